//! Pull requests: open one, find the one for a head branch, update it.
//! In dry run an opened pull request comes back with number 0.

use http::Method;
use serde_json::{Map, Value, json};

use super::client::{InstallationClient, encode, repo_path};
use super::decode;
use super::error::GitHubError;
use super::models::{NewPullRequest, PullEdit, PullRequest, PullState};
use super::transport::ApiRequest;
use super::types::{IssueNumber, RepoName};

impl InstallationClient {
    /// POST /pulls. After `MaybeApplied`, look it up with [`Self::find_pull_by_head`].
    pub async fn create_pull(
        &self,
        repo: &RepoName,
        pull: &NewPullRequest,
    ) -> Result<PullRequest, GitHubError> {
        let path = format!("{}/pulls", repo_path(repo));
        let body =
            json!({ "title": pull.title, "body": pull.body, "head": pull.head, "base": pull.base });
        match self
            .write(ApiRequest::new(Method::POST, path).with_body(body))
            .await?
        {
            Some(resp) => decode::pull(&resp.body),
            None => Ok(PullRequest {
                number: IssueNumber(0),
                author: None,
                head_ref: pull.head.clone(),
                head_sha: String::new(),
                base_ref: pull.base.clone(),
                html_url: String::new(),
                state: PullState::Open,
                merged: false,
            }),
        }
    }

    /// The newest pull request (open first, else closed) whose head is
    /// `branch` in this repository.
    pub async fn find_pull_by_head(
        &self,
        repo: &RepoName,
        branch: &str,
    ) -> Result<Option<PullRequest>, GitHubError> {
        let head = encode(&format!("{}:{branch}", repo.owner()));
        let path = format!(
            "{}/pulls?head={head}&state=all&per_page=100",
            repo_path(repo)
        );
        let resp = self.send(ApiRequest::get(path)).await?;
        let mut pulls = decode::pulls(&resp.body)?;
        pulls.retain(|p| p.head_ref == branch);
        let open = pulls.iter().position(|p| p.state == PullState::Open);
        Ok(match open {
            Some(i) => Some(pulls.swap_remove(i)),
            None => pulls.into_iter().next(),
        })
    }

    /// GET /pulls/{n}.
    pub async fn get_pull(
        &self,
        repo: &RepoName,
        number: IssueNumber,
    ) -> Result<PullRequest, GitHubError> {
        let path = format!("{}/pulls/{number}", repo_path(repo));
        let resp = self.send(ApiRequest::get(path)).await?;
        decode::pull(&resp.body)
    }

    /// PATCH /pulls/{n} with the fields that are set.
    pub async fn update_pull(
        &self,
        repo: &RepoName,
        number: IssueNumber,
        edit: &PullEdit,
    ) -> Result<(), GitHubError> {
        let path = format!("{}/pulls/{number}", repo_path(repo));
        let mut body = Map::new();
        if let Some(title) = &edit.title {
            body.insert("title".into(), json!(title));
        }
        if let Some(text) = &edit.body {
            body.insert("body".into(), json!(text));
        }
        if let Some(state) = edit.state {
            let state = match state {
                PullState::Open => "open",
                PullState::Closed => "closed",
            };
            body.insert("state".into(), json!(state));
        }
        let req = ApiRequest::new(Method::PATCH, path).with_body(Value::Object(body));
        self.write(req).await.map(|_| ())
    }
}
