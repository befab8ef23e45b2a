//! Webhook intake and event parsing. A real delivery from the fixtures with
//! a few fields removed, retyped or replaced (still JSON, so the typed read
//! is reached), or raw bytes; then what the intake does with a verified body
//! (the envelope, the job key, the stored payload) and what a worker does
//! (the typed parse, as every subscribed event kind).
//!
//! Properties: the stored payload decodes to the bytes that arrived; a body
//! the typed parse accepts is one the intake's envelope accepted too (the
//! intake never refuses what a worker could have handled; `ping` aside,
//! which reads nothing else, and bodies with a repeated key).

use std::sync::LazyLock;

use closer::events::envelope::Envelope;
use closer::events::{EventKind, parse_event};
use closer::store::deliveries::{decode_payload, encode_payload};
use fastrand::Rng;
use serde_json::Value;

use crate::driver::Target;
use crate::input;

pub const TARGET: Target = Target {
    name: "webhook",
    one,
};

const KINDS: [EventKind; 9] = [
    EventKind::Ping,
    EventKind::Installation,
    EventKind::InstallationRepositories,
    EventKind::Issues,
    EventKind::IssueComment,
    EventKind::PullRequest,
    EventKind::PullRequestReview,
    EventKind::PullRequestReviewComment,
    EventKind::Repository,
];

const VOCABULARY: &[&str] = &[
    "opened",
    "created",
    "edited",
    "deleted",
    "labeled",
    "closed",
    "reopened",
    "added",
    "removed",
    "suspend",
    "renamed",
    "transferred",
    "Bot",
    "User",
    "closer[bot]",
    "@closer run",
    "@closer stop",
    "owner/repo",
    "/",
    "#",
    "admin",
    "write",
    "read",
    "none",
    "open",
    "closed",
    "completed",
    "not_planned",
    "html_url",
    "https://github.com/o/r/issues/1",
    " ",
    "\n",
];

/// The fixtures' event header (the file name's first part) and body.
static SAMPLES: LazyLock<Vec<(String, Value)>> = LazyLock::new(|| {
    super::fixtures("github-webhooks", ".json")
        .into_iter()
        .map(|(name, text)| {
            let event = name.split('.').next().unwrap_or_default().to_owned();
            (
                event,
                serde_json::from_str(&text).expect("fixtures are JSON"),
            )
        })
        .collect()
});

fn one(rng: &mut Rng) {
    let (event, body, well_formed) = delivery(rng);
    intake(&event, &body);
    for kind in KINDS {
        // `ping` reads nothing but `zen` and `hook_id`, so it accepts what
        // the envelope refuses; every other kind reads the routing fields.
        // Text edits can repeat a key, which the envelope refuses and the
        // worker's lenient read takes the last of: GitHub never sends one.
        if parse_event(kind, &body).is_ok()
            && kind != EventKind::Ping
            && well_formed
            && let Err(e) = Envelope::parse(&body)
        {
            panic!("the intake refused ({e}) a body the {kind:?} parser reads");
        }
    }
}

/// The event header, the body, and whether the body is JSON as a JSON
/// writer makes it (no repeated key).
fn delivery(rng: &mut Rng) -> (String, Vec<u8>, bool) {
    let (event, sample) = &SAMPLES[rng.usize(..SAMPLES.len())];
    let event = if rng.u8(..) < 240 {
        event.clone()
    } else {
        input::text(rng, &["issues", "issue_comment", "_", "ping", "PUSH"], 3)
    };
    match rng.u8(..8) {
        0 => (event, input::bytes(rng, 200), false),
        1 => {
            let text = serde_json::to_string(sample).expect("JSON");
            (
                event,
                input::mutate_chars(rng, &text, VOCABULARY).into_bytes(),
                false,
            )
        }
        _ => {
            let mut value = sample.clone();
            input::mutate_json(rng, &mut value, VOCABULARY);
            (event, serde_json::to_vec(&value).expect("JSON"), true)
        }
    }
}

/// What `POST /webhooks` does once the signature matched.
fn intake(event: &str, body: &[u8]) {
    let Ok(envelope) = Envelope::parse(body) else {
        return;
    };
    if let Some(kind) = EventKind::from_header(event) {
        assert_eq!(EventKind::from_header(kind.as_str()), Some(kind));
        let key = envelope.job_key(kind, "delivery-1");
        assert!(!key.is_empty());
    }
    let (stored, encoding) = encode_payload(body);
    let decoded = decode_payload(stored, encoding).expect("a stored payload decodes");
    assert_eq!(decoded.as_deref(), Some(body), "the stored payload changed");
}
