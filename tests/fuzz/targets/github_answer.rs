//! GitHub's answers: every body closer decodes from the REST and GraphQL
//! APIs, through the decoders the client itself calls
//! (`closer::github::decode`), starting from GitHub's documented examples
//! (`tests/fixtures/github-api`). Each input is one of:
//!
//! - **extra**: unknown keys added anywhere, of any type, deeply nested,
//!   long strings and huge numbers among them: it decodes, to what the
//!   example decodes to (unknown fields change nothing);
//! - **optional**: a field closer does not require removed, or a free-text
//!   field given any text: it still decodes;
//! - **missing**: a required field removed: a `Decode` error naming the
//!   answer and the field;
//! - **retyped**: a required field given a value of another type (or an
//!   out-of-range number): a `Decode` error naming the answer and the
//!   field's path (`[2].user.login`);
//! - **anything**: JSON mutations, text edits, raw bytes, deep nesting,
//!   long strings, lone surrogates: no panic, and an error is a `Decode`
//!   naming the answer in a loggable length (GraphQL: or GitHub's own error,
//!   its message cut, a rate limit in the future).
//!
//! Error bodies (`decode::error_answer`, any status): no panic; a JSON
//! object whose `message` is a string keeps it (300 characters at most),
//! and a 400/422 keeps every string `code` of its `errors`, whatever else
//! the body holds.

use std::sync::LazyLock;

use closer::github::GitHubError;
use closer::github::decode;
use fastrand::Rng;
use serde_json::{Map, Value};

use crate::driver::Target;
use crate::input;

pub const TARGET: Target = Target {
    name: "github_answer",
    one,
};

/// The clock during a decode (ms since the epoch).
const NOW: i64 = 1_700_000_000_000;

/// The board an issue's project items are searched for (one of the
/// fixture's two).
const BOARD: &str = "PVT_kwDOAKP3Ns4AHwCr";

type Decoder = fn(&str, Option<&str>) -> Result<String, GitHubError>;

/// One answer closer reads: its fixture, the name its errors start with,
/// its decoder, the fields it cannot do without and the strings whose
/// value is one of a closed set (paths: `labels[].name`, `[]` any index).
pub struct Answer {
    pub file: &'static str,
    pub what: &'static str,
    pub decode: Decoder,
    pub graphql: bool,
    pub required: &'static [&'static str],
    pub closed: &'static [&'static str],
}

fn debug<T: std::fmt::Debug>(result: Result<T, GitHubError>) -> Result<String, GitHubError> {
    result.map(|v| format!("{v:?}"))
}

// A pull request's `user` may be null (a deleted account); when it is
// there, its login is required.
const PULL: &[&str] = &[
    "number",
    "head",
    "head.ref",
    "base",
    "base.ref",
    "state",
    "user.login",
];
const PULLS: &[&str] = &[
    "[].number",
    "[].head",
    "[].head.ref",
    "[].base",
    "[].base.ref",
    "[].state",
    "[].user.login",
];
const USER_APP: &[&str] = &["id", "user.login", "performed_via_github_app.id"];
const USERS_APPS: &[&str] = &["[].id", "[].user.login", "[].performed_via_github_app.id"];

