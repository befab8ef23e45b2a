//! What only root may use in the directories a sandbox shows, for closer
//! running as root (decision 221).
//!
//! A sandboxed process keeps closer's uid outside its namespaces (bwrap maps
//! its uid 65534 to it; Landlock keeps it): as root, every file the view
//! shows is readable by its owner bits, `/etc/shadow` and an SSH host key
//! among them. So each shown directory is walked once per process, in a
//! thread of its own, for what an unprivileged user could not use — a file
//! without the others' read bit, a directory without their search bit, a
//! socket, FIFO or device without their read and write bits, an entry that
//! cannot be read — and those paths are hidden like closer's own files.
//!
//! A directory is walked at its real path; when it is shown through a link
//! further up (not itself a link, which bwrap shows as a link), what is
//! found is named under its shown path too. Links inside are never
//! followed, nor is a network or FUSE file system walked into (it is
//! judged by its own mode). Shown directories, and the directories on the
//! way to one, are never hidden.
//!
//! The first sandboxed process waits for the walks, 30 s at most; a walk
//! still going then, or one that panicked, hides its whole directory
//! (fail closed), and the next process looks again. A file made root-only
//! after closer started is shown until closer restarts, unless it sits in
//! a directory hidden already (`/etc/ssl/private`). What closer hides
//! anyway, and directories the operator shares read-write, are spared when
//! the walks are used ([`Walks::hidden`]).

use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The longest the first sandboxed process waits for the walks.
const WAIT: Duration = Duration::from_secs(30);

/// File systems not walked into: network and FUSE mounts, which may hang
/// or hold more than a walk should read (`statfs`'s `f_type`).
const NOT_WALKED: &[i64] = &[
    0x6969,      // NFS
    0x6573_5546, // FUSE
    0x517B,      // SMB
    0xFF53_4D42, // CIFS
    0xFE53_4D42, // SMB2
    0x00C3_6400, // Ceph
    0x0187,      // autofs
];

/// The walk of one directory, shared by every confinement that shows it;
/// filled in by a thread of its own.
#[derive(Debug, Default)]
struct Walk {
    found: Mutex<Option<Vec<PathBuf>>>,
    done: Condvar,
}

impl Walk {
    fn set(&self, found: Vec<PathBuf>) {
        *self.found.lock().unwrap_or_else(|p| p.into_inner()) = Some(found);
        self.done.notify_all();
    }

