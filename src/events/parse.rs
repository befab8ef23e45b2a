//! The full typed read of a stored delivery. Only the fields closer uses are
//! deserialised; a payload missing one of them is a [`ParseError`] naming the
//! event, never a panic.

mod installation;
mod repository;

use serde::Deserialize;

use super::*;

/// Why a payload could not become an [`Event`].
#[derive(Debug, thiserror::Error)]
#[error("cannot read the {event} payload: {message}")]
pub struct ParseError {
    pub event: &'static str,
    pub message: String,
}

#[derive(Deserialize)]
struct RawActor {
    login: String,
    id: i64,
    #[serde(rename = "type", default)]
    kind: String,
}

/// Who GitHub names when an account is gone, or when a payload's `user` or
/// `sender` is null (the schema allows it): a user with no permission
/// anywhere, so nothing it "does" can steer the bot.
fn ghost() -> Actor {
    Actor {
        login: super::GHOST_LOGIN.to_owned(),
        id: 10137,
        is_bot: false,
    }
}

fn actor(raw: Option<RawActor>) -> Actor {
    raw.map_or_else(ghost, Actor::from)
}

impl From<RawActor> for Actor {
    fn from(a: RawActor) -> Self {
        Actor {
            is_bot: a.kind == "Bot",
            login: a.login,
            id: a.id,
        }
    }
}

#[derive(Deserialize)]
struct RawInstallationRef {
    id: i64,
}

#[derive(Deserialize)]
struct RawRepoName {
    full_name: String,
    #[serde(default)]
    id: Option<i64>,
}

#[derive(Deserialize)]
struct RawRepo {
    full_name: String,
    #[serde(default)]
    id: Option<i64>,
    #[serde(default)]
    created_at: Option<serde_json::Value>,
    #[serde(default)]
    clone_url: Option<String>,
    #[serde(default)]
    default_branch: Option<String>,
    #[serde(default)]
    private: bool,
}

#[derive(Deserialize)]
struct RawLabel {
    name: String,
}

#[derive(Deserialize)]
struct RawIssue {
    number: u64,
    #[serde(default)]
    title: String,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    user: Option<RawActor>,
    #[serde(default)]
    labels: Vec<RawLabel>,
    /// Optional in GitHub's schema (`issues.pinned` payloads omit it).
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    pull_request: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    updated_at: Option<String>,
}

#[derive(Deserialize)]
struct RawApp {
    id: i64,
}

#[derive(Deserialize)]
struct RawComment {
    id: i64,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    user: Option<RawActor>,
    #[serde(default)]
    performed_via_github_app: Option<RawApp>,
}

#[derive(Deserialize)]
struct RawReview {
    id: i64,
    #[serde(default)]
    state: String,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    user: Option<RawActor>,
}

#[derive(Deserialize)]
struct RawReviewComment {
    id: i64,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    user: Option<RawActor>,
    #[serde(default)]
    path: String,
    #[serde(default)]
    line: Option<u64>,
    #[serde(default)]
    start_line: Option<u64>,
    /// Older payloads have no `line`, only the original one.
    #[serde(default)]
    original_line: Option<u64>,
    #[serde(default)]
    diff_hunk: String,
    #[serde(default)]
    in_reply_to_id: Option<i64>,
    #[serde(default)]
    pull_request_review_id: Option<i64>,
    #[serde(default)]
    updated_at: Option<String>,
    #[serde(default)]
    performed_via_github_app: Option<RawApp>,
}

#[derive(Deserialize)]
struct RawBranch {
    #[serde(rename = "ref")]
    name: String,
    #[serde(default)]
    sha: Option<String>,
    /// The repository the branch is in (`null` when a fork was deleted).
    #[serde(default)]
    repo: Option<RawRepoName>,
}

#[derive(Deserialize)]
struct RawPull {
    number: u64,
    head: RawBranch,
    base: RawBranch,
    #[serde(default)]
    merged: Option<bool>,
    state: String,
    #[serde(default)]
    user: Option<RawActor>,
}

