//! GitHub's JSON shapes for the fake's answers, with every field octocrab's
//! models require (checked by `shapes_parse_as_octocrab_models`), so code that
//! reads them with octocrab or with closer's own structs sees what GitHub sends.

use closer::clock::Millis;
use serde_json::{Value, json};

use super::state::{
    FakeComment, FakeIssue, FakeLabel, FakePull, FakeReview, FakeReviewComment, FakeUser, Repo,
    State,
};

/// RFC 3339 time, as GitHub writes it.
pub fn time(ms: Millis) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

pub fn user(base: &str, u: &FakeUser) -> Value {
    let api = format!("{base}/users/{}", u.login);
    json!({
        "login": u.login,
        "id": u.id(),
        "node_id": format!("U_{}", u.id()),
        "avatar_url": format!("{base}/avatars/{}", u.login),
        "gravatar_id": "",
        "url": api,
        "html_url": format!("{base}/{}", u.login),
        "followers_url": format!("{api}/followers"),
        "following_url": format!("{api}/following{{/other_user}}"),
        "gists_url": format!("{api}/gists{{/gist_id}}"),
        "starred_url": format!("{api}/starred{{/owner}}{{/repo}}"),
        "subscriptions_url": format!("{api}/subscriptions"),
        "organizations_url": format!("{api}/orgs"),
        "repos_url": format!("{api}/repos"),
        "events_url": format!("{api}/events{{/privacy}}"),
        "received_events_url": format!("{api}/received_events"),
        "type": if u.is_bot { "Bot" } else { "User" },
        "site_admin": false,
    })
}

pub fn app(st: &State) -> Value {
    let owner = FakeUser::user("closer-owner");
    json!({
        "id": st.app.id,
        "slug": st.app.slug,
        "node_id": format!("A_{}", st.app.id),
        "client_id": format!("Iv1.{}", st.app.id),
        "owner": user(&st.base_url, &owner),
        "name": st.app.slug,
        "description": "closer under test",
        "external_url": "https://example.com/closer",
        "html_url": format!("{}/apps/{}", st.base_url, st.app.slug),
        "created_at": time(0),
        "updated_at": time(0),
        "permissions": { "issues": "write", "contents": "write", "pull_requests": "write", "metadata": "read" },
        "events": ["issues", "issue_comment"],
    })
}

pub fn label(base: &str, repo: &Repo, l: &FakeLabel) -> Value {
    json!({
        "id": l.id,
        "node_id": format!("LA_{}", l.id),
        "url": format!("{base}/repos/{}/labels/{}", repo.full_name(), l.name),
        "name": l.name,
        "description": l.description,
        "color": l.color,
        "default": false,
    })
}

/// An issue's labels: the repository's label when it exists.
fn issue_labels(base: &str, repo: &Repo, names: &[String]) -> Vec<Value> {
    names
        .iter()
        .map(|name| {
            let found = repo.labels.get(&name.to_lowercase()).cloned();
            let l = found.unwrap_or(FakeLabel {
                id: 0,
                name: name.clone(),
                color: "ededed".into(),
                description: None,
            });
            label(base, repo, &l)
        })
        .collect()
}

pub fn issue(base: &str, repo: &Repo, i: &FakeIssue) -> Value {
    let api = format!("{base}/repos/{}/issues/{}", repo.full_name(), i.number);
    let comments = repo
        .comments
        .values()
        .filter(|c| c.issue == i.number)
        .count();
    json!({
        "id": 500_000 + i.number,
        "node_id": repo.issue_node_id(i.number),
        "url": api,
        "repository_url": format!("{base}/repos/{}", repo.full_name()),
        "labels_url": format!("{api}/labels{{/name}}"),
        "comments_url": format!("{api}/comments"),
        "events_url": format!("{api}/events"),
        "html_url": format!("{base}/{}/issues/{}", repo.full_name(), i.number),
        "number": i.number,
        "state": i.state,
        "state_reason": i.state_reason,
        "title": i.title,
        "body": i.body,
        "user": user(base, &i.author),
        "labels": issue_labels(base, repo, &i.labels),
        "assignee": i.assignees.first().map(|a| user(base, &assignee(a))),
        "assignees": i.assignees.iter().map(|a| user(base, &assignee(a))).collect::<Vec<_>>(),
        "milestone": null,
        "locked": false,
        "active_lock_reason": null,
        "comments": comments,
        "closed_at": i.closed_at.map(time),
        "created_at": time(i.created_at),
        "updated_at": time(i.updated_at),
        "author_association": "OWNER",
    })
}

