//! The agents the operator allows (`[agents.<name>]` in the server config).
//! A repository picks one by name and can never name a command of its own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Which tool an agent entry drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AdapterKind {
    /// `claude -p … --output-format stream-json`
    ClaudeCode,
    /// `codex exec --json …`
    Codex,
    /// `opencode run …`
    Opencode,
    /// Any argv, speaking the `command` adapter contract (docs/agents.md) (prompt on stdin and in
    /// `CLOSER_PROMPT_FILE`, report on stdout).
    Command,
}

impl AdapterKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AdapterKind::ClaudeCode => "claude-code",
            AdapterKind::Codex => "codex",
            AdapterKind::Opencode => "opencode",
            AdapterKind::Command => "command",
        }
    }
}

/// One `[agents.<name>]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    pub adapter: AdapterKind,
    /// The argv. Required for `command`; for the tool adapters it replaces the
    /// executable (and leading flags) when the tool is not on `PATH` as usual.
    #[serde(default)]
    pub command: Vec<String>,
    /// Wall-clock limit for one iteration; the whole process group is killed
    /// at the deadline (default 1800).
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// Environment variables passed through to the agent, by name; nothing
    /// else from closer's environment reaches it beyond a minimal
    /// `PATH`/`HOME`/`LANG`.
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// Variables set for the agent with these values (not secrets: use
    /// `pass_env` for keys), e.g. `{ ANTHROPIC_BASE_URL = "https://…" }`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Cap on captured stdout and stderr, each (default 10 MiB).
    #[serde(default = "default_output_cap")]
    pub max_output_bytes: usize,
    /// Files copied into the run's own HOME before each iteration: the path
    /// under HOME → the operator's file (e.g. `".codex/config.toml" =
    /// "/etc/closer/codex.toml"`), for the tool's provider configuration.
    #[serde(default)]
    pub config_files: BTreeMap<String, PathBuf>,
    /// How long a run's HOME (tool state, transcripts) is kept after it was
    /// last used, for debugging (default 86400 = a day; 0 = removed as soon
    /// as another run sweeps).
    #[serde(default = "default_keep_home")]
    pub keep_home_secs: u64,
    /// Continue the tool's session from one iteration to the next (default
    /// true); false starts each iteration afresh, with only closer's prompt.
    #[serde(default = "default_resume")]
    pub resume: bool,
}

fn default_resume() -> bool {
    true
}

fn default_keep_home() -> u64 {
    86_400
}

impl AgentConfig {
    /// Everything wrong with this entry, for `check-config` and start: a
    /// command adapter without a command, a duration or size out of bounds,
    /// an unusable `config_files` entry, an `env` or `pass_env` name the
    /// agent is never given.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.adapter == AdapterKind::Command && self.command.is_empty() {
            problems.push("the command adapter needs `command = [\"program\", …]`".to_owned());
        }
        let bounds: [(&str, u64, u64, u64); 3] = [
            ("timeout_secs", self.timeout_secs, 1, MAX_TIMEOUT_SECS),
            (
                "max_output_bytes",
                self.max_output_bytes as u64,
                1024,
                MAX_OUTPUT_BYTES,
            ),
            ("keep_home_secs", self.keep_home_secs, 0, MAX_KEEP_HOME_SECS),
        ];
        for (key, value, min, max) in bounds {
            if !(min..=max).contains(&value) {
                problems.push(format!(
                    "{key} must be between {min} and {max}, got {value}"
                ));
            }
        }
        problems.extend(self.config_file_problems());
        let names = self.env.keys().map(|n| ("env", n));
        for (key, name) in names.chain(self.pass_env.iter().map(|n| ("pass_env", n))) {
            if refused_env_name(name) {
                problems.push(format!(
                    "`{key}` names {name}, which closer never gives an agent (the App key, the \
                     webhook secret, tokens, the database URL and `CLOSER_*` names are refused)"
                ));
            }
        }
        problems
    }

    /// Problems with `config_files`: a target that is not a plain relative
    /// path under HOME, one that is a directory or file closer makes there
    /// ([`HOME_RESERVED`]), one inside another target, or a source that
    /// cannot be read.
    pub fn config_file_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (target, source) in &self.config_files {
            let plain = !target.is_empty()
                && Path::new(target)
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)));
            if !plain {
                problems.push(format!(
                    "config_files: `{target}` must be a relative path under HOME without `..`"
                ));
            } else if let Some(reserved) = HOME_RESERVED.iter().find(|r| {
                Path::new(target) == Path::new(r)
                    || (HOME_RESERVED_FILES.contains(r) && Path::new(target).starts_with(r))
            }) {
                problems.push(format!(
                    "config_files: `{target}` is closer's own `{reserved}` in HOME; \
                     name a file inside it"
                ));
            } else if let Some(outer) = self.config_files.keys().find(|other| {
                *other != target && Path::new(target).starts_with(Path::new(other.as_str()))
            }) {
                problems.push(format!(
                    "config_files: `{target}` is inside `{outer}`, which is a file"
                ));
            }
            if let Err(e) = std::fs::File::open(source) {
                problems.push(format!(
                    "config_files: cannot read {} (for `{target}`): {e}",
                    source.display()
                ));
            }
        }
        problems
    }
}

