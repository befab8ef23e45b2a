//! Repository prompt overrides read through the GitHub client: a file of one
//! repository at one ref (the default branch), with the ETag passed through
//! so an unchanged override costs a `304`. It only reads, and turns every
//! GitHub failure into a [`PromptError::Source`] naming the path.

use std::sync::Arc;

use crate::github::types::RepoName;
use crate::github::{FileFetch, InstallationClient};
use crate::prompts::{PromptError, PromptSource, SourceFile};

/// One repository at one ref, as a [`PromptSource`].
#[derive(Debug, Clone)]
pub struct GitHubPromptSource {
    client: Arc<InstallationClient>,
    repo: RepoName,
    git_ref: String,
}

impl GitHubPromptSource {
    /// Reads `repo` at `git_ref` (normally its default branch).
    pub fn new(client: Arc<InstallationClient>, repo: RepoName, git_ref: &str) -> Self {
        Self {
            client,
            repo,
            git_ref: git_ref.to_owned(),
        }
    }
}

impl PromptSource for GitHubPromptSource {
    async fn read(&self, path: &str, etag: Option<&str>) -> Result<SourceFile, PromptError> {
        let fetched = self
            .client
            .get_file(&self.repo, path, &self.git_ref, etag)
            .await
            .map_err(|e| PromptError::Source {
                path: path.to_owned(),
                message: e.to_string(),
            })?;
        Ok(match fetched {
            FileFetch::Found { content, etag, .. } => SourceFile::Found {
                text: String::from_utf8(content).map_err(|_| PromptError::Source {
                    path: path.to_owned(),
                    message: "the file is not UTF-8".to_owned(),
                })?,
                etag,
            },
            FileFetch::NotModified => SourceFile::NotModified,
            FileFetch::NotFound => SourceFile::NotFound,
        })
    }
}
