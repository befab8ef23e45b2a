//! Every answer closer reads from GitHub, turned into closer's own types:
//! one function per answer, its body (and the headers it reads) in, our type
//! or an error out. The client calls these on each answer, and the fuzz
//! target `github_answer` calls the same ones, so what is fuzzed is what
//! runs. They must never panic, whatever GitHub (or something in its place)
//! sends: a body that does not fit is `GitHubError::Decode` naming the
//! answer, the field's path in it and what is wrong, in a loggable length.
//! The shapes themselves live in `wire.rs`, private to `github/`.

use secrecy::SecretString;
use serde_json::Value;

use super::error::GitHubError;
use super::graphql::graphql_data;
use super::models::{
    AppInfo, Comment, Issue, Label, ProjectBoard, PullRequest, Repository, ReviewComment,
};
use super::types::Permission;
use super::wire::{
    WireAddItem, WireApp, WireClearItem, WireComment, WireContent, WireIssue, WireIssueItems,
    WireLabel, WirePermission, WireProjectOwner, WirePull, WireRepository, WireReviewComment,
    WireToken, WireUpdateItem, WireUpdateItemPayload, parse,
};
use crate::clock::Millis;

pub use super::links::next_page;
pub use super::redirect::{Hop, Origin, next_hop};
pub use super::retry::rate_limit_remaining;

/// `GET /repos/{o}/{r}/issues/{n}`.
pub fn issue(body: &str) -> Result<Issue, GitHubError> {
    const WHAT: &str = "issue";
    within(WHAT, parse::<WireIssue>(body, WHAT)?.try_into())
}

/// `POST` or `PATCH` of an issue comment.
pub fn comment(body: &str) -> Result<Comment, GitHubError> {
    Ok(parse::<WireComment>(body, "comment")?.into())
}

/// One page of `GET /repos/{o}/{r}/issues/{n}/comments`.
pub fn comments(body: &str) -> Result<Vec<Comment>, GitHubError> {
    let page: Vec<WireComment> = parse(body, "comments")?;
    Ok(page.into_iter().map(Comment::from).collect())
}

/// A reply in a review thread.
pub fn review_comment(body: &str) -> Result<ReviewComment, GitHubError> {
    Ok(parse::<WireReviewComment>(body, "review comment")?.into())
}

/// One page of `GET /repos/{o}/{r}/pulls/{n}/comments`.
pub fn review_comments(body: &str) -> Result<Vec<ReviewComment>, GitHubError> {
    let page: Vec<WireReviewComment> = parse(body, "review comments")?;
    Ok(page.into_iter().map(ReviewComment::from).collect())
}

/// A label just created.
pub fn label(body: &str) -> Result<Label, GitHubError> {
    Ok(parse::<WireLabel>(body, "label")?.into())
}

/// One page of `GET /repos/{o}/{r}/labels`.
pub fn labels(body: &str) -> Result<Vec<Label>, GitHubError> {
    let page: Vec<WireLabel> = parse(body, "labels")?;
    Ok(page.into_iter().map(Label::from).collect())
}

/// `GET /repos/{o}/{r}/pulls/{n}`, or a pull request just opened.
pub fn pull(body: &str) -> Result<PullRequest, GitHubError> {
    const WHAT: &str = "pull request";
    within(WHAT, parse::<WirePull>(body, WHAT)?.try_into())
}

/// `GET /repos/{o}/{r}/pulls?head=…`.
pub fn pulls(body: &str) -> Result<Vec<PullRequest>, GitHubError> {
    const WHAT: &str = "pull requests";
    let page: Vec<WirePull> = parse(body, WHAT)?;
    page.into_iter()
        .enumerate()
        .map(|(i, pull)| within(&format!("{WHAT}: [{i}]"), pull.try_into()))
        .collect()
}

/// `GET /repos/{o}/{r}`.
pub fn repository(body: &str) -> Result<Repository, GitHubError> {
    const WHAT: &str = "repository";
    within(WHAT, parse::<WireRepository>(body, WHAT)?.try_into())
}

