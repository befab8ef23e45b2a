//! One goal as written in `.github/closer.yml`, before it becomes a
//! [`GoalSpec`]. Every field any goal type takes is accepted here, then the
//! conversion checks that the goal has exactly the fields its type needs, so
//! the error names the missing or stray field instead of serde's confusing
//! "unknown field `type`" from a flattened, tagged enum. It never runs or
//! resolves anything: a goal is data until the goal runner takes it.

use serde::{Deserialize, Serialize};

use crate::config::repo::{GoalKind, GoalSpec};

/// The goal types, as spelled in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalType {
    LintPasses,
    BuildSucceeds,
    TestsPass,
    TestAdded,
    FilesChanged,
    FileExists,
    NoSecrets,
    EndpointResponds,
    ResponseContains,
    CustomScript,
}

impl GoalType {
    /// The name used in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            GoalType::LintPasses => "lint_passes",
            GoalType::BuildSucceeds => "build_succeeds",
            GoalType::TestsPass => "tests_pass",
            GoalType::TestAdded => "test_added",
            GoalType::FilesChanged => "files_changed",
            GoalType::FileExists => "file_exists",
            GoalType::NoSecrets => "no_secrets",
            GoalType::EndpointResponds => "endpoint_responds",
            GoalType::ResponseContains => "response_contains",
            GoalType::CustomScript => "custom_script",
        }
    }

    /// The type-specific fields: (required, optional).
    fn fields(self) -> (&'static [&'static str], &'static [&'static str]) {
        match self {
            GoalType::LintPasses
            | GoalType::BuildSucceeds
            | GoalType::TestsPass
            | GoalType::CustomScript => (&["command"], &[]),
            GoalType::TestAdded | GoalType::FilesChanged => (&["pattern"], &[]),
            GoalType::FileExists => (&["path"], &[]),
            GoalType::NoSecrets => (&[], &[]),
            GoalType::EndpointResponds => (&["command", "url"], &["status"]),
            GoalType::ResponseContains => {
                (&["command", "url"], &["json_path", "expected", "contains"])
            }
        }
    }
}

impl GoalKind {
    /// The goal's type name, as in the file.
    pub fn type_name(&self) -> &'static str {
        self.goal_type().as_str()
    }

    /// The goal's type.
    pub fn goal_type(&self) -> GoalType {
        match self {
            GoalKind::LintPasses { .. } => GoalType::LintPasses,
            GoalKind::BuildSucceeds { .. } => GoalType::BuildSucceeds,
            GoalKind::TestsPass { .. } => GoalType::TestsPass,
            GoalKind::TestAdded { .. } => GoalType::TestAdded,
            GoalKind::FilesChanged { .. } => GoalType::FilesChanged,
            GoalKind::FileExists { .. } => GoalType::FileExists,
            GoalKind::NoSecrets {} => GoalType::NoSecrets,
            GoalKind::EndpointResponds { .. } => GoalType::EndpointResponds,
            GoalKind::ResponseContains { .. } => GoalType::ResponseContains,
            GoalKind::CustomScript { .. } => GoalType::CustomScript,
        }
    }
}

/// A goal with every field optional; see the module note.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGoal {
    #[serde(rename = "type")]
    kind: GoalType,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    pattern: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    status: Option<u16>,
    #[serde(default)]
    json_path: Option<String>,
    #[serde(default)]
    expected: Option<serde_json::Value>,
    #[serde(default)]
    contains: Option<String>,
    #[serde(default)]
    required: Option<bool>,
    #[serde(default)]
    timeout_secs: Option<u64>,
}

impl RawGoal {
    /// The type-specific fields that are present, by name.
    fn present(&self) -> Vec<&'static str> {
        let fields = [
            ("command", self.command.is_some()),
            ("pattern", self.pattern.is_some()),
            ("path", self.path.is_some()),
            ("url", self.url.is_some()),
            ("status", self.status.is_some()),
            ("json_path", self.json_path.is_some()),
            ("expected", self.expected.is_some()),
            ("contains", self.contains.is_some()),
        ];
        fields.iter().filter(|(_, p)| *p).map(|(n, _)| *n).collect()
    }
}

impl TryFrom<RawGoal> for GoalSpec {
    type Error = String;

