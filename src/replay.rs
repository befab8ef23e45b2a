//! `closer replay <payload.json> --event <name>`: feeds one webhook payload
//! through the same pipeline a delivery takes (typed event → the engine's
//! triggers), with every GitHub write printed instead of sent.
//!
//! It never touches the operator's database (a throwaway SQLite file in a
//! temporary directory holds whatever the engine records) and never runs an
//! agent: the steps a trigger would queue are listed, not executed. Reads go
//! to GitHub with the App's credentials when configured, so the replay sees
//! the repository's real `.github/closer.yml` and permissions.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use tokio::sync::Notify;

use crate::config::server::ServerConfig;
use crate::events::{EventKind, parse_event};
use crate::github::{GitHubApp, GitHubSettings, WriteRecorder};
use crate::model::Named;
use crate::store::{Store, StoreOptions, jobs};

/// Prints each write as `would <METHOD> <path>` and its JSON body.
struct PrintRecorder;

impl WriteRecorder for PrintRecorder {
    fn record(&self, method: &str, path: &str, body: Option<&str>) {
        println!("would {method} {path}");
        if let Some(body) = body {
            println!("    {body}");
        }
    }
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Replays one payload; prints what closer would do. Errors are input
/// problems (unreadable file, not JSON, not a payload of that event).
pub async fn replay(config: &ServerConfig, payload: &Path, event: &str) -> anyhow::Result<()> {
    let bytes =
        std::fs::read(payload).with_context(|| format!("cannot read {}", payload.display()))?;
    serde_json::from_slice::<serde_json::Value>(&bytes)
        .with_context(|| format!("{} is not JSON", payload.display()))?;
    let Some(kind) = EventKind::from_header(event) else {
        println!("`{event}` is not an event closer subscribes to: it would be stored as ignored");
        return Ok(());
    };
    let event = parse_event(kind, &bytes)?;

    let dir = TempDir(std::env::temp_dir().join(format!("closer-replay-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0)?;
    let url = format!("sqlite://{}", dir.0.join("replay.db").display());
    let store = Store::open(&StoreOptions::new(url), crate::clock::system()).await?;
    let github = Arc::new(GitHubApp::new(
        GitHubSettings {
            api_url: config.github.api_url.clone(),
            app_id: config.github.app_id,
            private_key: config.github.private_key.clone(),
            dry_run: true,
            ..GitHubSettings::default()
        },
        store.clock().clone(),
        Some(Arc::new(PrintRecorder)),
    )?);
    let mut config = config.clone();
    config.data_dir = dir.0.join("data");
    let engine = crate::service::build_engine(
        &config,
        crate::agent::confine::Confinement::unconfined(),
        store.clone(),
        github,
        Arc::new(Notify::new()),
    )?;
    match engine.on_event(&event).await {
        Ok(outcome) => println!("outcome: {outcome}"),
        Err(e) => println!("outcome: error: {e}"),
    }
    for (state, count) in jobs::depth_by_state(store.pool()).await? {
        println!(
            "jobs {}: {count} (queued steps are not run by replay)",
            state.as_str()
        );
    }
    store.close().await;
    Ok(())
}