/// An assignee by login (`…[bot]` logins are bots).
fn assignee(login: &str) -> FakeUser {
    match login.ends_with("[bot]") {
        true => FakeUser::bot(login),
        false => FakeUser::user(login),
    }
}

/// A pull request review, as `GET /pulls/{n}/reviews/{id}` answers it.
pub fn review(st: &State, repo: &Repo, r: &FakeReview) -> Value {
    let base = &st.base_url;
    json!({
        "id": r.id,
        "node_id": format!("PRR_{}", r.id),
        "user": user(base, &r.author),
        "body": r.body,
        "state": r.state,
        "html_url": format!("{base}/{}/pull/{}#pullrequestreview-{}", repo.full_name(), r.pull, r.id),
        "pull_request_url": format!("{base}/repos/{}/pulls/{}", repo.full_name(), r.pull),
        "_links": {
            "html": {"href": format!("{base}/{}/pull/{}#pullrequestreview-{}", repo.full_name(), r.pull, r.id)},
            "pull_request": {"href": format!("{base}/repos/{}/pulls/{}", repo.full_name(), r.pull)},
        },
        "submitted_at": time(r.submitted_at),
        "commit_id": "0000000000000000000000000000000000000000",
        "author_association": "OWNER",
    })
}

/// A review comment, as `GET /pulls/{n}/comments` answers it (GitHub's
/// "Pull Request Review Comment" schema).
pub fn review_comment(st: &State, repo: &Repo, c: &FakeReviewComment) -> Value {
    let base = &st.base_url;
    let api = format!("{base}/repos/{}/pulls/comments/{}", repo.full_name(), c.id);
    let html = format!(
        "{base}/{}/pull/{}#discussion_r{}",
        repo.full_name(),
        c.pull,
        c.id
    );
    let pull_url = format!("{base}/repos/{}/pulls/{}", repo.full_name(), c.pull);
    let mut v = json!({
        "url": api,
        "pull_request_review_id": c.review,
        "id": c.id,
        "node_id": format!("PRRC_{}", c.id),
        "diff_hunk": c.diff_hunk,
        "path": c.path,
        "position": c.line,
        "original_position": c.line,
        "commit_id": "0000000000000000000000000000000000000000",
        "original_commit_id": "0000000000000000000000000000000000000000",
        "user": user(base, &c.author),
        "body": c.body,
        "created_at": time(c.created_at),
        "updated_at": time(c.updated_at),
        "html_url": html,
        "pull_request_url": pull_url,
        "author_association": if c.author.is_bot { "NONE" } else { "OWNER" },
        "_links": {
            "self": {"href": api},
            "html": {"href": html},
            "pull_request": {"href": pull_url},
        },
        "start_line": c.start_line,
        "original_start_line": c.start_line,
        "start_side": c.start_line.map(|_| "RIGHT"),
        "line": c.line,
        "original_line": c.line,
        "side": "RIGHT",
        "subject_type": "line",
        "performed_via_github_app": c.via_app.map(|_| app(st)),
    });
    if let Some(to) = c.in_reply_to {
        v["in_reply_to_id"] = json!(to);
    }
    v
}

