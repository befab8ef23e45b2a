//! `opencode`: `opencode run --format json [--session <id>]`, prompt on
//! stdin. The tool prints JSON Lines events `{type, timestamp, sessionID,
//! part | error}` with types `step_start`, `text`, `tool_use`,
//! `step_finish`, `error`; the text parts of the last step (after the last
//! `step_start`) make the final message, `step_finish` parts carry tokens
//! (cached input apart) and cost. A `step_finish` with reason `stop` is the
//! end unless more events follow: an automatic compaction ends a step that
//! way and then continues the session.
//!
//! When the model provider fails after the tool's retries (five, from 2 s
//! doubling to 30 s, or as the answer's `retry-after-ms` / `retry-after`
//! says: about 80 s), the session ends with an `error` event named
//! `APIError` whose `data` has the `statusCode` (none when no answer came:
//! `Cannot connect to API: Unable to connect. …`), `isRetryable` and the
//! provider's `message`. A 429 or 5xx, or no answer, is the provider down.
//!
//! Why this configuration: anything that would ask for a permission is
//! rejected when nobody can answer, and the session then ends with exit 0
//! and no report. closer passes (in `OPENCODE_CONFIG_CONTENT`, merged over
//! the operator's `~/.config/opencode/opencode.json`) a permission set that
//! allows edits and commands; a rejection that still happens (an operator's
//! `deny` rule) is reported by name.

use serde_json::Value;

use crate::agent::adapter::{
    AgentAdapter, AgentRequest, Interpretation, Invocation, Observation, Progress, file_name,
    json_events, plain, short_command, tool_argv,
};
use crate::agent::outcome::{AgentFailure, AgentUsage, Tokens, count, dollars, outage_status};
use crate::config::agents::{AdapterKind, AgentConfig};

/// The OpenCode adapter.
#[derive(Debug, Clone, Copy)]
pub struct Opencode;

/// Permissions for an unattended run: allow what would otherwise be asked
/// (and, with nobody to ask, rejected; reading `*.env` files asks by
/// default). Merged with the operator's config.
pub const PERMISSIONS: &str = r#"{"permission":{"read":"allow","edit":"allow","bash":"allow","webfetch":"allow","external_directory":"allow","doom_loop":"allow"},"autoupdate":false,"share":"disabled"}"#;

/// Set to 1: no self-update, no sharing, no fetches closer does not need,
/// and no configuration from the repository (`opencode.json` in the
/// worktree is attacker-controlled) or from Claude Code's files.
const QUIET: &[&str] = &[
    "OPENCODE_DISABLE_AUTOUPDATE",
    "OPENCODE_DISABLE_SHARE",
    "OPENCODE_DISABLE_MODELS_FETCH",
    "OPENCODE_DISABLE_LSP_DOWNLOAD",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS",
    "OPENCODE_DISABLE_PROJECT_CONFIG",
    "OPENCODE_DISABLE_CLAUDE_CODE",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS",
];

impl AgentAdapter for Opencode {
    fn kind(&self) -> AdapterKind {
        AdapterKind::Opencode
    }

    fn invocation(&self, config: &AgentConfig, request: &AgentRequest) -> Invocation {
        let mut flags = vec!["run", "--format", "json"];
        if let Some(session) = &request.resume {
            flags.extend(["--session", session.as_str()]);
        }
        Invocation {
            argv: tool_argv(config, "opencode", &flags),
            stdin: request.prompt.clone().into_bytes(),
            env: [("OPENCODE_CONFIG_CONTENT", PERMISSIONS)]
                .into_iter()
                .chain(QUIET.iter().map(|name| (*name, "1")))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        }
    }

