//! The story tester's pull request side: reviews and review comments, a
//! conversation comment on the pull request, a push by a person to closer's
//! branch, the pull request closed, the issue assigned. Each changes the
//! fake GitHub (or the origin repository) first, then delivers what GitHub
//! would send, built from the real webhook payloads in
//! `tests/fixtures/github-webhooks/` with this story's values put in.

use closer::github::types::IssueNumber;
use serde_json::{Value, json};

use super::fake_github::json::time;
use super::fake_github::state::FakeUser;
use super::story::{REPO, Story, user_json};

/// A real payload of the fixtures, as JSON.
fn fixture(name: &str) -> Value {
    serde_json::from_slice(&super::fixture(name)).expect("fixtures are JSON")
}

impl Story {
    /// The pull request as webhook payloads show it, over the fixture's.
    pub fn pull_json(&self, number: IssueNumber, template: &Value) -> Value {
        let pull = self
            .github
            .pulls(&self.repo)
            .into_iter()
            .find(|p| p.number == number.0)
            .expect("the pull request");
        let mut v = template.clone();
        v["number"] = json!(pull.number);
        v["state"] = json!(pull.state);
        v["merged"] = json!(pull.merged);
        v["title"] = json!(pull.title);
        v["body"] = json!(pull.body);
        v["user"] = user_json(&pull.author);
        v["head"]["ref"] = json!(pull.head);
        v["head"]["sha"] = json!(self.origin.branch_head(&pull.head));
        v["head"]["repo"]["full_name"] = json!(REPO);
        v["base"]["ref"] = json!(pull.base);
        v["base"]["repo"]["full_name"] = json!(REPO);
        v
    }

    /// The one pull request of the story.
    pub fn the_pull(&self) -> IssueNumber {
        let pulls = self.github.pulls(&self.repo);
        assert_eq!(pulls.len(), 1, "one pull request: {pulls:#?}");
        IssueNumber(pulls[0].number)
    }

    /// `author` submits a review (`state`: `CHANGES_REQUESTED`,
    /// `COMMENTED`, `APPROVED`) with `body` and one thread per
    /// `(path, line, text)`; `pull_request_review.submitted` and one
    /// `pull_request_review_comment.created` per thread are delivered.
    /// Answers the threads' comment ids.
    pub async fn review_as(
        &mut self,
        pull: IssueNumber,
        author: &str,
        state: &str,
        body: &str,
        threads: &[(&str, u64, &str)],
    ) -> Vec<u64> {
        self.review_by(pull, FakeUser::user(author), state, body, threads)
            .await
    }

    /// The maintainer requests one change, in a thread on `path` at
    /// `line`, and the story runs until nothing is left to do. Answers the
    /// thread's first comment.
    pub async fn request_change(
        &mut self,
        pull: IssueNumber,
        path: &str,
        line: u64,
        text: &str,
    ) -> u64 {
        let ids = self
            .review_as(
                pull,
                super::story::MAINTAINER,
                "CHANGES_REQUESTED",
                "",
                &[(path, line, text)],
            )
            .await;
        self.idle().await;
        ids[0]
    }

    /// [`Story::review_as`] by any user (a bot, too).
    pub async fn review_by(
        &mut self,
        pull: IssueNumber,
        user: FakeUser,
        state: &str,
        body: &str,
        threads: &[(&str, u64, &str)],
    ) -> Vec<u64> {
        self.submit_review(pull, user, state, body, threads).await.1
    }

    /// [`Story::review_by`], answering the review's id too.
    pub async fn submit_review(
        &mut self,
        pull: IssueNumber,
        user: FakeUser,
        state: &str,
        body: &str,
        threads: &[(&str, u64, &str)],
    ) -> (u64, Vec<u64>) {
        let (review_id, ids) =
            self.github
                .review_pull(&self.repo, pull, user.clone(), state, body, threads);
        let mut payload = fixture("pull_request_review.submitted.2.json");
        payload["pull_request"] = self.pull_json(pull, &payload["pull_request"]);
        payload["review"]["id"] = json!(review_id);
        payload["review"]["state"] = json!(state.to_lowercase());
        payload["review"]["body"] = json!((!body.is_empty()).then_some(body));
        payload["review"]["user"] = user_json(&user);
        payload["sender"] = user_json(&user);
        self.deliver("pull_request_review", payload).await;
        for id in &ids {
            self.deliver_review_comment(pull, *id).await;
        }
        (review_id, ids)
    }

