//! The `delivery` job: read a stored delivery, type it, act on it, and record
//! what was done on the delivery row.
//!
//! A payload that cannot be typed is marked `failed` with the reason and not
//! retried (the same bytes will not parse better next time); a database error
//! is retried. Installation bookkeeping happens here, and so does stopping
//! the open runs of repositories closer loses its access to (the App
//! uninstalled or suspended, a repository removed from it or deleted:
//! `store/withdrawn.rs`); issue, comment, pull request, review, review
//! comment and repository events then go to the [`EventReactor`] it was
//! given (the engine, wired in `service.rs`), which it knows by that
//! interface only.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::Deserialize;

use super::{JobError, JobFuture, JobRunner};
use crate::events::{
    Event, EventKind, InstallationAction, RepositoriesAction, RepositoryAction, parse_event,
};
use crate::model::{DeliveryStatus, Named, RepoName, Withdrawal};
use crate::store::jobs::LeasedJob;
use crate::store::withdrawn::{self, Scope};
use crate::store::{Store, StoreError, deliveries, installations};

/// What acts on issue, comment, pull request and review events: returns a short
/// description of what was done, or the job error to settle with.
pub trait EventReactor: Send + Sync {
    fn on_event<'a>(
        &'a self,
        event: &'a Event,
    ) -> Pin<Box<dyn Future<Output = Result<String, JobError>> + Send + 'a>>;
}

#[derive(Deserialize)]
struct DeliveryJob {
    delivery_id: String,
}

/// Handles `delivery` jobs.
pub struct DeliveryRunner {
    store: Store,
    events: Option<Arc<dyn EventReactor>>,
}

impl DeliveryRunner {
    /// Installation bookkeeping only: issue, comment and pull request events
    /// are recorded, not acted on.
    pub fn new(store: Store) -> Self {
        Self {
            store,
            events: None,
        }
    }

    /// Hands issue, comment and pull request events to `events`.
    pub fn with_events(store: Store, events: Arc<dyn EventReactor>) -> Self {
        Self {
            store,
            events: Some(events),
        }
    }

    async fn process(&self, job: &LeasedJob) -> Result<(), JobError> {
        let payload: DeliveryJob = serde_json::from_str(&job.payload)
            .map_err(|e| JobError::Permanent(format!("bad delivery job payload: {e}")))?;
        let pool = self.store.pool();
        let delivery = deliveries::get(pool, &payload.delivery_id)
            .await
            .map_err(retry)?
            .ok_or_else(|| {
                JobError::Permanent(format!("delivery {} not found", payload.delivery_id))
            })?;
        if delivery.status != DeliveryStatus::Received {
            // Processed by an earlier attempt whose completion was lost.
            return Ok(());
        }
        let now = self.store.now_ms();
        let Some(kind) = EventKind::from_header(&delivery.event) else {
            deliveries::mark(
                pool,
                &delivery.delivery_id,
                DeliveryStatus::Ignored,
                "event not handled",
                now,
            )
            .await
            .map_err(retry)?;
            return Ok(());
        };
        // A delivery with a job is stored with its payload (decision 103).
        let Some(payload) = &delivery.payload else {
            return Err(JobError::Permanent(format!(
                "delivery {} was stored without its payload",
                delivery.delivery_id
            )));
        };
        let (status, outcome) = match parse_event(kind, payload) {
            Ok(event) => {
                let mut outcome = self.apply(&event).await.map_err(retry)?;
                if let Some(events) = &self.events
                    && matches!(
                        event,
                        Event::Issues { .. }
                            | Event::IssueComment { .. }
                            | Event::PullRequest { .. }
                            | Event::PullRequestReview { .. }
                            | Event::PullRequestReviewComment { .. }
                            | Event::Repository { .. }
                    )
                {
                    let done = events.on_event(&event).await?;
                    outcome = format!("{outcome}: {done}");
                }
                (DeliveryStatus::Processed, outcome)
            }
            Err(e) => {
                tracing::warn!(delivery = %delivery.delivery_id, error = %e, "delivery payload not understood");
                (DeliveryStatus::Failed, e.to_string())
            }
        };
        deliveries::mark(
            pool,
            &delivery.delivery_id,
            status,
            &outcome,
            self.store.now_ms(),
        )
        .await
        .map_err(retry)?;
        tracing::info!(delivery = %delivery.delivery_id, event = %delivery.event, status = status.as_str(), %outcome, "delivery handled");
        Ok(())
    }

    /// Acts on a typed event; returns a short description of what was done.
    async fn apply(&self, event: &Event) -> Result<String, StoreError> {
        match event {
            Event::Ping { zen, .. } => Ok(format!("ping: {}", zen.as_deref().unwrap_or(""))),
            Event::Installation { .. } => self.installation(event).await,
            Event::InstallationRepositories { .. } => self.installation_repositories(event).await,
            Event::Repository {
                action: RepositoryAction::Deleted,
                installation: Some(installation),
                repo,
                ..
            } => {
                let scope = Scope::Repository {
                    installation: *installation,
                    name: &repo.name,
                    id: repo.id,
                };
                let stopped = self.withdraw(scope, Withdrawal::Deleted).await?;
                Ok(format!("repository {} deleted{stopped}", repo.name))
            }
            other => Ok(describe(other)),
        }
    }