pub const ANSWERS: &[Answer] = &[
    Answer {
        file: "issue",
        what: "issue",
        decode: |b, _| debug(decode::issue(b)),
        graphql: false,
        // `user` may be null or missing (a deleted account: the ghost);
        // when it is there, its login is required, as an assignee's is.
        required: &[
            "number",
            "title",
            "state",
            "user.login",
            "labels[].name",
            "assignees[].login",
        ],
        closed: &["state"],
    },
    Answer {
        file: "comment",
        what: "comment",
        decode: |b, _| debug(decode::comment(b)),
        graphql: false,
        required: USER_APP,
        closed: &[],
    },
    Answer {
        file: "comments",
        what: "comments",
        decode: |b, _| debug(decode::comments(b)),
        graphql: false,
        required: USERS_APPS,
        closed: &[],
    },
    Answer {
        file: "review_comment",
        what: "review comment",
        decode: |b, _| debug(decode::review_comment(b)),
        graphql: false,
        required: USER_APP,
        closed: &[],
    },
    Answer {
        file: "review_comments",
        what: "review comments",
        decode: |b, _| debug(decode::review_comments(b)),
        graphql: false,
        required: USERS_APPS,
        closed: &[],
    },
    Answer {
        file: "label",
        what: "label",
        decode: |b, _| debug(decode::label(b)),
        graphql: false,
        required: &["name"],
        closed: &[],
    },
    Answer {
        file: "labels",
        what: "labels",
        decode: |b, _| debug(decode::labels(b)),
        graphql: false,
        required: &["[].name"],
        closed: &[],
    },
    Answer {
        file: "pull",
        what: "pull request",
        decode: |b, _| debug(decode::pull(b)),
        graphql: false,
        required: PULL,
        closed: &["state"],
    },
    Answer {
        file: "pulls",
        what: "pull requests",
        decode: |b, _| debug(decode::pulls(b)),
        graphql: false,
        required: PULLS,
        closed: &["[].state"],
    },
    Answer {
        file: "repository",
        what: "repository",
        decode: |b, _| debug(decode::repository(b)),
        graphql: false,
        required: &["id", "full_name", "clone_url"],
        closed: &["full_name"],
    },
    Answer {
        file: "file",
        what: "file contents",
        decode: |b, _| debug(decode::file(b)),
        graphql: false,
        required: &["type", "encoding", "sha"],
        closed: &["type", "encoding", "content"],
    },
    Answer {
        file: "permission",
        what: "collaborator permission",
        decode: |b, _| debug(decode::permission(b)),
        graphql: false,
        required: &["permission"],
        closed: &[],
    },
    Answer {
        file: "app",
        what: "app",
        decode: |b, _| debug(decode::app(b)),
        graphql: false,
        required: &["id", "name"],
        closed: &[],
    },
    Answer {
        file: "installation_token",
        what: "installation token",
        decode: |b, _| debug(decode::installation_token(b)),
        graphql: false,
        required: &["token", "expires_at"],
        closed: &["expires_at"],
    },
    Answer {
        file: "project_board",
        what: "project board",
        decode: |b, r| debug(decode::project_board(b, r, NOW)),
        graphql: true,
        required: &[
            "data",
            "data.organization.projectV2.id",
            "data.organization.projectV2.fields.nodes[].options[].id",
            "data.organization.projectV2.fields.nodes[].options[].name",
        ],
        closed: &[],
    },
    Answer {
        file: "graphql_error",
        what: "project board",
        decode: |b, r| debug(decode::project_board(b, r, NOW)),
        graphql: true,
        required: &[],
        closed: &[],
    },
    Answer {
        file: "added_project_item",
        what: "added project item",
        decode: |b, r| debug(decode::added_project_item(b, r, NOW)),
        graphql: true,
        required: &[
            "data",
            "data.addProjectV2ItemById",
            "data.addProjectV2ItemById.item",
            "data.addProjectV2ItemById.item.id",
        ],
        closed: &[],
    },
    Answer {
        file: "issue_project_item",
        what: "issue's project items",
        decode: |b, r| debug(decode::issue_project_item(b, r, NOW, BOARD)),
        graphql: true,
        required: &["data", "data.node.projectItems.nodes[].id"],
        closed: &[],
    },
    Answer {
        file: "cleared_project_item",
        what: "cleared project item",
        decode: |b, r| debug(decode::cleared_project_item(b, r, NOW)),
        graphql: true,
        required: &[
            "data",
            "data.clearProjectV2ItemFieldValue",
            "data.clearProjectV2ItemFieldValue.projectV2Item",
            "data.clearProjectV2ItemFieldValue.projectV2Item.id",
        ],
        closed: &[],
    },
    Answer {
        file: "updated_project_item",
        what: "project item",
        decode: |b, r| debug(decode::updated_project_item(b, r, NOW)),
        graphql: true,
        required: &[
            "data",
            "data.updateProjectV2ItemFieldValue",
            "data.updateProjectV2ItemFieldValue.projectV2Item",
            "data.updateProjectV2ItemFieldValue.projectV2Item.id",
        ],
        closed: &[],
    },
];

