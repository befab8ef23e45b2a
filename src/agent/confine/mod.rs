//! Confinement: what a process closer runs on a repository's behalf (the
//! agent, the setup, goal commands and servers, baseline commands, a custom
//! completion handler) can see and reach.
//!
//! The view is an allow-list: the run's worktree and its own home read-write,
//! the run's git metadata read-only, the system and toolchain directories
//! read-only, nothing else. closer's own files — its data directory (the
//! database, every other run's worktree and mirror), its configuration file,
//! the App key — are *hidden* even where they sit under an allowed directory.
//!
//! Two backends build that view:
//! - [`bwrap`]: bubblewrap, when installed. New user, PID, IPC and UTS
//!   namespaces (closer's processes are invisible; every descendant dies
//!   with the sandbox), a mount namespace holding only the view, and for
//!   `network = "none"` a network namespace with nothing but loopback.
//! - [`landlock`]: the kernel's Landlock LSM, applied between fork and exec.
//!   The same file-system allow-list, TCP `connect`/`bind` denied for
//!   `network = "none"`, and the domain's scoping: no signals to, no ptrace
//!   of (so no `/proc/<pid>/environ` of) processes outside it. No PID
//!   namespace and no UDP filtering: weaker than bwrap, and said so.
//!
//! Both drop every privilege: under bwrap the process is uid 65534 in its
//! user namespace with no capability (it may nest namespaces of its own:
//! the masks are locked mounts there); under Landlock `no_new_privs` is set
//! and, when closer runs as root, every capability (bounding set included)
//! is dropped. Either way the process keeps closer's uid outside, so as root
//! what only root may read in the view is hidden too ([`root_only`]).
//! Resource limits ([`limits`]) apply under both, and under `none`.
//!
//! `mode = "auto"` takes bwrap when it works here, else Landlock; when neither
//! is available closer still starts (intake, `--dry-run`) but says so in its
//! log and refuses to run anything for a repository: each run fails at
//! once naming why, until the operator installs a sandbox or chooses
//! `mode = "none"` — which is logged at start and shown in every status
//! comment. Asking for `bwrap` or `landlock` by name where it is missing
//! stops closer at start.

pub mod bwrap;
pub mod landlock;
pub mod limits;
pub mod root_only;
pub mod view;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

pub use self::limits::Limits;
pub use self::view::View;

/// `[sandbox] mode`: which confinement the operator asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// bwrap when it works, else Landlock; with neither, closer starts and
    /// refuses each run.
    #[default]
    Auto,
    Bwrap,
    Landlock,
    /// No confinement, by the operator's explicit choice.
    None,
}

/// Whether a sandboxed process may use the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    Full,
    None,
}

/// What a sandboxed process is, for its network default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A coding agent: needs its model's API.
    Agent,
    /// A goal or baseline command (tests, lint, build).
    Goal,
    /// A `setup` command: installs the goals' dependencies.
    Setup,
    /// A goal's server (`endpoint_responds`), which closer must reach.
    Server,
    /// A custom completion handler.
    Handler,
}

/// `[sandbox.network]`: the network per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NetworkPolicy {
    pub agent: Network,
    pub setup: Network,
    pub goals: Network,
    pub handler: Network,
}

impl Default for NetworkPolicy {
    /// Agents reach their model and the setup its registries; goals and
    /// handlers reach nothing.
    fn default() -> Self {
        NetworkPolicy {
            agent: Network::Full,
            setup: Network::Full,
            goals: Network::None,
            handler: Network::None,
        }
    }
}

impl NetworkPolicy {
    /// The network of a process of `kind`. A goal's server shares closer's
    /// network (closer connects to it), see docs/security.md.
    pub fn of(&self, kind: Kind) -> Network {
        match kind {
            Kind::Agent => self.agent,
            Kind::Setup => self.setup,
            Kind::Goal => self.goals,
            Kind::Server => Network::Full,
            Kind::Handler => self.handler,
        }
    }
}

