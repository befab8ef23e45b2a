//! What only root may read in the directories a sandbox shows, for closer
//! running as root (decision 221).
//!
//! A sandboxed process keeps closer's uid outside its namespaces (bwrap maps
//! its uid 65534 to it; Landlock keeps it): as root, every file the view
//! shows is readable by its owner bits, `/etc/shadow` and an SSH host key
//! among them. So each shown directory is walked once per process, in a
//! thread of its own, for what an unprivileged user could not read — a file
//! without the others' read bit, a directory without their search bit — and
//! those paths are hidden like closer's own files. A directory is walked at
//! its real path (and what is found is named under both); the walk never
//! follows a symbolic link inside it and never goes into a directory it
//! hides. What cannot be read is hidden too.
//!
//! A file made root-only after closer started is shown until closer
//! restarts, unless it sits in a directory hidden already
//! (`/etc/ssl/private`). What closer hides anyway, and directories the
//! operator shares read-write, are spared when the walks are used
//! ([`Walks::hidden`]).

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// The walk of one directory, shared by every confinement that shows it;
/// filled in by a thread of its own.
type Walk = Arc<OnceLock<Vec<PathBuf>>>;

/// Walks already started in this process, by the directory they walk (as
/// shown).
static WALKS: Mutex<Vec<(PathBuf, Walk)>> = Mutex::new(Vec::new());

/// The walks of a confinement's shown directories.
#[derive(Debug, Clone)]
pub struct Walks {
    walks: Vec<Walk>,
}

impl Walks {
    /// Walks `roots`, each unless this process walks it already.
    pub fn start(roots: &[PathBuf]) -> Walks {
        let mut started = WALKS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut walks = Vec::new();
        for root in roots {
            if let Some((_, walk)) = started.iter().find(|(r, _)| r == root) {
                walks.push(walk.clone());
                continue;
            }
            let walk = spawn(root, roots);
            started.push((root.clone(), walk.clone()));
            walks.push(walk);
        }
        Walks { walks }
    }

    /// What every sandbox must hide, once the walks have ended (waits for
    /// them): the root-only paths found, except inside `skipped` (closer's
    /// own hidden paths, hidden whole anyway) and `kept` (what the operator
    /// shares read-write), and except the directories on the way to a
    /// kept one, whose other entries are hidden instead.
    pub fn hidden(&self, kept: &[PathBuf], skipped: &[PathBuf]) -> Vec<PathBuf> {
        let mut hidden = Vec::new();
        for path in self.walks.iter().flat_map(|w| w.wait()) {
            if inside_any(path, kept) || inside_any(path, skipped) || hidden.contains(path) {
                continue;
            }
            if kept.iter().any(|k| k.starts_with(path)) {
                way_to(path, kept, &mut hidden);
            } else {
                hidden.push(path.clone());
            }
        }
        hidden
    }
}

/// Starts the walk of `root` (`roots`: every shown directory, none of which
/// the walk hides).
fn spawn(root: &Path, roots: &[PathBuf]) -> Walk {
    let walk = Walk::default();
    let (filled, dir, roots) = (walk.clone(), root.to_path_buf(), roots.to_vec());
    let thread = std::thread::Builder::new()
        .name("closer-root-only".into())
        .spawn(move || {
            let started = std::time::Instant::now();
            let found = std::panic::catch_unwind(|| unreadable_to_others(&dir, &roots));
            let found = found.unwrap_or_else(|_| {
                // Fail closed: the whole directory hidden, and said why.
                tracing::error!(dir = %dir.display(), "the walk for root-only files panicked: the directory is hidden from every sandbox");
                vec![dir.clone()]
            });
            tracing::info!(dir = %dir.display(), hidden = found.len(), ms = started.elapsed().as_millis() as u64, "walked for files only root may read");
            let _ = filled.set(found);
        });
    if let Err(e) = thread {
        tracing::error!(error = %e, dir = %root.display(), "no thread for the walk for root-only files: the directory is hidden from every sandbox");
        let _ = walk.set(vec![root.to_path_buf()]);
    }
    walk
}