#[derive(Deserialize)]
struct RawNumber {
    number: u64,
}

#[derive(Deserialize)]
struct RawFrom {
    /// GitHub's schema says a string, but the bodies it describes are
    /// nullable: a `null` reads as the empty text rather than costing the
    /// delivery.
    #[serde(default)]
    from: Option<String>,
}

#[derive(Deserialize, Default)]
struct RawChanges {
    /// `issues.transferred`: the repository and issue it went to.
    #[serde(default)]
    new_repository: Option<RawRepoName>,
    #[serde(default)]
    new_issue: Option<RawNumber>,
    #[serde(default)]
    title: Option<RawFrom>,
    #[serde(default)]
    body: Option<RawFrom>,
    /// `repository.renamed`: `{"name": {"from": "<old name>"}}`.
    #[serde(default)]
    repository: Option<repository::RawRenamed>,
    /// `repository.transferred`: `{"from": {"user" | "organization": …}}`.
    #[serde(default)]
    owner: Option<repository::RawOwnerFrom>,
}

impl RawChanges {
    fn of_issue(changes: Option<&RawChanges>) -> IssueChanges {
        let from = |f: Option<&RawFrom>| f.map(|f| f.from.clone().unwrap_or_default());
        let moved_to = changes.and_then(|c| match (&c.new_repository, &c.new_issue) {
            (Some(repo), Some(issue)) => Some(MovedIssue {
                repo: repo.full_name.clone(),
                number: IssueNumber(issue.number),
            }),
            _ => None,
        });
        IssueChanges {
            title_from: from(changes.and_then(|c| c.title.as_ref())),
            body_from: from(changes.and_then(|c| c.body.as_ref())),
            moved_to,
        }
    }
}

#[derive(Deserialize)]
struct RawPayload {
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    installation: Option<serde_json::Value>,
    #[serde(default)]
    repository: Option<RawRepo>,
    #[serde(default)]
    sender: Option<RawActor>,
    #[serde(default)]
    issue: Option<RawIssue>,
    /// An issue comment, or a review comment (`pull_request_review_comment`).
    #[serde(default)]
    comment: Option<serde_json::Value>,
    #[serde(default)]
    pull_request: Option<RawPull>,
    #[serde(default)]
    label: Option<RawLabel>,
    #[serde(default)]
    assignee: Option<RawActor>,
    #[serde(default)]
    review: Option<RawReview>,
    #[serde(default)]
    changes: Option<RawChanges>,
    #[serde(default)]
    repositories: Vec<RawRepoName>,
    #[serde(default)]
    repositories_added: Vec<RawRepoName>,
    #[serde(default)]
    repositories_removed: Vec<RawRepoName>,
    #[serde(default)]
    zen: Option<String>,
    #[serde(default)]
    hook_id: Option<i64>,
}

/// Reads a stored delivery into an [`Event`].
pub fn parse_event(kind: EventKind, body: &[u8]) -> Result<Event, ParseError> {
    let event = kind.as_str();
    let err = |message: String| ParseError { event, message };
    let mut raw: RawPayload = serde_json::from_slice(body).map_err(|e| err(e.to_string()))?;
    if kind == EventKind::Ping {
        return Ok(Event::Ping {
            zen: raw.zen,
            hook_id: raw.hook_id,
        });
    }
    let sender = actor(raw.sender.take());
    let installation = match &raw.installation {
        Some(value) => Some(
            serde_json::from_value::<RawInstallationRef>(value.clone())
                .map(|i| InstallationId(i.id))
                .map_err(|e| err(format!("installation: {e}")))?,
        ),
        None => None,
    };
    let parts = Parts {
        event,
        action: raw.action.clone().unwrap_or_default(),
        installation,
        sender,
    };
    match kind {
        EventKind::Installation | EventKind::InstallationRepositories | EventKind::Ping => {
            installation::event(kind, raw, parts)
        }
        EventKind::Repository => repository::event(raw, parts),
        _ => thread_event(kind, raw, parts),
    }
}