    /// `who` dismisses review `review` (`pull_request_review.dismissed`).
    pub async fn dismiss_review_as(&mut self, pull: IssueNumber, review: u64, who: &str) {
        let mut payload = fixture("pull_request_review.dismissed.json");
        payload["pull_request"] = self.pull_json(pull, &payload["pull_request"]);
        payload["review"]["id"] = json!(review);
        payload["sender"] = user_json(&FakeUser::user(who));
        self.deliver("pull_request_review", payload).await;
    }

    /// `author` replies in the review thread whose first comment is `root`
    /// (`pull_request_review_comment.created` is delivered). Answers the
    /// reply's id.
    pub async fn reply_in_thread_as(
        &mut self,
        pull: IssueNumber,
        root: u64,
        author: &str,
        body: &str,
    ) -> u64 {
        let id = self
            .github
            .reply_in_thread(&self.repo, root, FakeUser::user(author), body);
        self.deliver_review_comment(pull, id).await;
        id
    }

    /// `editor` changes the words of review comment `id`
    /// (`pull_request_review_comment.edited` is delivered, from them).
    pub async fn edit_review_comment_as(
        &mut self,
        pull: IssueNumber,
        id: u64,
        editor: &str,
        body: &str,
    ) {
        let from = self.github.edit_review_comment(&self.repo, id, body);
        let mut payload = self.review_comment_payload(pull, id);
        payload["action"] = json!("edited");
        payload["changes"] = json!({"body": {"from": from}});
        payload["sender"] = user_json(&FakeUser::user(editor));
        self.deliver("pull_request_review_comment", payload).await;
    }

    /// Delivers `pull_request_review_comment.created` for an existing
    /// review comment.
    pub async fn deliver_review_comment(&mut self, pull: IssueNumber, id: u64) {
        let payload = self.review_comment_payload(pull, id);
        self.deliver("pull_request_review_comment", payload).await;
    }

    /// `pull_request_review_comment.created` for an existing review
    /// comment, sent by its author.
    fn review_comment_payload(&self, pull: IssueNumber, id: u64) -> Value {
        let c = self.github.review_comment(&self.repo, id);
        let mut payload = fixture("pull_request_review_comment.created.2.json");
        payload["pull_request"] = self.pull_json(pull, &payload["pull_request"]);
        let comment = &mut payload["comment"];
        comment["id"] = json!(c.id);
        comment["body"] = json!(c.body);
        comment["user"] = user_json(&c.author);
        comment["path"] = json!(c.path);
        comment["line"] = json!(c.line);
        comment["original_line"] = json!(c.line);
        comment["start_line"] = json!(c.start_line);
        comment["diff_hunk"] = json!(c.diff_hunk);
        comment["pull_request_review_id"] = json!(c.review);
        comment["created_at"] = json!(time(c.created_at));
        comment["updated_at"] = json!(time(c.updated_at));
        if let Some(to) = c.in_reply_to {
            comment["in_reply_to_id"] = json!(to);
        }
        payload["sender"] = user_json(&c.author);
        payload
    }

    /// `author` comments in the pull request's conversation
    /// (`issue_comment.created` on the pull request); answers the
    /// comment's id.
    pub async fn comment_on_pull_as(&mut self, pull: IssueNumber, author: &str, body: &str) -> u64 {
        let user = FakeUser::user(author);
        let id = self.github.comment_as(&self.repo, pull, user.clone(), body);
        let payload = self.pull_comment_event("created", pull, id, body, &user);
        self.deliver("issue_comment", payload).await;
        id
    }

    /// `author` deletes their comment `id` in the pull request's
    /// conversation (`issue_comment.deleted`, with the text it had).
    pub async fn delete_pull_comment_as(&mut self, pull: IssueNumber, id: u64, author: &str) {
        let user = FakeUser::user(author);
        let body = self.github.delete_comment(&self.repo, id);
        let payload = self.pull_comment_event("deleted", pull, id, &body, &user);
        self.deliver("issue_comment", payload).await;
    }

    /// An `issue_comment` payload on the pull request `pull`: comment `id`
    /// by `user`, who also sent the event.
    fn pull_comment_event(
        &self,
        action: &str,
        pull: IssueNumber,
        id: u64,
        body: &str,
        user: &FakeUser,
    ) -> Value {
        json!({
            "action": action,
            "issue": {"number": pull.0, "title": "pull request", "body": null,
                      "user": user_json(&FakeUser::bot(&self.github.bot_login())),
                      "labels": [], "state": "open",
                      "pull_request": {"url": format!("{}/repos/{REPO}/pulls/{}", self.github.url(), pull.0)}},
            "comment": {"id": id, "body": body, "user": user_json(user), "performed_via_github_app": null},
            "sender": user_json(user),
        })
    }