const VOCABULARY: &[&str] = &[
    "id",
    "login",
    "type",
    "Bot",
    "User",
    "[bot]",
    "state",
    "open",
    "closed",
    "number",
    "title",
    "body",
    "labels",
    "name",
    "user",
    "ref",
    "head",
    "base",
    "merged",
    "merged_at",
    "full_name",
    "octocat/Hello-World",
    "clone_url",
    "file",
    "dir",
    "base64",
    "none",
    "content",
    "sha",
    "permission",
    "role_name",
    "admin",
    "write",
    "token",
    "expires_at",
    "2016-07-11T22:14:10Z",
    "performed_via_github_app",
    "data",
    "errors",
    "message",
    "NOT_FOUND",
    "RATE_LIMITED",
    "FORBIDDEN",
    "projectV2",
    "organization",
    "nodes",
    "options",
    "__typename",
    "ProjectV2SingleSelectField",
    "item",
    "null",
    "\\u0000",
    "\\ud800",
    "1e999",
    "-1",
    "\"",
    ":",
    ",",
    "{",
    "}",
    "[",
    "]",
];

/// Each answer's fixture, parsed, and what it decodes to.
pub struct Sample {
    pub answer: &'static Answer,
    pub value: Value,
    pub expected: Result<String, GitHubError>,
}

pub static SAMPLES: LazyLock<Vec<Sample>> = LazyLock::new(|| {
    let files = super::fixtures("github-api", ".json");
    ANSWERS
        .iter()
        .map(|answer| {
            let name = format!("{}.json", answer.file);
            let (_, text) = files.iter().find(|(n, _)| *n == name).expect("a fixture");
            Sample {
                answer,
                value: serde_json::from_str(text).expect("fixtures are JSON"),
                expected: (answer.decode)(text, None),
            }
        })
        .collect()
});

static ERROR_BODIES: LazyLock<Vec<Value>> = LazyLock::new(|| {
    super::fixtures("github-api", ".json")
        .into_iter()
        .filter(|(name, _)| name.starts_with("error."))
        .map(|(_, text)| serde_json::from_str(&text).expect("fixtures are JSON"))
        .collect()
});

fn one(rng: &mut Rng) {
    if rng.u8(..8) == 0 {
        return error_body(rng);
    }
    let sample = &SAMPLES[rng.usize(..SAMPLES.len())];
    let answer = sample.answer;
    let mut value = sample.value.clone();
    match rng.u8(..8) {
        0 => {
            extra(rng, &mut value);
            let got = (answer.decode)(&serialize(rng, &value), None);
            assert_eq!(got, sample.expected, "an unknown field changed the answer");
        }
        1 => {
            optional(rng, answer, &mut value);
            let body = serialize(rng, &value);
            if let Err(e) = (answer.decode)(&body, None)
                && sample.expected.is_ok()
            {
                panic!("a valid {} did not decode: {e}\n{body}", answer.what);
            }
        }
        2 => missing(rng, answer, &mut value),
        3 => retyped(rng, answer, &mut value),
        _ => anything(rng, answer, value),
    }
}

/// Compact or pretty, as GitHub's servers and proxies may send it.
fn serialize(rng: &mut Rng, value: &Value) -> String {
    let text = if rng.bool() {
        serde_json::to_string(value)
    } else {
        serde_json::to_string_pretty(value)
    };
    text.expect("JSON")
}

/// Every node of `value`: its JSON pointer, its path as serde names it
/// (`labels[0].name`) and its pattern (`labels[].name`).
struct Node {
    pointer: String,
    path: String,
    pattern: String,
}

fn nodes(value: &Value) -> Vec<Node> {
    let mut out = Vec::new();
    walk(value, String::new(), String::new(), String::new(), &mut out);
    out
}

