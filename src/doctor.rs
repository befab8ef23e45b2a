//! `closer doctor`: checks an operator's setup and says what is wrong in
//! plain words — the configuration parses, the data directory is writable,
//! the database is reachable and migrated, the webhook secret is set, the
//! App's credentials are accepted by GitHub, the LLM answers with the
//! configured model, the sandbox confines runs here, git is recent enough,
//! and each configured agent's tool is installed and starts. Exit 0 only when every
//! check holds.
//!
//! Each check is independent: one failing does not hide the others.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::agent::adapter::adapter_for;
use crate::agent::process::{self, BaseEnv, ProcessSpec};
use crate::config::agents::AgentConfig;
use crate::config::server::ServerConfig;
use crate::github::{GitHubApp, GitHubSettings};
use crate::store::{Store, migrate};

/// How long a tool gets to print its version.
const VERSION_TIMEOUT: Duration = Duration::from_secs(30);

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub check: String,
    /// `Ok(what was seen)` or `Err(what is wrong and what to do)`.
    pub result: Result<String, String>,
}

impl Finding {
    fn new(check: impl Into<String>, result: Result<String, String>) -> Finding {
        Finding {
            check: check.into(),
            result,
        }
    }
}

/// Every check against `config` (the configuration already parsed).
pub async fn examine(config: &ServerConfig) -> Vec<Finding> {
    let mut findings = vec![
        Finding::new("configuration", Ok("parsed".to_owned())),
        Finding::new("data directory", data_dir(&config.data_dir).await),
        Finding::new("database", database(config).await),
        Finding::new("webhook secret", webhook_secret(config)),
        Finding::new("GitHub App", github_app(config).await),
        Finding::new("LLM", llm(config).await),
        Finding::new("sandbox", sandbox(config)),
        Finding::new("git", crate::agent::sandbox::git::check_version()),
    ];
    if config.agents.is_empty() {
        let why = "no agent is configured: add an [agents.NAME] entry (docs/agents.md)";
        findings.push(Finding::new("agents", Err(why.to_owned())));
    }
    for (name, agent) in &config.agents {
        let home = config.data_dir.join("homes").join(format!("doctor-{name}"));
        let found = tool(agent, &home).await;
        let _ = crate::agent::sandbox::remove::remove_tree(&home).await;
        findings.push(Finding::new(format!("agent `{name}`"), found));
    }
    findings
}

/// The sandbox agents and goals would run in here.
fn sandbox(config: &ServerConfig) -> Result<String, String> {
    let confinement = config.confinement().map_err(|e| e.to_string())?;
    if let Some(reason) = confinement.unavailable() {
        return Err(reason.to_owned());
    }
    if confinement.root_under_landlock() {
        let why = crate::agent::confine::ROOT_UNDER_LANDLOCK;
        return Err(format!("[sandbox] mode = \"landlock\": {why}"));
    }
    Ok(match confinement.backend() {
        crate::agent::confine::Backend::Unconfined => {
            "mode = \"none\": agents, goals and handlers run UNCONFINED".to_owned()
        }
        backend => {
            let mut seen = format!(
                "agents, goals and handlers run confined by {}",
                backend.name()
            );
            if !backend.scopes_sockets() {
                seen += "; this kernel has no Landlock scoping (ABI 6), so they can reach \
                         the abstract Unix sockets outside their sandbox";
            }
            if let Some(root_only) = confinement.root_only() {
                seen += &format!(
                    "; closer runs as root, so {} paths only root may read are hidden \
                     from them{} (better: run closer as an unprivileged user)",
                    root_only.len(),
                    named(&root_only),
                );
            }
            seen
        }
    })
}

/// The first few of `paths`, for a line of the report.
fn named(paths: &[std::path::PathBuf]) -> String {
    const SHOWN: usize = 8;
    let mut names: Vec<String> = paths
        .iter()
        .take(SHOWN)
        .map(|p| p.display().to_string())
        .collect();
    if paths.len() > SHOWN {
        names.push(format!("and {} more", paths.len() - SHOWN));
    }
    match names.is_empty() {
        true => String::new(),
        false => format!(" ({})", names.join(", ")),
    }
}

/// The report, a line per check, and whether all hold.
pub fn report(findings: &[Finding]) -> (bool, String) {
    let mut out = String::new();
    for f in findings {
        let (mark, text) = match &f.result {
            Ok(seen) => ("ok  ", seen),
            Err(problem) => ("FAIL", problem),
        };
        let _ = writeln!(out, "{mark} {}: {text}", f.check);
    }
    let healthy = findings.iter().all(|f| f.result.is_ok());
    let failed = findings.iter().filter(|f| f.result.is_err()).count();
    let _ = match healthy {
        true => writeln!(out, "\nall {} checks passed", findings.len()),
        false => writeln!(out, "\n{failed} of {} checks failed", findings.len()),
    };
    (healthy, out)
}

async fn data_dir(dir: &Path) -> Result<String, String> {
    let probe = dir.join(".closer-doctor-probe");
    let written = async {
        tokio::fs::create_dir_all(dir).await?;
        tokio::fs::write(&probe, b"probe").await?;
        tokio::fs::remove_file(&probe).await
    };
    written
        .await
        .map(|()| format!("{} is writable", dir.display()))
        .map_err(|e| {
            format!(
                "{} is not writable ({e}): set data_dir / CLOSER_DATA_DIR to a directory closer's user owns",
                dir.display()
            )
        })
}