/// `[sandbox]` as the operator wrote it, plus the files closer itself must
/// keep hidden (filled in at load).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    pub mode: Mode,
    pub network: NetworkPolicy,
    /// Extra directories visible read-only (toolchains not on `PATH`).
    pub read_only: Vec<PathBuf>,
    /// Extra directories visible read-write (a shared cache).
    pub read_write: Vec<PathBuf>,
    /// Paths never visible, even under an allowed directory.
    pub hide: Vec<PathBuf>,
    pub limits: Limits,
}

/// The backend in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    Bwrap {
        program: PathBuf,
        /// bwrap starts under Landlock's scoping (kernel ABI 6): no
        /// abstract Unix socket or signal reaches out of the sandbox.
        scoped: bool,
    },
    Landlock {
        abi: u32,
    },
    Unconfined,
    /// `auto` found nothing: every process is refused, with this reason.
    Unavailable {
        reason: String,
    },
}

impl Backend {
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Bwrap { .. } => "bwrap",
            Backend::Landlock { .. } => "landlock",
            Backend::Unconfined => "none",
            Backend::Unavailable { .. } => "unavailable",
        }
    }

    /// Whether a confined process is kept from the abstract Unix sockets
    /// and the processes outside its sandbox (decision 226).
    pub fn scopes_sockets(&self) -> bool {
        match self {
            Backend::Bwrap { scoped, .. } => *scoped,
            Backend::Landlock { abi } => *abi >= landlock::SCOPE_ABI,
            Backend::Unconfined | Backend::Unavailable { .. } => false,
        }
    }
}

/// No confinement is possible and the operator did not choose `none`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfineError {
    #[error(
        "no confinement is available here ({0}); closer will not run agents unconfined. \
         Install bubblewrap, run on a kernel with Landlock, or set `[sandbox] mode = \"none\"` \
         to run agents with closer's own access (see docs/security.md)"
    )]
    Unavailable(String),
    #[error("[sandbox] mode = \"{mode}\" is not available here: {reason}")]
    ModeUnavailable { mode: &'static str, reason: String },
    #[error(
        "[sandbox] read_write makes {dir} writable, and {program_dir} on PATH is in it: \
         a sandboxed process could put a `git` there that closer would run unconfined. \
         Share a cache directory that holds no program closer runs"
    )]
    WritableProgramDir { dir: String, program_dir: String },
}

/// `backend` when it can confine the network as `config.network` asks.
/// Landlock before ABI 4 cannot: asked for by name, that stops closer at
/// start; under `auto` closer starts and refuses each run, naming why, as
/// when no sandbox is found at all.
/// `no_bwrap` says why `auto` passed bubblewrap over.
fn network_filter(
    config: &SandboxConfig,
    backend: Backend,
    no_bwrap: &str,
) -> Result<Backend, ConfineError> {
    let Backend::Landlock { abi } = backend else {
        return Ok(backend);
    };
    let kinds = [
        config.network.agent,
        config.network.setup,
        config.network.goals,
        config.network.handler,
    ];
    if abi >= landlock::NET_ABI || !kinds.contains(&Network::None) {
        return Ok(backend);
    }
    let reason = format!(
        "the kernel's Landlock ABI {abi} cannot filter the network; \
         set every [sandbox.network] kind to \"full\" or install bubblewrap"
    );
    match config.mode {
        Mode::Landlock => Err(ConfineError::ModeUnavailable {
            mode: "landlock",
            reason,
        }),
        _ => Ok(Backend::Unavailable {
            reason: ConfineError::Unavailable(format!("{no_bwrap}; {reason}")).to_string(),
        }),
    }
}