    /// What the walk found, once it has ended before `deadline`.
    fn wait_until(&self, deadline: Instant) -> Option<Vec<PathBuf>> {
        let mut found = self.found.lock().unwrap_or_else(|p| p.into_inner());
        while found.is_none() {
            let left = deadline.checked_duration_since(Instant::now())?;
            found = self
                .done
                .wait_timeout(found, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        found.clone()
    }
}

/// Walks already started in this process, by the directory they walk (as
/// shown).
static WALKS: Mutex<Vec<(PathBuf, Arc<Walk>)>> = Mutex::new(Vec::new());

/// The walks of a confinement's shown directories.
#[derive(Debug, Clone)]
pub struct Walks {
    walks: Vec<(PathBuf, Arc<Walk>)>,
}

/// What [`Walks::hidden`] found: the paths, and whether every walk had
/// ended (else its directory is hidden whole, this time).
pub struct Found {
    pub paths: Vec<PathBuf>,
    pub complete: bool,
}

impl Walks {
    /// Walks `roots`, each unless this process walks it already.
    pub fn start(roots: &[PathBuf]) -> Walks {
        let mut started = WALKS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut walks = Vec::new();
        for root in roots {
            let walk = match started.iter().find(|(r, _)| r == root) {
                Some((_, walk)) => walk.clone(),
                None => {
                    let walk = spawn(root, roots);
                    started.push((root.clone(), walk.clone()));
                    walk
                }
            };
            walks.push((root.clone(), walk));
        }
        Walks { walks }
    }

    /// What every sandbox must hide (waits for the walks, [`WAIT`] at
    /// most): the paths found, except inside `skipped` (closer's own hidden
    /// paths, hidden whole anyway) and `kept` (what the operator shares
    /// read-write), and except the directories on the way to a kept one,
    /// whose other entries are hidden instead.
    pub fn hidden(&self, kept: &[PathBuf], skipped: &[PathBuf]) -> Found {
        let (kept, skipped) = (both_forms(kept), both_forms(skipped));
        let deadline = Instant::now() + WAIT;
        let mut hidden = std::collections::BTreeSet::new();
        let mut complete = true;
        for (root, walk) in &self.walks {
            let Some(found) = walk.wait_until(deadline) else {
                tracing::error!(dir = %root.display(), "the walk for root-only files has not ended: the directory is hidden from this sandbox");
                complete = false;
                hidden.insert(root.clone());
                continue;
            };
            for path in found {
                if inside_any(&path, &kept) || inside_any(&path, &skipped) {
                    continue;
                }
                if kept.iter().any(|k| k.starts_with(&path)) {
                    way_to(&path, &kept, &mut hidden);
                } else {
                    hidden.insert(path);
                }
            }
        }
        Found {
            paths: hidden.into_iter().collect(),
            complete,
        }
    }
}

/// Starts the walk of `root` (`roots`: every shown directory, none of which
/// the walk hides).
fn spawn(root: &Path, roots: &[PathBuf]) -> Arc<Walk> {
    let walk = Arc::new(Walk::default());
    let (filled, dir, roots) = (walk.clone(), root.to_path_buf(), roots.to_vec());
    let thread = std::thread::Builder::new()
        .name("closer-root-only".into())
        .spawn(move || {
            let started = Instant::now();
            let found = std::panic::catch_unwind(|| unreadable_to_others(&dir, &roots));
            let found = found.unwrap_or_else(|_| {
                tracing::error!(dir = %dir.display(), "the walk for root-only files panicked: the directory is hidden from every sandbox");
                vec![dir.clone()]
            });
            tracing::info!(dir = %dir.display(), hidden = found.len(), ms = started.elapsed().as_millis() as u64, "walked for files only root may use");
            filled.set(found);
        });
    if let Err(e) = thread {
        tracing::error!(error = %e, dir = %root.display(), "no thread for the walk for root-only files: the directory is hidden from every sandbox");
        walk.set(vec![root.to_path_buf()]);
    }
    walk
}

/// Every path under `root` an unprivileged user could not use (see the
/// module's notes). `root` itself, the other `roots` and the directories
/// on the way to one are never hidden (the operator shows them on
/// purpose).
pub fn unreadable_to_others(root: &Path, roots: &[PathBuf]) -> Vec<PathBuf> {
    let Ok(real) = std::fs::canonicalize(root) else {
        return Vec::new();
    };
    let roots = both_forms(roots);
    let shown = |path: &Path| roots.iter().any(|r| r.starts_with(path));
    let mut found = Vec::new();
    let mut stack = vec![real.clone()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            if !shown(&dir) {
                found.push(dir);
            }
            continue;
        };
        for entry in entries {
            let Ok(entry) = entry else {
                if !shown(&dir) {
                    found.push(dir.clone());
                }
                break;
            };
            let path = entry.path();
            let Ok(meta) = entry.metadata() else {
                if !shown(&path) {
                    found.push(path);
                }
                continue;
            };
            match judge(&meta, &path, shown(&path)) {
                Judged::Walk => stack.push(path),
                Judged::Hide => found.push(path),
                Judged::Show => {}
            }
        }
    }
    let linked_above = root.symlink_metadata().is_ok_and(|m| !m.is_symlink()) && real != root;
    if linked_above {
        let named: Vec<PathBuf> = found
            .iter()
            .filter_map(|p| p.strip_prefix(&real).ok().map(|rel| root.join(rel)))
            .collect();
        found.extend(named);
    }
    found.sort();
    found
}

enum Judged {
    Walk,
    Hide,
    Show,
}

/// What to do with one entry (`meta` not following links): `shown` when
/// it is a shown directory or on the way to one.
fn judge(meta: &std::fs::Metadata, path: &Path, shown: bool) -> Judged {
    let others = meta.mode() & 0o007;
    let kind = meta.file_type();
    if kind.is_symlink() {
        Judged::Show
    } else if kind.is_dir() {
        if others & 0o001 == 0 && !shown {
            Judged::Hide
        } else if network(path) {
            Judged::Show
        } else {
            Judged::Walk
        }
    } else if kind.is_socket() || kind.is_fifo() || kind.is_block_device() || kind.is_char_device()
    {
        // Connecting, writing or opening a device needs more than reading.
        match others & 0o006 == 0o006 {
            true => Judged::Show,
            false => Judged::Hide,
        }
    } else if others & 0o004 == 0 {
        Judged::Hide
    } else {
        Judged::Show
    }
}

/// True when `dir` is on a network or FUSE file system.
fn network(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    let Ok(name) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path and a zeroed struct the kernel fills.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::statfs(name.as_ptr(), &mut fs) } != 0 {
        return false;
    }
    #[allow(clippy::unnecessary_cast)]
    NOT_WALKED.contains(&(fs.f_type as i64))
}