/// `GET /repos/{o}/{r}/contents/{path}`: the file's bytes and blob sha.
pub fn file(body: &str) -> Result<(Vec<u8>, String), GitHubError> {
    const WHAT: &str = "file contents";
    within(WHAT, parse::<WireContent>(body, WHAT)?.decode())
}

/// `GET /repos/{o}/{r}/collaborators/{user}/permission`: the role GitHub
/// names (`role_name`), else the legacy `permission`; a custom role falls
/// back to the legacy value, an unknown one is `None`.
pub fn permission(body: &str) -> Result<Permission, GitHubError> {
    let wire: WirePermission = parse(body, "collaborator permission")?;
    Ok(wire
        .role_name
        .as_deref()
        .and_then(Permission::known_role)
        .unwrap_or_else(|| Permission::from_role_name(&wire.permission)))
}

/// `GET /app` (with the App's JWT).
pub fn app(body: &str) -> Result<AppInfo, GitHubError> {
    Ok(parse::<WireApp>(body, "app")?.into())
}

/// `POST /app/installations/{id}/access_tokens`: the token and when it
/// expires (ms since the epoch).
pub fn installation_token(body: &str) -> Result<(SecretString, Millis), GitHubError> {
    const WHAT: &str = "installation token";
    let wire: WireToken = parse(body, WHAT)?;
    let expires_at = chrono::DateTime::parse_from_rfc3339(&wire.expires_at)
        .map_err(|e| {
            GitHubError::decode(WHAT, format_args!("expires_at {:?}: {e}", wire.expires_at))
        })?
        .timestamp_millis();
    Ok((SecretString::from(wire.token), expires_at))
}

/// The project board query's answer: the board, or `None` when the owner
/// has no such board. `reset` is the `x-ratelimit-reset` header.
pub fn project_board(
    body: &str,
    reset: Option<&str>,
    now: Millis,
) -> Result<Option<ProjectBoard>, GitHubError> {
    let data: WireProjectOwner = graphql_data(body, reset, now, "project board")?;
    let holder = data.organization.or(data.user);
    Ok(holder.and_then(|h| h.project).map(ProjectBoard::from))
}

/// The issue's project items query's answer: the id of its item on the
/// board `project_id`, if it has one there.
pub fn issue_project_item(
    body: &str,
    reset: Option<&str>,
    now: Millis,
    project_id: &str,
) -> Result<Option<String>, GitHubError> {
    let data: WireIssueItems = graphql_data(body, reset, now, "issue's project items")?;
    let items = data.node.and_then(|n| n.items).map(|c| c.nodes);
    let on_board = items.into_iter().flatten().flatten().find(|i| {
        let board = i.project.as_ref().and_then(|p| p.id.as_deref());
        board == Some(project_id)
    });
    Ok(on_board.map(|i| i.id))
}

/// `addProjectV2ItemById`'s answer: the item's id.
pub fn added_project_item(
    body: &str,
    reset: Option<&str>,
    now: Millis,
) -> Result<String, GitHubError> {
    const WHAT: &str = "added project item";
    let data: WireAddItem = graphql_data(body, reset, now, WHAT)?;
    data.payload
        .item
        .map(|i| i.id)
        .ok_or_else(|| GitHubError::decode(WHAT, "data.addProjectV2ItemById.item: no item"))
}

/// `updateProjectV2ItemFieldValue`'s answer: the item must be named.
pub fn updated_project_item(
    body: &str,
    reset: Option<&str>,
    now: Millis,
) -> Result<(), GitHubError> {
    const WHAT: &str = "project item";
    let data: WireUpdateItem = graphql_data(body, reset, now, WHAT)?;
    item_named(data.payload, WHAT, "updateProjectV2ItemFieldValue")
}

/// `clearProjectV2ItemFieldValue`'s answer: the item must be named.
pub fn cleared_project_item(
    body: &str,
    reset: Option<&str>,
    now: Millis,
) -> Result<(), GitHubError> {
    const WHAT: &str = "cleared project item";
    let data: WireClearItem = graphql_data(body, reset, now, WHAT)?;
    item_named(data.payload, WHAT, "clearProjectV2ItemFieldValue")
}