    fn try_from(raw: RawGoal) -> Result<Self, String> {
        raw.check_fields()?;
        let required = raw.required.unwrap_or(true);
        let timeout_secs = raw.timeout_secs;
        Ok(GoalSpec {
            kind: raw.into_kind()?,
            required,
            timeout_secs,
        })
    }
}

impl RawGoal {
    /// The fields the goal type takes, present and not empty, and the
    /// values that can be checked on their own.
    fn check_fields(&self) -> Result<(), String> {
        let raw = self;
        let name = raw.kind.as_str();
        let (required, optional) = raw.kind.fields();
        let present = raw.present();
        if let Some(stray) = present
            .iter()
            .find(|f| !required.contains(f) && !optional.contains(f))
        {
            let mut takes: Vec<&str> = required.iter().chain(optional).copied().collect();
            takes.extend(["required", "timeout_secs"]);
            return Err(format!(
                "a `{name}` goal does not take `{stray}` (it takes: {})",
                takes.join(", ")
            ));
        }
        if let Some(missing) = required.iter().find(|f| !present.contains(f)) {
            return Err(format!("a `{name}` goal needs `{missing}`"));
        }
        for (field, value) in [
            ("command", &raw.command),
            ("pattern", &raw.pattern),
            ("path", &raw.path),
            ("url", &raw.url),
        ] {
            if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
                return Err(format!("`{field}` of a `{name}` goal must not be empty"));
            }
        }
        if let Some(pattern) = &raw.pattern {
            globset::Glob::new(pattern)
                .map_err(|e| format!("`pattern` is not a valid glob: {}", e.kind()))?;
        }
        if let Some(url) = &raw.url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(format!(
                "`url` must start with http:// or https://, got `{url}`"
            ));
        }
        if let Some(status) = raw.status.filter(|s| !(100..=599).contains(s)) {
            return Err(format!(
                "`status` must be an HTTP status from 100 to 599, got {status}"
            ));
        }
        if raw.timeout_secs == Some(0) {
            return Err("`timeout_secs` must be at least 1".to_owned());
        }
        if let Some(secs) = raw
            .timeout_secs
            .filter(|s| *s > super::repo::MAX_GOAL_TIMEOUT_SECS)
        {
            return Err(format!(
                "`timeout_secs` must be at most {} (a day), got {secs}",
                super::repo::MAX_GOAL_TIMEOUT_SECS
            ));
        }
        Ok(())
    }

    /// The typed goal.
    fn into_kind(self) -> Result<GoalKind, String> {
        let raw = self;
        let s = |v: Option<String>| v.unwrap_or_default();
        let kind = match raw.kind {
            GoalType::LintPasses => GoalKind::LintPasses {
                command: s(raw.command),
            },
            GoalType::BuildSucceeds => GoalKind::BuildSucceeds {
                command: s(raw.command),
            },
            GoalType::TestsPass => GoalKind::TestsPass {
                command: s(raw.command),
            },
            GoalType::CustomScript => GoalKind::CustomScript {
                command: s(raw.command),
            },
            GoalType::TestAdded => GoalKind::TestAdded {
                pattern: s(raw.pattern),
            },
            GoalType::FilesChanged => GoalKind::FilesChanged {
                pattern: s(raw.pattern),
            },
            GoalType::FileExists => GoalKind::FileExists { path: s(raw.path) },
            GoalType::NoSecrets => GoalKind::NoSecrets {},
            GoalType::EndpointResponds => GoalKind::EndpointResponds {
                command: s(raw.command),
                url: s(raw.url),
                status: raw.status,
            },
            GoalType::ResponseContains => {
                if raw.json_path.is_some() != raw.expected.is_some() {
                    return Err(
                        "a `response_contains` goal needs `json_path` and `expected` together"
                            .to_owned(),
                    );
                }
                if raw.json_path.is_none() && raw.contains.is_none() {
                    return Err("a `response_contains` goal needs `json_path` with `expected`, or `contains`".to_owned());
                }
                GoalKind::ResponseContains {
                    command: s(raw.command),
                    url: s(raw.url),
                    json_path: raw.json_path,
                    expected: raw.expected,
                    contains: raw.contains,
                }
            }
        };
        Ok(kind)
    }
}