/// Refuses a `read_write` directory that is, or holds, a directory of
/// `path`: closer finds the programs it runs itself (git) there, outside
/// any sandbox. Compared as written and with links resolved (a shared
/// `~/tools` that links to `/opt/tools/bin` is refused too).
fn writable_program_dir(read_write: &[PathBuf], path: &str) -> Result<(), ConfineError> {
    let both = |dir: &Path| [Some(dir.to_path_buf()), std::fs::canonicalize(dir).ok()];
    let shared: Vec<_> = read_write.iter().map(|dir| (dir, both(dir))).collect();
    for program_dir in path.split(':').filter(|d| !d.is_empty()).map(Path::new) {
        let programs = both(program_dir);
        let holds = |(_, names): &&(&PathBuf, [Option<PathBuf>; 2])| {
            let mut pairs = programs
                .iter()
                .flatten()
                .flat_map(|p| names.iter().flatten().map(move |s| (p, s)));
            pairs.any(|(program, shared)| program.starts_with(shared))
        };
        if let Some((dir, _)) = shared.iter().find(holds) {
            return Err(ConfineError::WritableProgramDir {
                dir: dir.display().to_string(),
                program_dir: program_dir.display().to_string(),
            });
        }
    }
    Ok(())
}

/// Why `auto` does not fall back to Landlock for closer running as root
/// (decision 223).
pub const ROOT_UNDER_LANDLOCK: &str = "closer runs as root, and under Landlock a sandboxed \
     process would still be root outside it: it could change the modes of the system files it \
     sees and reach root's Unix sockets. Run closer as an unprivileged user, or make bubblewrap \
     work here";

/// True when closer runs as root. Async-signal-safe (one system call).
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The confinement chosen at start, shared by everything that runs processes.
#[derive(Debug, Clone)]
pub struct Confinement {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    backend: Backend,
    network: NetworkPolicy,
    /// System and toolchain directories, read-only.
    read_only: Vec<PathBuf>,
    read_write: Vec<PathBuf>,
    hide: Vec<PathBuf>,
    /// Running as root: what only root may read in `read_only`
    /// ([`root_only`]), walked in the background.
    root_only: Option<root_only::Walks>,
    /// `hide` and the root-only paths, joined once every walk has ended.
    hidden: std::sync::Mutex<Option<Arc<Vec<PathBuf>>>>,
    limits: Limits,
}

impl Confinement {
    /// Picks the backend `config.mode` asks for. `path` is the `PATH`
    /// subprocesses get: its directories (and their toolchains) are visible.
    pub fn detect(config: &SandboxConfig, path: &str) -> Result<Confinement, ConfineError> {
        if config.mode != Mode::None {
            writable_program_dir(&config.read_write, path)?;
        }
        // Why bwrap was passed over (`auto`), for the reason a run is refused.
        let mut no_bwrap = String::new();
        let backend = match config.mode {
            Mode::None => Backend::Unconfined,
            Mode::Bwrap => bwrap::probe().map_err(|reason| ConfineError::ModeUnavailable {
                mode: "bwrap",
                reason,
            })?,
            Mode::Landlock => {
                landlock::probe().map_err(|reason| ConfineError::ModeUnavailable {
                    mode: "landlock",
                    reason,
                })?
            }
            Mode::Auto => match bwrap::probe() {
                Ok(backend) => backend,
                Err(why) if is_root() => Backend::Unavailable {
                    reason: ConfineError::Unavailable(format!("{why}; {ROOT_UNDER_LANDLOCK}"))
                        .to_string(),
                },
                Err(why) => {
                    no_bwrap = why;
                    landlock::probe().unwrap_or_else(|no_landlock| Backend::Unavailable {
                        reason: ConfineError::Unavailable(format!("{no_bwrap}; {no_landlock}"))
                            .to_string(),
                    })
                }
            },
        };
        let backend = network_filter(config, backend, &no_bwrap)?;
        Ok(Confinement::new(backend, config, path))
    }

    /// No confinement (`mode = "none"`).
    pub fn unconfined() -> Confinement {
        Confinement::new(Backend::Unconfined, &SandboxConfig::default(), "")
    }