/// A field mutation's payload must name the item it changed.
fn item_named(payload: WireUpdateItemPayload, what: &str, field: &str) -> Result<(), GitHubError> {
    match payload.item {
        Some(_) => Ok(()),
        None => Err(GitHubError::decode(
            what,
            format!("data.{field}.projectV2Item: no item"),
        )),
    }
}

/// A final answer that is not a success (not 2xx, not a followed redirect,
/// not an expected 304) as our error: GitHub's `message` (cut to 300
/// characters), `errors[].code` and, for a validation error, the reasons
/// in `errors[]` when the body has them. Read as any
/// JSON, field by field: GitHub's `errors` are objects with a `code` or
/// plain strings (its "validation error simple"), and neither kind, nor
/// anything else in the body, may cost the message or the codes.
pub fn error_answer(status: u16, body: &str) -> GitHubError {
    let parsed: Value = serde_json::from_str(body).unwrap_or_default();
    let message = parsed
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .chars()
        .take(300)
        .collect::<String>();
    let codes = || {
        let items = parsed.get("errors").and_then(Value::as_array);
        items
            .into_iter()
            .flatten()
            .filter_map(|item| Some(item.get("code")?.as_str()?.to_owned()))
            .collect()
    };
    // At most 3 reasons, each cut: they end up in a diagnosis comment.
    let details = || {
        let items = parsed.get("errors").and_then(Value::as_array);
        items
            .into_iter()
            .flatten()
            .filter_map(|item| match item {
                Value::String(text) => Some(text.as_str()),
                item => item.get("message")?.as_str(),
            })
            .filter(|text| !text.trim().is_empty())
            .take(3)
            .map(|text| text.chars().take(200).collect())
            .collect()
    };
    match status {
        401 => GitHubError::Unauthorized,
        404 => GitHubError::NotFound,
        410 => GitHubError::Gone { message },
        400 | 422 => GitHubError::Validation {
            status,
            message,
            codes: codes(),
            details: details(),
        },
        403 => GitHubError::Forbidden { message },
        500..=599 => GitHubError::Server { status },
        status => GitHubError::Unexpected { status, message },
    }
}

