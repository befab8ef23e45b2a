//! The repository's `.github/closer.yml` as closer reads it for an event:
//! on the default branch, now (`read_config`), and the permission a user
//! needs to steer a run under way (`steering_minimum`: the stricter of the
//! run's own configuration and the current one).

use super::context::{CONFIG_PATH, parse_config};
use super::data::RunData;
use super::{Engine, EngineError};
use crate::config::ConfigErrors;
use crate::config::repo::RepoConfig;
use crate::config::repo_parse::commands_minimum;
use crate::events::Repo;
use crate::github::{FileFetch, InstallationClient};
use crate::model::{DEFAULT_TRIGGER_LABEL, IssueNumber, Permission, RepoName, Run};
use crate::store::runs;

/// The repository config as read for an event.
pub(super) struct ConfigRead {
    pub text: Option<String>,
    pub parsed: Result<RepoConfig, ConfigErrors>,
}

impl ConfigRead {
    pub(super) fn trigger_label(&self) -> &str {
        self.parsed
            .as_ref()
            .map_or(DEFAULT_TRIGGER_LABEL, |c| c.trigger_label.as_str())
    }
}

impl Engine {
    /// Reads and parses `.github/closer.yml` on the default branch.
    pub(super) async fn read_config(
        &self,
        client: &InstallationClient,
        repo: &Repo,
    ) -> Result<ConfigRead, EngineError> {
        let branch = repo.default_branch.as_deref();
        let text = config_text(client, &repo.name, branch).await?;
        let parsed = parse_config(text.as_deref(), &self.agents.names());
        Ok(ConfigRead { text, parsed })
    }

    /// The permission a user needs for a command, a request to the App, an
    /// assignment, an issue edit or the trigger label on `repo`'s issue
    /// `number`: the file's `commands.min_permission`. A file that does not
    /// parse never lowers it: what it still says is read on its own
    /// ([`commands_minimum`]), and the minimum of the issue's run, which
    /// read the file when it started, holds too (decision 227).
    pub(super) async fn commands_minimum(
        &self,
        config: &ConfigRead,
        repo: &RepoName,
        number: IssueNumber,
    ) -> Result<Permission, EngineError> {
        if let Ok(parsed) = &config.parsed {
            return Ok(parsed.commands.min_permission);
        }
        let current = commands_minimum(config.text.as_deref());
        let run = runs::by_issue(self.runs.store().pool(), repo, number).await?;
        let own = match run {
            Some(run) => commands_minimum(RunData::of(&run)?.config_text.as_deref()),
            None => Permission::None,
        };
        Ok(current.max(own))
    }

    /// The permission a user needs to steer `run` now: the stricter of
    /// `snapshot` (the run's own configuration, read when it started) and
    /// the repository's configuration on its default branch now, so that a
    /// minimum raised while the run works holds at once for its replies,
    /// reviews and review threads, as it does for commands. A current file
    /// that does not parse, or that GitHub will not give for a reason that
    /// does not pass (a transient one is an error: the job is tried
    /// again), leaves the run's own.
    pub(super) async fn steering_minimum(
        &self,
        client: &InstallationClient,
        run: &Run,
        snapshot: Permission,
    ) -> Result<Permission, EngineError> {
        let branch = run.default_branch.as_deref();
        let text = match config_text(client, &run.repository, branch).await {
            Ok(text) => text,
            Err(EngineError::GitHub(e)) if !e.is_transient() => {
                tracing::warn!(run = %run.id, error = %e,
                    "could not read the repository's configuration; the run's minimum holds");
                return Ok(snapshot);
            }
            Err(e) => return Err(e),
        };
        let current = parse_config(text.as_deref(), &self.agents.names())
            .map(|c| c.commands.min_permission)
            .unwrap_or(snapshot);
        Ok(current.max(snapshot))
    }
}

/// `.github/closer.yml` of `repo` on `branch` (`None`: the default branch,
/// asked of GitHub); `None` when there is no such file.
async fn config_text(
    client: &InstallationClient,
    repo: &RepoName,
    branch: Option<&str>,
) -> Result<Option<String>, EngineError> {
    let branch = match branch {
        Some(b) => b.to_owned(),
        None => client.get_repository(repo).await?.default_branch,
    };
    Ok(
        match client.get_file(repo, CONFIG_PATH, &branch, None).await? {
            FileFetch::Found { content, .. } => {
                Some(String::from_utf8_lossy(&content).into_owned())
            }
            FileFetch::NotFound | FileFetch::NotModified => None,
        },
    )
}
