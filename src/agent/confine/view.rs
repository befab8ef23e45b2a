//! Which directories a sandboxed process sees: the system's, the
//! toolchains' on its `PATH`, the program's own installation, and the run's
//! [`View`].

use std::path::{Path, PathBuf};

/// The run's own places.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// The worktree, the run's home and temporary directory.
    pub read_write: Vec<PathBuf>,
    /// The run's git metadata (closer commits for the agent), the prompt.
    pub read_only: Vec<PathBuf>,
}

/// System directories every program needs, read-only. `/etc` is among them:
/// closer's own files there are hidden, not the directory.
const SYSTEM: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
];

/// Directory names whose parent is a toolchain's root (`~/.pyenv/shims`,
/// `/opt/node/bin`): the root holds what the programs there load.
const TOOLCHAIN_BIN: &[&str] = &["bin", "sbin", "shims"];

pub fn system_dirs() -> Vec<PathBuf> {
    SYSTEM.iter().map(PathBuf::from).collect()
}

/// Every absolute directory on `path`, and for a `…/bin` or `…/shims`
/// directory its parent (a toolchain's root), unless that parent is `/` or
/// `/usr`-like system directory already covered, or a home directory.
pub fn toolchain_dirs(path: &str) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for entry in path.split(':').map(Path::new) {
        if !entry.is_absolute() {
            continue;
        }
        dirs.push(entry.to_path_buf());
        let is_bin = entry
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| TOOLCHAIN_BIN.contains(&n));
        if let Some(parent) = entry.parent().filter(|_| is_bin)
            && toolchain_root(parent)
        {
            dirs.push(parent.to_path_buf());
        }
    }
    dirs
}

/// A parent worth exposing: not the root, not a system prefix, not a home.
fn toolchain_root(dir: &Path) -> bool {
    let depth = dir.components().count();
    let home_like = dir.starts_with("/home") && depth <= 3 || dir == Path::new("/root");
    depth > 1 && !home_like && !["/usr", "/usr/local"].contains(&dir.to_str().unwrap_or(""))
}

/// The installation a program runs from: for a program inside
/// `node_modules`, the outermost `node_modules` (its dependencies are
/// siblings); else the directory of its real path.
pub fn program_dirs(program: &Path) -> Vec<PathBuf> {
    let Ok(real) = std::fs::canonicalize(program) else {
        return Vec::new();
    };
    let mut dirs = Vec::new();
    if let Some(parent) = program.parent() {
        dirs.push(parent.to_path_buf());
    }
    let modules = real
        .ancestors()
        .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .last();
    match modules {
        Some(root) => dirs.push(root.to_path_buf()),
        None => dirs.extend(real.parent().map(Path::to_path_buf)),
    }
    dirs
}

/// The paths that exist (a bind of a missing path fails the sandbox).
pub fn existing(paths: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut kept: Vec<PathBuf> = Vec::new();
    for path in paths {
        if path.symlink_metadata().is_ok() && !kept.contains(&path) {
            kept.push(path);
        }
    }
    kept
}

/// True when `path` is `hidden` or lies inside it.
pub fn is_hidden(path: &Path, hidden: &[PathBuf]) -> bool {
    hidden.iter().any(|h| path.starts_with(h))
}

/// Hidden paths strictly inside `dir`: what must be masked after `dir` is
/// made visible.
pub fn hidden_inside<'a>(dir: &Path, hidden: &'a [PathBuf]) -> Vec<&'a Path> {
    hidden
        .iter()
        .filter(|h| h.starts_with(dir) && h.as_path() != dir)
        .map(PathBuf::as_path)
        .collect()
}

/// True when `dir` neither is nor contains a hidden path, as written and
/// with links resolved: a directory that may be shown after closer's masks.
pub fn shows_nothing_hidden(dir: &Path, hidden: &[PathBuf]) -> bool {
    let real = std::fs::canonicalize(dir).ok();
    [Some(dir), real.as_deref()]
        .into_iter()
        .flatten()
        .all(|d| hidden_inside(d, hidden).is_empty() && !hidden.iter().any(|h| h == d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_toolchain_root_comes_with_its_bin_directory() {
        let dirs =
            toolchain_dirs("/root/.pyenv/shims:/usr/local/bin:/usr/bin:relative:/home/me/bin");
        assert!(dirs.contains(&PathBuf::from("/root/.pyenv")));
        assert!(dirs.contains(&PathBuf::from("/root/.pyenv/shims")));
        assert!(!dirs.contains(&PathBuf::from("/usr/local")));
        assert!(!dirs.contains(&PathBuf::from("/usr")));
        assert!(
            !dirs.contains(&PathBuf::from("/home/me")),
            "a home is not a toolchain"
        );
        assert!(!dirs.iter().any(|d| d.ends_with("relative")));
    }

    #[test]
    fn hidden_paths_inside_a_directory_are_found() {
        let hidden = vec![
            PathBuf::from("/etc/closer/key.pem"),
            PathBuf::from("/srv/data"),
        ];
        assert_eq!(
            hidden_inside(Path::new("/etc"), &hidden),
            [Path::new("/etc/closer/key.pem")]
        );
        assert!(is_hidden(Path::new("/srv/data/worktrees/x"), &hidden));
        assert!(!is_hidden(Path::new("/srv/database"), &hidden));
    }
}