    /// `author` pushes a commit to the pull request's branch, and no
    /// webhook arrives (yet). Answers the commit.
    pub fn push_quietly_as(&self, author: &str, path: &str, content: &str) -> String {
        let head = self.github.pulls(&self.repo)[0].head.clone();
        self.origin.push_to_branch(&head, author, path, content)
    }

    /// `author` pushes a commit to the pull request's branch;
    /// `pull_request.synchronize` is delivered. Answers the commit.
    pub async fn push_to_pull_as(
        &mut self,
        pull: IssueNumber,
        author: &str,
        path: &str,
        content: &str,
    ) -> String {
        let head = self.github.pulls(&self.repo)[0].head.clone();
        let sha = self.origin.push_to_branch(&head, author, path, content);
        self.deliver_synchronize(pull, author).await;
        sha
    }

    /// `author` resets the pull request's branch to `sha` with a forced
    /// push; `pull_request.synchronize` is delivered.
    pub async fn reset_pull_as(&mut self, pull: IssueNumber, author: &str, sha: &str) {
        let head = self.github.pulls(&self.repo)[0].head.clone();
        self.origin.force_branch(&head, sha);
        self.deliver_synchronize(pull, author).await;
    }

    /// `pull_request.synchronize` for the pull request's branch as it is,
    /// sent by `author`.
    async fn deliver_synchronize(&mut self, pull: IssueNumber, author: &str) {
        let mut payload = fixture("pull_request.synchronize.json");
        payload["pull_request"] = self.pull_json(pull, &payload["pull_request"]);
        payload["sender"] = user_json(&FakeUser::user(author));
        self.deliver("pull_request", payload).await;
    }

    /// A maintainer closes the pull request without merging it;
    /// `pull_request.closed` (`merged: false`) is delivered.
    pub async fn close_pull_as(&mut self, pull: IssueNumber, author: &str) {
        self.github.close_pull(&self.repo, pull);
        let mut payload = fixture("pull_request.closed.json");
        payload["pull_request"] = self.pull_json(pull, &payload["pull_request"]);
        payload["pull_request"]["merged"] = json!(false);
        payload["sender"] = user_json(&FakeUser::user(author));
        self.deliver("pull_request", payload).await;
    }

    /// A maintainer merges the pull request, and GitHub delivers what it
    /// would: `issues.closed` for each open issue the pull request closes
    /// by its `Closes #n` (sent by the maintainer), and
    /// `pull_request.closed` (`merged: true`).
    pub async fn merge_as(&mut self, pull: IssueNumber, author: &str) {
        let closed = self.github.merge_pull(&self.repo, pull);
        for n in closed {
            let payload = json!({
                "action": "closed",
                "issue": self.issue_json(n),
                "sender": user_json(&FakeUser::user(author)),
            });
            self.deliver("issues", payload).await;
        }
        let mut payload = fixture("pull_request.closed.json");
        payload["pull_request"] = self.pull_json(pull, &payload["pull_request"]);
        payload["pull_request"]["merged_at"] = json!("2026-11-27T09:00:00Z");
        payload["sender"] = user_json(&FakeUser::user(author));
        self.deliver("pull_request", payload).await;
    }

    /// `sender` takes `assignee` off the issue; `issues.unassigned` is
    /// delivered.
    pub async fn unassign_as(&mut self, number: IssueNumber, sender: &str, assignee: &FakeUser) {
        self.github.unassign(&self.repo, number, &assignee.login);
        let payload = json!({
            "action": "unassigned",
            "issue": self.issue_json(number),
            "assignee": user_json(assignee),
            "sender": user_json(&FakeUser::user(sender)),
        });
        self.deliver("issues", payload).await;
    }

    /// `sender` assigns the issue to `assignee`; `issues.assigned` is
    /// delivered (shaped as GitHub documents it: the issue, `assignee`,
    /// `sender`).
    pub async fn assign_as(&mut self, number: IssueNumber, sender: &str, assignee: &FakeUser) {
        self.github.assign(&self.repo, number, &assignee.login);
        let payload = json!({
            "action": "assigned",
            "issue": self.issue_json(number),
            "assignee": user_json(assignee),
            "sender": user_json(&FakeUser::user(sender)),
        });
        self.deliver("issues", payload).await;
    }
}
