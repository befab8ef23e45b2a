//! A repository renamed, or moved to another owner: its runs follow it.
//! GitHub answers the old name with redirects for a while, but deliveries
//! come under the new name (and find a run by it), and an installation
//! token is minted for a repository by its name now. So closer's runs of
//! the repository, ended ones too (a `/closer retry` finds them), and the
//! installation's record of its repositories, take the new name, once
//! GitHub confirms that the old name leads to it: a replayed delivery of an
//! older rename changes nothing. From a `repository` event, or found by
//! reconciliation when that event was missed (`reconcile.rs`). Only the
//! runs of the repository GitHub answers for (by its id), and those stored
//! without an id, follow: a run of another repository that once had the
//! name is not handed over (`store/replaced.rs`).

use super::{Engine, EngineError};
use crate::events::Repo;
use crate::github::InstallationClient;
use crate::model::{InstallationId, RepoName};
use crate::store::replaced::{self, Holder};
use crate::store::{installations, runs};

impl Engine {
    /// `repository.renamed` or `.transferred`: `repo` was `previous`.
    pub(super) async fn on_repository_moved(
        &self,
        installation: InstallationId,
        repo: &Repo,
        previous: Option<&RepoName>,
    ) -> Result<String, EngineError> {
        let Some(old) = previous else {
            return Ok("repository event without its earlier name".to_owned());
        };
        let client = self.github.client(installation).await?;
        Ok(
            match self.follow_rename(&client, installation, old).await? {
                Some(now) => format!("{old} is {now} now: its runs follow"),
                None => format!("{old} does not lead to {}: nothing renamed", repo.name),
            },
        )
    }

    /// Gives the runs of `old` the name GitHub answers `old` with now, when
    /// that is another name (GitHub follows a renamed or moved repository's
    /// old name to it), and `installation` (the one that asked, which
    /// reaches the repository now); `None` when it is not, or the old name
    /// leads nowhere.
    pub(super) async fn follow_rename(
        &self,
        client: &InstallationClient,
        installation: InstallationId,
        old: &RepoName,
    ) -> Result<Option<RepoName>, EngineError> {
        let (now, id, url) = match client.get_repository(old).await {
            Ok(repo) => (repo.full_name, repo.id, repo.clone_url),
            Err(e) if e.is_gone() => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        // Exactly: runs are found by their name as written, so a change
        // of case is a rename too.
        if now == *old {
            return Ok(None);
        }
        let store = self.runs.store();
        let pool = store.pool();
        // GitHub says `now` is repository `id`'s name: runs of another
        // repository stored under it would keep this one's from it.
        let holder = Holder {
            name: &now,
            id,
            created_at: None,
        };
        replaced::set_aside(pool, holder, store.now_ms()).await?;
        let renamed = runs::rename_repository(pool, old, &now, id, &url, installation).await?;
        let (from, to) = (old.to_string(), now.to_string());
        installations::rename_repository(pool, installation.0, &from, &to).await?;
        tracing::info!(%old, %now, runs = renamed, "a repository was renamed: its runs follow");
        Ok(Some(now))
    }
}
