//! Repository reads: the repository and its default branch, a file at a ref
//! (ETag-aware, so an unchanged config costs no rate limit), and a user's
//! permission (`role_name`).

use super::client::{InstallationClient, encode, encode_path, repo_path};
use super::decode;
use super::error::GitHubError;
use super::models::{FileFetch, Repository};
use super::transport::ApiRequest;
use super::types::{Permission, RepoName};

impl InstallationClient {
    /// GET /repos/{o}/{r}.
    pub async fn get_repository(&self, repo: &RepoName) -> Result<Repository, GitHubError> {
        let resp = self.send(ApiRequest::get(repo_path(repo))).await?;
        decode::repository(&resp.body)
    }

    /// GET /repos/{o}/{r}/contents/{path}?ref={git_ref}. With `etag` from an
    /// earlier `Found`, an unchanged file answers `NotModified` (304, which
    /// GitHub does not count against the rate limit).
    pub async fn get_file(
        &self,
        repo: &RepoName,
        path: &str,
        git_ref: &str,
        etag: Option<&str>,
    ) -> Result<FileFetch, GitHubError> {
        let url = format!(
            "{}/contents/{}?ref={}",
            repo_path(repo),
            encode_path(path),
            encode(git_ref)
        );
        let mut req = ApiRequest::get(url);
        req.if_none_match = etag.map(str::to_owned);
        let resp = match self.send(req).await {
            Ok(resp) => resp,
            Err(GitHubError::NotFound) => return Ok(FileFetch::NotFound),
            Err(e) => return Err(e),
        };
        if resp.status == 304 {
            return Ok(FileFetch::NotModified);
        }
        let etag = resp.header("etag").map(str::to_owned);
        let (content, sha) = decode::file(&resp.body)?;
        Ok(FileFetch::Found { content, etag, sha })
    }

    /// A user's permission on the repository from `role_name`, falling back
    /// to the legacy `permission` when `role_name` is missing or a custom
    /// role (an organisation's own role, which GitHub reports with its base
    /// permission in `permission`). A user GitHub does not know has `None`.
    pub async fn collaborator_permission(
        &self,
        repo: &RepoName,
        user: &str,
    ) -> Result<Permission, GitHubError> {
        let path = format!(
            "{}/collaborators/{}/permission",
            repo_path(repo),
            encode(user)
        );
        let resp = match self.send(ApiRequest::get(path)).await {
            Ok(resp) => resp,
            Err(GitHubError::NotFound) => return Ok(Permission::None),
            Err(e) => return Err(e),
        };
        decode::permission(&resp.body)
    }
}
