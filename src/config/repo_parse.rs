//! Reading `.github/closer.yml`: YAML → [`RepoConfig`], with every error
//! carrying the file, line and column and saying what was expected.
//!
//! Type and range errors come from deserializing (serde-saphyr knows where each
//! value is); checks that need context or span several keys (the operator's
//! agents, `custom` needing `handler`, `reproduction: required` needing a
//! `tests_pass` goal) run after, on a second light pass that
//! only records where those keys are. The rendered [`ConfigErrors`] is exactly
//! what the bot posts and what `closer check-config` prints. This module must
//! never panic on any input, and never echo more of the file than a key name.

use crate::model::Named;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Deserializer, de::Error as _};
use serde_saphyr::Spanned;

use crate::config::repo::{CompletionType, GoalKind, RepoConfig, ReproductionMode};
use crate::model::TaskType;

/// One problem in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// 1-based line, when known.
    pub line: Option<u64>,
    /// 1-based column, when known.
    pub column: Option<u64>,
    /// What is wrong and what was expected.
    pub message: String,
}

/// Everything wrong with one config file. `Display` renders the text the bot
/// posts and `closer check-config` prints: one `file:line:column: message` per
/// line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors {
    /// The file name as given (e.g. `.github/closer.yml`).
    pub file: String,
    /// At least one error.
    pub errors: Vec<ConfigError>,
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            match (e.line, e.column) {
                (Some(l), Some(c)) => write!(f, "{}:{l}:{c}: {}", self.file, e.message)?,
                (Some(l), None) => write!(f, "{}:{l}: {}", self.file, e.message)?,
                _ => write!(f, "{}: {}", self.file, e.message)?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Parses and validates a `.github/closer.yml`. `operator_agents` are the names
/// of the operator's `[agents.*]`; `agent:` must be one of them.
pub fn parse_repo_config(
    text: &str,
    file_name: &str,
    operator_agents: &[&str],
) -> Result<RepoConfig, ConfigErrors> {
    let fail = |errors| ConfigErrors {
        file: file_name.to_owned(),
        errors,
    };
    // An empty document (or `~`) is the default configuration.
    let config: RepoConfig = serde_saphyr::from_str::<Option<RepoConfig>>(text)
        .map_err(|e| fail(vec![from_yaml_error(&e)]))?
        .unwrap_or_default();
    // The first pass succeeded, so this one (a subset, unknown keys ignored)
    // does too; without it errors only lose their line and column.
    let spots: Spots = serde_saphyr::from_str::<Option<Spots>>(text)
        .ok()
        .flatten()
        .unwrap_or_default();
    let errors = semantic_errors(&config, &spots, operator_agents);
    if errors.is_empty() {
        Ok(config)
    } else {
        Err(fail(errors))
    }
}

/// The minimum permission for commands that `text` asks for, read on its
/// own when the file does not parse as a whole (a typo, a field this
/// version does not know): `commands.min_permission` when that much reads,
/// the default when the file names none, and `admin` when it names one
/// closer cannot read, or `none`, which it refuses (decision 227). A
/// broken file never lowers the bar the repository set.
pub fn commands_minimum(text: Option<&str>) -> crate::model::Permission {
    use crate::model::Permission;
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct File {
        commands: Commands,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Commands {
        min_permission: Option<Permission>,
    }
    let Some(text) = text else {
        return Permission::default();
    };
    match serde_saphyr::from_str::<Option<File>>(text) {
        Ok(file) => match file.unwrap_or_default().commands.min_permission {
            None => Permission::default(),
            Some(Permission::None) => Permission::Admin,
            Some(minimum) => minimum,
        },
        Err(_) => Permission::Admin,
    }
}

/// `closer check-config <file>`: the exit code (0 valid, 1 invalid or
/// unreadable) and the text to print.
pub fn check_config_file(path: &Path, operator_agents: &[&str]) -> (i32, String) {
    let name = path.display().to_string();
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return (1, format!("{name}: cannot read the file: {e}")),
    };
    match parse_repo_config(&text, &name, operator_agents) {
        Ok(config) => (0, format!("{name}: ok: {}", config.summary())),
        Err(e) => (1, e.to_string()),
    }
}

impl RepoConfig {
    /// A one-line summary of the effective configuration.
    pub fn summary(&self) -> String {
        let c = &self.completion;
        let detail = match c.kind {
            CompletionType::Manual => format!(", keyword {}", c.keyword),
            CompletionType::Custom => {
                format!(", handler {}", c.handler.as_deref().unwrap_or("?"))
            }
            _ => String::new(),
        };
        let goals: usize = self.task_types.values().map(|r| r.goals.len()).sum();
        format!(
            "agent {}, completion {} (max {} iterations, confidence >= {}{detail}), \
             {} setup commands, {} DoD goals, {goals} task-type goals, trigger label {}, \
             close on {}",
            self.agent,
            c.kind.as_str(),
            c.max_iterations,
            c.confidence_threshold,
            self.setup.commands.len(),
            self.dod.len(),
            self.trigger_label,
            match self.close_on {
                crate::config::repo::CloseOn::Verified => "verified",
                crate::config::repo::CloseOn::Merged => "merged",
            },
        )
    }
}

/// Where the keys checked after parsing are, for the error's line and column.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Spots {
    agent: Option<Spanned<String>>,
    completion: Option<Spanned<CompletionSpots>>,
    reproduction: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct CompletionSpots {
    #[serde(rename = "type")]
    kind: Option<Spanned<String>>,
    handler: Option<Spanned<String>>,
    keyword: Option<Spanned<String>>,
}

fn at<T>(s: &Spanned<T>, message: String) -> ConfigError {
    ConfigError {
        line: Some(s.referenced.line()).filter(|l| *l > 0),
        column: Some(s.referenced.column()).filter(|c| *c > 0),
        message,
    }
}

fn nowhere(message: String) -> ConfigError {
    ConfigError {
        line: None,
        column: None,
        message,
    }
}

fn semantic_errors(config: &RepoConfig, spots: &Spots, agents: &[&str]) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    // With no agents known (`closer check-config` run without the operator's
    // configuration) the name cannot be checked; an operator who configured
    // none has a problem no repository can fix, reported when a run starts.
    if !agents.is_empty() && !agents.contains(&config.agent.as_str()) {
        let message = format!(
            "unknown agent `{}`, expected one of: {}",
            config.agent,
            agents.join(", ")
        );
        errors.push(match &spots.agent {
            Some(s) => at(s, message),
            None => nowhere(format!("{message} (`agent` defaults to `default`)")),
        });
    }
    let c = &config.completion;
    let cs = spots.completion.as_ref();
    let type_spot = cs.and_then(|s| s.value.kind.as_ref());
    let handler_spot = cs.and_then(|s| s.value.handler.as_ref());
    let place = |spot: Option<&Spanned<String>>, message: String| match (spot, cs) {
        (Some(s), _) => at(s, message),
        (None, Some(s)) => at(s, message),
        (None, None) => nowhere(message),
    };
    match (&c.handler, c.kind) {
        (None, CompletionType::Custom) => errors.push(place(
            type_spot,
            "completion type `custom` needs `handler`: the path of an executable in the repository"
                .to_owned(),
        )),
        (Some(h), CompletionType::Custom) => {
            if let Some(problem) = handler_path_problem(h) {
                errors.push(place(handler_spot, problem));
            }
        }
        (Some(_), other) => errors.push(place(
            handler_spot,
            format!(
                "`handler` is only used with completion type `custom`, not `{}`",
                other.as_str()
            ),
        )),
        (None, _) => {}
    }
    if c.kind == CompletionType::Manual && c.keyword.trim().is_empty() {
        let spot = cs.and_then(|s| s.value.keyword.as_ref());
        errors.push(place(
            spot,
            "completion type `manual` needs a non-empty `keyword`".to_owned(),
        ));
    }
    errors.extend(reproduction_error(config, spots));
    errors
}

