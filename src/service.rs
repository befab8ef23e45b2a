//! `closer serve`: wires the store, the intake writer, the HTTP server, the
//! workers and housekeeping together, and takes them down in order on
//! SIGTERM / Ctrl-C: stop accepting, finish in-flight requests, drain the
//! intake writer, let workers finish (or give back) their jobs, exit 0 —
//! all within `[http] shutdown_grace_secs` of the signal (HTTP connections
//! and in-flight jobs get that long, side by side).

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use anyhow::Context;
use tokio::sync::{Notify, watch};

use crate::agent::confine::Confinement;
use crate::agent::process::BaseEnv;
use crate::cli::Role;
use crate::config::server::ServerConfig;
use crate::engine::run::{Engine, EngineSettings, LlmPrices, MAYBE_APPLIED_RECHECK, Workspace};
use crate::github::{GitHubApp, GitHubSettings};
use crate::model::JobKind;
use crate::retention::Retention;
use crate::server::signals::ShutdownSignals;
use crate::server::{self, AppState};
use crate::store::Store;
use crate::store::dry_run::DbRecorder;
use crate::store::writer::IntakeWriter;
use crate::worker::delivery::{DeliveryRunner, EventReactor};
use crate::worker::{JobRunner, WorkerHealth, WorkerPool, WorkerSettings};

/// How often open runs are compared with the queue and with GitHub.
const RECONCILE_EVERY: Duration = Duration::from_secs(600);

/// How `closer serve` was asked to run.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub role: Role,
    pub dry_run: bool,
    /// Where the workers, reconciliation and retention run: a runtime of
    /// their own at a lower priority ([`crate::work_runtime`]) when they
    /// share the process with intake; `None`: this one.
    pub work: Option<tokio::runtime::Handle>,
}

/// Runs until a shutdown signal.
pub async fn serve(config: ServerConfig, options: ServeOptions) -> anyhow::Result<()> {
    let mut signals = ShutdownSignals::install().context("cannot catch SIGTERM and SIGINT")?;
    let (secret, listener) = preflight(&config, &options).await?;
    // Opening may wait without a bound (another replica's migration): a
    // stop signal meanwhile ends the process here, before it serves.
    let store = tokio::select! {
        opened = Store::open(&config.store, crate::clock::system()) => {
            opened.context("cannot open the database")?
        }
        () = signals.recv() => {
            tracing::info!("shutdown signal while the database was opened: stopping");
            return Ok(());
        }
    };
    tracing::info!(backend = ?store.backend(), role = ?options.role, dry_run = options.dry_run, "database ready");
    let (github, recorder_task) = github_app(&config, &store, options.dry_run)?;
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let jobs_ready = Arc::new(Notify::new());
    let (writer, writer_task) = match options.role.runs_intake() {
        true => {
            let (writer, task) = IntakeWriter::spawn(store.clone(), 8192)?;
            (Some(writer), Some(task))
        }
        false => (None, None),
    };
    // Spawned from here, the background's tasks run on the workers' runtime.
    let work = options.work.as_ref().map(|handle| handle.enter());
    let (worker_tasks, workers) = match options.role.runs_workers() {
        true => {
            let (tasks, health) = start_workers(
                &config,
                confined(&config)?,
                &store,
                &github,
                &jobs_ready,
                &shutdown_rx,
            )?;
            (tasks, Some(health))
        }
        false => (Vec::new(), None),
    };
    let max_attempts = config.queue.max_attempts;
    let mut state = AppState::new(store.clone(), writer, &secret, jobs_ready, max_attempts)
        .with_http_limits(&config.http);
    if let Some(workers) = workers {
        state = state.with_workers(workers);
    }
    let state = Arc::new(state);
    if config.github.app_id.is_some() {
        tokio::spawn(announce_app(
            Arc::downgrade(&github),
            state.app_slug.clone(),
        ));
    }
    // After the state: it installs the metrics recorder the task reports to.
    let housekeeping = start_retention(&config, &store, shutdown_rx);
    drop(work);
    serve_http(&config, listener, state, signals.wait(shutdown_tx)).await?;

    tracing::info!("shutting down: draining the intake writer and the workers");
    if let Some(task) = writer_task {
        let _ = task.await;
    }
    for task in worker_tasks {
        let _ = task.await;
    }
    housekeeping.abort();
    drop(github);
    // The recorder ends once the last client holding it is gone; give it a
    // moment to store what it was handed.
    if tokio::time::timeout(Duration::from_secs(2), recorder_task)
        .await
        .is_err()
    {
        tracing::warn!("dry-run recorder still busy at exit");
    }
    store.close().await;
    tracing::info!("stopped");
    Ok(())
}