/// Every path under `root` an unprivileged user could not read: files
/// without the others' read bit, directories without their search bit
/// (not walked into), and what cannot be read at all. `root` itself, the
/// other `roots` and the directories on the way to one are never hidden
/// (the operator shows them on purpose). Named as under `root` and, when
/// that differs, under its real path.
pub fn unreadable_to_others(root: &Path, roots: &[PathBuf]) -> Vec<PathBuf> {
    let Ok(real) = std::fs::canonicalize(root) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut stack = vec![real.clone()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            if dir != real {
                found.push(dir);
            }
            continue;
        };
        for entry in entries {
            let Ok(entry) = entry else {
                found.push(dir.clone());
                break;
            };
            let path = entry.path();
            let Ok(meta) = entry.metadata() else {
                found.push(path);
                continue;
            };
            let shown = roots.iter().any(|r| r.starts_with(&path));
            let others = meta.mode() & 0o007;
            if meta.is_symlink() {
                continue;
            } else if meta.is_dir() && (others & 0o001 != 0 || shown) {
                stack.push(path);
            } else if !shown && (meta.is_dir() || others & 0o004 == 0) {
                found.push(path);
            }
        }
    }
    if real != root {
        let shown: Vec<PathBuf> = found
            .iter()
            .filter_map(|p| p.strip_prefix(&real).ok().map(|rel| root.join(rel)))
            .collect();
        found.extend(shown);
    }
    found.sort();
    found
}

/// Below `dir`, a directory others may not search, on the way to a `kept`
/// path: every entry that is neither on the way to one nor inside one is
/// hidden, whatever its own mode (nobody could reach it).
fn way_to(dir: &Path, kept: &[PathBuf], hidden: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for path in entries.flatten().map(|e| e.path()) {
        if inside_any(&path, kept) {
            continue;
        }
        if kept.iter().any(|k| k.starts_with(&path)) {
            way_to(&path, kept, hidden);
        } else {
            hidden.push(path);
        }
    }
}

fn inside_any(path: &Path, dirs: &[PathBuf]) -> bool {
    dirs.iter().any(|d| path.starts_with(d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn what_others_cannot_read_is_found_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for (rel, mode) in [
            ("public.txt", 0o644),
            ("secret.txt", 0o600),
            ("group.txt", 0o640),
            ("private/inner.txt", 0o644),
            ("listed/inner.txt", 0o644),
            ("listed/secret.txt", 0o600),
            ("share/cache/entry", 0o600),
            ("share/public.txt", 0o644),
            ("tools/bin/tool", 0o755),
        ] {
            let path = root.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, rel).unwrap();
            chmod(&path, mode);
        }
        chmod(&root.join("private"), 0o700);
        chmod(&root.join("listed"), 0o711);
        chmod(&root.join("share"), 0o700);
        chmod(&root.join("tools"), 0o700);
        std::os::unix::fs::symlink(root.join("secret.txt"), root.join("link")).unwrap();
        // `tools/bin` is shown too (a toolchain on PATH): the way to it stays.
        let roots = [root.clone(), root.join("tools/bin")];
        let found = unreadable_to_others(&root, &roots);
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
        // A directory shared read-write is shown, and the way to it; what
        // else lies behind a directory nobody may search stays hidden.
        let walks = Walks {
            walks: vec![Arc::new(OnceLock::from(found))],
        };
        let hidden = walks.hidden(&[root.join("share/cache")], &[root.join("private")]);
        assert_eq!(
            hidden,
            [
                root.join("group.txt"),
                root.join("listed/secret.txt"),
                root.join("secret.txt"),
                root.join("share/public.txt"),
            ]
        );
    }

    #[test]
    fn a_directory_shown_through_a_link_is_walked_at_its_real_path() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap().join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::write(real.join("key"), "").unwrap();
        chmod(&real.join("key"), 0o600);
        let link = dir.path().canonicalize().unwrap().join("shown");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let found = unreadable_to_others(&link, std::slice::from_ref(&link));
        assert_eq!(found, [real.join("key"), link.join("key")]);
    }
}