/// `reproduction: required` with no `tests_pass` goal to run the
/// reproduction with: no bug could ever be verified.
fn reproduction_error(config: &RepoConfig, spots: &Spots) -> Option<ConfigError> {
    if config.reproduction != Some(ReproductionMode::Required) {
        return None;
    }
    let bug = config.task_types.get(&TaskType::Bug);
    let tests = config
        .dod
        .iter()
        .chain(bug.into_iter().flat_map(|r| r.goals.iter()))
        .any(|g| matches!(g.kind, GoalKind::TestsPass { .. }));
    if tests {
        return None;
    }
    let message = "`reproduction: required` needs a `tests_pass` goal (in `dod` or in \
                   `task_types.bug.goals`) to run the reproduction with: without one no bug \
                   can be verified"
        .to_owned();
    Some(match &spots.reproduction {
        Some(s) => at(s, message),
        None => nowhere(message),
    })
}

fn handler_path_problem(path: &str) -> Option<String> {
    if path.trim().is_empty() {
        return Some("`handler` must not be empty".to_owned());
    }
    if path.starts_with('/') || path.starts_with('\\') {
        return Some(format!(
            "`handler` must be a path inside the repository, not the absolute path `{path}`"
        ));
    }
    if path.split(['/', '\\']).any(|part| part == "..") {
        return Some(format!(
            "`handler` must stay inside the repository: `{path}` contains `..`"
        ));
    }
    None
}

