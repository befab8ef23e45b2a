//! Issue comments and reactions: list (all pages), create, edit, react.
//! In dry run a created comment comes back with id 0.

use http::Method;
use serde_json::json;

use super::client::{InstallationClient, repo_path};
use super::decode;
use super::error::GitHubError;
use super::models::{Comment, CommentId, Reaction};
use super::transport::ApiRequest;
use super::types::{IssueNumber, RepoName};

/// GitHub's largest page.
const PER_PAGE: usize = 100;
/// 10,000 comments: far past any issue closer works on.
const MAX_PAGES: u32 = 100;

impl InstallationClient {
    /// Every comment on an issue, oldest first.
    pub async fn list_comments(
        &self,
        repo: &RepoName,
        number: IssueNumber,
    ) -> Result<Vec<Comment>, GitHubError> {
        let mut all = Vec::new();
        for page in 1..=MAX_PAGES {
            let path = format!(
                "{}/issues/{number}/comments?per_page={PER_PAGE}&page={page}",
                repo_path(repo)
            );
            let resp = self.send(ApiRequest::get(path)).await?;
            let batch = decode::comments(&resp.body)?;
            let last = batch.len() < PER_PAGE;
            all.extend(batch);
            if last {
                break;
            }
        }
        Ok(all)
    }

    /// POST a comment. Not repeated after a network error once sent, nor
    /// after a 5xx: that gives `MaybeApplied`, and the caller looks for its
    /// marker.
    pub async fn create_comment(
        &self,
        repo: &RepoName,
        number: IssueNumber,
        body: &str,
    ) -> Result<Comment, GitHubError> {
        let path = format!("{}/issues/{number}/comments", repo_path(repo));
        let req = ApiRequest::new(Method::POST, path).with_body(json!({ "body": body }));
        match self.write(req).await? {
            Some(resp) => decode::comment(&resp.body),
            None => Ok(self.dry_run_comment(CommentId(0), body)),
        }
    }

    /// PATCH a comment's body.
    pub async fn edit_comment(
        &self,
        repo: &RepoName,
        id: CommentId,
        body: &str,
    ) -> Result<Comment, GitHubError> {
        let path = format!("{}/issues/comments/{id}", repo_path(repo));
        let req = ApiRequest::new(Method::PATCH, path).with_body(json!({ "body": body }));
        match self.write(req).await? {
            Some(resp) => decode::comment(&resp.body),
            None => Ok(self.dry_run_comment(id, body)),
        }
    }

    /// React to a comment (e.g. 👀 on a command). Reacting twice is a no-op on GitHub.
    pub async fn add_comment_reaction(
        &self,
        repo: &RepoName,
        id: CommentId,
        reaction: Reaction,
    ) -> Result<(), GitHubError> {
        let path = format!("{}/issues/comments/{id}/reactions", repo_path(repo));
        self.react(path, reaction).await
    }

    /// React to an issue's own body.
    pub async fn add_issue_reaction(
        &self,
        repo: &RepoName,
        number: IssueNumber,
        reaction: Reaction,
    ) -> Result<(), GitHubError> {
        let path = format!("{}/issues/{number}/reactions", repo_path(repo));
        self.react(path, reaction).await
    }

    async fn react(&self, path: String, reaction: Reaction) -> Result<(), GitHubError> {
        // GitHub answers 200 with the existing reaction when it is there.
        let req = ApiRequest::new(Method::POST, path)
            .with_body(json!({ "content": reaction.as_str() }))
            .repeatable();
        self.write(req).await.map(|_| ())
    }

    /// What a dry-run write answers: the comment as it would read.
    fn dry_run_comment(&self, id: CommentId, body: &str) -> Comment {
        Comment {
            id,
            body: body.to_owned(),
            author: "dry-run[bot]".to_owned(),
            author_is_bot: true,
            performed_via_app_id: self.app_id().map(|id| id as i64),
            html_url: String::new(),
        }
    }
}
