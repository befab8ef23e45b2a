//! `claude-code`: `claude -p --output-format stream-json --verbose
//! --permission-mode bypassPermissions --setting-sources user`, prompt on
//! stdin, `--resume <session>` from the second iteration. The tool prints JSON Lines events (`system`,
//! `assistant`, `user`, …) and last a `result` object (`subtype`,
//! `is_error`, `result`, `session_id`, `total_cost_usd`, `usage`,
//! `modelUsage`, `permission_denials`); `result` is the final message.
//! A stream cut before its `result` (the deadline, a stop, a crash, the
//! output cap) is read from its events: the last assistant text, the
//! session id, the assistant messages' usage once per message id.
//! When the model API failed after the tool's retries (ten by default,
//! about three minutes; `CLAUDE_CODE_MAX_RETRIES`), the result says so:
//! `is_error`, `terminal_reason: "api_error"`, `api_error_status` (null
//! when no answer came: a refused connection, a timeout) and the tool's
//! sentence in `result` ("API Error: 503 Service Unavailable. …"). A 429,
//! a 5xx or no answer is the provider being down.
//!
//! Why these flags: in print mode every edit and command needs a permission
//! the tool cannot ask for, so without a permission mode it denies them all
//! and still exits 0. closer confines the agent itself (worktree, HOME,
//! deadline), so the agent may edit and run commands freely inside it. As
//! root the tool refuses that mode unless `IS_SANDBOX=1`, which closer sets.

use serde_json::Value;

use crate::agent::adapter::{
    AgentAdapter, AgentRequest, Interpretation, Invocation, Observation, Progress, file_name,
    json_events, plain, short_command, tool_argv,
};
use crate::agent::outcome::{AgentFailure, AgentUsage, Tokens, count, dollars, outage_status};
use crate::config::agents::{AdapterKind, AgentConfig};

/// The Claude Code adapter.
#[derive(Debug, Clone, Copy)]
pub struct ClaudeCode;

impl AgentAdapter for ClaudeCode {
    fn kind(&self) -> AdapterKind {
        AdapterKind::ClaudeCode
    }

    fn invocation(&self, config: &AgentConfig, request: &AgentRequest) -> Invocation {
        let mut flags = vec![
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-mode",
            "bypassPermissions",
            // The operator's settings (copied into the run's HOME), never
            // the repository's own `.claude/settings.json`: its hooks and
            // permissions are attacker-controlled.
            "--setting-sources",
            "user",
        ];
        if let Some(session) = &request.resume {
            flags.extend(["--resume", session.as_str()]);
        }
        Invocation {
            argv: tool_argv(config, "claude", &flags),
            stdin: request.prompt.clone().into_bytes(),
            env: vec![
                ("IS_SANDBOX".into(), "1".into()),
                (
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
                    "1".into(),
                ),
                ("DISABLE_AUTOUPDATER".into(), "1".into()),
            ],
        }
    }

    /// Tool calls as activity; an API retry because the credentials were
    /// refused is fatal (the tool would retry for minutes).
    fn observe(&self, line: &str) -> Option<Observation> {
        let event: Value = serde_json::from_str(line).ok()?;
        match (
            event.get("type")?.as_str()?,
            event.get("subtype").and_then(Value::as_str),
        ) {
            ("system", Some("api_retry")) => {
                let status = event.get("error_status").and_then(Value::as_u64);
                let error = event.get("error").and_then(Value::as_str).unwrap_or("");
                let refused = matches!(status, Some(401 | 403)) || error.contains("authentication");
                refused.then(|| {
                    let status = status.map_or_else(String::new, |s| format!(" {s}"));
                    Observation::Fatal(AgentFailure::Authentication {
                        detail: format!("the model API answered{status} ({error})"),
                    })
                })
            }
            ("result", _) => Some(Observation::Finished),
            ("assistant", _) => {
                let content = event.pointer("/message/content")?.as_array()?;
                let activity = content
                    .iter()
                    .filter(|c| c.get("type").and_then(Value::as_str) == Some("tool_use"))
                    .filter_map(|c| {
                        let name = c.get("name")?.as_str()?;
                        Some(activity(name, c.get("input").unwrap_or(&Value::Null)))
                    })
                    .next_back()?;
                Some(Observation::Progress(Progress {
                    activity: Some(activity),
                    tokens: 0,
                }))
            }
            _ => None,
        }
    }