fn walk(value: &Value, pointer: String, path: String, pattern: String, out: &mut Vec<Node>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let dot = if path.is_empty() || path.ends_with('.') {
                    ""
                } else {
                    "."
                };
                let pdot = if pattern.is_empty() { "" } else { "." };
                walk(
                    child,
                    format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1")),
                    format!("{path}{dot}{key}"),
                    format!("{pattern}{pdot}{key}"),
                    out,
                );
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                let pattern = format!("{pattern}[]");
                walk(
                    child,
                    format!("{pointer}/{i}"),
                    format!("{path}[{i}]"),
                    pattern,
                    out,
                );
            }
        }
        _ => {}
    }
    out.push(Node {
        pointer,
        path,
        pattern,
    });
}

/// Unknown keys (`x-fuzz…`, never a field closer reads) added to objects.
fn extra(rng: &mut Rng, value: &mut Value) {
    let objects: Vec<String> = nodes(value)
        .into_iter()
        .filter(|n| value.pointer(&n.pointer).is_some_and(Value::is_object))
        .map(|n| n.pointer)
        .collect();
    for _ in 0..rng.usize(1..=4) {
        let at = &objects[rng.usize(..objects.len())];
        let key = format!("x-fuzz{}", input::text(rng, VOCABULARY, 3));
        let junk = junk(rng);
        if let Some(Value::Object(map)) = value.pointer_mut(at) {
            map.insert(key, junk);
        }
    }
}

/// Any JSON value: a scalar, a long string, an edge number, or nested
/// arrays and objects up to 90 deep (within serde_json's 128 levels).
fn junk(rng: &mut Rng) -> Value {
    match rng.u8(..6) {
        0 => Value::String(input::text(rng, VOCABULARY, 2_000)),
        1 => {
            let mut v = input::scalar(rng, VOCABULARY);
            for _ in 0..rng.usize(1..90) {
                v = if rng.bool() {
                    Value::Array(vec![v])
                } else {
                    Value::Object(Map::from_iter([("k".to_owned(), v)]))
                };
            }
            v
        }
        2 => serde_json::from_str(input::pick(rng, input::EDGE_NUMBERS)).unwrap_or(Value::Null),
        _ => input::scalar(rng, VOCABULARY),
    }
}

fn required(answer: &Answer, pattern: &str) -> bool {
    answer.required.contains(&pattern)
}

/// A field closer can do without removed, or a free-text string replaced.
fn optional(rng: &mut Rng, answer: &Answer, value: &mut Value) {
    for _ in 0..rng.usize(1..=4) {
        let all = nodes(value);
        let node = &all[rng.usize(..all.len())];
        let is_string = value.pointer(&node.pointer).is_some_and(Value::is_string);
        let closed = answer.closed.contains(&node.pattern.as_str());
        if rng.bool() && is_string && !closed {
            let text = if rng.u8(..16) == 0 {
                input::text(rng, VOCABULARY, 20_000)
            } else {
                input::text(rng, VOCABULARY, 12)
            };
            if let Some(s) = value.pointer_mut(&node.pointer) {
                *s = Value::String(text);
            }
        } else if !node.pointer.is_empty()
            && !required(answer, &node.pattern)
            && (node.pattern.ends_with("[]")
                || !answer.required.iter().any(|r| is_under(r, &node.pattern)))
        {
            remove(value, &node.pointer);
        }
    }
}

/// Whether `inner` lies inside `outer` (or is it), by pattern.
fn is_under(inner: &str, outer: &str) -> bool {
    inner == outer
        || inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

fn remove(value: &mut Value, pointer: &str) {
    let (parent, last) = pointer.rsplit_once('/').expect("not the root");
    let key = last.replace("~1", "/").replace("~0", "~");
    match value.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.remove(&key);
        }
        Some(Value::Array(items)) => {
            if let Ok(i) = key.parse::<usize>() {
                items.remove(i);
            }
        }
        _ => {}
    }
}