/// What closer itself makes or names in a run's HOME: TMPDIR, the marker
/// of its last use, the XDG directories and the adapters' own directories.
/// A `config_files` entry may go inside a directory, never replace one.
pub const HOME_RESERVED: &[&str] = &[
    "tmp",
    ".closer-last-used",
    ".config",
    ".local",
    ".local/share",
    ".local/state",
    ".cache",
    ".codex",
];

/// Of [`HOME_RESERVED`], the files: nothing goes inside them either.
const HOME_RESERVED_FILES: &[&str] = &[".closer-last-used"];

/// The longest iteration an agent may be given: a week.
const MAX_TIMEOUT_SECS: u64 = 7 * 86_400;
/// The largest capture of stdout or stderr: 1 GiB.
const MAX_OUTPUT_BYTES: u64 = 1024 * 1024 * 1024;
/// The longest a run's HOME is kept: a year.
const MAX_KEEP_HOME_SECS: u64 = 365 * 86_400;

fn default_timeout() -> u64 {
    1800
}

fn default_output_cap() -> usize {
    10 * 1024 * 1024
}

/// The operator's agents by name.
pub type Agents = BTreeMap<String, AgentConfig>;

/// Environment names the agent never receives, even when the operator lists
/// them in `pass_env` or `env`: the App key, the webhook secret, tokens and
/// the database. `CLOSER_*` is reserved for closer's own (the LLM key among
/// them).
const REFUSED_ENV: &[&str] = &[
    "GITHUB_PRIVATE_KEY",
    "GITHUB_PRIVATE_KEY_PATH",
    "GITHUB_WEBHOOK_SECRET",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "DATABASE_URL",
];

/// Whether closer refuses to give an agent the variable `name`.
pub fn refused_env_name(name: &str) -> bool {
    REFUSED_ENV.contains(&name) || name.starts_with("CLOSER_")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_files(targets: &[&str]) -> AgentConfig {
        let mut config: AgentConfig =
            toml::from_str("adapter = \"command\"\ncommand = [\"true\"]").unwrap();
        for target in targets {
            config
                .config_files
                .insert((*target).to_owned(), PathBuf::from("Cargo.toml"));
        }
        config
    }

    /// A name closer never gives an agent is the operator's error at
    /// start and in `check-config`, not a warning when a run starts and a
    /// tool without its key.
    #[test]
    fn a_refused_env_name_is_a_problem_of_the_config() {
        let config: AgentConfig = toml::from_str(
            "adapter = \"command\"\ncommand = [\"true\"]\n\
             pass_env = [\"CLOSER_LLM_API_KEY\", \"MY_AGENT_KEY\"]\n\
             env = { GITHUB_TOKEN = \"x\", MY_SETTING = \"y\" }",
        )
        .unwrap();
        let problems = config.problems();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].contains("`env` names GITHUB_TOKEN"),
            "{problems:?}"
        );
        assert!(
            problems[1].contains("`pass_env` names CLOSER_LLM_API_KEY"),
            "{problems:?}"
        );
        // The control: the agent's own names pass.
        let fine: AgentConfig = toml::from_str(
            "adapter = \"command\"\ncommand = [\"true\"]\npass_env = [\"MY_AGENT_KEY\"]",
        )
        .unwrap();
        assert_eq!(fine.problems(), Vec::<String>::new());
    }

    #[test]
    fn a_config_file_may_not_replace_what_closer_makes_in_home() {
        // The control: files inside closer's directories are what operators
        // give (`.codex/config.toml`, `.config/opencode/opencode.json`).
        let fine = [
            ".codex/config.toml",
            ".config/opencode/opencode.json",
            ".claude.json",
        ];
        assert_eq!(
            with_files(&fine).config_file_problems(),
            Vec::<String>::new()
        );

        for target in [
            "tmp",
            ".config",
            ".codex",
            ".local/share",
            ".closer-last-used",
        ] {
            let problems = with_files(&[target]).config_file_problems();
            assert!(
                problems.len() == 1 && problems[0].contains("closer's own"),
                "{target}: {problems:?}"
            );
        }
        let problems = with_files(&[".tool", ".tool/auth.json"]).config_file_problems();
        assert!(
            problems.len() == 1 && problems[0].contains("`.tool/auth.json` is inside `.tool`"),
            "{problems:?}"
        );
        for target in ["../x", "/etc/passwd", "", "a/../b"] {
            let problems = with_files(&[target]).config_file_problems();
            assert!(
                problems[0].contains("must be a relative path"),
                "{target}: {problems:?}"
            );
        }
        let mut missing = with_files(&[]);
        missing
            .config_files
            .insert(".x".into(), PathBuf::from("/nonexistent/file"));
        assert!(missing.config_file_problems()[0].contains("cannot read /nonexistent/file"));
    }
}