pub fn comment(st: &State, repo: &Repo, c: &FakeComment) -> Value {
    let base = &st.base_url;
    let via = c.via_app.map(|_| app(st));
    json!({
        "id": c.id,
        "node_id": format!("IC_{}", c.id),
        "url": format!("{base}/repos/{}/issues/comments/{}", repo.full_name(), c.id),
        "html_url": format!("{base}/{}/issues/{}#issuecomment-{}", repo.full_name(), c.issue, c.id),
        "issue_url": format!("{base}/repos/{}/issues/{}", repo.full_name(), c.issue),
        "body": c.body,
        "user": user(base, &c.author),
        "created_at": time(c.created_at),
        "updated_at": time(c.updated_at),
        "author_association": if c.author.is_bot { "NONE" } else { "OWNER" },
        "performed_via_github_app": via,
    })
}

pub fn repository(base: &str, r: &Repo) -> Value {
    let owner = FakeUser::user(&r.owner);
    let api = format!("{base}/repos/{}", r.full_name());
    json!({
        "id": r.id,
        "node_id": format!("R_{}", r.id),
        "name": r.name,
        "full_name": r.full_name(),
        "owner": user(base, &owner),
        "private": r.private,
        "html_url": format!("{base}/{}", r.full_name()),
        "description": null,
        "fork": false,
        "url": api,
        "clone_url": r.clone_url,
        "git_url": format!("git://fake/{}.git", r.full_name()),
        "ssh_url": format!("git@fake:{}.git", r.full_name()),
        "default_branch": r.default_branch,
        "visibility": if r.private { "private" } else { "public" },
        "archived": false,
        "disabled": false,
        "created_at": time(r.created_at),
        "updated_at": time(r.created_at),
        "pushed_at": time(r.created_at),
    })
}

fn branch(base: &str, r: &Repo, name: &str) -> Value {
    json!({
        "label": format!("{}:{name}", r.owner),
        "ref": name,
        "sha": "0000000000000000000000000000000000000000",
        "user": user(base, &FakeUser::user(&r.owner)),
        "repo": repository(base, r),
    })
}

pub fn pull(base: &str, r: &Repo, p: &FakePull) -> Value {
    let api = format!("{base}/repos/{}/pulls/{}", r.full_name(), p.number);
    json!({
        "id": p.id,
        "node_id": format!("PR_{}", p.id),
        "number": p.number,
        "url": api,
        "html_url": format!("{base}/{}/pull/{}", r.full_name(), p.number),
        "diff_url": format!("{base}/{}/pull/{}.diff", r.full_name(), p.number),
        "patch_url": format!("{base}/{}/pull/{}.patch", r.full_name(), p.number),
        "issue_url": format!("{base}/repos/{}/issues/{}", r.full_name(), p.number),
        "state": p.state,
        "locked": false,
        "title": p.title,
        "body": p.body,
        "user": user(base, &p.author),
        "labels": [],
        "draft": false,
        "merged": p.merged,
        "merged_at": if p.merged { Some(time(p.updated_at)) } else { None },
        "closed_at": if p.state == "closed" { Some(time(p.updated_at)) } else { None },
        "created_at": time(p.created_at),
        "updated_at": time(p.updated_at),
        "head": match &p.merged_sha {
            Some(sha) => {
                let mut head = branch(base, r, &p.head);
                head["sha"] = json!(sha);
                head
            }
            None => branch(base, r, &p.head),
        },
        "base": branch(base, r, &p.base),
        "author_association": "NONE",
    })
}