/// The required nodes of `value`, one picked.
fn pick_required(rng: &mut Rng, answer: &Answer, value: &Value) -> Option<Node> {
    let mut all: Vec<Node> = nodes(value)
        .into_iter()
        .filter(|n| !n.pointer.is_empty() && required(answer, &n.pattern))
        .collect();
    (!all.is_empty()).then(|| all.swap_remove(rng.usize(..all.len())))
}

/// A required field removed: the error names it.
fn missing(rng: &mut Rng, answer: &Answer, value: &mut Value) {
    let Some(node) = pick_required(rng, answer, value) else {
        return;
    };
    remove(value, &node.pointer);
    let body = serialize(rng, value);
    let key = node.path.rsplit(['.', ']']).next().unwrap_or_default();
    let message = decode_error(answer, &body, &node.path);
    assert!(
        message.contains(key),
        "the error does not name the missing {key:?} ({}): {message}",
        node.path
    );
}

/// A required field of another type: the error names its path.
fn retyped(rng: &mut Rng, answer: &Answer, value: &mut Value) {
    let Some(node) = pick_required(rng, answer, value) else {
        return;
    };
    let old = value.pointer(&node.pointer).cloned().unwrap_or_default();
    *value.pointer_mut(&node.pointer).expect("the node") = wrong_type(rng, &old);
    let body = serialize(rng, value);
    let path = match answer.graphql {
        true => node.path.strip_prefix("data.").unwrap_or(&node.path),
        false => node.path.as_str(),
    };
    let message = decode_error(answer, &body, &node.path);
    assert!(
        message.contains(path),
        "the error does not name {path:?}: {message}"
    );
}

/// A value `old`'s field cannot take: another JSON type, or for a number a
/// fraction or one past `u64`.
fn wrong_type(rng: &mut Rng, old: &Value) -> Value {
    loop {
        let candidate = match rng.u8(..4) {
            0 => Value::from(*input::pick(rng, &[&1.5, &18446744073709551616.0, &-0.5])),
            _ => input::scalar(rng, VOCABULARY),
        };
        let wrong = match old {
            Value::Number(_) => !candidate.is_i64() && !candidate.is_u64(),
            _ => std::mem::discriminant(&candidate) != std::mem::discriminant(old),
        };
        if wrong {
            return candidate;
        }
    }
}

/// The `Decode` error `body` must be refused with.
fn decode_error(answer: &Answer, body: &str, changed: &str) -> String {
    match (answer.decode)(body, None) {
        Ok(v) => panic!(
            "{} with {changed:?} changed decoded: {v}\n{body}",
            answer.what
        ),
        Err(GitHubError::Decode(message)) => {
            check_decode(answer, &message);
            message
        }
        Err(e) => panic!("{changed:?} changed: not a decode error: {e:?}"),
    }
}

fn check_decode(answer: &Answer, message: &str) {
    assert!(
        message.starts_with(&format!("{}: ", answer.what)),
        "the error does not name the answer {:?}: {message}",
        answer.what
    );
    let len = message.chars().count();
    assert!(len <= answer.what.len() + 340, "a {len}-character error");
}

/// Anything: the answer never panics, and fails in a known way.
fn anything(rng: &mut Rng, answer: &Answer, mut value: Value) {
    let body = match rng.u8(..8) {
        0 => String::from_utf8_lossy(&input::bytes(rng, 300)).into_owned(),
        1 => {
            let text = serialize(rng, &value);
            input::mutate_chars(rng, &text, VOCABULARY)
        }
        2 => {
            let text = serialize(rng, &value);
            splice(rng, &text)
        }
        _ => {
            input::mutate_json(rng, &mut value, VOCABULARY);
            serialize(rng, &value)
        }
    };
    let reset = (rng.u8(..4) == 0).then(|| input::text(rng, input::EDGE_NUMBERS, 2));
    match (answer.decode)(&body, reset.as_deref()) {
        Ok(_) => {}
        Err(GitHubError::Decode(message)) => check_decode(answer, &message),
        Err(e) if answer.graphql => graphql_error(&e),
        Err(e) => panic!("not a decode error: {e:?}"),
    }
}