async fn database(config: &ServerConfig) -> Result<String, String> {
    let store = Store::connect(&config.store, crate::clock::system())
        .await
        .map_err(|e| format!("cannot connect ({e}): check DATABASE_URL"))?;
    let current = migrate::current_version(store.pool()).await;
    let shared = store.sqlite_file().and_then(readable_by_others);
    store.close().await;
    if let Some(file) = shared {
        return Err(format!(
            "{file} can be read by other users, and it holds issues, comments and prompts: \
             `chmod 600 {file}*` (closer creates it so)"
        ));
    }
    let latest = migrate::latest_version();
    match current {
        Ok(v) if v == latest => Ok(format!("reachable, at migration {v}")),
        Ok(v) => Err(format!(
            "reachable but at migration {v} of {latest}: run `closer migrate` (serve migrates at start)"
        )),
        Err(e) => Err(format!(
            "reachable, but the schema cannot be read ({e}): run `closer migrate`"
        )),
    }
}

/// The SQLite file's name when its group or others may read it.
fn readable_by_others(file: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(file).ok()?.permissions().mode();
    (mode & 0o044 != 0).then(|| file.display().to_string())
}

async fn github_app(config: &ServerConfig) -> Result<String, String> {
    if config.github.app_id.is_none() || config.github.private_key.is_none() {
        return Err(
            "GITHUB_APP_ID and the private key (GITHUB_PRIVATE_KEY_PATH) are not both set"
                .to_owned(),
        );
    }
    let settings = GitHubSettings {
        api_url: config.github.api_url.clone(),
        app_id: config.github.app_id,
        private_key: config.github.private_key.clone(),
        ..GitHubSettings::default()
    };
    let app = GitHubApp::new(settings, crate::clock::system(), None)
        .map_err(|e| format!("the App settings are invalid: {e}"))?;
    let info = app.app_info().await.map_err(|e| {
        format!("GitHub did not accept the App's JWT ({e}): check GITHUB_APP_ID and the key")
    })?;
    Ok(format!("JWT accepted for `{}`", info.slug))
}

/// `serve` in the `all` and `intake` roles does not start without it; a
/// worker-only process (`--role worker`) does not need it.
fn webhook_secret(config: &ServerConfig) -> Result<String, String> {
    config
        .require_webhook_secret()
        .map(|_| "set".to_owned())
        .map_err(|e| format!("{e} (only `closer serve --role worker` runs without it)"))
}

async fn llm(config: &ServerConfig) -> Result<String, String> {
    let Some(settings) = &config.llm else {
        return Err(
            "no LLM is configured: set CLOSER_LLM_PROVIDER, _BASE_URL, _MODEL and _API_KEY".into(),
        );
    };
    let client = crate::llm::build_client(settings.into())
        .map_err(|e| format!("the LLM client cannot be built: {e}"))?;
    let request = crate::llm::LlmRequest {
        system: None,
        prompt: "Answer with ok = true.".to_owned(),
        schema_name: "doctor".to_owned(),
        schema: serde_json::json!({
            "type": "object",
            "properties": {"ok": {"type": "boolean"}},
            "required": ["ok"],
            "additionalProperties": false
        }),
    };
    client
        .query(&request)
        .await
        .map(|_| format!("{} answered a structured query", settings.model))
        .map_err(|e| {
            format!(
                "{} at {} did not answer: {e}",
                settings.model, settings.base_url
            )
        })
}

/// The tool's version (tool adapters), or that the operator's command
/// exists and is executable (it is never run for a check).
async fn tool(agent: &AgentConfig, home: &Path) -> Result<String, String> {
    if let Some(problem) = agent.config_file_problems().into_iter().next() {
        return Err(problem);
    }
    let base = BaseEnv::from_process();
    let Some(argv) = adapter_for(agent.adapter).version_argv(agent) else {
        let program = agent.command.first().cloned().unwrap_or_default();
        let found = process::resolve_program(&program, Some(&base.path));
        return match executable(&found) {
            true => Ok(format!("`{}` is executable", found.display())),
            false => Err(format!("`{program}` is not an executable file on PATH")),
        };
    };
    let program = argv.first().cloned().unwrap_or_default();
    tokio::fs::create_dir_all(home).await.map_err(|e| {
        format!(
            "cannot make a HOME for the check at {}: {e}",
            home.display()
        )
    })?;
    let mut env = base.vars();
    env.insert("HOME".into(), home.display().to_string());
    let spec = ProcessSpec {
        argv,
        cwd: home.to_path_buf(),
        env,
        stdin: None,
        timeout: VERSION_TIMEOUT,
        max_output_bytes: 64 * 1024,
        keep_end: false,
        jail: None,
        fd3: None,
    };
    let output = process::run(&spec).await.map_err(|e| {
        format!("`{program}` cannot be started ({e}): install it (docs/agents.md) or set `command`")
    })?;
    let said = output.tail(3);
    if !output.success() {
        return Err(format!("`{program}` did not start: {said}"));
    }
    Ok(format!(
        "`{program}` {}",
        said.lines().next().unwrap_or("").trim()
    ))
}

fn executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