/// What every event but `ping` has, parsed before its own fields.
struct Parts {
    event: &'static str,
    action: String,
    installation: Option<InstallationId>,
    sender: Actor,
}

impl Parts {
    fn err(&self, message: String) -> ParseError {
        ParseError {
            event: self.event,
            message,
        }
    }

    fn missing(&self, field: &str) -> ParseError {
        self.err(format!("missing `{field}`"))
    }
}

/// The events about an issue or a pull request.
fn thread_event(kind: EventKind, raw: RawPayload, p: Parts) -> Result<Event, ParseError> {
    let err = |message: String| p.err(message);
    let RawPayload {
        repository,
        issue: raw_issue,
        comment: raw_comment_value,
        pull_request,
        label,
        assignee,
        review,
        changes,
        ..
    } = raw;
    let repo = repo(repository, &err)?;
    let (action, installation, sender) = (p.action.as_str(), p.installation, p.sender.clone());
    let the_issue = |i: Option<RawIssue>| i.map(issue).ok_or_else(|| p.missing("issue"));
    let the_pull = |r: Option<RawPull>| r.map(pull).ok_or_else(|| p.missing("pull_request"));
    Ok(match kind {
        EventKind::Issues => Event::Issues {
            action: IssuesAction::parse(action),
            installation,
            repo,
            issue: the_issue(raw_issue)?,
            label: label.map(|l| l.name),
            assignee: assignee.map(Actor::from),
            changes: RawChanges::of_issue(changes.as_ref()),
            sender,
        },
        EventKind::IssueComment => Event::IssueComment {
            action: CommentAction::parse(action),
            installation,
            repo,
            issue: the_issue(raw_issue)?,
            comment: comment(
                serde_json::from_value(raw_comment_value.ok_or_else(|| p.missing("comment"))?)
                    .map_err(|e| err(format!("comment: {e}")))?,
            ),
            previous_body: changes
                .and_then(|c| c.body)
                .map(|b| b.from.unwrap_or_default()),
            sender,
        },
        EventKind::PullRequest => Event::PullRequest {
            action: PullRequestAction::parse(action),
            installation,
            repo,
            pull: the_pull(pull_request)?,
            sender,
        },
        EventKind::PullRequestReview => Event::PullRequestReview {
            action: ReviewAction::parse(action),
            installation,
            repo,
            pull: the_pull(pull_request)?,
            review: review.map(review_ref).ok_or_else(|| p.missing("review"))?,
            sender,
        },
        _ => Event::PullRequestReviewComment {
            action: CommentAction::parse(action),
            installation,
            repo,
            pull: the_pull(pull_request)?,
            comment: review_comment(
                serde_json::from_value(raw_comment_value.ok_or_else(|| p.missing("comment"))?)
                    .map_err(|e| err(format!("comment: {e}")))?,
            ),
            sender,
        },
    })
}

fn repo(raw: Option<RawRepo>, err: &dyn Fn(String) -> ParseError) -> Result<Repo, ParseError> {
    let raw = raw.ok_or_else(|| err("missing `repository`".to_owned()))?;
    let name = RepoName::parse(&raw.full_name)
        .ok_or_else(|| err(format!("bad repository name {:?}", raw.full_name)))?;
    Ok(Repo {
        name,
        id: raw.id.map(RepositoryId),
        created_at: raw.created_at.as_ref().and_then(millis),
        clone_url: raw.clone_url,
        default_branch: raw.default_branch,
        private: raw.private,
    })
}

/// A time as GitHub writes it in a payload, in milliseconds since the epoch:
/// an ISO 8601 text, or a number of seconds; `None` for anything else.
fn millis(value: &serde_json::Value) -> Option<i64> {
    match value {
        serde_json::Value::String(text) => chrono::DateTime::parse_from_rfc3339(text)
            .ok()
            .map(|t| t.timestamp_millis()),
        serde_json::Value::Number(secs) => secs.as_i64()?.checked_mul(1000),
        _ => None,
    }
}

