//! Labels: add to / remove from an issue, create repository labels with a
//! colour, list a repository's labels (every page). Removing an absent label and creating an existing one are not
//! errors: both leave the repository as the caller wants it.

use http::Method;
use serde_json::json;

use super::client::{InstallationClient, encode, repo_path};
use super::decode;
use super::error::GitHubError;
use super::models::{Label, LabelCreated};
use super::transport::ApiRequest;
use super::types::{IssueNumber, RepoName};

/// 5,000 labels: far past any repository closer works in.
const MAX_LABEL_PAGES: usize = 50;

impl InstallationClient {
    /// POST /issues/{n}/labels: adds (never replaces) labels. GitHub creates
    /// unknown labels with a default colour; call [`Self::create_label`] first.
    pub async fn add_labels(
        &self,
        repo: &RepoName,
        number: IssueNumber,
        labels: &[&str],
    ) -> Result<(), GitHubError> {
        let path = format!("{}/issues/{number}/labels", repo_path(repo));
        // Adding a label the issue already has changes nothing.
        let req = ApiRequest::new(Method::POST, path)
            .with_body(json!({ "labels": labels }))
            .repeatable();
        self.write(req).await.map(|_| ())
    }

    /// DELETE /issues/{n}/labels/{name}; a label that is not there is fine.
    pub async fn remove_label(
        &self,
        repo: &RepoName,
        number: IssueNumber,
        name: &str,
    ) -> Result<(), GitHubError> {
        let path = format!(
            "{}/issues/{number}/labels/{}",
            repo_path(repo),
            encode(name)
        );
        match self.write(ApiRequest::new(Method::DELETE, path)).await {
            Ok(_) | Err(GitHubError::NotFound) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// POST /labels with a colour (six hex digits) and description.
    pub async fn create_label(
        &self,
        repo: &RepoName,
        label: &Label,
    ) -> Result<LabelCreated, GitHubError> {
        let path = format!("{}/labels", repo_path(repo));
        let mut body = json!({ "name": label.name, "color": label.color.trim_start_matches('#') });
        if let Some(description) = &label.description {
            body["description"] = json!(description);
        }
        match self
            // A second attempt answers `already_exists`, handled below.
            .write(
                ApiRequest::new(Method::POST, path)
                    .with_body(body)
                    .repeatable(),
            )
            .await
        {
            Ok(Some(resp)) => Ok(LabelCreated::Created(decode::label(&resp.body)?)),
            Ok(None) => Ok(LabelCreated::Created(label.clone())),
            Err(e) if e.has_code("already_exists") => Ok(LabelCreated::AlreadyExists),
            Err(e) => Err(e),
        }
    }

    /// The repository's labels, page by page while the `Link` header names
    /// a next one (at most [`MAX_LABEL_PAGES`] pages of 100).
    ///
    /// Each page is asked for by number on the repository's own path, not
    /// at the URL the `Link` gives: GitHub names it by repository id
    /// (`/repositories/{id}/labels?page=2`), which the least-privilege
    /// token scoping (`scope.rs`) cannot tie to the repository, so it would
    /// take an installation-wide token for a read.
    pub async fn list_repo_labels(&self, repo: &RepoName) -> Result<Vec<Label>, GitHubError> {
        let mut all = Vec::new();
        for page in 1..=MAX_LABEL_PAGES {
            let path = format!("{}/labels?per_page=100&page={page}", repo_path(repo));
            let resp = self.send(ApiRequest::get(path)).await?;
            all.extend(decode::labels(&resp.body)?);
            if decode::next_page(&resp.headers).is_none() {
                break;
            }
        }
        Ok(all)
    }
}