/// Below `dir`, a directory others may not search, on the way to a `kept`
/// path: every entry that is neither on the way to one nor inside one is
/// hidden, whatever its own mode (nobody could reach it). Links are not
/// followed, nor hidden (their targets are judged where they are).
fn way_to(dir: &Path, kept: &[PathBuf], hidden: &mut std::collections::BTreeSet<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for path in entries.flatten().map(|e| e.path()) {
        let is_link = path.symlink_metadata().is_ok_and(|m| m.is_symlink());
        if is_link || inside_any(&path, kept) {
            continue;
        }
        if kept.iter().any(|k| k.starts_with(&path)) {
            way_to(&path, kept, hidden);
        } else {
            hidden.insert(path);
        }
    }
}

/// `paths` as written and, where it differs, with links resolved.
fn both_forms(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut forms = paths.to_vec();
    forms.extend(
        paths
            .iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .filter(|real| !paths.contains(real)),
    );
    forms
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

    fn done(found: Vec<PathBuf>) -> Walks {
        let walk = Arc::new(Walk::default());
        walk.set(found);
        Walks {
            walks: vec![(PathBuf::from("/"), walk)],
        }
    }

    #[test]
    fn what_others_cannot_use_is_found_and_nothing_else() {
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
        let socket = std::os::unix::net::UnixListener::bind(root.join("daemon.sock")).unwrap();
        chmod(&root.join("daemon.sock"), 0o755);
        // `tools/bin` is shown too (a toolchain on PATH): the way to it stays.
        let roots = [root.clone(), root.join("tools/bin")];
        let found = unreadable_to_others(&root, &roots);
        drop(socket);
        assert_eq!(
            found,
            [
                root.join("daemon.sock"),
                root.join("group.txt"),
                root.join("listed/secret.txt"),
                root.join("private"),
                root.join("secret.txt"),
                root.join("share"),
            ]
        );
        // A directory shared read-write is shown, and the way to it; what
        // else lies behind a directory nobody may search stays hidden.
        let found = done(found).hidden(&[root.join("share/cache")], &[root.join("private")]);
        assert!(found.complete);
        assert_eq!(
            found.paths,
            [
                root.join("daemon.sock"),
                root.join("group.txt"),
                root.join("listed/secret.txt"),
                root.join("secret.txt"),
                root.join("share/public.txt"),
            ]
        );
    }

    #[test]
    fn a_directory_shown_below_a_link_is_walked_at_its_real_path() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let real = base.join("real/bin");
        std::fs::create_dir_all(&real).unwrap();
        std::fs::write(real.join("key"), "").unwrap();
        chmod(&real.join("key"), 0o600);
        std::os::unix::fs::symlink(base.join("real"), base.join("current")).unwrap();
        // Shown through a link above it: named both ways.
        let below = base.join("current/bin");
        let found = unreadable_to_others(&below, std::slice::from_ref(&below));
        assert_eq!(found, [below.join("key"), real.join("key")]);
        // Itself a link (bwrap shows it as one): its real names only.
        std::os::unix::fs::symlink(&real, base.join("shown")).unwrap();
        let link = base.join("shown");
        let found = unreadable_to_others(&link, std::slice::from_ref(&link));
        assert_eq!(found, [real.join("key")]);
    }

    #[test]
    fn a_walk_not_ended_by_the_deadline_answers_nothing() {
        let deadline = Instant::now() + Duration::from_millis(10);
        assert_eq!(Walk::default().wait_until(deadline), None);
    }
}