/// GitHub's GraphQL errors: messages cut, a rate limit in the future.
fn graphql_error(e: &GitHubError) {
    match e {
        GitHubError::NotFound => {}
        GitHubError::Forbidden { message } | GitHubError::GraphQl { message, .. } => {
            assert!(message.chars().count() <= 300, "a long message: {e}");
        }
        GitHubError::RateLimited { until } => assert!(*until > NOW, "{e:?}"),
        other => panic!("not a GraphQL error: {other:?}"),
    }
}

/// Text the JSON writer never makes, spliced at a character boundary: deep
/// nesting, a lone surrogate, a huge number, a long string.
fn splice(rng: &mut Rng, text: &str) -> String {
    let at = text
        .char_indices()
        .map(|(i, _)| i)
        .nth(rng.usize(..text.chars().count().max(1)));
    let at = at.unwrap_or(text.len());
    let depth = rng.usize(100..5_000);
    let piece = match rng.u8(..5) {
        0 => format!("{}{}", "[".repeat(depth), "]".repeat(depth)),
        1 => format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth)),
        2 => "\"\\ud800\"".to_owned(),
        3 => "1".repeat(rng.usize(20..400)),
        _ => format!("\"{}\"", "x".repeat(rng.usize(1_000..200_000))),
    };
    format!("{}{piece}{}", &text[..at], &text[at..])
}

/// An error body with any status: never a panic; GitHub's message and
/// codes kept when they are strings, whatever else the body holds.
fn error_body(rng: &mut Rng) {
    let mut value = ERROR_BODIES[rng.usize(..ERROR_BODIES.len())].clone();
    const STATUSES: &[u16] = &[400, 401, 403, 404, 409, 410, 422, 500, 502, 301];
    let status = match rng.u8(..4) {
        0 => rng.u16(..),
        _ => STATUSES[rng.usize(..STATUSES.len())],
    };
    let body = match rng.u8(..4) {
        0 => {
            let text = serialize(rng, &value);
            input::mutate_chars(rng, &text, VOCABULARY)
        }
        _ => {
            input::mutate_json(rng, &mut value, VOCABULARY);
            serialize(rng, &value)
        }
    };
    let error = decode::error_answer(status, &body);
    let parsed: Option<Value> = serde_json::from_str(&body).ok();
    let wanted: String = parsed
        .as_ref()
        .and_then(|v| v.get("message")?.as_str())
        .unwrap_or_default()
        .chars()
        .take(300)
        .collect();
    let codes: Vec<&str> = parsed
        .as_ref()
        .and_then(|v| v.get("errors")?.as_array())
        .map(|items| {
            items
                .iter()
                .filter_map(|e| e.get("code")?.as_str())
                .collect()
        })
        .unwrap_or_default();
    check_error_answer(status, &error, &wanted, &codes);
}

fn check_error_answer(status: u16, error: &GitHubError, wanted: &str, codes: &[&str]) {
    let kept = |m: &str| assert_eq!(m, wanted, "GitHub's message was lost ({status})");
    match (status, error) {
        (401, GitHubError::Unauthorized) | (404, GitHubError::NotFound) => {}
        (500..=599, GitHubError::Server { status: s }) => assert_eq!(*s, status),
        (403, GitHubError::Forbidden { message }) | (410, GitHubError::Gone { message }) => {
            kept(message)
        }
        (
            400 | 422,
            GitHubError::Validation {
                message,
                codes: got,
                details,
                ..
            },
        ) => {
            kept(message);
            assert_eq!(got, codes, "GitHub's codes were lost");
            assert!(details.len() <= 3, "{details:?}");
            assert!(details.iter().all(|d| d.chars().count() <= 200));
        }
        (_, GitHubError::Unexpected { status: s, message }) if *s == status => kept(message),
        (_, other) => panic!("{status} became {other:?}"),
    }
}