    /// `backend` with the view `config` and `path` describe (what
    /// [`Confinement::detect`] builds once it has picked the backend).
    pub fn new(backend: Backend, config: &SandboxConfig, path: &str) -> Confinement {
        let mut read_only = view::system_dirs();
        read_only.extend(view::toolchain_dirs(path));
        read_only.extend(config.read_only.iter().cloned());
        let read_only = view::existing(read_only);
        let read_write = view::existing(config.read_write.clone());
        let confined = matches!(backend, Backend::Bwrap { .. } | Backend::Landlock { .. });
        let root_only = (confined && is_root()).then(|| root_only::Walks::start(&read_only));
        Confinement {
            inner: Arc::new(Inner {
                backend,
                network: config.network,
                read_only,
                read_write,
                hide: config.hide.clone(),
                root_only,
                hidden: std::sync::Mutex::new(None),
                limits: config.limits,
            }),
        }
    }

    pub fn backend(&self) -> &Backend {
        &self.inner.backend
    }

    /// True when processes run with closer's own access.
    pub fn is_unconfined(&self) -> bool {
        self.inner.backend == Backend::Unconfined
    }

    /// Running as root and confined: the paths only root may read that
    /// every sandbox hides (waits for the walk).
    pub fn root_only(&self) -> Option<Vec<PathBuf>> {
        Some(self.root_only_found()?.paths)
    }

    fn root_only_found(&self) -> Option<root_only::Found> {
        let walks = self.inner.root_only.as_ref()?;
        Some(walks.hidden(&self.inner.read_write, &self.inner.hide))
    }

    /// True when the operator asked for Landlock by name and closer runs
    /// as root: confined, but not against root's own powers (decision 223).
    pub fn root_under_landlock(&self) -> bool {
        matches!(self.inner.backend, Backend::Landlock { .. }) && is_root()
    }

    /// Why no process can run, when `auto` found no sandbox.
    pub fn unavailable(&self) -> Option<&str> {
        match &self.inner.backend {
            Backend::Unavailable { reason } => Some(reason),
            _ => None,
        }
    }

    /// The jail of one process: this confinement with a run's `view`.
    pub fn jail(&self, kind: Kind, view: View) -> Jail {
        Jail {
            confinement: self.clone(),
            network: self.inner.network.of(kind),
            view,
            pid_one: false,
        }
    }
}

/// One process's confinement: what it sees, whether it has a network.
#[derive(Debug, Clone)]
pub struct Jail {
    confinement: Confinement,
    pub network: Network,
    pub view: View,
    /// bwrap: the program is process 1 of its PID namespace, with no
    /// process of bwrap's beside it, which would hold the program's
    /// standard descriptors open to every process of the sandbox through
    /// `/proc/1/fd` (the goal probe's answer, decision 197).
    pub pid_one: bool,
}

impl Jail {
    pub fn backend(&self) -> &Backend {
        &self.confinement.inner.backend
    }

    pub fn limits(&self) -> Limits {
        self.confinement.inner.limits
    }

    /// Read-only for every process: system and toolchain directories and
    /// the operator's `read_only`.
    pub fn shared_read_only(&self) -> &[PathBuf] {
        &self.confinement.inner.read_only
    }

    /// Read-write for every process: the operator's `read_write`.
    pub fn shared_read_write(&self) -> &[PathBuf] {
        &self.confinement.inner.read_write
    }