    fn version_argv(&self, config: &AgentConfig) -> Option<Vec<String>> {
        Some(tool_argv(config, "claude", &["--version"]))
    }

    fn interpret(&self, stdout: &str) -> Interpretation {
        let events = json_events(stdout);
        let Some(result) = events
            .iter()
            .rev()
            .find(|v| v.get("type").and_then(Value::as_str) == Some("result"))
        else {
            return match events.is_empty() {
                true => plain(stdout),
                false => unfinished(&events),
            };
        };
        let text = |key: &str| result.get(key).and_then(Value::as_str).map(str::to_owned);
        let is_error = result.get("is_error").and_then(Value::as_bool) == Some(true)
            || text("subtype").is_some_and(|s| s.starts_with("error"));
        let denied = denials(result);
        let api_down = text("terminal_reason").as_deref() == Some("api_error")
            && outage_status(result.get("api_error_status").and_then(Value::as_u64));
        let detail = || {
            text("result")
                .filter(|r| !r.trim().is_empty())
                .or_else(|| text("subtype"))
                .unwrap_or_else(|| "error".to_owned())
        };
        let failure = if !denied.is_empty() {
            Some(AgentFailure::PermissionDenied { denied })
        } else if is_error && api_down {
            Some(AgentFailure::ModelUnavailable { detail: detail() })
        } else if is_error {
            Some(AgentFailure::ToolError { detail: detail() })
        } else {
            None
        };
        Interpretation {
            message: text("result").unwrap_or_default(),
            structured: result.clone(),
            failure,
            usage: usage(result),
            session_id: text("session_id"),
        }
    }
}

/// A stream that ended before its `result` (the deadline, a stop, a crash,
/// the output cap): the agent's last words, the session the events name,
/// and what the model calls so far reported. Their usage is `message_start`'s
/// (output counted as 1), so the output falls short; the cost is unknown.
/// Why the run ended is not read here: the deadline, the stop or the exit
/// status names it.
fn unfinished(events: &[Value]) -> Interpretation {
    let message = last_words(events);
    let session_id = events
        .iter()
        .find_map(|e| e.get("session_id").and_then(Value::as_str))
        .map(str::to_owned);
    Interpretation {
        structured: serde_json::json!({
            "message": message,
            "session_id": session_id,
            "events": events.len(),
        }),
        message,
        failure: None,
        usage: assistant_usage(events),
        session_id,
    }
}

/// The main agent's `assistant` messages, not a subagent's (those carry
/// the `Task` call's id in `parent_tool_use_id`).
fn main_messages(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e.get("type").and_then(Value::as_str) == Some("assistant"))
        .filter(|e| e.get("parent_tool_use_id").is_none_or(Value::is_null))
        .filter_map(|e| e.get("message"))
        .collect()
}