/// What `serve` needs before it touches anything: the webhook secret (for
/// intake), the App's credentials (unless `--dry-run`) and its port. Bound
/// first: a second `closer serve` on a taken port stops here, before it
/// migrates, claims jobs or writes to GitHub (decision 236).
async fn preflight(
    config: &ServerConfig,
    options: &ServeOptions,
) -> anyhow::Result<(secrecy::SecretString, tokio::net::TcpListener)> {
    let secret = match options.role.runs_intake() {
        true => config.require_webhook_secret()?.clone(),
        false => secrecy::SecretString::from(String::new()),
    };
    if !options.dry_run && (config.github.app_id.is_none() || config.github.private_key.is_none()) {
        anyhow::bail!(
            "GITHUB_APP_ID and GITHUB_PRIVATE_KEY (or GITHUB_PRIVATE_KEY_PATH) are required; \
             run with --dry-run to try closer without a GitHub App"
        );
    }
    let listener = tokio::net::TcpListener::bind(config.bind)
        .await
        .with_context(|| format!("cannot listen on {}", config.bind))?;
    Ok((secret, listener))
}

/// The hourly retention task (`[retention]`).
fn start_retention(
    config: &ServerConfig,
    store: &Store,
    shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let retention = Retention::new(
        store.clone(),
        Workspace::new(&config.data_dir, &BaseEnv::from_process()),
        config.data_dir.clone(),
        config.retention,
    );
    tokio::spawn(retention.run_forever(shutdown))
}

/// The sandbox for agents, goals and handlers, announced in the log; an
/// error when the backend the operator named is missing. When `auto` finds
/// none, closer starts and every run fails, naming why. A git older than
/// closer's defences need is refused here too.
fn confined(config: &ServerConfig) -> anyhow::Result<Confinement> {
    let git = crate::agent::sandbox::git::check_version().map_err(anyhow::Error::msg)?;
    tracing::info!(%git, "git");
    if let Ok(path) = std::env::var("PATH")
        && crate::agent::process::absolute_dirs(&path) != path
    {
        tracing::warn!(
            %path,
            "PATH has relative or empty directories; closer and what it runs search only \
             its absolute ones"
        );
    }
    private_data_dir(&config.data_dir);
    let confinement = config.confinement()?;
    if let Some(reason) = confinement.unavailable() {
        tracing::error!("{reason}; every run will fail until this is fixed");
        return Ok(confinement);
    }
    match confinement.backend().name() {
        "none" => tracing::warn!(
            "[sandbox] mode = \"none\": agents, goals and handlers run UNCONFINED, with \
             closer's own access to its key, database and every run"
        ),
        backend => tracing::info!(backend, "agents, goals and handlers run confined"),
    }
    if confinement.root_under_landlock() {
        tracing::error!(
            "[sandbox] mode = \"landlock\": {}",
            crate::agent::confine::ROOT_UNDER_LANDLOCK
        );
    }
    Ok(confinement)
}

/// Makes the data directory closer's alone (mode 0700), creating it when
/// missing: a sandboxed process is closer's user outside, so a setuid file
/// it leaves in a worktree would run as that user (as root, when closer is
/// root) for any local user who could reach it (decision 225). A directory
/// that cannot be made so is logged, not fatal.
fn private_data_dir(dir: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let made = crate::engine::run::private_dir(dir);
    let mode = made
        .and_then(|()| std::fs::metadata(dir))
        .map(|m| m.permissions().mode());
    let private = match mode {
        Ok(mode) if mode & 0o077 == 0 => Ok(()),
        Ok(mode) => {
            tracing::info!(dir = %dir.display(), mode = format!("{:o}", mode & 0o777), "the data directory is made private (0700)");
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        }
        Err(e) => Err(e),
    };
    if let Err(e) = private {
        tracing::warn!(dir = %dir.display(), error = %e, "the data directory could not be made private (0700)");
    }
}

/// The GitHub App client (recording writes in the database under
/// `--dry-run`), announced once credentials are set; with the recorder's
/// task.
fn github_app(
    config: &ServerConfig,
    store: &Store,
    dry_run: bool,
) -> anyhow::Result<(Arc<GitHubApp>, tokio::task::JoinHandle<()>)> {
    let (recorder, recorder_task) = DbRecorder::spawn(store.clone());
    let settings = GitHubSettings {
        api_url: config.github.api_url.clone(),
        app_id: config.github.app_id,
        private_key: config.github.private_key.clone(),
        dry_run,
        redactor: crate::redact::Redactor::with_operator_secrets(
            config.github.webhook_secret.as_ref(),
            config.llm.as_ref().and_then(|l| l.api_key.as_ref()),
        ),
        ..GitHubSettings::default()
    };
    let github = GitHubApp::new(settings, store.clock().clone(), Some(Arc::new(recorder)))
        .context("invalid GitHub App settings")?;
    Ok((Arc::new(github), recorder_task))
}

