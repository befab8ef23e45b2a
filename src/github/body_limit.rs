//! GitHub's limit on a comment, issue or pull request body, kept at the
//! write path whatever the caller rendered: the texts in `crate::comment`
//! fit with room to spare for the hidden marker appended after them, but
//! the outgoing filter runs after that and may lengthen a body (a held
//! value of eight or nine characters becomes the ten of `[redacted]`), and
//! a body GitHub refuses is an update lost. A body over the limit is cut
//! in the middle: its start (the status comment's run marker) and its last
//! line when that is one of closer's hidden markers (what a retried step
//! looks for) are kept.

use serde_json::Value;

/// GitHub's limit, in characters; bytes are never fewer.
pub const BODY_MAX: usize = 65_536;

/// Longest last line kept as a marker.
const MARKER_MAX: usize = 512;

const CUT_NOTE: &str = "\n\n_(cut to fit GitHub's limit)_\n";

/// GitHub's limit on an issue's or a pull request's title, in characters.
pub const TITLE_MAX: usize = 256;

/// The `body` field of a write's JSON, cut to [`BODY_MAX`] if it is over,
/// and its `title` to [`TITLE_MAX`]: a title is rendered to fit, but the
/// outgoing filter may lengthen it too (an issue title of cut credentials,
/// each `AKIA` four characters that become ten), and a refused title is a
/// pull request never opened (decision 229).
pub(crate) fn fit_body(json: &mut Value) {
    if let Some(Value::String(body)) = json.get_mut("body")
        && body.len() > BODY_MAX
    {
        *body = fit(body);
    }
    if let Some(Value::String(title)) = json.get_mut("title")
        && title.chars().count() > TITLE_MAX
    {
        *title = fit_title(title);
    }
}

/// `title` cut to [`TITLE_MAX`] characters in the middle, keeping its end
/// when that is the issue it names (` (#12)`).
fn fit_title(title: &str) -> String {
    let tail = title
        .rfind(" (#")
        .map(|at| &title[at..])
        .filter(|t| t.ends_with(')') && t[3..t.len() - 1].bytes().all(|b| b.is_ascii_digit()))
        .unwrap_or("");
    let room = TITLE_MAX - 1 - tail.chars().count();
    let head: String = title.chars().take(room).collect();
    format!("{head}…{tail}")
}

fn fit(body: &str) -> String {
    let marker = body
        .rfind('\n')
        .map(|at| &body[at + 1..])
        .filter(|last| last.starts_with("<!-- closer:") && last.len() <= MARKER_MAX)
        .unwrap_or("");
    let room = BODY_MAX - CUT_NOTE.len() - marker.len();
    let mut keep = room;
    while !body.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}{CUT_NOTE}{marker}", &body[..keep])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_over_the_limit_keeps_its_start_and_its_issue() {
        let title = format!("fix: {} (#12)", "[redacted] ".repeat(40));
        let mut json = serde_json::json!({ "title": title, "body": "short" });
        fit_body(&mut json);
        let fitted = json["title"].as_str().unwrap();
        assert_eq!(fitted.chars().count(), TITLE_MAX, "{fitted}");
        assert!(fitted.starts_with("fix: [redacted]"), "{fitted}");
        assert!(fitted.ends_with("… (#12)"), "{fitted}");
        assert_eq!(json["body"], "short");
        let plain = "x".repeat(TITLE_MAX + 5);
        let mut json = serde_json::json!({ "title": plain });
        fit_body(&mut json);
        assert_eq!(json["title"].as_str().unwrap().chars().count(), TITLE_MAX);
    }

    #[test]
    fn a_body_over_the_limit_keeps_its_start_and_its_marker() {
        let marker = "<!-- closer:once=run-1:question-2 -->";
        let body = format!(
            "<!-- closer:run=run-1 -->\n{}\n{marker}",
            "é".repeat(40_000)
        );
        let mut json = serde_json::json!({ "body": body });
        fit_body(&mut json);
        let fitted = json["body"].as_str().unwrap();
        assert!(fitted.len() <= BODY_MAX, "{}", fitted.len());
        assert!(fitted.starts_with("<!-- closer:run=run-1 -->\n"));
        assert!(fitted.ends_with(marker));
        assert!(fitted.contains("cut to fit"));
    }

    #[test]
    fn a_body_within_the_limit_or_another_field_is_left_alone() {
        let body = "x".repeat(BODY_MAX);
        let mut json = serde_json::json!({ "body": body, "name": "y".repeat(BODY_MAX + 1) });
        let before = json.clone();
        fit_body(&mut json);
        assert_eq!(json, before);
        // The control: one byte more is cut.
        let mut over = serde_json::json!({ "body": "x".repeat(BODY_MAX + 1) });
        fit_body(&mut over);
        assert!(over["body"].as_str().unwrap().len() <= BODY_MAX);
    }
}