/// A semantic error of a shape (`state: …`) prefixed with the answer.
fn within<T>(what: &str, result: Result<T, GitHubError>) -> Result<T, GitHubError> {
    result.map_err(|e| match e {
        GitHubError::Decode(detail) => GitHubError::Decode(format!("{what}: {detail}")),
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_names_the_answer_and_the_field_path() {
        let body = r#"[{"id": 1}, {"id": 2, "user": {"login": 5}}]"#;
        let err = comments(body).unwrap_err().to_string();
        assert!(
            err.contains("comments: [1].user.login: invalid type: integer `5`, expected a string"),
            "{err}"
        );
        let err = issue(r#"{"number": 1, "state": "open", "user": {"login": "a"}}"#).unwrap_err();
        assert!(
            err.to_string().contains("issue: missing field `title`"),
            "{err}"
        );
        let err = pulls(
            r#"[{"number": 1, "head": {"ref": "a"}, "base": {"ref": "b"},
            "state": "merged"}]"#,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains(r#"pull requests: [0]: state: "merged" is neither open nor closed"#),
            "{err}"
        );
    }

    #[test]
    fn an_issues_item_is_the_one_on_the_board_asked_about() {
        let body = r#"{"data": {"node": {"projectItems": {"nodes": [
            null,
            {"id": "PVTI_hidden", "project": null},
            {"id": "PVTI_other", "project": {"id": "PVT_2"}},
            {"id": "PVTI_ours", "project": {"id": "PVT_1"}}
        ]}}}}"#;
        let item = issue_project_item(body, None, 0, "PVT_1").unwrap();
        assert_eq!(item.as_deref(), Some("PVTI_ours"));
        assert_eq!(issue_project_item(body, None, 0, "PVT_3").unwrap(), None);
        // Not an issue, or nothing the App can see: no item.
        for body in [r#"{"data": {"node": {}}}"#, r#"{"data": {"node": null}}"#] {
            assert_eq!(issue_project_item(body, None, 0, "PVT_1").unwrap(), None);
        }
    }

    /// serde repeats a value of the wrong type in full, so a long one made
    /// an error (a log line, a stored job error) as long; the
    /// `github_answer` fuzz target holds every error to a loggable length.
    #[test]
    fn a_long_value_is_cut_in_the_error() {
        let long = "x".repeat(100_000);
        let body = format!(
            r#"{{"number": 1, "title": "t", "state": "{long}", "user": {{"login": "a"}}}}"#
        );
        let err = issue(&body).unwrap_err().to_string();
        assert!(err.contains("issue: state: \"xxx"), "{err}");
        assert!(
            err.chars().count() < 400,
            "{} characters",
            err.chars().count()
        );
        let err = issue(&format!(r#"{{"number": "{long}"}}"#))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("could not decode GitHub's answer: issue: number: invalid type"),
            "{err}"
        );
        assert!(
            err.ends_with(" expected u64 at line 1 column 100013"),
            "the position is kept: {err}"
        );
    }

    /// Found by the `github_answer` fuzz target: GitHub's "validation error
    /// simple" (`errors` as strings) failed the whole body, so the error
    /// lost GitHub's message, and one odd item lost every code.
    #[test]
    fn an_error_body_keeps_its_message_whatever_its_errors_hold() {
        let simple = r#"{"message": "Validation Failed", "errors": ["Head sha can't be blank"]}"#;
        assert_eq!(
            error_answer(422, simple),
            GitHubError::Validation {
                status: 422,
                message: "Validation Failed".into(),
                codes: vec![],
                details: vec!["Head sha can't be blank".into()],
            }
        );
        // GitHub's reason is in the error, and so in a diagnosis.
        let no_commits = r#"{"message": "Validation Failed", "errors": [{"resource": "PullRequest",
            "code": "custom", "message": "No commits between main and closer/issue-7"}]}"#;
        assert_eq!(
            error_answer(422, no_commits).to_string(),
            "GitHub rejected the request (422): Validation Failed \
             (No commits between main and closer/issue-7)"
        );
        let mixed = r#"{"message": "Validation Failed",
            "errors": [{"code": "already_exists"}, "x", {"code": 7}, {"code": "custom"}]}"#;
        assert!(error_answer(422, mixed).has_code("already_exists"));
        assert!(error_answer(422, mixed).has_code("custom"));
        assert_eq!(
            error_answer(403, r#"{"message": 3}"#),
            GitHubError::Forbidden {
                message: String::new()
            }
        );
    }

    /// Seen while writing the `github_headers` target:
    /// `x-ratelimit-remaining: NaN` (or `inf`) was read as a float and set
    /// the rate-limit gauge to it.
    #[test]
    fn the_remaining_calls_are_a_count() {
        let mut headers = http::HeaderMap::new();
        for (value, wanted) in [
            ("4999", Some(4999)),
            (" 0 ", Some(0)),
            ("NaN", None),
            ("inf", None),
            ("-1", None),
        ] {
            headers.insert("x-ratelimit-remaining", value.parse().unwrap());
            assert_eq!(rate_limit_remaining(&headers), wanted, "{value}");
        }
    }

    #[test]
    fn an_installation_token_needs_an_rfc_3339_expiry() {
        let (_, at) =
            installation_token(r#"{"token": "ghs_x", "expires_at": "2016-07-11T22:14:10Z"}"#)
                .unwrap();
        assert_eq!(at, 1_468_275_250_000);
        let err =
            installation_token(r#"{"token": "ghs_x", "expires_at": "tomorrow"}"#).unwrap_err();
        assert!(
            err.to_string()
                .contains("installation token: expires_at \"tomorrow\""),
            "{err}"
        );
    }
}