/// The engine, its reconciliation, and the worker pool; with the pool's
/// health for `/readyz`.
fn start_workers(
    config: &ServerConfig,
    confinement: Confinement,
    store: &Store,
    github: &Arc<GitHubApp>,
    jobs_ready: &Arc<Notify>,
    shutdown: &watch::Receiver<bool>,
) -> anyhow::Result<(Vec<tokio::task::JoinHandle<()>>, WorkerHealth)> {
    let engine = build_engine(
        config,
        confinement,
        store.clone(),
        github.clone(),
        jobs_ready.clone(),
    )?;
    let runners = job_runners(store, &engine);
    tokio::spawn(
        engine
            .clone()
            .reconcile_forever(RECONCILE_EVERY, shutdown.clone()),
    );
    let settings = WorkerSettings {
        lease: config.queue.lease,
        shutdown_grace: config.http.shutdown_grace,
        ..WorkerSettings::default()
    };
    let pool = WorkerPool::new(store.clone(), runners, settings, jobs_ready.clone());
    let process = process_name();
    let mut tasks = pool.spawn(config.queue.workers, &process, shutdown.clone());
    // Awaited at shutdown with the workers: it says the process left. A
    // process without workers never takes the steps it would hold.
    if config.queue.workers > 0 {
        let announce = engine.announce_workspace_forever(process, shutdown.clone());
        tasks.push(tokio::spawn(announce));
    }
    tracing::info!(count = config.queue.workers, "workers started");
    Ok((tasks, pool.health()))
}

/// Serves HTTP on `listener` until the shutdown signal, then finishes
/// in-flight requests (for at most the shutdown grace).
async fn serve_http(
    config: &ServerConfig,
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let app = server::router(state, &config.webhook_path);
    crate::server::listen::raise_file_limit(config.http.max_connections);
    tracing::info!(address = %listener.local_addr()?, path = %config.webhook_path, "listening");
    server::listen::serve(listener, app, config.http, shutdown).await;
    Ok(())
}

/// The engine from the operator's config. Without `[llm]` the engine still
/// runs, but every run fails at start with a comment saying the operator must
/// configure one (logged here once, and per run). An error when closer cannot
/// find its own binary, which renders prompt overrides.
pub(crate) fn build_engine(
    config: &ServerConfig,
    confinement: Confinement,
    store: Store,
    github: Arc<GitHubApp>,
    ready: Arc<Notify>,
) -> anyhow::Result<Arc<Engine>> {
    let prompt_renderer = crate::prompts::Renderer::this_program()
        .context("cannot find closer's own binary, which renders prompt overrides")?;
    let llm = match &config.llm {
        Some(c) => match crate::llm::build_client(c.into()) {
            Ok(client) => Some(client),
            Err(e) => {
                tracing::error!(error = %e, "the LLM client cannot be built; runs will fail");
                None
            }
        },
        None => {
            tracing::error!("no LLM configured (CLOSER_LLM_*): every run will fail at start");
            None
        }
    };
    let settings = EngineSettings {
        confinement,
        agents: config.agents.clone(),
        llm,
        data_dir: config.data_dir.clone(),
        base_env: BaseEnv::from_process(),
        max_attempts: config.queue.max_attempts,
        dashboard_url: None,
        max_tokens_per_run: config.limits.max_tokens_per_run,
        max_cost_usd_per_run: config.limits.max_cost_usd_per_run,
        llm_prices: config
            .llm
            .as_ref()
            .map(|c| LlmPrices {
                input_usd_per_mtok: c.input_usd_per_mtok.unwrap_or(0.0),
                output_usd_per_mtok: c.output_usd_per_mtok.unwrap_or(0.0),
            })
            .unwrap_or_default(),
        recheck_after: MAYBE_APPLIED_RECHECK,
        progress_every: config.progress_every,
        prompt_renderer,
    };
    Ok(Engine::new(store, github, settings, ready))
}

/// The job runners of a worker process: deliveries (the engine acting on
/// their events) and run steps. `closer serve` and the story tests wire
/// their workers with this one function.
pub fn job_runners(store: &Store, engine: &Arc<Engine>) -> HashMap<JobKind, Arc<dyn JobRunner>> {
    let events: Arc<dyn EventReactor> = engine.clone();
    HashMap::from([
        (
            JobKind::Delivery,
            Arc::new(DeliveryRunner::with_events(store.clone(), events)) as Arc<dyn JobRunner>,
        ),
        (JobKind::Run, engine.run_step_runner()),
    ])
}

/// Checks the App credentials at start, says whom they belong to and hands
/// the slug to intake's triage. A failure is logged, not fatal (GitHub may be
/// briefly unreachable), and tried again a minute later; meanwhile triage
/// counts any `@` in a comment as a possible mention of the App.
async fn announce_app(github: Weak<GitHubApp>, slug: Arc<std::sync::OnceLock<String>>) {
    // Weak: a retry pending at shutdown must not keep the client alive.
    while let Some(app) = github.upgrade() {
        match app.app_info().await {
            Ok(app) => {
                tracing::info!(app = %app.slug, id = app.id, "authenticated as the GitHub App");
                let _ = slug.set(app.slug);
                return;
            }
            Err(e) => tracing::warn!(error = %e, "cannot authenticate as the GitHub App yet"),
        }
        drop(app);
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
}

/// Names this process's workers in lease records: host, pid and a random
/// part, so that two replicas never share a name (systemd sets no
/// `HOSTNAME`; containers sharing a host's name all run as pid 1), which
/// every lease check (heartbeat, outcome, release) compares.
fn process_name() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "closer".to_owned());
    format!("{host}:{}:{:08x}", std::process::id(), fastrand::u32(..))
}
