//! The environment every subprocess starts from, and where a program is
//! found: only in `PATH`'s absolute directories (decision 116).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The `PATH` of a process whose own has no absolute directory.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The minimal environment every subprocess starts from: `PATH`, `HOME` and
/// `LANG`, nothing inherited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseEnv {
    pub path: String,
    pub home: PathBuf,
    pub lang: String,
}

impl BaseEnv {
    /// `PATH` and `HOME` copied from closer's own environment (read once, at
    /// start), `LANG=C.UTF-8`. Neither holds a secret. `PATH` keeps only its
    /// absolute directories ([`absolute_dirs`]); without any (unset, empty,
    /// or all relative) it is `/usr/local/bin:/usr/bin:/bin`, since an empty
    /// `PATH` means the current directory to `execvp`.
    pub fn from_process() -> BaseEnv {
        BaseEnv {
            path: search_path(&std::env::var("PATH").unwrap_or_default()),
            home: std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from),
            lang: "C.UTF-8".to_owned(),
        }
    }

    /// The three variables as a map to extend.
    pub fn vars(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("PATH".to_owned(), self.path.clone()),
            ("HOME".to_owned(), self.home.display().to_string()),
            ("LANG".to_owned(), self.lang.clone()),
        ])
    }
}

/// The absolute directories of `path`, in order. A relative one (`.`,
/// `bin`, or an empty entry, which means the current directory) is found
/// from the directory a program starts in, and closer starts its own git in
/// a worktree the agent wrote: a `bin/git` there would run unconfined.
pub fn absolute_dirs(path: &str) -> String {
    path.split(':')
        .filter(|dir| Path::new(dir).is_absolute())
        .collect::<Vec<_>>()
        .join(":")
}

/// The absolute directories of `raw`, or [`DEFAULT_PATH`] when it has none.
fn search_path(raw: &str) -> String {
    match absolute_dirs(raw) {
        dirs if dirs.is_empty() => DEFAULT_PATH.to_owned(),
        dirs => dirs,
    }
}

/// `Command` looks a bare name up on closer's own `PATH`; the child's `PATH`
/// is the one that counts, so resolve against it (its absolute directories
/// only, see [`absolute_dirs`]).
pub fn resolve_program(program: &str, path: Option<&str>) -> PathBuf {
    if program.contains('/') {
        return PathBuf::from(program);
    }
    path.into_iter()
        .flat_map(|p| p.split(':'))
        .filter(|dir| Path::new(dir).is_absolute())
        .map(|dir| Path::new(dir).join(program))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| PathBuf::from(program))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_path_directories_are_never_searched() {
        // The control: the working directory (the crate's root in a test),
        // named absolutely, finds the file.
        let here = std::env::current_dir().unwrap();
        assert_eq!(
            resolve_program("Cargo.toml", Some(&here.display().to_string())),
            here.join("Cargo.toml")
        );
        for relative in [".", "", "./", "src/.."] {
            assert_eq!(
                resolve_program("Cargo.toml", Some(&format!("/nonexistent:{relative}"))),
                PathBuf::from("Cargo.toml"),
                "{relative:?}"
            );
        }
        assert_eq!(
            absolute_dirs("/usr/bin::.:bin:/bin:"),
            "/usr/bin:/bin".to_owned()
        );
        // An empty PATH would mean the current directory to execvp.
        for none in ["", ".", "bin::"] {
            assert_eq!(search_path(none), DEFAULT_PATH, "{none:?}");
        }
        assert_eq!(search_path("/opt/bin:."), "/opt/bin");
    }
}