/// A message's text blocks.
fn texts(message: &Value) -> Vec<&str> {
    let content = message.get("content").and_then(Value::as_array);
    content
        .into_iter()
        .flatten()
        .filter(|c| c.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .collect()
}

/// The text blocks of the last assistant message that has any, in order:
/// one message comes as one event per content block, all with its id.
fn last_words(events: &[Value]) -> String {
    let messages = main_messages(events);
    let Some(last) = messages.iter().rposition(|m| !texts(m).is_empty()) else {
        return String::new();
    };
    let blocks: Vec<&Value> = match message_id(messages[last]) {
        Some(id) => messages
            .into_iter()
            .filter(|m| message_id(m) == Some(id))
            .collect(),
        None => vec![messages[last]],
    };
    blocks
        .into_iter()
        .flat_map(texts)
        .collect::<Vec<_>>()
        .join("\n")
}

fn message_id(message: &Value) -> Option<&str> {
    message.get("id").and_then(Value::as_str)
}

/// The `message.usage` of every `assistant` event, subagents' included,
/// once per message id: a message with a text and a tool call comes as
/// two events that repeat the same usage (docs/agent-tools/claude.md §4).
fn assistant_usage(events: &[Value]) -> AgentUsage {
    let mut seen = std::collections::HashSet::new();
    let mut usage = AgentUsage::default();
    let messages = events
        .iter()
        .filter(|e| e.get("type").and_then(Value::as_str) == Some("assistant"))
        .filter_map(|e| e.get("message"));
    for message in messages {
        if message_id(message).is_some_and(|id| !seen.insert(id)) {
            continue;
        }
        let tokens = tokens(message.get("usage"));
        usage.tokens.add(&tokens);
        // Not the tool's own messages (`<synthetic>`, no usage).
        if let Some(model) = message.get("model").and_then(Value::as_str)
            && tokens.total() > 0
        {
            usage
                .models
                .entry(model.to_owned())
                .or_default()
                .add(&tokens);
        }
    }
    usage
}

/// What a tool call is doing, in a few words.
fn activity(tool: &str, input: &Value) -> String {
    let arg = |k: &str| input.get(k).and_then(Value::as_str);
    match (tool, arg("file_path"), arg("command")) {
        ("Write" | "Edit" | "MultiEdit" | "NotebookEdit", Some(path), _) => {
            format!("editing {}", file_name(path))
        }
        ("Read", Some(path), _) => format!("reading {}", file_name(path)),
        ("Bash", _, Some(command)) => format!("running `{}`", short_command(command)),
        _ => format!("using {tool}"),
    }
}

/// `usage` (this invocation's, all four kinds); per model and the cost from
/// `model_usage_since_last_result` — `modelUsage` and `total_cost_usd` add
/// up the whole session, earlier iterations included, when it was resumed.
fn usage(result: &Value) -> AgentUsage {
    let tokens = tokens(result.get("usage"));
    let per_model = result
        .get("model_usage_since_last_result")
        .or_else(|| result.get("modelUsage"))
        .and_then(Value::as_object);
    let since_last: Option<f64> = result
        .get("model_usage_since_last_result")
        .and_then(Value::as_object)
        .map(|m| m.values().filter_map(|u| dollars(u.get("costUSD"))).sum());
    let models = per_model
        .map(|models| {
            models
                .iter()
                .map(|(name, m)| {
                    let tokens = Tokens {
                        input: count(m.get("inputTokens")),
                        output: count(m.get("outputTokens")),
                        cache_write: count(m.get("cacheCreationInputTokens")),
                        cache_read: count(m.get("cacheReadInputTokens")),
                    };
                    (name.clone(), tokens)
                })
                .collect()
        })
        .unwrap_or_default();
    AgentUsage {
        tokens,
        cost_usd: since_last.or_else(|| dollars(result.get("total_cost_usd"))),
        models,
        session_total: false,
    }
}

/// The four counts of an API `usage` object.
fn tokens(usage: Option<&Value>) -> Tokens {
    let field = |k: &str| count(usage.and_then(|u| u.get(k)));
    Tokens {
        input: field("input_tokens"),
        output: field("output_tokens"),
        cache_write: field("cache_creation_input_tokens"),
        cache_read: field("cache_read_input_tokens"),
    }
}

/// `permission_denials` as "edit calc.py", "run `git push`", "use WebFetch".
fn denials(result: &Value) -> Vec<String> {
    let Some(list) = result.get("permission_denials").and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .map(|d| {
            let tool = d
                .get("tool_name")
                .and_then(Value::as_str)
                .unwrap_or("a tool");
            let input = d.get("tool_input");
            let arg = |k: &str| input.and_then(|i| i.get(k)).and_then(Value::as_str);
            match (
                tool,
                arg("file_path").or(arg("notebook_path")),
                arg("command"),
            ) {
                ("Write" | "Edit" | "MultiEdit" | "NotebookEdit", Some(path), _) => {
                    format!("edit {}", file_name(path))
                }
                ("Bash", _, Some(command)) => {
                    format!("run `{}`", short_command(command))
                }
                _ => format!("use {tool}"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_result_object_with_every_kind_of_token() {
        let out = r#"{"type":"system","subtype":"init","session_id":"4b5c"}
{"type":"result","subtype":"success","is_error":false,"duration_ms":2712,"num_turns":3,"result":"Fixed the parser.","session_id":"4b5c","total_cost_usd":0.031,"usage":{"input_tokens":12,"cache_creation_input_tokens":3000,"cache_read_input_tokens":77000,"output_tokens":40},"modelUsage":{"claude-sonnet-4-5":{"inputTokens":12,"outputTokens":40,"cacheReadInputTokens":77000,"cacheCreationInputTokens":3000,"costUSD":0.031}},"permission_denials":[]}"#;
        let i = ClaudeCode.interpret(out);
        assert_eq!(i.message, "Fixed the parser.");
        assert_eq!(i.session_id.as_deref(), Some("4b5c"));
        assert_eq!(i.usage.tokens.total(), 80_052);
        assert_eq!(i.usage.cost_usd, Some(0.031));
        assert_eq!(i.usage.models["claude-sonnet-4-5"].cache_read, 77_000);
        assert!(i.failure.is_none());
    }

    #[test]
    fn permission_denials_are_a_named_failure() {
        let out = r#"{"type":"result","subtype":"success","is_error":false,"result":"I need permission to write calc.py.","session_id":"x","permission_denials":[{"tool_name":"Write","tool_use_id":"t1","tool_input":{"file_path":"/w/calc.py","content":"x"}},{"tool_name":"Bash","tool_use_id":"t2","tool_input":{"command":"python3 -m unittest"}}]}"#;
        let failure = ClaudeCode.interpret(out).failure.unwrap();
        assert_eq!(
            failure.describe(),
            "the agent was denied permission to edit calc.py, run `python3 -m unittest`"
        );
    }

    #[test]
    fn an_error_subtype_is_a_tool_error() {
        let out = r#"{"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":30,"session_id":"x"}"#;
        let i = ClaudeCode.interpret(out);
        assert_eq!(
            i.failure,
            Some(AgentFailure::ToolError {
                detail: "error_max_turns".into()
            })
        );
    }

    /// The result of the pinned release (fields trimmed) after its retries
    /// against a server answering 503, 529, nothing (a closed port) and a
    /// silent one (API_TIMEOUT_MS): the provider down, every time.
    #[test]
    fn an_api_error_result_with_a_5xx_or_no_answer_is_the_provider_down() {
        let results = [
            (
                r#"{"type":"result","subtype":"success","is_error":true,"terminal_reason":"api_error","api_error_status":503,"api_error_type":"api_error","result":"API Error: 503 Service Unavailable. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:18503).","session_id":"c105"}"#,
                "API Error: 503 Service Unavailable.",
            ),
            (
                r#"{"type":"result","subtype":"success","is_error":true,"terminal_reason":"api_error","api_error_status":529,"api_error_type":"overloaded_error","result":"API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:18529).","session_id":"8243"}"#,
                "API Error: 529 Overloaded.",
            ),
            (
                r#"{"type":"result","subtype":"success","is_error":true,"terminal_reason":"api_error","api_error_status":null,"api_error_type":null,"result":"API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)","session_id":"d9c3"}"#,
                "API Error: Connection refused",
            ),
            (
                r#"{"type":"result","subtype":"success","is_error":true,"terminal_reason":"api_error","api_error_status":null,"result":"Request timed out. If the API is slow to answer, or a proxy or gateway holds responses, set API_TIMEOUT_MS above 3000.","session_id":"b254"}"#,
                "Request timed out.",
            ),
        ];
        crate::agent::adapters::assert_provider_down(&ClaudeCode, &results);
    }

    /// A request the API refused (400) or a refused key (401) is the
    /// tool's error, not an outage (a 401 is named fatal from its words).
    #[test]
    fn an_api_error_the_provider_meant_is_a_tool_error() {
        for (status, text) in [
            (400, "API Error: 400 err"),
            (
                401,
                "Failed to authenticate. API Error: 401 Incorrect API key provided",
            ),
        ] {
            let out = format!(
                r#"{{"type":"result","subtype":"success","is_error":true,"terminal_reason":"api_error","api_error_status":{status},"result":"{text}","session_id":"x"}}"#
            );
            assert_eq!(
                ClaudeCode.interpret(&out).failure,
                Some(AgentFailure::ToolError {
                    detail: text.into()
                })
            );
        }
    }

    /// The agent's command printed an outage of the service it tested, and
    /// the agent reported it: that is the task's output, not the tool's.
    #[test]
    fn an_outage_in_a_command_the_agent_ran_is_not_the_providers() {
        let out = r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"curl: (7) Failed to connect to 127.0.0.1 port 8080: Connection refused\nHTTP/1.1 503 Service Unavailable","is_error":true}]},"session_id":"x"}
{"type":"result","subtype":"success","is_error":false,"result":"The server answers 503 Service Unavailable: connection refused on 8080.","session_id":"x","permission_denials":[]}"#;
        let i = ClaudeCode.interpret(out);
        assert_eq!(i.failure, None);
        assert!(i.message.contains("503"));
    }

    /// Output cut before its `result` (a timeout, a stop, a crash, the
    /// output cap): the report is the last thing the agent said, not the
    /// event stream; the session is the one the events name; each model
    /// call's usage counts once although a message with a text and a tool
    /// call comes as two `assistant` events with the same id.
    #[test]
    fn output_cut_before_the_result_keeps_the_last_words_the_session_and_the_usage() {
        let out = r#"{"type":"system","subtype":"init","cwd":"/w","session_id":"f219","model":"claude-opus-5-5"}
{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-5-5","content":[{"type":"text","text":"The parser drops the last token."}],"stop_reason":null,"usage":{"input_tokens":1000,"cache_creation_input_tokens":3000,"cache_read_input_tokens":40000,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"f219"}
{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-5-5","content":[{"type":"tool_use","id":"toolu_1","name":"Edit","input":{"file_path":"src/parser.rs","old_string":"a","new_string":"b"}}],"stop_reason":null,"usage":{"input_tokens":1000,"cache_creation_input_tokens":3000,"cache_read_input_tokens":40000,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"f219"}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"The file src/parser.rs has been updated successfully."}]},"session_id":"f219"}
{"type":"assistant","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude-opus-5-5","content":[{"type":"tool_use","id":"toolu_2","name":"Bash","input":{"command":"cargo test"}}],"stop_reason":null,"usage":{"input_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":44000,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"f219"}
"#;
        let i = ClaudeCode.interpret(out);
        assert!(!i.message.starts_with('{'), "{}", i.message);
        assert_eq!(i.message, "The parser drops the last token.");
        assert_eq!(i.session_id.as_deref(), Some("f219"));
        assert_eq!(i.usage.tokens.total(), 44_001 + 44_011);
        assert_eq!(i.usage.models["claude-opus-5-5"].input, 1_010);
        assert_eq!(i.usage.cost_usd, None);
        assert_eq!(i.failure, None, "the exit or the deadline names it");
    }

    /// The last assistant message's text blocks make the report; what a
    /// subagent (a `Task` call) said is not the agent's report.
    #[test]
    fn output_cut_before_the_result_reports_the_main_agents_last_message() {
        let out = r#"{"type":"assistant","message":{"id":"msg_1","model":"m","content":[{"type":"text","text":"First look."}]},"session_id":"s"}
{"type":"assistant","message":{"id":"msg_2","model":"m","content":[{"type":"text","text":"Fixed add()."}]},"session_id":"s"}
{"type":"assistant","message":{"id":"msg_2","model":"m","content":[{"type":"text","text":"Tests pass."}]},"session_id":"s"}
{"type":"assistant","message":{"id":"msg_3","model":"m","content":[{"type":"text","text":"subagent words"}]},"parent_tool_use_id":"toolu_9","session_id":"s"}
"#;
        assert_eq!(
            ClaudeCode.interpret(out).message,
            "Fixed add().\nTests pass."
        );
    }

    #[test]
    fn non_json_output_becomes_a_message() {
        let i = ClaudeCode.interpret("Error: not logged in\n");
        assert_eq!(i.structured["message"], "Error: not logged in");
    }
}
