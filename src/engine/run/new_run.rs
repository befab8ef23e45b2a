//! Making a run for an issue a trigger asked for (the label, an
//! assignment, `/closer run`, a request to the App), or restarting an ended
//! one (`/closer retry`): the run's row and data, its status comment and
//! its first step. The events that call it are in `triggers.rs` and
//! `commands.rs`.

use std::sync::Arc;

use super::config_read::ConfigRead;
use super::context::CONFIG_PATH;
use super::data::RunData;
use super::triggers::{Thread, digest};
use super::{Engine, EngineError, Step};
use crate::comment;
use crate::config::repo::RepoConfig;
use crate::events::IssueRef;
use crate::github::{InstallationClient, PullState};
use crate::model::{IssueNumber, RepoName, Run, RunId, RunState, Stage, issue_branch};
use crate::store::{replaced, runs};

impl Engine {
    /// Starts a run for the issue, or restarts an ended one (`restart`: a
    /// command asked for it). An invalid config gets one comment and no run.
    pub(super) async fn trigger(
        &self,
        client: &Arc<InstallationClient>,
        thread: &Thread<'_>,
        config: ConfigRead,
        restart: bool,
    ) -> Result<String, EngineError> {
        let parsed = match config.parsed {
            Ok(c) => c,
            Err(errors) => {
                let body = comment::invalid_config_comment(CONFIG_PATH, &errors.to_string());
                // Not repeated while the text stays the same.
                let key = format!("text:{}", digest(&body));
                let (repo, number) = (&thread.repo.name, thread.issue.number);
                self.status
                    .post_once_marked(client, repo, number, &key, &body)
                    .await?;
                return Ok("invalid repository config: no run".to_owned());
            }
        };
        // A run works on an open issue (reconciliation stops one whose issue
        // is closed): a command or an assignment on a closed issue (closed
        // by closer when its run was done, or by a person) opens it again
        // for the work asked for.
        if restart && !thread.issue.open {
            client
                .reopen_issue(&thread.repo.name, thread.issue.number)
                .await?;
        }
        let data = issue_data(thread.issue, config.text, !restart);
        let fresh = self.fresh_run(thread, &parsed, &data);
        let (run, created) = runs::insert_or_get(self.runs.store().pool(), &fresh).await?;
        let mut run = match self.queue_start(client, run, created).await? {
            Ok(queued) => return Ok(queued),
            Err(run) => run,
        };
        if !restart || !run.state.is_final() {
            return Ok(format!("run {} already {}", run.id, run.state));
        }
        let mut restarted = restarted_data(RunData::of(&run)?, data, run.iteration);
        restarted.restarted_at = Some(self.runs.store().now_ms());
        let (kept, merged) = kept_pull(client, &thread.repo.name, run.pull_request).await?;
        run.pull_request = kept;
        // Its work is on the default branch now: the new life starts from
        // there, not from the old base and branch (decision 243), and does
        // not follow the head GitHub merged (decision 249).
        if let Some(head) = merged {
            restarted.afresh = true;
            restarted.after_merge = true;
            restarted.branch_head = None;
            restarted.merged_head = Some(head);
            run.base_commit = None;
        }
        // One kept open is worked on as a review round: its open threads are
        // in the prompts and answered, and what is asked on it while the run
        // works gets a round after it (an earlier round's carried threads
        // went with the earlier life's data).
        restarted.review_round = run.pull_request.is_some();
        run.stage = Stage::Normal;
        run.state = RunState::Queued;
        run.outcome = None;
        run.max_iterations = run.iteration + fresh.max_iterations;
        run.completion_type = fresh.completion_type;
        run.installation_id = fresh.installation_id;
        run.clone_url = fresh.clone_url.or(run.clone_url);
        run.default_branch = fresh.default_branch.or(run.default_branch);
        run.data = restarted.to_json();
        // A run stored without the id takes this repository's (an event
        // under the name with another id set it aside first).
        if let (None, Some(id)) = (run.repository_id, thread.repo.id) {
            replaced::adopt_id(self.runs.store().pool(), &run.id, id).await?;
            run.repository_id = Some(id);
        }
        self.runs.save_restart(&mut run).await?;
        self.runs.enqueue(&run.id, Step::Start).await?;
        Ok(format!("run {} restarted", run.id))
    }

    /// Queues the `start` of a run just created, or of one still queued;
    /// gives any other run back (`Err`).
    async fn queue_start(
        &self,
        client: &Arc<InstallationClient>,
        run: Run,
        created: bool,
    ) -> Result<Result<String, Run>, EngineError> {
        let unshown = run.state == RunState::Queued && run.status_comment_id.is_none();
        if created || unshown {
            // The status comment is created here, in the delivery job (keyed
            // by the issue), so a stop delivered meanwhile always finds it.
            let id = run.id.clone();
            let names = self.agents.names();
            let mut ctx = super::RunContext::load_lenient(run, client.clone(), &names)?;
            // Safe to send back: done again, the run is found and queued.
            super::status::sending_back(self.status.publish(&mut ctx)).await?;
            self.runs.enqueue(&id, Step::Start).await?;
            return Ok(Ok(format!("run {id} queued")));
        }
        if run.state == RunState::Queued {
            // Shown already, and its `start` may be at work (the clone and
            // the baseline take minutes) in a job this one does not wait
            // for: a save of the run read here would write it back as it
            // was (decision 232). Its step is queued, if none is.
            self.runs.enqueue_unless_live(&run.id, Step::Start).await?;
            return Ok(Ok(format!("run {} already queued", run.id)));
        }
        Ok(Err(run))
    }

