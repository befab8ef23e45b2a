//! Issue operations: read an issue, edit it, close it with a reason.

use http::Method;
use serde_json::{Map, Value, json};

use super::client::{InstallationClient, repo_path};
use super::decode;
use super::error::GitHubError;
use super::models::{Issue, IssueEdit, IssueState, StateReason};
use super::transport::ApiRequest;
use super::types::{IssueNumber, RepoName};

impl InstallationClient {
    /// GET /repos/{o}/{r}/issues/{n}.
    pub async fn get_issue(
        &self,
        repo: &RepoName,
        number: IssueNumber,
    ) -> Result<Issue, GitHubError> {
        let path = format!("{}/issues/{number}", repo_path(repo));
        let resp = self.send(ApiRequest::get(path)).await?;
        decode::issue(&resp.body)
    }

    /// PATCH /repos/{o}/{r}/issues/{n} with the fields that are set.
    pub async fn edit_issue(
        &self,
        repo: &RepoName,
        number: IssueNumber,
        edit: &IssueEdit,
    ) -> Result<(), GitHubError> {
        let path = format!("{}/issues/{number}", repo_path(repo));
        let req = ApiRequest::new(Method::PATCH, path).with_body(edit_body(edit));
        self.write(req).await.map(|_| ())
    }

    /// Closes an issue with `state_reason` (`completed`, `not_planned`, ...).
    pub async fn close_issue(
        &self,
        repo: &RepoName,
        number: IssueNumber,
        reason: StateReason,
    ) -> Result<(), GitHubError> {
        let edit = IssueEdit {
            state: Some(IssueState::Closed),
            state_reason: Some(reason),
            ..IssueEdit::default()
        };
        self.edit_issue(repo, number, &edit).await
    }
}

fn edit_body(edit: &IssueEdit) -> Value {
    let mut body = Map::new();
    if let Some(title) = &edit.title {
        body.insert("title".into(), json!(title));
    }
    if let Some(text) = &edit.body {
        body.insert("body".into(), json!(text));
    }
    if let Some(state) = edit.state {
        body.insert("state".into(), json!(state.as_str()));
    }
    if let Some(reason) = edit.state_reason {
        body.insert("state_reason".into(), json!(reason.as_str()));
    }
    Value::Object(body)
}