fn issue(raw: RawIssue) -> IssueRef {
    IssueRef {
        number: IssueNumber(raw.number),
        title: raw.title,
        body: raw.body.unwrap_or_default(),
        author: actor(raw.user),
        labels: raw.labels.into_iter().map(|l| l.name).collect(),
        open: raw.state.as_deref() != Some("closed"),
        is_pull_request: raw.pull_request.is_some(),
        updated_at: raw.updated_at,
    }
}

fn comment(raw: RawComment) -> CommentRef {
    CommentRef {
        id: raw.id,
        body: raw.body.unwrap_or_default(),
        author: actor(raw.user),
        via_app_id: raw.performed_via_github_app.map(|a| a.id),
    }
}

fn pull(raw: RawPull) -> PullRef {
    PullRef {
        number: IssueNumber(raw.number),
        head_repo: raw.head.repo.map(|r| r.full_name),
        head_ref: raw.head.name,
        head_sha: raw.head.sha,
        base_ref: raw.base.name,
        merged: raw.merged.unwrap_or(false),
        open: raw.state == "open",
        author: actor(raw.user),
    }
}

fn review_ref(raw: RawReview) -> ReviewRef {
    ReviewRef {
        id: raw.id,
        state: ReviewState::parse(&raw.state),
        body: raw.body.unwrap_or_default(),
        author: actor(raw.user),
    }
}