/// GitHub's error body.
pub fn error(message: &str) -> Value {
    json!({ "message": message, "documentation_url": "https://docs.github.com/rest" })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use closer::clock::ManualClock;
    use jsonwebtoken::DecodingKey;
    use octocrab::models;

    use super::super::state::{AppIdentity, FakeFile};
    use super::*;

    fn model() -> (State, Repo) {
        let app = AppIdentity {
            id: 1,
            slug: "closer-test".into(),
            public_key: DecodingKey::from_rsa_pem(super::super::PUBLIC_KEY_PEM.as_bytes()).unwrap(),
        };
        let st = State::new(
            "http://127.0.0.1:1".into(),
            Arc::new(ManualClock::new(1_700_000_000_000)),
            app,
        );
        let mut files = std::collections::BTreeMap::new();
        files.insert(("main".into(), "a".into()), FakeFile::new(b"x"));
        let repo = Repo {
            id: 9,
            created_at: 0,
            owner: "acme".into(),
            name: "widget".into(),
            default_branch: "main".into(),
            clone_url: "http://127.0.0.1:1/acme/widget.git".into(),
            private: false,
            files,
            issues: Default::default(),
            comments: Default::default(),
            labels: Default::default(),
            permissions: Default::default(),
            reactions: Vec::new(),
            pulls: Default::default(),
            reviews: Default::default(),
            review_comments: Default::default(),
            next_number: 0,
        };
        (st, repo)
    }

    /// The fake's answers carry every field octocrab's models require, so
    /// code reading them through octocrab works against the fake too.
    #[test]
    fn shapes_parse_as_octocrab_models() {
        let (st, repo) = model();
        let base = st.base_url.clone();
        let issue = FakeIssue {
            number: 1,
            title: "t".into(),
            body: Some("b".into()),
            state: "closed".into(),
            state_reason: Some("completed".into()),
            labels: vec!["bug".into()],
            author: FakeUser::user("alice"),
            assignees: vec!["closer-test[bot]".into()],
            created_at: 0,
            updated_at: 0,
            closed_at: Some(0),
        };
        let comment = FakeComment {
            id: 5,
            issue: 1,
            body: "c".into(),
            author: st.bot(),
            via_app: Some(1),
            created_at: 0,
            updated_at: 0,
        };
        let pull = FakePull {
            id: 7,
            number: 2,
            title: "p".into(),
            body: None,
            head: "closer/issue-1".into(),
            base: "main".into(),
            state: "open".into(),
            merged: false,
            merged_sha: None,
            author: st.bot(),
            created_at: 0,
            updated_at: 0,
        };
        let label_model = FakeLabel {
            id: 3,
            name: "phase:review".into(),
            color: "0e8a16".into(),
            description: Some("d".into()),
        };
        serde_json::from_value::<models::issues::Issue>(super::issue(&base, &repo, &issue))
            .unwrap();
        serde_json::from_value::<models::issues::Comment>(super::comment(&st, &repo, &comment))
            .unwrap();
        serde_json::from_value::<models::Label>(super::label(&base, &repo, &label_model)).unwrap();
        serde_json::from_value::<models::Repository>(super::repository(&base, &repo)).unwrap();
        serde_json::from_value::<models::pulls::PullRequest>(super::pull(&base, &repo, &pull))
            .unwrap();
        serde_json::from_value::<models::Author>(super::user(&base, &FakeUser::bot("x[bot]")))
            .unwrap();
        serde_json::from_value::<models::App>(super::app(&st)).unwrap();
        let thread = FakeReviewComment {
            id: 11,
            pull: 2,
            review: Some(10),
            body: "rename this".into(),
            author: FakeUser::user("maria"),
            via_app: None,
            path: "calc.sh".into(),
            line: Some(3),
            start_line: Some(1),
            diff_hunk: "@@ -1 +1 @@".into(),
            in_reply_to: Some(9),
            created_at: 0,
            updated_at: 0,
        };
        serde_json::from_value::<models::pulls::Comment>(super::review_comment(
            &st, &repo, &thread,
        ))
        .unwrap();
        let review = FakeReview {
            id: 10,
            pull: 2,
            state: "CHANGES_REQUESTED".into(),
            body: "please".into(),
            author: FakeUser::user("maria"),
            submitted_at: 0,
        };
        serde_json::from_value::<models::pulls::Review>(super::review(&st, &repo, &review))
            .unwrap();
    }
}