    /// Never visible, whatever contains them: closer's own files and, when
    /// closer runs as root, what only root may use (a process may wait for
    /// those walks, 30 s at most: [`root_only`]).
    pub fn hidden(&self) -> Arc<Vec<PathBuf>> {
        let inner = &self.confinement.inner;
        let lock = || inner.hidden.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(hidden) = lock().as_ref() {
            return hidden.clone();
        }
        let mut hidden = inner.hide.clone();
        let found = self.confinement.root_only_found();
        let complete = found.as_ref().is_none_or(|f| f.complete);
        hidden.extend(found.into_iter().flat_map(|f| f.paths));
        let hidden = Arc::new(hidden);
        if complete {
            *lock() = Some(hidden.clone());
        }
        hidden
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setup_has_the_network_by_default_and_an_operator_can_take_it() {
        let default = NetworkPolicy::default();
        assert_eq!(default.of(Kind::Setup), Network::Full);
        assert_eq!(default.of(Kind::Goal), Network::None);
        let taken: SandboxConfig = toml::from_str("[network]\nsetup = \"none\"\n").unwrap();
        assert_eq!(taken.network.of(Kind::Setup), Network::None);
        assert_eq!(taken.network.of(Kind::Agent), Network::Full);
    }

    #[test]
    fn landlock_that_cannot_filter_the_network_stops_only_a_named_mode() {
        let config = |mode, kinds| SandboxConfig {
            mode,
            network: NetworkPolicy {
                agent: Network::Full,
                setup: Network::Full,
                goals: kinds,
                handler: kinds,
            },
            ..SandboxConfig::default()
        };
        let old = Backend::Landlock { abi: 3 };
        let err =
            network_filter(&config(Mode::Landlock, Network::None), old.clone(), "").unwrap_err();
        assert!(
            err.to_string().contains("Landlock ABI 3 cannot filter"),
            "{err}"
        );
        // `auto` starts, and every run is refused with the reason.
        let auto =
            network_filter(&config(Mode::Auto, Network::None), old.clone(), "no bwrap").unwrap();
        let reason = match &auto {
            Backend::Unavailable { reason } => reason,
            other => panic!("{other:?}"),
        };
        assert!(reason.contains("Landlock ABI 3 cannot filter"), "{reason}");
        assert!(reason.contains("no bwrap"), "bwrap's own reason: {reason}");
        // The controls: no kind asks for no network, or the ABI can filter it.
        let full = config(Mode::Auto, Network::Full);
        assert_eq!(network_filter(&full, old.clone(), ""), Ok(old));
        let new = Backend::Landlock {
            abi: landlock::NET_ABI,
        };
        assert_eq!(
            network_filter(&config(Mode::Auto, Network::None), new.clone(), ""),
            Ok(new)
        );
    }

    #[test]
    fn a_shared_directory_holding_a_program_directory_is_refused() {
        let config = |dirs: &[&str]| SandboxConfig {
            mode: Mode::Bwrap,
            read_write: dirs.iter().map(PathBuf::from).collect(),
            ..SandboxConfig::default()
        };
        let path = "/root/.cargo/bin:/usr/local/bin:/usr/bin";
        for shared in ["/root/.cargo", "/root/.cargo/bin", "/usr"] {
            let err = Confinement::detect(&config(&[shared]), path).unwrap_err();
            assert!(
                matches!(&err, ConfineError::WritableProgramDir { dir, .. } if dir == shared),
                "{shared}: {err}"
            );
        }
        // The control: a cache beside the program directories is fine.
        assert_eq!(
            writable_program_dir(&config(&["/root/.cache/pip"]).read_write, path),
            Ok(())
        );
        assert_eq!(
            writable_program_dir(&config(&["/root/.cargo/bin-cache"]).read_write, path),
            Ok(()),
            "a sibling whose name starts alike"
        );
    }

    #[test]
    fn a_shared_directory_is_compared_with_its_links_resolved() {
        let root = tempfile::tempdir().unwrap();
        let tools = root.path().join("opt/tools");
        std::fs::create_dir_all(tools.join("bin")).unwrap();
        let link = root.path().join("tools-link");
        std::os::unix::fs::symlink(&tools, &link).unwrap();
        let program_dir = tools.join("bin").display().to_string();
        let linked_program_dir = link.join("bin").display().to_string();
        // The control: as text, neither names the other.
        assert!(!Path::new(&program_dir).starts_with(&link));
        assert!(!Path::new(&linked_program_dir).starts_with(&tools));
        for (shared, path) in [(&link, &program_dir), (&tools, &linked_program_dir)] {
            let err = writable_program_dir(std::slice::from_ref(shared), path).unwrap_err();
            assert!(
                matches!(err, ConfineError::WritableProgramDir { .. }),
                "{shared:?} and {path}"
            );
        }
        let beside = root.path().join("cache");
        std::fs::create_dir(&beside).unwrap();
        assert_eq!(writable_program_dir(&[beside], &linked_program_dir), Ok(()));
    }
}