    /// Stops the open runs in `scope`, which closer can no longer reach
    /// (`store/withdrawn.rs`); answers what to add to the outcome.
    async fn withdraw(&self, scope: Scope<'_>, why: Withdrawal) -> Result<String, StoreError> {
        let pool = self.store.pool();
        let stopped = withdrawn::stop_runs(pool, scope, why, self.store.now_ms()).await?;
        if stopped.is_empty() {
            return Ok(String::new());
        }
        tracing::warn!(?scope, runs = ?stopped, reason = why.reason(), "open runs stopped: closer lost its access");
        Ok(format!("; {} open runs stopped", stopped.len()))
    }

    /// `installation`: the installation's row follows it.
    async fn installation(&self, event: &Event) -> Result<String, StoreError> {
        let Event::Installation {
            action,
            installation,
            account_login,
            account_type,
            repositories,
            ..
        } = event
        else {
            return Ok(describe(event));
        };
        let (pool, now, id) = (self.store.pool(), self.store.now_ms(), installation.0);
        let upsert = || installations::upsert(pool, id, account_login, account_type, now);
        let all = Scope::Installation(*installation);
        let stopped = match action {
            InstallationAction::Created | InstallationAction::NewPermissionsAccepted => {
                upsert().await?;
                installations::add_repositories(pool, id, repositories).await?;
                String::new()
            }
            InstallationAction::Deleted => {
                installations::delete(pool, id).await?;
                self.withdraw(all, Withdrawal::Uninstalled).await?
            }
            InstallationAction::Suspend => {
                upsert().await?;
                installations::set_suspended(pool, id, Some(now), now).await?;
                self.withdraw(all, Withdrawal::Suspended).await?
            }
            InstallationAction::Unsuspend => {
                upsert().await?;
                installations::set_suspended(pool, id, None, now).await?;
                String::new()
            }
            InstallationAction::Other(_) => String::new(),
        };
        Ok(format!("installation {id}: {action:?}{stopped}"))
    }

    /// `installation_repositories`: repositories added to or removed from
    /// the installation.
    async fn installation_repositories(&self, event: &Event) -> Result<String, StoreError> {
        let Event::InstallationRepositories {
            action,
            installation,
            added,
            removed,
            ..
        } = event
        else {
            return Ok(describe(event));
        };
        if *action != RepositoriesAction::Added && *action != RepositoriesAction::Removed {
            return Ok(format!("installation {installation}: {action:?} ignored"));
        }
        let pool = self.store.pool();
        installations::add_repositories(pool, installation.0, added).await?;
        let names: Vec<String> = removed.iter().map(|r| r.name.clone()).collect();
        installations::remove_repositories(pool, installation.0, &names).await?;
        let mut stopped = String::new();
        for repo in removed {
            let Some(name) = RepoName::parse(&repo.name) else {
                continue;
            };
            let scope = Scope::Repository {
                installation: *installation,
                name: &name,
                id: repo.id,
            };
            stopped += &self.withdraw(scope, Withdrawal::Removed).await?;
        }
        Ok(format!(
            "installation {installation}: +{} -{} repositories{stopped}",
            added.len(),
            removed.len()
        ))
    }
}

/// A short description of an event that needs no bookkeeping here.
fn describe(event: &Event) -> String {
    match event {
        Event::Issues {
            action,
            repo,
            issue,
            ..
        } => {
            format!("issues {action:?} on {}#{}", repo.name, issue.number)
        }
        Event::IssueComment {
            action,
            repo,
            issue,
            ..
        } => {
            format!("issue_comment {action:?} on {}#{}", repo.name, issue.number)
        }
        Event::PullRequest {
            action, repo, pull, ..
        } => {
            format!("pull_request {action:?} on {}#{}", repo.name, pull.number)
        }
        Event::PullRequestReview {
            action, repo, pull, ..
        } => {
            format!(
                "pull_request_review {action:?} on {}#{}",
                repo.name, pull.number
            )
        }
        Event::PullRequestReviewComment {
            action, repo, pull, ..
        } => format!(
            "pull_request_review_comment {action:?} on {}#{}",
            repo.name, pull.number
        ),
        Event::Ping { .. } => "ping".to_owned(),
        Event::Repository { action, repo, .. } => {
            format!("repository {} {}", action.as_str(), repo.name)
        }
        Event::Installation { installation, .. }
        | Event::InstallationRepositories { installation, .. } => {
            format!("installation {installation}")
        }
    }
}

fn retry(e: StoreError) -> JobError {
    JobError::Retry(e.to_string())
}

impl JobRunner for DeliveryRunner {
    fn run<'a>(&'a self, job: &'a LeasedJob) -> JobFuture<'a> {
        Box::pin(self.process(job))
    }
}