    /// A new run of the thread's issue, queued.
    fn fresh_run(&self, thread: &Thread<'_>, config: &RepoConfig, data: &RunData) -> Run {
        let now = self.runs.store().now_ms();
        Run {
            id: RunId::generate(),
            installation_id: thread.installation,
            repository: thread.repo.name.clone(),
            repository_id: thread.repo.id,
            issue_number: thread.issue.number,
            state: RunState::Queued,
            phase: crate::model::Phase::Preparation,
            completion_type: config.completion.kind,
            task_type: None,
            stage: Stage::Normal,
            iteration: 0,
            max_iterations: config.completion.max_iterations,
            branch: issue_branch(thread.issue.number),
            base_commit: None,
            clone_url: thread.repo.clone_url.clone(),
            default_branch: thread.repo.default_branch.clone(),
            pull_request: None,
            status_comment_id: None,
            tokens_used: 0,
            cost_usd: 0.0,
            outcome: None,
            data: data.to_json(),
            created_at: now,
            updated_at: now,
            generation: 0,
        }
    }
}

/// The run data of a new (or restarted) run: the issue as the trigger saw it.
fn issue_data(issue: &IssueRef, config_text: Option<String>, by_label: bool) -> RunData {
    RunData {
        config_text,
        issue_title: issue.title.clone(),
        issue_body: issue.body.clone(),
        issue_author: issue.author.login.clone(),
        issue_labels: issue.labels.clone(),
        issue_updated_at: issue.updated_at.clone(),
        by_label,
        ..RunData::default()
    }
}

/// The pull request a restarted run keeps: its open one. One that ended
/// (merged, or closed unmerged) stays so: a restart opens a new one for its
/// work, whatever ended the run. The second answer: the one it had was
/// merged.
async fn kept_pull(
    client: &InstallationClient,
    repo: &RepoName,
    pull: Option<IssueNumber>,
) -> Result<(Option<IssueNumber>, Option<String>), EngineError> {
    let Some(number) = pull else {
        return Ok((None, None));
    };
    let pull = client.get_pull(repo, number).await?;
    let open = pull.state == PullState::Open;
    Ok((open.then_some(number), pull.merged.then_some(pull.head_sha)))
}

/// A restarted run's data: the issue's `fresh` data, with what the run's
/// earlier life (`old`, at `iteration`) carries over.
fn restarted_data(old: RunData, fresh: RunData, iteration: u32) -> RunData {
    RunData {
        convergence: old
            .convergence
            .restarted(iteration, "restarted by a maintainer"),
        phase_label: old.phase_label,
        failed_label: old.failed_label,
        awaiting_label: old.awaiting_label,
        // The branch as last seen on GitHub: a retry continues from it
        // (people's commits included) and pushes with a lease on it.
        branch_head: old.branch_head,
        // Work an earlier life kept for judging, and counted, is judged by
        // this one without being counted again.
        usage_counted: old.usage_counted,
        // A review step the earlier life's last round took, retried late,
        // stays covered (ids only grow: no step of this life is).
        round_covers: old.round_covers,
        // A life that ended before its `start` made the worktree afresh
        // leaves that to the next (decision 243).
        afresh: old.afresh,
        // Still the merged branch's head, if the branch is left as it was.
        merged_head: old.merged_head,
        // Its worktree (a stopped run's commits not pushed) is still there.
        workspace: old.workspace,
        ..fresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restart_carries_what_the_earlier_life_settled_and_takes_the_rest_fresh() {
        let old = RunData {
            branch_head: Some("abc".into()),
            usage_counted: Some(3),
            round_covers: Some(41),
            agent_session: Some("old-session".into()),
            issue_title: "old title".into(),
            afresh: true,
            merged_head: Some("def".into()),
            ..RunData::default()
        };
        let fresh = RunData {
            issue_title: "new title".into(),
            ..RunData::default()
        };
        let data = restarted_data(old, fresh, 3);
        assert_eq!(data.branch_head.as_deref(), Some("abc"));
        assert_eq!(
            data.usage_counted,
            Some(3),
            "kept work is not counted twice"
        );
        assert_eq!(
            data.round_covers,
            Some(41),
            "the last round's steps stay covered"
        );
        assert_eq!(data.agent_session, None, "a fresh session");
        assert_eq!(data.issue_title, "new title");
        assert!(data.afresh, "a worktree still to make afresh stays so");
        assert_eq!(
            data.merged_head.as_deref(),
            Some("def"),
            "still not followed"
        );
    }
}
