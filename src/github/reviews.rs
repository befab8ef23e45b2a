//! Pull request review comments: every comment on a pull request's diff
//! (all pages, oldest first), and a reply in a thread
//! (`POST /pulls/{n}/comments/{id}/replies`). In dry run a reply comes back
//! with id 0.

use http::Method;
use serde_json::json;

use super::client::{InstallationClient, repo_path};
use super::decode;
use super::error::GitHubError;
use super::models::{Actor, ReviewComment};
use super::transport::ApiRequest;
use super::types::{IssueNumber, RepoName};

/// GitHub's largest page.
const PER_PAGE: usize = 100;
/// 10,000 review comments: far past any pull request closer opens.
const MAX_PAGES: u32 = 100;

impl InstallationClient {
    /// `GET /pulls/{n}/comments`: every review comment, oldest first.
    pub async fn list_review_comments(
        &self,
        repo: &RepoName,
        pull: IssueNumber,
    ) -> Result<Vec<ReviewComment>, GitHubError> {
        let mut all = Vec::new();
        for page in 1..=MAX_PAGES {
            let path = format!(
                "{}/pulls/{pull}/comments?per_page={PER_PAGE}&page={page}",
                repo_path(repo)
            );
            let resp = self.send(ApiRequest::get(path)).await?;
            let batch = decode::review_comments(&resp.body)?;
            let last = batch.len() < PER_PAGE;
            all.extend(batch);
            if last {
                break;
            }
        }
        Ok(all)
    }

    /// Replies in the thread of review comment `to` (a thread's first
    /// comment; GitHub refuses a reply to a reply). Not repeated after a
    /// 5xx: the caller looks for its marker.
    pub async fn reply_to_review_comment(
        &self,
        repo: &RepoName,
        pull: IssueNumber,
        to: u64,
        body: &str,
    ) -> Result<ReviewComment, GitHubError> {
        let path = format!("{}/pulls/{pull}/comments/{to}/replies", repo_path(repo));
        let req = ApiRequest::new(Method::POST, path).with_body(json!({ "body": body }));
        match self.write(req).await? {
            Some(resp) => decode::review_comment(&resp.body),
            None => Ok(ReviewComment {
                id: 0,
                body: body.to_owned(),
                author: Actor {
                    login: "dry-run[bot]".to_owned(),
                    is_bot: true,
                },
                performed_via_app_id: self.app_id().map(|id| id as i64),
                path: String::new(),
                line: None,
                start_line: None,
                diff_hunk: String::new(),
                in_reply_to: Some(to),
                review_id: None,
                edited: false,
            }),
        }
    }

    /// Reopens a closed issue.
    pub async fn reopen_issue(
        &self,
        repo: &RepoName,
        number: IssueNumber,
    ) -> Result<(), GitHubError> {
        let edit = super::models::IssueEdit {
            state: Some(super::models::IssueState::Open),
            ..super::models::IssueEdit::default()
        };
        self.edit_issue(repo, number, &edit).await
    }
}