/// Turns a serde-saphyr error into ours: the location kept apart, the message
/// without its trailing " at line L, column C" and with the terse scalar
/// errors spelled out.
fn from_yaml_error(e: &serde_saphyr::Error) -> ConfigError {
    let inner = e.without_snippet();
    let location = inner.location();
    let mut message = inner.to_string();
    if let Some(cut) = message.rfind(" at line ") {
        let tail = &message[cut + " at line ".len()..];
        if tail.contains(", column ")
            && tail
                .chars()
                .all(|c| c.is_ascii_digit() || ", column".contains(c))
        {
            message.truncate(cut);
        }
    }
    let message = match message.as_str() {
        "invalid u16" | "invalid u32" | "invalid u64" => {
            "expected a whole number that is not negative".to_owned()
        }
        "invalid floating point" => "expected a number".to_owned(),
        "expected string scalar" => "expected a string".to_owned(),
        "expected sequence start" => "expected a list".to_owned(),
        "expected mapping start" => "expected a mapping of `key: value` pairs".to_owned(),
        m => match m.strip_prefix("duplicate mapping key: ") {
            Some(rest) => {
                let key = rest
                    .split(", set DuplicateKeyPolicy")
                    .next()
                    .unwrap_or(rest);
                format!("duplicate key `{key}`")
            }
            None => message,
        },
    };
    ConfigError {
        line: location.map(|l| l.line()).filter(|l| *l > 0),
        column: location.map(|l| l.column()).filter(|c| *c > 0),
        message,
    }
}

// Field validators used by `#[serde(deserialize_with)]` in `repo.rs`: an error
// raised here carries the value's line and column.

/// A `u32` from `min` to `max`, with the error naming both.
fn within<E: serde::de::Error>(v: u32, min: u32, max: u32) -> Result<u32, E> {
    if !(min..=max).contains(&v) {
        return Err(E::custom(format!("must be from {min} to {max}, got {v}")));
    }
    Ok(v)
}

/// `completion.max_iterations`: 1 to 1000.
pub(crate) fn iteration_limit<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    within(u32::deserialize(d)?, 1, 1000)
}

/// `convergence.stagnation_threshold`: 1 to 100.
pub(crate) fn stagnation_limit<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    within(u32::deserialize(d)?, 1, 100)
}

/// `convergence.diff_budget`: 1 to 10 000 000 changed lines.
pub(crate) fn line_budget<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    within(u32::deserialize(d)?, 1, 10_000_000)
}

/// `setup.commands`: each command a non-empty shell line.
pub(crate) fn setup_commands<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let commands = Vec::<String>::deserialize(d)?;
    if commands.iter().any(|c| c.trim().is_empty()) {
        return Err(D::Error::custom("a setup command must not be empty"));
    }
    Ok(commands)
}

/// `setup.timeout_secs`: 1 s to a day, as a goal's.
pub(crate) fn setup_timeout<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = u64::deserialize(d)?;
    if !(1..=crate::config::repo::MAX_GOAL_TIMEOUT_SECS).contains(&v) {
        return Err(D::Error::custom(format!(
            "must be from 1 to {}, got {v}",
            crate::config::repo::MAX_GOAL_TIMEOUT_SECS
        )));
    }
    Ok(v)
}

/// A `u64` of at least 1.
pub(crate) fn at_least_one_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = u64::deserialize(d)?;
    if v == 0 {
        return Err(D::Error::custom("must be at least 1, got 0"));
    }
    Ok(v)
}

/// An optional count of at least 1.
pub(crate) fn at_least_one<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let v = Option::<u64>::deserialize(d)?;
    if v == Some(0) {
        return Err(D::Error::custom(
            "must be at least 1, got 0 (leave the key out for no limit)",
        ));
    }
    Ok(v)
}

/// A number from 0 to 1.
pub(crate) fn unit_interval<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if !(0.0..=1.0).contains(&v) {
        return Err(D::Error::custom(format!(
            "must be a number from 0 to 1, got {v}"
        )));
    }
    Ok(v)
}

/// An optional number greater than 0.
pub(crate) fn positive_f64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let v = Option::<f64>::deserialize(d)?;
    if let Some(x) = v
        && (x.is_nan() || x <= 0.0)
    {
        return Err(D::Error::custom(format!(
            "must be a number greater than 0, got {x}"
        )));
    }
    Ok(v)
}