    /// Tool calls as activity, each step's tokens.
    fn observe(&self, line: &str) -> Option<Observation> {
        let event: Value = serde_json::from_str(line).ok()?;
        let part = event.get("part")?;
        match event.get("type")?.as_str()? {
            "tool_use" => {
                let tool = part.get("tool")?.as_str()?;
                let input = part.pointer("/state/input").unwrap_or(&Value::Null);
                Some(Observation::Progress(Progress {
                    activity: Some(activity(tool, input)),
                    tokens: 0,
                }))
            }
            // The last step ends with reason `stop`: the answer is in. The
            // tool may linger (installing its plugin package from npm, say).
            "step_finish" if part.get("reason").and_then(Value::as_str) == Some("stop") => {
                Some(Observation::Finished)
            }
            // A new step or its text: the session goes on, also after a
            // step that ended with `stop` (an automatic compaction does
            // that, then continues), which calls the tool's grace off.
            "step_start" | "text" | "reasoning" => Some(Observation::Progress(Progress {
                activity: None,
                tokens: 0,
            })),
            "step_finish" => Some(Observation::Progress(Progress {
                activity: None,
                tokens: usage(&[part]).tokens.total(),
            })),
            _ => None,
        }
    }

    fn version_argv(&self, config: &AgentConfig) -> Option<Vec<String>> {
        Some(tool_argv(config, "opencode", &["--version"]))
    }