fn review_comment(raw: RawReviewComment) -> ReviewCommentRef {
    ReviewCommentRef {
        id: raw.id,
        body: raw.body.unwrap_or_default(),
        author: actor(raw.user),
        path: raw.path,
        line: raw.line.or(raw.original_line),
        start_line: raw.start_line,
        diff_hunk: raw.diff_hunk,
        in_reply_to: raw.in_reply_to_id,
        review_id: raw.pull_request_review_id,
        via_app_id: raw.performed_via_github_app.map(|a| a.id),
        updated_at: raw.updated_at.unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!(
            "{}/tests/fixtures/github-webhooks/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {path}: {e}"))
    }

    #[test]
    fn every_fixture_parses_into_its_event() {
        let dir = format!(
            "{}/tests/fixtures/github-webhooks",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).expect("fixtures directory") {
            let name = entry.unwrap().file_name().into_string().unwrap();
            let Some(event) = name.strip_suffix(".json") else {
                continue;
            };
            let event = event.split('.').next().unwrap();
            let kind = EventKind::from_header(event).expect("fixtures are subscribed events");
            parse_event(kind, &fixture(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            seen += 1;
        }
        assert!(seen >= 46, "only {seen} fixtures found");
    }

    /// What GitHub's schema allows to be null or missing: `issue.state`
    /// (`issues.pinned`), `issue.user`, `sender`, `installation.account`
    /// (an enterprise installation). Each parses; a null user is the ghost,
    /// who has no permission anywhere.
    #[test]
    fn fields_the_schema_allows_to_be_null_or_missing_parse() {
        let mut v: serde_json::Value =
            serde_json::from_slice(&fixture("issues.opened.json")).unwrap();
        v["action"] = "pinned".into();
        v["issue"].as_object_mut().unwrap().remove("state");
        v["issue"]["user"] = serde_json::Value::Null;
        v["sender"] = serde_json::Value::Null;
        let body = serde_json::to_vec(&v).unwrap();
        let Event::Issues { issue, sender, .. } = parse_event(EventKind::Issues, &body).unwrap()
        else {
            panic!("not an issues event");
        };
        assert!(issue.open);
        assert_eq!(
            (issue.author.login.as_str(), sender.login.as_str()),
            ("ghost", "ghost")
        );

        let mut v: serde_json::Value =
            serde_json::from_slice(&fixture("installation.created.json")).unwrap();
        v["installation"]["account"] = serde_json::Value::Null;
        let body = serde_json::to_vec(&v).unwrap();
        let Event::Installation { account_login, .. } =
            parse_event(EventKind::Installation, &body).unwrap()
        else {
            panic!("not an installation event");
        };
        assert_eq!(account_login, "");

        let mut v: serde_json::Value =
            serde_json::from_slice(&fixture("issue_comment.created.json")).unwrap();
        v["comment"]["user"] = serde_json::Value::Null;
        v["issue"]["state"] = "closed".into();
        let body = serde_json::to_vec(&v).unwrap();
        let Event::IssueComment { comment, issue, .. } =
            parse_event(EventKind::IssueComment, &body).unwrap()
        else {
            panic!("not a comment");
        };
        assert_eq!(comment.author.login, "ghost");
        assert!(!issue.open);
    }

    #[test]
    fn a_comment_keeps_its_author_app_and_previous_body() {
        let event = parse_event(
            EventKind::IssueComment,
            &fixture("issue_comment.edited.json"),
        )
        .unwrap();
        let Event::IssueComment {
            action,
            previous_body,
            comment,
            issue,
            ..
        } = event
        else {
            panic!("not a comment event");
        };
        assert_eq!(action, CommentAction::Edited);
        assert_eq!(
            previous_body.as_deref(),
            Some("You are totally right! I'll get this fixed right away.")
        );
        assert!(!comment.author.is_bot);
        assert_eq!(issue.number, IssueNumber(1));
    }

    #[test]
    fn an_issue_edit_says_what_changed_and_a_null_earlier_body_reads_as_empty() {
        let mut payload: serde_json::Value =
            serde_json::from_slice(&fixture("issues.edited.json")).unwrap();
        let Event::Issues { changes, .. } =
            parse_event(EventKind::Issues, &serde_json::to_vec(&payload).unwrap()).unwrap()
        else {
            panic!("not an issues event");
        };
        assert_eq!(
            changes,
            IssueChanges::default(),
            "the fixture's `changes` is empty"
        );
        payload["changes"] = serde_json::json!({"title": {"from": "old"}, "body": {"from": null}});
        let Event::Issues { changes, .. } =
            parse_event(EventKind::Issues, &serde_json::to_vec(&payload).unwrap()).unwrap()
        else {
            panic!("not an issues event");
        };
        assert_eq!(changes.title_from.as_deref(), Some("old"));
        assert_eq!(changes.body_from.as_deref(), Some(""));
    }

    #[test]
    fn a_review_and_a_review_comment_keep_what_the_review_loop_needs() {
        let event = parse_event(
            EventKind::PullRequestReview,
            &fixture("pull_request_review.submitted.2.json"),
        )
        .unwrap();
        let Event::PullRequestReview { review, pull, .. } = event else {
            panic!("not a review");
        };
        assert_eq!(review.id, 237895671);
        assert_eq!(review.state, ReviewState::Commented);
        assert_eq!(review.body, "");
        assert_eq!(review.author.login, "Codertocat");
        assert_eq!(pull.author.login, "Codertocat");
        assert_eq!(pull.head_ref, "changes");
        assert_eq!(
            pull.head_sha.as_deref(),
            Some("ec26c3e57ca3a959ca5aad62de7213c562f8c821")
        );

        let event = parse_event(
            EventKind::PullRequestReviewComment,
            &fixture("pull_request_review_comment.created.2.json"),
        )
        .unwrap();
        let Event::PullRequestReviewComment { comment, .. } = event else {
            panic!("not a review comment");
        };
        assert_eq!(comment.id, 284312630);
        assert_eq!(comment.path, "README.md");
        assert_eq!(comment.line, Some(265));
        assert_eq!(comment.start_line, None);
        assert_eq!(comment.diff_hunk, "@@ -1 +1 @@\n-# Hello-World");
        assert_eq!(comment.in_reply_to, None);
        assert_eq!(comment.review_id, Some(237895671));
        assert_eq!(
            comment.body,
            "Maybe you should use more emoji on this line."
        );
    }

    /// No `issues.assigned` example exists in the fixtures; it is derived
    /// from `issues.opened.json` as GitHub documents it: `assignee` names
    /// the user assigned.
    #[test]
    fn an_assignment_names_the_assignee() {
        let mut v: serde_json::Value =
            serde_json::from_slice(&fixture("issues.opened.json")).unwrap();
        v["action"] = "assigned".into();
        v["assignee"] = serde_json::json!({"login": "closer-bot[bot]", "id": 9, "type": "Bot"});
        let body = serde_json::to_vec(&v).unwrap();
        let Event::Issues {
            action, assignee, ..
        } = parse_event(EventKind::Issues, &body).unwrap()
        else {
            panic!("not an issues event");
        };
        assert_eq!(action, IssuesAction::Assigned);
        let assignee = assignee.expect("an assignee");
        assert_eq!(assignee.login, "closer-bot[bot]");
        assert!(assignee.is_bot);
    }

    #[test]
    fn labeled_issue_names_the_label() {
        let event = parse_event(EventKind::Issues, &fixture("issues.labeled.json")).unwrap();
        let Event::Issues {
            action,
            label,
            repo,
            ..
        } = event
        else {
            panic!("not an issues event");
        };
        assert_eq!(action, IssuesAction::Labeled);
        assert_eq!(label.as_deref(), Some("bug"));
        assert_eq!(repo.id, Some(RepositoryId(186_853_002)), "GitHub's id");
        // "2019-05-15T15:19:25Z"
        assert_eq!(repo.created_at, Some(1_557_933_565_000));
    }

    #[test]
    fn malformed_payloads_are_errors_not_panics() {
        for body in [
            &b"not json"[..],
            b"[]",
            b"{}",
            b"{\"action\":\"opened\",\"sender\":{\"login\":\"a\",\"id\":1}}",
            b"{\"action\":\"opened\",\"sender\":{\"login\":\"a\",\"id\":1},\"repository\":{\"full_name\":\"nope\"},\"issue\":{\"number\":1,\"user\":{\"login\":\"a\",\"id\":1},\"state\":\"open\"}}",
            b"{\"sender\":{\"login\":\"a\",\"id\":1},\"installation\":\"x\"}",
        ] {
            let result = parse_event(EventKind::Issues, body);
            assert!(result.is_err(), "{}", String::from_utf8_lossy(body));
        }
        // An unknown action is kept, not refused.
        let mut v: serde_json::Value =
            serde_json::from_slice(&fixture("issues.opened.json")).unwrap();
        v["action"] = "milestoned".into();
        let event = parse_event(EventKind::Issues, v.to_string().as_bytes()).unwrap();
        assert!(matches!(
            event,
            Event::Issues { action: IssuesAction::Other(ref a), .. } if a == "milestoned"
        ));
    }

    /// `issues.transferred` as GitHub's schema gives it: `changes` holds
    /// the whole new issue and repository; closer keeps where it went.
    #[test]
    fn a_transfer_says_where_the_issue_went() {
        let mut v: serde_json::Value =
            serde_json::from_slice(&fixture("issues.opened.json")).unwrap();
        v["action"] = "transferred".into();
        let mut new_issue = v["issue"].clone();
        new_issue["number"] = 7.into();
        let mut new_repository = v["repository"].clone();
        new_repository["full_name"] = "octo/elsewhere".into();
        v["changes"] =
            serde_json::json!({"new_issue": new_issue, "new_repository": new_repository});
        let Event::Issues {
            action, changes, ..
        } = parse_event(EventKind::Issues, v.to_string().as_bytes()).unwrap()
        else {
            panic!("an issues event");
        };
        assert_eq!(action, IssuesAction::Transferred);
        let to = changes.moved_to.expect("where it went");
        assert_eq!(
            (to.repo.as_str(), to.number),
            ("octo/elsewhere", IssueNumber(7))
        );
        // Without `changes` (not as GitHub sends it), still an event.
        v.as_object_mut().unwrap().remove("changes");
        let event = parse_event(EventKind::Issues, v.to_string().as_bytes()).unwrap();
        assert!(matches!(event, Event::Issues { changes, .. } if changes.moved_to.is_none()));
    }
}