/// A list of valid glob patterns.
pub(crate) fn valid_globs<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let v = Vec::<String>::deserialize(d)?;
    for pattern in &v {
        if let Err(e) = globset::Glob::new(pattern) {
            return Err(D::Error::custom(format!(
                "`{pattern}` is not a valid glob: {}",
                e.kind()
            )));
        }
    }
    Ok(v)
}

/// A permission other than `none`.
pub(crate) fn some_permission<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<crate::model::Permission, D::Error> {
    let p = crate::model::Permission::deserialize(d)?;
    if p == crate::model::Permission::None {
        return Err(D::Error::custom(
            "`none` would let anyone steer the bot; expected one of read, triage, write, maintain, admin",
        ));
    }
    Ok(p)
}

/// A GitHub label name: 1 to 50 characters, not only spaces.
pub(crate) fn label_name<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let v = String::deserialize(d)?;
    if v.trim().is_empty() {
        return Err(D::Error::custom("the label name must not be empty"));
    }
    if v.chars().count() > 50 {
        return Err(D::Error::custom(
            "the label name must be at most 50 characters (GitHub's limit)",
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_file_keeps_the_minimum_it_names_and_fails_closed_on_one_it_cannot_read() {
        use crate::model::Permission;
        let broken =
            "commands: { min_permission: maintain }\ncompletion: { max_iterations: lots }\n";
        assert!(
            parse_repo_config(broken, "f", &[]).is_err(),
            "the file is broken"
        );
        for (text, minimum) in [
            (None, Permission::Write),
            (Some(""), Permission::Write),
            (Some(broken), Permission::Maintain),
            (
                Some("completion: { max_iterations: lots }\n"),
                Permission::Write,
            ),
            (
                Some("commands: { min_permission: admin, colour: blue }\n"),
                Permission::Admin,
            ),
            (
                Some("commands: { min_permission: maintain }\ndod: ["),
                Permission::Admin,
            ),
            (
                Some("commands: { min_permission: owner }\n"),
                Permission::Admin,
            ),
            (
                Some("commands: { min_permission: none }\n"),
                Permission::Admin,
            ),
            (
                Some("commands: { min_permission: triage }\n"),
                Permission::Triage,
            ),
            (Some("- a list\n"), Permission::Admin),
        ] {
            assert_eq!(commands_minimum(text), minimum, "{text:?}");
        }
    }

    #[test]
    fn documents_without_content_are_the_default() {
        for text in [
            "",
            "\n",
            "# nothing\n",
            "---\n",
            "---\n# c\n",
            "~\n",
            "null\n",
        ] {
            let parsed = parse_repo_config(text, "f.yml", &["default"]);
            assert_eq!(parsed, Ok(RepoConfig::default()), "{text:?}");
        }
    }

    /// `reproduction: required` without a `tests_pass` goal fails every
    /// bug run; the file says so where the key is. With a bug goal, or in
    /// `report` mode, it is fine.
    #[test]
    fn a_required_reproduction_needs_a_tests_goal() {
        let errors = parse_repo_config("reproduction: required\n", "f.yml", &["default"])
            .expect_err("no tests to reproduce with");
        let shown = errors.to_string();
        assert!(shown.contains("f.yml:1:15:"), "{shown}");
        assert!(shown.contains("needs a `tests_pass` goal"), "{shown}");
        for fine in [
            "reproduction: report\n",
            "reproduction: required\ndod:\n  - { type: tests_pass, command: make test }\n",
            "reproduction: required\ntask_types:\n  bug:\n    goals:\n      - { type: tests_pass, command: make test }\n",
        ] {
            let parsed = parse_repo_config(fine, "f.yml", &["default"]);
            assert!(parsed.is_ok(), "{fine}: {parsed:?}");
        }
    }

    #[test]
    fn a_token_budget_of_zero_is_refused_and_one_is_taken() {
        let errors = parse_repo_config("budget:\n  max_tokens: 0\n", "f.yml", &["default"])
            .expect_err("0 would refuse every run");
        assert!(
            errors.to_string().contains("must be at least 1"),
            "{errors}"
        );
        let one = parse_repo_config("budget:\n  max_tokens: 1\n", "f.yml", &["default"]);
        assert_eq!(one.map(|c| c.budget.max_tokens), Ok(Some(1)));
    }

    #[test]
    fn alias_bombs_are_refused_not_expanded() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        assert!(parse_repo_config(&text, "f.yml", &["default"]).is_err());
    }
}
