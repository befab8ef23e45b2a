//! What the agent CLIs print (Claude Code's stream-json, Codex's `--json`
//! events, OpenCode's JSON lines, and the `command` adapter's plain report):
//! real event streams with events edited, dropped, repeated and cut short,
//! plus raw bytes; through each adapter's `interpret` (the whole output)
//! and `observe` (line by line, while the tool runs).
//!
//! Property: any output is interpreted (never a panic), and an output with
//! no event at all is the report itself, unchanged.

use std::sync::LazyLock;

use closer::agent::adapter::adapter_for;
use closer::config::agents::AdapterKind;
use fastrand::Rng;
use serde_json::Value;

use crate::driver::Target;
use crate::input;

pub const TARGET: Target = Target {
    name: "agent_stream",
    one,
};

const KINDS: [AdapterKind; 4] = [
    AdapterKind::ClaudeCode,
    AdapterKind::Codex,
    AdapterKind::Opencode,
    AdapterKind::Command,
];

const CLAUDE: &str = r#"{"type":"system","subtype":"init","session_id":"4b5c"}
{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"cargo test"}}],"usage":{"input_tokens":5,"output_tokens":2}}}
{"type":"result","subtype":"success","is_error":false,"num_turns":3,"result":"Fixed the parser.","session_id":"4b5c","total_cost_usd":0.031,"usage":{"input_tokens":12,"cache_creation_input_tokens":3000,"cache_read_input_tokens":77000,"output_tokens":40},"permission_denials":[{"tool_name":"Write","tool_use_id":"t1","tool_input":{"file_path":"/w/calc.py","content":"x"}}]}"#;

const CODEX: &str = r#"{"type":"thread.started","thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a53"}
{"type":"turn.started"}
{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"","exit_code":null,"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"Fixed the off-by-one in parse()."}}
{"type":"turn.completed","usage":{"input_tokens":24763,"cached_input_tokens":24448,"output_tokens":122}}
{"type":"error","message":"stream disconnected"}"#;

const OPENCODE: &str = r#"{"type":"step_start","timestamp":1767036059338,"sessionID":"ses_4947","part":{"id":"prt_1","type":"step-start"}}
{"type":"tool_use","timestamp":1767036061199,"sessionID":"ses_4947","part":{"id":"prt_2","type":"tool","tool":"bash","state":{"status":"completed","input":{"command":"ls"},"output":"src\n"}}}
{"type":"text","timestamp":1767036064268,"sessionID":"ses_4947","part":{"id":"prt_3","type":"text","text":"Added the missing test."}}
{"type":"step_finish","timestamp":1767036064273,"sessionID":"ses_4947","part":{"reason":"stop","cost":0.002,"tokens":{"input":671,"output":8,"reasoning":0,"cache":{"read":21415,"write":0}}}}
{"type":"error","timestamp":1,"sessionID":"s","error":{"name":"ProviderAuthError","data":{"message":"no API key"}}}"#;

const PIECES: &[&str] = &[
    "type",
    "result",
    "is_error",
    "true",
    "session_id",
    "usage",
    "{",
    "}",
    "\"",
    ":",
    ",",
    "\n",
    "step_finish",
    "turn.completed",
    "item.completed",
    "agent_message",
    "error",
    "null",
];

static EVENTS: LazyLock<Vec<Value>> = LazyLock::new(|| {
    [CLAUDE, CODEX, OPENCODE]
        .iter()
        .flat_map(|s| s.lines())
        .map(|l| serde_json::from_str(l).expect("sample events are JSON"))
        .collect()
});

fn one(rng: &mut Rng) {
    let output = output(rng);
    let kind = KINDS[rng.usize(..KINDS.len())];
    let adapter = adapter_for(kind);
    for line in output.lines() {
        let _ = adapter.observe(line);
    }
    let interpretation = adapter.interpret(&output);
    let no_event = output.lines().all(|l| !l.trim_start().starts_with('{'));
    if no_event && !output.trim().is_empty() {
        assert_eq!(
            interpretation.message.trim(),
            output.trim(),
            "{kind:?}: {output:?}"
        );
    }
}

fn output(rng: &mut Rng) -> String {
    match rng.u8(..8) {
        0 => String::from_utf8_lossy(&input::bytes(rng, 200)).into_owned(),
        1 => {
            let sample = input::pick(rng, &[CLAUDE, CODEX, OPENCODE]);
            input::mutate_text(rng, sample, PIECES)
        }
        _ => {
            let mut lines = Vec::new();
            for _ in 0..rng.usize(0..6) {
                let mut event = EVENTS[rng.usize(..EVENTS.len())].clone();
                if rng.bool() {
                    input::mutate_json(rng, &mut event, PIECES);
                }
                lines.push(event.to_string());
            }
            lines.join("\n")
        }
    }
}
