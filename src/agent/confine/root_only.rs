//! What only root may read in the directories a sandbox shows, for closer
//! running as root (decision 221).
//!
//! A sandboxed process keeps closer's uid outside its namespaces (bwrap maps
//! its uid 65534 to it; Landlock keeps it): as root, every file the view
//! shows is readable by its owner bits, `/etc/shadow` and an SSH host key
//! among them. So the directories are walked once, in the background, for
//! what an unprivileged user could not read — a file without the
//! others' read bit, a directory without their search bit — and those
//! paths are hidden like closer's own files. The walk never follows a
//! symbolic link (its target is walked where it is shown) and never goes
//! into a directory it hides.
//!
//! One walk per set of directories per process, started with the
//! confinement: a file made root-only after closer started is shown until
//! closer restarts, unless it sits in a directory hidden already
//! (`/etc/ssl/private`). Directories the operator shares read-write are
//! spared when the walk is used ([`sparing`]).

use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

/// The walk of one set of directories, shared by every confinement that
/// shows them; filled in by a thread of its own.
pub type Walk = Arc<OnceLock<Vec<PathBuf>>>;

/// Walks already started in this process, by the roots they walk.
static WALKS: Mutex<Vec<(Vec<PathBuf>, Walk)>> = Mutex::new(Vec::new());

/// The walk of `roots`, started now unless this process started it before.
pub fn walk(roots: &[PathBuf]) -> Walk {
    let mut walks = WALKS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, walk)) = walks.iter().find(|(r, _)| r == roots) {
        return walk.clone();
    }
    let walk = Walk::default();
    let (filled, walked) = (walk.clone(), roots.to_vec());
    let started = std::thread::Builder::new()
        .name("closer-root-only".into())
        .spawn(move || {
            let _ = filled.set(unreadable_to_others(&walked, &[]));
        });
    if let Err(e) = started {
        // No thread: walk here, once, rather than show everything.
        tracing::warn!(error = %e, "walking the sandbox's directories in place");
        let _ = walk.set(unreadable_to_others(roots, &[]));
    }
    walks.push((roots.to_vec(), walk.clone()));
    walk
}

/// `found` (a walk's paths) sparing `kept`, what the operator shares
/// read-write: a path inside one is dropped, a directory on the way to one
/// is walked instead of hidden.
pub fn sparing(found: &[PathBuf], kept: &[PathBuf]) -> Vec<PathBuf> {
    let mut spared = Vec::new();
    for path in found {
        if kept.iter().any(|k| path.starts_with(k)) {
            continue;
        }
        if kept.iter().any(|k| k.starts_with(path)) {
            spared.extend(unreadable_to_others(std::slice::from_ref(path), kept));
        } else {
            spared.push(path.clone());
        }
    }
    spared
}

/// Every path under `roots` an unprivileged user could not read: files
/// without the others' read bit, directories without their search bit
/// (not walked into). The roots themselves, what lies inside a `kept` path
/// and the directories on the way to one are spared (walked into, never
/// hidden): the operator shows those on purpose.
pub fn unreadable_to_others(roots: &[PathBuf], kept: &[PathBuf]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack: Vec<PathBuf> = roots
        .iter()
        .filter(|root| !roots.iter().any(|r| r != *root && root.starts_with(r)))
        .filter(|root| root.symlink_metadata().is_ok_and(|m| m.is_dir()))
        .cloned()
        .collect();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let (path, Ok(meta)) = (entry.path(), entry.metadata()) else {
                continue;
            };
            if meta.is_symlink() || kept.iter().any(|k| path.starts_with(k)) {
                continue;
            }
            let others = meta.mode() & 0o007;
            let holds_kept = kept.iter().any(|k| k.starts_with(&path));
            if meta.is_dir() && (others & 0o001 != 0 || holds_kept) {
                stack.push(path);
            } else if meta.is_dir() || others & 0o004 == 0 {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::Path;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn what_others_cannot_read_is_found_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        for (rel, mode) in [
            ("public.txt", 0o644),
            ("secret.txt", 0o600),
            ("group.txt", 0o640),
            ("private/inner.txt", 0o644),
            ("listed/inner.txt", 0o644),
            ("listed/secret.txt", 0o600),
            ("share/cache/entry", 0o600),
        ] {
            let path = root.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, rel).unwrap();
            chmod(&path, mode);
        }
        chmod(&root.join("private"), 0o700);
        chmod(&root.join("listed"), 0o711);
        chmod(&root.join("share"), 0o700);
        std::os::unix::fs::symlink(root.join("secret.txt"), root.join("link")).unwrap();
        let found = unreadable_to_others(std::slice::from_ref(&root), &[]);
        assert_eq!(
            found,
            [
                root.join("group.txt"),
                root.join("listed/secret.txt"),
                root.join("private"),
                root.join("secret.txt"),
                root.join("share"),
            ]
        );
        // A directory shared read-write is shown, with the way to it.
        std::fs::write(root.join("share/secret.txt"), "").unwrap();
        chmod(&root.join("share/secret.txt"), 0o600);
        let kept = [root.join("share/cache")];
        let found = unreadable_to_others(std::slice::from_ref(&root), &[]);
        assert_eq!(
            sparing(&found, &kept),
            [
                root.join("group.txt"),
                root.join("listed/secret.txt"),
                root.join("private"),
                root.join("secret.txt"),
                root.join("share/secret.txt"),
            ]
        );
    }
}