    fn interpret(&self, stdout: &str) -> Interpretation {
        let events = json_events(stdout);
        if events.is_empty() {
            return plain(stdout);
        }
        let of_type = |t: &'static str| events.iter().filter(move |v| kind(v) == Some(t));
        // The last step's text: what the model wrote beside a tool call in
        // an earlier step, or before an automatic compaction continued the
        // session, is not its answer.
        let last_step = events
            .iter()
            .rposition(|v| kind(v) == Some("step_start"))
            .unwrap_or(0);
        let message = events[last_step..]
            .iter()
            .filter(|v| kind(v) == Some("text"))
            .filter_map(|v| v.pointer("/part/text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n");
        let denied: Vec<String> = of_type("tool_use")
            .filter_map(|v| v.get("part"))
            .filter(|p| {
                p.pointer("/state/error")
                    .and_then(Value::as_str)
                    .is_some_and(|e| e.contains("rejected permission"))
            })
            .filter_map(|p| {
                let tool = p.get("tool")?.as_str()?;
                Some(denial(
                    tool,
                    p.pointer("/state/input").unwrap_or(&Value::Null),
                ))
            })
            .collect();
        let error = of_type("error").map(error_failure).next_back();
        let failure = match denied.is_empty() {
            true => error,
            false => Some(AgentFailure::PermissionDenied { denied }),
        };
        let session = events.iter().find_map(|v| {
            v.get("sessionID")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        let finishes: Vec<&Value> = of_type("step_finish")
            .filter_map(|v| v.get("part"))
            .collect();
        Interpretation {
            structured: serde_json::json!({
                "message": message,
                "session_id": session,
                "steps": finishes.len(),
            }),
            message,
            failure,
            usage: usage(&finishes),
            session_id: session,
        }
    }
}

/// An event's `type`.
fn kind(event: &Value) -> Option<&str> {
    event.get("type").and_then(Value::as_str)
}

/// An `error` event as a failure: an `APIError` with a 429 or 5xx status,
/// or with no status and retryable (no answer came), is the provider down.
fn error_failure(event: &Value) -> AgentFailure {
    let detail = event
        .pointer("/error/data/message")
        .or_else(|| event.pointer("/error/message"))
        .or_else(|| event.pointer("/error/name"))
        .and_then(Value::as_str)
        .unwrap_or("opencode reported an error")
        .to_owned();
    let api = event.pointer("/error/name").and_then(Value::as_str) == Some("APIError");
    let status = event
        .pointer("/error/data/statusCode")
        .and_then(Value::as_u64);
    let retryable = event
        .pointer("/error/data/isRetryable")
        .and_then(Value::as_bool);
    let down = match status {
        Some(_) => outage_status(status),
        None => retryable == Some(true),
    };
    match api && down {
        true => AgentFailure::ModelUnavailable { detail },
        false => AgentFailure::ToolError { detail },
    }
}

/// What a tool call is doing, in a few words.
fn activity(tool: &str, input: &Value) -> String {
    let arg = |k: &str| input.get(k).and_then(Value::as_str);
    let name = |p: &'static str| arg(p).map(file_name);
    match (tool, name("filePath"), arg("command")) {
        ("write" | "edit" | "patch", Some(file), _) => format!("editing {file}"),
        ("read", Some(file), _) => format!("reading {file}"),
        ("bash", _, Some(command)) => {
            format!("running `{}`", short_command(command))
        }
        _ => format!("using {tool}"),
    }
}

/// A rejected tool call as "read /etc/hostname", "run `curl …`".
fn denial(tool: &str, input: &Value) -> String {
    let arg = |k: &str| input.get(k).and_then(Value::as_str);
    match (tool, arg("filePath"), arg("command")) {
        ("write" | "edit" | "patch", Some(path), _) => format!("edit {path}"),
        (_, Some(path), _) => format!("{tool} {path}"),
        (_, _, Some(command)) => format!("run `{}`", short_command(command)),
        _ => format!("use {tool}"),
    }
}

/// The sum of the `step_finish` parts: `tokens.{input, output, reasoning,
/// cache.read, cache.write}` (reasoning counts as output) and `cost`.
fn usage(finishes: &[&Value]) -> AgentUsage {
    let mut tokens = Tokens::default();
    let mut cost = None;
    for part in finishes {
        let t = part.get("tokens");
        let field = |p: &str| count(t.and_then(|t| t.pointer(p)));
        tokens.add(&Tokens {
            input: field("/input"),
            output: field("/output").saturating_add(field("/reasoning")),
            cache_write: field("/cache/write"),
            cache_read: field("/cache/read"),
        });
        if let Some(c) = dollars(part.get("cost")) {
            cost = Some(cost.unwrap_or(0.0) + c);
        }
    }
    AgentUsage {
        tokens,
        cost_usd: cost,
        models: Default::default(),
        session_total: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = r#"{"type":"step_start","timestamp":1767036059338,"sessionID":"ses_494719016ffe85dkDMj0FPRbHK","part":{"id":"prt_1","sessionID":"ses_494719016ffe85dkDMj0FPRbHK","messageID":"msg_1","type":"step-start"}}
{"type":"tool_use","timestamp":1767036061199,"sessionID":"ses_494719016ffe85dkDMj0FPRbHK","part":{"id":"prt_2","type":"tool","tool":"bash","state":{"status":"completed","input":{"command":"ls"},"output":"src\n"}}}
{"type":"text","timestamp":1767036064268,"sessionID":"ses_494719016ffe85dkDMj0FPRbHK","part":{"id":"prt_3","type":"text","text":"Added the missing test.","time":{"start":1767036064265,"end":1767036064265}}}
{"type":"step_finish","timestamp":1767036064273,"sessionID":"ses_494719016ffe85dkDMj0FPRbHK","part":{"id":"prt_4","type":"step-finish","reason":"stop","cost":0.002,"tokens":{"input":671,"output":8,"reasoning":0,"cache":{"read":21415,"write":0}}}}
"#;

    #[test]
    fn joins_text_parts_and_sums_cost() {
        let i = Opencode.interpret(RUN);
        assert_eq!(i.message, "Added the missing test.");
        assert_eq!(
            i.session_id.as_deref(),
            Some("ses_494719016ffe85dkDMj0FPRbHK")
        );
        assert_eq!(i.usage.tokens.total(), 671 + 8 + 21415);
        assert_eq!(i.usage.cost_usd, Some(0.002));
        assert!(i.failure.is_none());
    }

    /// What the model wrote beside a tool call in an earlier step, and the
    /// answer before an automatic compaction continued the session, are
    /// not the report: only the last step's text is.
    #[test]
    fn the_report_is_the_text_of_the_last_step() {
        let out = r#"{"type":"step_start","sessionID":"s","part":{"type":"step-start"}}
{"type":"text","sessionID":"s","part":{"type":"text","text":"Let me look at the parser."}}
{"type":"tool_use","sessionID":"s","part":{"tool":"read","state":{"status":"completed","input":{"filePath":"src/parser.rs"}}}}
{"type":"step_finish","sessionID":"s","part":{"reason":"tool-calls","tokens":{"input":10,"output":1}}}
{"type":"step_start","sessionID":"s","part":{"type":"step-start"}}
{"type":"text","sessionID":"s","part":{"type":"text","text":"Fixed the parser."}}
{"type":"text","sessionID":"s","part":{"type":"text","text":"The tests pass."}}
{"type":"step_finish","sessionID":"s","part":{"reason":"stop","tokens":{"input":20,"output":2}}}
"#;
        let i = Opencode.interpret(out);
        assert_eq!(i.message, "Fixed the parser.\nThe tests pass.");
        assert_eq!(i.usage.tokens.total(), 33, "every step's tokens count");
    }

    #[test]
    fn the_last_step_is_the_finish_and_tool_calls_are_activity() {
        let stop = r#"{"type":"step_finish","sessionID":"s","part":{"reason":"stop","tokens":{"input":1,"output":1}}}"#;
        assert_eq!(Opencode.observe(stop), Some(Observation::Finished));
        let more = r#"{"type":"step_finish","sessionID":"s","part":{"reason":"tool-calls","tokens":{"input":1000,"output":200,"cache":{"read":40000}}}}"#;
        assert_eq!(
            Opencode.observe(more),
            Some(Observation::Progress(Progress {
                activity: None,
                tokens: 41_200
            }))
        );
        let bash = r#"{"type":"tool_use","sessionID":"s","part":{"tool":"bash","state":{"status":"completed","input":{"command":"cargo test"}}}}"#;
        assert_eq!(
            Opencode.observe(bash),
            Some(Observation::Progress(Progress {
                activity: Some("running `cargo test`".into()),
                tokens: 0
            }))
        );
    }

    /// The error events of the pinned release after its retries (headers
    /// and bodies trimmed): 503, 529 and no answer are the provider down; a
    /// 400 is the request's fault.
    #[test]
    fn an_api_error_with_a_5xx_or_no_answer_is_the_provider_down() {
        let down = [
            (
                r#"{"type":"error","timestamp":1,"sessionID":"s","error":{"name":"APIError","data":{"message":"Service Unavailable: {\"error\": {\"message\": \"Service Unavailable\"}}","statusCode":503,"isRetryable":true,"metadata":{"url":"http://127.0.0.1:18703/v1/chat/completions"}}}}"#,
                "Service Unavailable: ",
            ),
            (
                r#"{"type":"error","timestamp":1,"sessionID":"s","error":{"name":"APIError","data":{"message":"Overloaded","statusCode":529,"isRetryable":true}}}"#,
                "Overloaded",
            ),
            (
                r#"{"type":"error","timestamp":1,"sessionID":"s","error":{"name":"APIError","data":{"message":"Cannot connect to API: Unable to connect. Is the computer able to access the url?","isRetryable":true,"metadata":{"url":"http://127.0.0.1:18999/v1/chat/completions"}}}}"#,
                "Cannot connect to API",
            ),
        ];
        crate::agent::adapters::assert_provider_down(&Opencode, &down);
        let bad = r#"{"type":"error","timestamp":1,"sessionID":"s","error":{"name":"APIError","data":{"message":"err","statusCode":400,"isRetryable":false}}}"#;
        assert_eq!(
            Opencode.interpret(bad).failure,
            Some(AgentFailure::ToolError {
                detail: "err".into()
            })
        );
    }

    /// A command the agent ran printed a refused connection and a 503:
    /// the session ended normally.
    #[test]
    fn an_outage_in_a_command_the_agent_ran_is_not_the_providers() {
        let curl = r#"{"type":"tool_use","sessionID":"s","part":{"tool":"bash","state":{"status":"completed","input":{"command":"curl localhost:8080"},"output":"curl: (7) Failed to connect: Connection refused\n503 Service Unavailable"}}}"#;
        let i = Opencode.interpret(&format!("{curl}\n{RUN}"));
        assert_eq!(i.failure, None);
    }

    #[test]
    fn an_error_event_is_an_error() {
        let out = r#"{"type":"error","timestamp":1,"sessionID":"s","error":{"name":"ProviderAuthError","data":{"message":"no API key"}}}"#;
        assert_eq!(
            Opencode.interpret(out).failure,
            Some(AgentFailure::ToolError {
                detail: "no API key".into()
            })
        );
    }
}
