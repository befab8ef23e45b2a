//! The `closer` binary: parse the command line, load the configuration once,
//! run the command. Errors are printed, never panicked.

use std::process::ExitCode;

use clap::Parser;
use closer::cli::{Cli, Command, Role};
use closer::config::server::ServerConfig;
use closer::service::{self, ServeOptions};
use closer::store::{Store, migrate};

/// mimalloc: intake allocates a little for every request on two threads and
/// frees it on others; glibc's allocator cost ~15 % of intake throughput
/// (docs/benchmarks.md). C code (SQLite, zstd) still uses glibc's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    forbid_inspection();
    tune_memory();
    let cli = Cli::parse();
    match cli.command {
        Command::RenderPrompt => return closer::prompts::confined::child_main(),
        Command::GoalProbe => return closer::engine::goals::probe::child_main(),
        _ => {}
    }
    closer::install_crypto_provider();
    init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Workers sharing the process with intake run on a runtime of their own.
    let work = match &cli.command {
        Command::Serve(args) if args.role == Role::All => match closer::work_runtime::build() {
            Ok(work) => Some(work),
            Err(e) => {
                eprintln!("error: cannot start the workers' runtime: {e}");
                return ExitCode::FAILURE;
            }
        },
        _ => None,
    };
    let handle = work.as_ref().map(|work| work.handle().clone());
    let outcome = runtime.block_on(run(cli, handle));
    // Its workers have given their jobs back by now; what is left
    // (reconciliation between passes) is dropped.
    if let Some(work) = work {
        work.shutdown_timeout(std::time::Duration::from_secs(1));
    }
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli, work: Option<tokio::runtime::Handle>) -> anyhow::Result<ExitCode> {
    if let Command::Doctor = cli.command {
        return Ok(doctor(&cli).await);
    }
    if let Command::CheckConfig { file } = &cli.command {
        // Only the agents' names: a maintainer checks the file away from
        // the server, without its key, database or agents' files.
        let names = ServerConfig::agent_names(&cli.settings)?;
        let agents: Vec<&str> = names.iter().map(String::as_str).collect();
        let (code, report) = closer::config::check_config_file(file, &agents);
        println!("{report}");
        return Ok(if code == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(code.clamp(1, 255) as u8)
        });
    }
    let config = ServerConfig::load(&cli.settings)?;
    match cli.command {
        // Answered above, before the configuration could fail to load.
        Command::Doctor
        | Command::RenderPrompt
        | Command::GoalProbe
        | Command::CheckConfig { .. } => {}
        Command::Serve(args) => {
            let options = ServeOptions {
                role: args.role,
                dry_run: args.dry_run,
                work,
            };
            service::serve(config, options).await?;
        }
        Command::Migrate => {
            let store = Store::connect(&config.store, closer::clock::system()).await?;
            let applied = migrate::run(&store).await?;
            println!(
                "database at migration {} ({} applied now)",
                migrate::latest_version(),
                applied.len()
            );
            store.close().await;
        }
        Command::Replay { payload, event } => {
            closer::replay::replay(&config, &payload, &event).await?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `closer doctor`: a configuration that does not load is the first
/// finding, not an error exit without the others.
async fn doctor(cli: &Cli) -> ExitCode {
    let (healthy, report) = match ServerConfig::load(&cli.settings) {
        Ok(config) => closer::doctor::report(&closer::doctor::examine(&config).await),
        Err(e) => (false, format!("FAIL configuration: {e}\n")),
    };
    print!("{report}");
    match healthy {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    }
}

/// Agents run as the same user as closer. Marking the process non-dumpable
/// makes `/proc/<pid>/environ`, `/proc/<pid>/mem` and ptrace unavailable to
/// them, so they cannot read the secrets in closer's environment or memory.
fn forbid_inspection() {
    // SAFETY: PR_SET_DUMPABLE takes plain integers and touches no memory.
    let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    if rc != 0 {
        eprintln!(
            "warning: could not mark the process non-dumpable; agents may read its environment"
        );
    }
}

/// Keeps the resident size small under load.
///
/// - mimalloc asks for transparent huge pages on its arenas; under intake
///   load that grew the resident size by ~11 MB (2 MiB pages, barely used)
///   and cost throughput zeroing them. Huge pages are turned off for this
///   process (the agents it starts inherit that; they lose little by it).
/// - glibc, still used by the C libraries, gives every thread that allocates
///   its own arena (up to 8 per core) and keeps freed memory in each; two
///   are plenty for closer's few threads.
/// - mimalloc returns the pages a thread no longer uses to the system a
///   second after they empty; returning them at once kept ~5 MB less
///   resident under load at no measured cost (docs/benchmarks.md, run 4).
fn tune_memory() {
    // SAFETY: prctl, mallopt and mi_option_set take plain integers and touch
    // no Rust memory; called before any thread starts.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0);
    }
}

/// `mi_option_purge_delay` in mimalloc 3.3's `mi_option_e` (its
/// include/mimalloc.h; the bindings do not name it). The options are numbered
/// by their place in that enum: a test checks the version they were read from.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// The mimalloc the option numbers above were read from.
#[cfg(test)]
const MIMALLOC_VERSION: i32 = 30302;

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

#[cfg(test)]
mod tests {
    use super::{MI_OPTION_PURGE_DELAY, MIMALLOC_VERSION};

    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        // SAFETY: plain integers in and out.
        let (version, default, set) = unsafe {
            let version = libmimalloc_sys::mi_version();
            let default = libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY);
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0);
            let set = libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY);
            (version, default, set)
        };
        assert_eq!(
            version, MIMALLOC_VERSION,
            "mimalloc changed: read the option numbers in main.rs again"
        );
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(
                default, 1000,
                "the purge delay's default in mimalloc 3, in ms"
            );
        }
        assert_eq!(set, 0);
    }
}
