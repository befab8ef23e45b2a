//! GitHub's JSON, read leniently: only the fields closer uses, with defaults
//! where GitHub (or GitHub Enterprise Server) may leave one out. Each shape is
//! turned into our own type here, so a change in GitHub's answers touches one
//! file. Nothing here is public outside `github/`.

use base64::Engine;
use serde::Deserialize;

use super::error::GitHubError;
use super::models::{
    Actor, AppInfo, Comment, CommentId, Issue, IssueState, Label, ProjectBoard, ProjectField,
    ProjectOption, PullRequest, PullState, Repository, ReviewComment, StateReason,
};
use super::types::{IssueNumber, RepoName, RepositoryId};

#[derive(Debug, Deserialize)]
pub(crate) struct WireUser {
    pub login: String,
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
}

impl WireUser {
    fn actor(self) -> Actor {
        let is_bot = self.kind.as_deref() == Some("Bot") || self.login.ends_with("[bot]");
        Actor {
            login: self.login,
            is_bot,
        }
    }

    /// The author of a comment: a deleted account shows as `user: null`,
    /// which GitHub calls "ghost".
    fn author(user: Option<WireUser>) -> Actor {
        user.map_or_else(
            || Actor {
                login: "ghost".to_owned(),
                is_bot: false,
            },
            WireUser::actor,
        )
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireLabel {
    pub name: String,
    #[serde(default)]
    pub color: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
}

impl From<WireLabel> for Label {
    fn from(w: WireLabel) -> Self {
        Label {
            name: w.name,
            color: w.color.unwrap_or_default(),
            description: w.description.filter(|d| !d.is_empty()),
        }
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireIssue {
    pub number: u64,
    pub title: String,
    #[serde(default)]
    pub body: Option<String>,
    pub state: String,
    #[serde(default)]
    pub state_reason: Option<String>,
    #[serde(default)]
    pub labels: Vec<WireLabel>,
    /// `null` for a deleted account (GitHub's `nullable-simple-user`).
    #[serde(default)]
    pub user: Option<WireUser>,
    #[serde(default)]
    pub html_url: String,
    #[serde(default)]
    pub pull_request: Option<serde_json::Value>,
    #[serde(default)]
    pub node_id: Option<String>,
    /// `null` or missing in some answers; its entries may be `null` too.
    #[serde(default)]
    pub assignees: Option<Vec<Option<WireUser>>>,
    /// An RFC 3339 time; `null` while the issue is open.
    #[serde(default)]
    pub closed_at: Option<String>,
}

impl TryFrom<WireIssue> for Issue {
    type Error = GitHubError;

    fn try_from(w: WireIssue) -> Result<Self, GitHubError> {
        Ok(Issue {
            number: IssueNumber(w.number),
            title: w.title,
            body: w.body.unwrap_or_default(),
            state: issue_state(&w.state)?,
            state_reason: w.state_reason.as_deref().and_then(StateReason::parse),
            labels: w.labels.into_iter().map(|l| l.name).collect(),
            assignees: (w.assignees.into_iter().flatten().flatten())
                .map(|u| u.login)
                .collect(),
            author: WireUser::author(w.user),
            html_url: w.html_url,
            is_pull_request: w.pull_request.is_some(),
            node_id: w.node_id.unwrap_or_default(),
            closed_at: w.closed_at.as_deref().and_then(millis),
        })
    }
}

fn issue_state(s: &str) -> Result<IssueState, GitHubError> {
    match s {
        "open" => Ok(IssueState::Open),
        "closed" => Ok(IssueState::Closed),
        other => Err(GitHubError::decode(
            "state",
            format_args!("{other:?} is neither open nor closed"),
        )),
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireAppRef {
    pub id: i64,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireComment {
    pub id: u64,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub user: Option<WireUser>,
    #[serde(default)]
    pub performed_via_github_app: Option<WireAppRef>,
    #[serde(default)]
    pub html_url: String,
}

impl From<WireComment> for Comment {
    fn from(w: WireComment) -> Self {
        let author = WireUser::author(w.user);
        Comment {
            id: CommentId(w.id),
            body: w.body.unwrap_or_default(),
            author: author.login,
            author_is_bot: author.is_bot,
            performed_via_app_id: w.performed_via_github_app.map(|a| a.id),
            html_url: w.html_url,
        }
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireReviewComment {
    pub id: u64,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub user: Option<WireUser>,
    #[serde(default)]
    pub performed_via_github_app: Option<WireAppRef>,
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub line: Option<u64>,
    #[serde(default)]
    pub original_line: Option<u64>,
    #[serde(default)]
    pub start_line: Option<u64>,
    #[serde(default)]
    pub diff_hunk: String,
    #[serde(default)]
    pub in_reply_to_id: Option<u64>,
    #[serde(default)]
    pub pull_request_review_id: Option<u64>,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub updated_at: Option<String>,
}

/// How much later than `created_at` a comment's `updated_at` may be and
/// the comment still count as never edited: GitHub sets a new comment's a
/// second or so after its creation (its own example payloads show it).
const EDITED_AFTER_SECS: i64 = 60;

/// An RFC 3339 time in milliseconds since the epoch; `None` when it does
/// not parse.
fn millis(time: &str) -> Option<crate::clock::Millis> {
    chrono::DateTime::parse_from_rfc3339(time)
        .ok()
        .map(|t| t.timestamp_millis())
}

/// Whether a comment was changed after it was written, by its times; a
/// time that does not parse counts as an edit when the two differ.
fn edited(created: Option<&str>, updated: Option<&str>) -> bool {
    let (Some(created), Some(updated)) = (created, updated) else {
        return false;
    };
    let secs = |t: &str| chrono::DateTime::parse_from_rfc3339(t).map(|t| t.timestamp());
    match (secs(created), secs(updated)) {
        (Ok(c), Ok(u)) => u.saturating_sub(c) > EDITED_AFTER_SECS,
        _ => created != updated,
    }
}

impl From<WireReviewComment> for ReviewComment {
    fn from(w: WireReviewComment) -> Self {
        let author = WireUser::author(w.user);
        ReviewComment {
            id: w.id,
            body: w.body.unwrap_or_default(),
            author,
            performed_via_app_id: w.performed_via_github_app.map(|a| a.id),
            path: w.path,
            line: w.line.or(w.original_line),
            start_line: w.start_line,
            diff_hunk: w.diff_hunk,
            in_reply_to: w.in_reply_to_id,
            review_id: w.pull_request_review_id,
            edited: edited(w.created_at.as_deref(), w.updated_at.as_deref()),
        }
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireRepository {
    pub id: i64,
    pub full_name: String,
    #[serde(default)]
    pub default_branch: Option<String>,
    pub clone_url: String,
    #[serde(default)]
    pub private: bool,
}

impl TryFrom<WireRepository> for Repository {
    type Error = GitHubError;

    fn try_from(w: WireRepository) -> Result<Self, GitHubError> {
        let full_name = RepoName::parse(&w.full_name).ok_or_else(|| {
            GitHubError::decode(
                "full_name",
                format_args!("{:?} is not owner/name", w.full_name),
            )
        })?;
        Ok(Repository {
            id: RepositoryId(w.id),
            full_name,
            default_branch: w.default_branch.unwrap_or_else(|| "main".to_owned()),
            clone_url: w.clone_url,
            private: w.private,
        })
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireBranchRef {
    #[serde(rename = "ref")]
    pub git_ref: String,
    #[serde(default)]
    pub sha: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WirePull {
    pub number: u64,
    #[serde(default)]
    pub user: Option<WireUser>,
    pub head: WireBranchRef,
    pub base: WireBranchRef,
    #[serde(default)]
    pub html_url: String,
    pub state: String,
    #[serde(default)]
    pub merged: Option<bool>,
    #[serde(default)]
    pub merged_at: Option<String>,
}

impl TryFrom<WirePull> for PullRequest {
    type Error = GitHubError;

    fn try_from(w: WirePull) -> Result<Self, GitHubError> {
        let state = match w.state.as_str() {
            "open" => PullState::Open,
            "closed" => PullState::Closed,
            other => {
                return Err(GitHubError::decode(
                    "state",
                    format_args!("{other:?} is neither open nor closed"),
                ));
            }
        };
        // The list endpoint has no `merged`; `merged_at` says the same.
        let merged = w.merged.unwrap_or(false) || w.merged_at.is_some();
        Ok(PullRequest {
            number: IssueNumber(w.number),
            author: w.user.map(|u| u.login),
            head_ref: w.head.git_ref,
            head_sha: w.head.sha,
            base_ref: w.base.git_ref,
            html_url: w.html_url,
            state,
            merged,
        })
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireContent {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub encoding: Option<String>,
    pub sha: String,
}

impl WireContent {
    /// The file's bytes; GitHub wraps the base64 at 60 columns.
    pub fn decode(self) -> Result<(Vec<u8>, String), GitHubError> {
        if self.kind != "file" {
            return Err(GitHubError::decode(
                "type",
                format_args!("the path is a {:?}, not a file", self.kind),
            ));
        }
        match self.encoding.as_deref() {
            Some("base64") => {}
            other => {
                return Err(GitHubError::decode(
                    "encoding",
                    format_args!("{other:?} is not base64 (file too large?)"),
                ));
            }
        }
        let packed: String = self
            .content
            .unwrap_or_default()
            .chars()
            .filter(|c| !c.is_ascii_whitespace())
            .collect();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(packed)
            .map_err(|e| GitHubError::decode("content", format_args!("bad base64: {e}")))?;
        Ok((bytes, self.sha))
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct WirePermission {
    pub permission: String,
    #[serde(default)]
    pub role_name: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireToken {
    pub token: String,
    pub expires_at: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireApp {
    pub id: i64,
    #[serde(default)]
    pub slug: Option<String>,
    pub name: String,
}

impl From<WireApp> for AppInfo {
    fn from(w: WireApp) -> Self {
        let slug = w.slug.unwrap_or(w.name);
        AppInfo {
            id: w.id,
            bot_login: format!("{slug}[bot]"),
            slug,
        }
    }
}

/// `data` of the board query: `{"organization": {"projectV2": …}}` or the
/// same under `"user"`; either may be `null`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireProjectOwner {
    #[serde(default)]
    pub organization: Option<WireProjectHolder>,
    #[serde(default)]
    pub user: Option<WireProjectHolder>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireProjectHolder {
    #[serde(rename = "projectV2", default)]
    pub project: Option<WireProject>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireProject {
    pub id: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub fields: Option<WireProjectFields>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireProjectFields {
    #[serde(default)]
    pub nodes: Vec<Option<WireProjectField>>,
}

/// A field node: only single-select fields carry `options` (the query asks
/// for the rest through an inline fragment on `ProjectV2SingleSelectField`).
#[derive(Debug, Deserialize)]
pub(crate) struct WireProjectField {
    #[serde(rename = "__typename", default)]
    pub typename: Option<String>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub options: Option<Vec<WireProjectOption>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireProjectOption {
    pub id: String,
    pub name: String,
}

impl From<WireProject> for ProjectBoard {
    fn from(w: WireProject) -> Self {
        let nodes = w.fields.map(|f| f.nodes).unwrap_or_default();
        let fields = nodes
            .into_iter()
            .flatten()
            .filter(|f| {
                f.typename
                    .as_deref()
                    .is_none_or(|t| t == "ProjectV2SingleSelectField")
            })
            .filter_map(|f| {
                Some(ProjectField {
                    id: f.id?,
                    name: f.name?,
                    options: f
                        .options?
                        .into_iter()
                        .map(|o| ProjectOption {
                            id: o.id,
                            name: o.name,
                        })
                        .collect(),
                })
            })
            .collect();
        ProjectBoard {
            id: w.id,
            title: w.title,
            fields,
        }
    }
}

/// A node reference, `{"id": "…"}`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireNode {
    pub id: String,
}

/// `data` of the issue's project items query,
/// `node(id:) { ... on Issue { projectItems { nodes { id project { id } } } } }`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireIssueItems {
    /// `null` when the id names nothing the App can see.
    #[serde(default)]
    pub node: Option<WireItemsHolder>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireItemsHolder {
    /// Missing when the node is not an issue.
    #[serde(rename = "projectItems", default)]
    pub items: Option<WireItemConnection>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireItemConnection {
    /// A connection's entries may be `null`.
    #[serde(default)]
    pub nodes: Vec<Option<WireProjectItem>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireProjectItem {
    pub id: String,
    /// Its board; one without an id is no board closer can name.
    #[serde(default)]
    pub project: Option<WireItemProject>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireItemProject {
    #[serde(default)]
    pub id: Option<String>,
}

/// `data` of `addProjectV2ItemById`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireAddItem {
    #[serde(rename = "addProjectV2ItemById")]
    pub payload: WireAddItemPayload,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireAddItemPayload {
    #[serde(default)]
    pub item: Option<WireNode>,
}

/// `data` of `updateProjectV2ItemFieldValue`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireUpdateItem {
    #[serde(rename = "updateProjectV2ItemFieldValue")]
    pub payload: WireUpdateItemPayload,
}

/// `data` of `clearProjectV2ItemFieldValue`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireClearItem {
    #[serde(rename = "clearProjectV2ItemFieldValue")]
    pub payload: WireUpdateItemPayload,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireUpdateItemPayload {
    #[serde(rename = "projectV2Item", default)]
    pub item: Option<WireNode>,
}

/// Parses a JSON body into `T`. An error names the answer (`what`), the
/// field's path in it (`[3].user.login`) and serde's reason, with the line
/// and column.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(
    body: &str,
    what: &str,
) -> Result<T, GitHubError> {
    let mut json = serde_json::Deserializer::from_str(body);
    let value =
        serde_path_to_error::deserialize(&mut json).map_err(|e| GitHubError::decode(what, e))?;
    json.end().map_err(|e| GitHubError::decode(what, e))?;
    Ok(value)
}

/// [`parse`] for a JSON value already read (GraphQL's `data`).
pub(crate) fn parse_value<T: serde::de::DeserializeOwned>(
    value: serde_json::Value,
    what: &str,
) -> Result<T, GitHubError> {
    serde_path_to_error::deserialize(value).map_err(|e| GitHubError::decode(what, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_with_wrapped_base64_decodes() {
        let w = WireContent {
            kind: "file".into(),
            content: Some("aGVsbG8g\nd29ybGQ=\n".into()),
            encoding: Some("base64".into()),
            sha: "abc".into(),
        };
        assert_eq!(
            w.decode().unwrap(),
            (b"hello world".to_vec(), "abc".to_owned())
        );
    }

    #[test]
    fn directory_is_not_a_file() {
        let w = WireContent {
            kind: "dir".into(),
            content: None,
            encoding: None,
            sha: "abc".into(),
        };
        assert!(matches!(w.decode(), Err(GitHubError::Decode(_))));
    }

    #[test]
    fn bot_comment_keeps_its_app() {
        let json = r#"{"id": 5, "body": "hi", "user": {"login": "closer[bot]", "type": "Bot"},
            "performed_via_github_app": {"id": 42, "slug": "closer"}, "html_url": "u"}"#;
        let c: Comment = parse::<WireComment>(json, "comment").unwrap().into();
        assert!(c.author_is_bot);
        assert_eq!(c.performed_via_app_id, Some(42));
    }

    #[test]
    fn issue_by_deleted_user_is_ghost() {
        let json = r#"{"number": 1, "title": "t", "state": "open", "user": null}"#;
        let issue = Issue::try_from(parse::<WireIssue>(json, "issue").unwrap()).unwrap();
        assert_eq!(issue.author.login, "ghost");
    }

    #[test]
    fn comment_by_deleted_user_is_ghost() {
        let c: Comment = parse::<WireComment>(r#"{"id": 1, "user": null}"#, "c")
            .unwrap()
            .into();
        assert_eq!(c.author, "ghost");
        assert_eq!(c.body, "");
    }

    #[test]
    fn board_keeps_only_single_select_fields() {
        let json = r#"{"id": "PVT_1", "title": "Roadmap", "fields": {"nodes": [
            {"__typename": "ProjectV2Field"},
            null,
            {"__typename": "ProjectV2SingleSelectField", "id": "F1", "name": "Status",
             "options": [{"id": "o1", "name": "Todo"}, {"id": "o2", "name": "Done"}]},
            {"__typename": "ProjectV2IterationField"}
        ]}}"#;
        let board: ProjectBoard = parse::<WireProject>(json, "board").unwrap().into();
        assert_eq!(board.id, "PVT_1");
        assert_eq!(board.fields.len(), 1);
        let status = board.field(" status ").unwrap();
        assert_eq!(status.options[1].name, "Done");
        assert!(board.field("Priority").is_none());
    }

    #[test]
    fn listed_pull_is_merged_by_merged_at() {
        let json = r#"{"number": 3, "head": {"ref": "b"}, "base": {"ref": "main"},
            "state": "closed", "merged_at": "2024-01-01T00:00:00Z"}"#;
        let pr: PullRequest = parse::<WirePull>(json, "pr").unwrap().try_into().unwrap();
        assert!(pr.merged);
        assert_eq!(pr.state, PullState::Closed);
    }

    /// A new comment's `updated_at` a second after its `created_at` (as in
    /// GitHub's own example payloads) is no edit; an hour later is.
    #[test]
    fn a_comment_counts_as_edited_only_well_after_it_was_written() {
        let created = Some("2019-05-15T15:20:37Z");
        assert!(!edited(created, Some("2019-05-15T15:20:38Z")));
        assert!(!edited(created, created));
        assert!(edited(created, Some("2019-05-15T16:20:37Z")));
        assert!(!edited(None, Some("2019-05-15T16:20:37Z")));
        assert!(edited(created, Some("not a time")));
    }
}
