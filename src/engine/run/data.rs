//! The engine's own JSON in `runs.data` and `iterations.judgment`: what a run
//! needs between steps (the config text, the issue as the trigger saw it,
//! the baseline, the convergence state, which labels and one-off comments are
//! already on GitHub). JSON that does not parse is an error, never a panic
//! and never a silent default; a field added later reads as its default in
//! data written before it.

use serde::{Deserialize, Serialize};

use crate::agent::sandbox::Worktree;
use crate::engine::baseline::Baseline;
use crate::engine::convergence::ConvergenceState;
use crate::engine::handlers::IterationSummary;
use crate::engine::judge::Judgment;
use crate::engine::verify::IterationVerification;
use crate::model::{Phase, RunState};
use crate::store::messages::MessageRow;

/// What a run carries between steps.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RunData {
    /// `.github/closer.yml` as read when the run was triggered (`None`: absent).
    pub config_text: Option<String>,
    pub issue_title: String,
    pub issue_body: String,
    pub issue_author: String,
    pub issue_labels: Vec<String>,
    /// Started by the trigger label (not a command): removing the label stops it.
    pub by_label: bool,
    /// When GitHub last changed the issue as the title and body above show
    /// it (`updated_at` of the event they were taken from): an edit older
    /// than this is not taken (`issue_edit.rs`).
    pub issue_updated_at: Option<String>,
    pub baseline: Option<Baseline>,
    pub convergence: ConvergenceState,
    pub worktree: Option<Worktree>,
    /// The phase whose `phase:*` label closer put on the issue.
    #[serde(with = "phase_label")]
    pub phase_label: Option<Phase>,
    pub awaiting_label: bool,
    pub failed_label: bool,
    /// The iteration whose question was posted.
    pub question_posted: Option<u32>,
    /// The id of that question's comment: a comment with a smaller id was
    /// written before it, and does not answer it (`None`: a question
    /// posted before closer kept it).
    pub question_comment: Option<i64>,
    /// The replies stored, and not yet carried by a prompt, when the run
    /// decided to ask: written before the question, they do not answer it
    /// (the next prompt carries them with the answer).
    pub asked_over: Vec<i64>,
    /// The iteration the author's answer resumed the run for: until the
    /// prompt after it, the author may add to their answer (a second
    /// thought, written while that iteration is prepared or works, reaches
    /// the next prompt; see [`RunData::author_may_reply`]).
    pub answered_for: Option<u32>,
    /// Why the run failed, for the diagnosis (set before it is posted).
    #[serde(deserialize_with = "failure_compat")]
    pub failure: Option<super::failure::RunFailure>,
    pub diagnosis_posted: bool,
    pub deliverable_posted: bool,
    /// Verified, pull request open, closing when it merges (`close_on: merged`).
    pub awaiting_merge: bool,
    /// The issue of a done run was closed (the last write of a done run).
    pub issue_closed: bool,
    /// A done run that leaves its issue for a person to close: an answer
    /// (`read_info`/`report`) under `close_on: merged`, which has no pull
    /// request to wait for.
    pub leave_open: bool,
    /// closer opened the issue again after closing it (its run failed
    /// afterwards: the pull request was closed, or a review round failed).
    pub reopened: bool,
    /// A problem with the configured project board, reported once.
    pub board_problem: Option<String>,
    /// The last status comment body written, to skip no-op edits.
    pub last_status: Option<String>,
    /// The agent tool's session, continued by the next iteration.
    pub agent_session: Option<String>,
    /// The session's running token total as the tool last reported it
    /// (tools that report totals rather than per run).
    pub agent_session_tokens: crate::agent::outcome::Tokens,
    /// The iteration whose agent's spending is in the run's totals: saved
    /// with them, so an iteration judged again (after the LLM was down, a
    /// crash) does not count its kept work twice.
    pub usage_counted: Option<u32>,
    /// The run's branch on the remote as closer last saw it (`None`: not
    /// there): what the next push's lease expects.
    pub branch_head: Option<String>,
    /// What the next prompt must say about the branch (somebody pushed to
    /// it; the agent's earlier commits were rebased or must be redone).
    pub branch_note: Option<String>,
    /// Who edited the issue since the last prompt (a permitted user,
    /// `issue_edit.rs`): the next prompt shows the new text.
    pub issue_edited_by: Option<String>,
    /// A review round is under way: iterations started by reviews or
    /// requests on the run's pull request, after it was verified.
    pub review_round: bool,
    /// The newest queue job when the latest review round started: the
    /// round took what the `review` steps queued up to it asked (its own
    /// step among them), so such a step, run again (sent back at its status
    /// write, retried) or late (queued by another delivery of the same
    /// review), only writes the status.
    pub round_covers: Option<i64>,
    /// The review threads (their first comments' ids) the prompts of this
    /// round carried, answered once the round is verified.
    pub pending_threads: Vec<u64>,
    /// For each pending thread, the newest of its comments the prompts
    /// carried: what closer's reply answers (`threads.rs`). Absent for a
    /// thread pending from before it was recorded.
    pub threads_seen: std::collections::BTreeMap<u64, u64>,
    /// The verification re-run after a person pushed to the branch; shown
    /// instead of the last iteration's until the next iteration.
    pub reverified: Option<IterationVerification>,
    /// The agent's model provider is down: the iteration it interrupted
    /// waits to run again (cleared when an agent run ends otherwise).
    pub model_outage: Option<super::ModelOutage>,
    /// When a maintainer last restarted the run (`None`: never): the
    /// steps that died before belong to an earlier life, and do not count
    /// towards failing this one (`reconcile.rs`).
    pub restarted_at: Option<crate::clock::Millis>,
    /// The head a maintainer merged the run's pull request at, when it is
    /// not the one closer verified last: the done status says so.
    pub merged_unverified: Option<String>,
    /// The last commit on the run's branch closer knows verified complete:
    /// the one it pushed, or one a re-verification after a push found
    /// complete (a failed re-verification of a later commit leaves it).
    pub verified_head: Option<String>,
    /// Restarted after the earlier life's pull request was merged: `start`
    /// makes the worktree afresh from the default branch, which holds
    /// that work now, instead of continuing from the old base (decision
    /// 243).
    pub afresh: bool,
    /// The head GitHub merged, when a restart found the run's pull
    /// request merged. A squash or rebase merge leaves commits the default
    /// branch does not hold, and GitHub keeps the branch unless told to
    /// delete it: the life started afresh does not continue from that
    /// head, and its first push replaces it (decision 249).
    pub merged_head: Option<String>,
    /// This life began when a restart found the run's pull request
    /// merged: its base holds that fix, so a reproduction is looked for
    /// but not required (decision 257). Not carried to a later life.
    pub after_merge: bool,
    /// The workspace (data directory, by its id) holding the run's
    /// worktree, with the agent's commits not yet pushed: its steps wait
    /// for that one while it is alive (decision 254).
    pub workspace: Option<String>,
}

impl RunData {
    /// Whether the run's phase label stays as its pull request left it: a
    /// review round's, once the pull request gave the issue `phase:review`
    /// or `phase:complete`. A restart that kept its open pull request works
    /// as a round but starts at `phase:preparation`, and moves on through
    /// the phases as a first life does.
    pub fn keeps_phase(&self) -> bool {
        self.review_round && matches!(self.phase_label, Some(Phase::Review | Phase::Complete))
    }

    /// Whether the issue's author may reply to the run now: while it
    /// awaits an answer, and from their answer to the prompt after the
    /// iteration the answer resumed it for (that iteration's prompt may
    /// already have carried the answer; the next one carries what the
    /// author added). Never later: the author does not steer the run. The
    /// window is shut by that iteration's judgment unless the run goes on
    /// (`decide.rs`), and by the next prompt (`iterate.rs`).
    pub fn author_may_reply(&self, run: &crate::model::Run) -> bool {
        match run.state {
            RunState::AwaitingResponse => true,
            RunState::Queued | RunState::Running => self
                .answered_for
                .is_some_and(|n| run.iteration + 1 >= n && run.iteration <= n),
            _ => false,
        }
    }

    /// Whether the stored reply `m` answers the run's question: no prompt
    /// carried it, it was not stored before the run decided to ask
    /// (`asked_over`), and it is an issue comment written after the
    /// question's (reviews, stored under negated ids, never answer it).
    pub fn answers_question(&self, m: &MessageRow) -> bool {
        m.used_in.is_none()
            && !self.asked_over.contains(&m.comment_id)
            && self.question_comment.is_none_or(|q| m.comment_id > q)
    }

    /// The data of `run`; unreadable data is the run's corruption.
    pub fn of(run: &crate::model::Run) -> Result<RunData, super::EngineError> {
        RunData::from_json(&run.data).map_err(|e| super::EngineError::CorruptRun {
            run: run.id.clone(),
            message: e.to_string(),
        })
    }

    /// Reads `runs.data`.
    pub fn from_json(text: &str) -> Result<RunData, serde_json::Error> {
        serde_json::from_str(text)
    }

    pub fn to_json(&self) -> String {
        // Plain data (strings, numbers, maps with string keys): cannot fail.
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }
}

/// The phase label as stored: `"phase:processing"`, the label itself, so
/// that data written before phases were typed reads the same.
mod phase_label {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::model::{Named, Phase};

    pub fn serialize<S: Serializer>(phase: &Option<Phase>, s: S) -> Result<S::Ok, S::Error> {
        match phase {
            Some(p) => s.serialize_some(&p.issue_label()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Phase>, D::Error> {
        let Some(label) = Option::<String>::deserialize(d)? else {
            return Ok(None);
        };
        label
            .strip_prefix("phase:")
            .and_then(Phase::parse)
            .map(Some)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown phase label {label:?}")))
    }
}

/// Reads the failure as an object, or as the JSON text earlier versions
/// stored it as.
fn failure_compat<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<super::failure::RunFailure>, D::Error> {
    match Option::<serde_json::Value>::deserialize(d)? {
        None => Ok(None),
        Some(serde_json::Value::String(text)) => serde_json::from_str(&text)
            .map(Some)
            .map_err(serde::de::Error::custom),
        Some(value) => serde_json::from_value(value)
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

/// One iteration as the engine stores it in `iterations.judgment`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IterationRecord {
    pub summary: IterationSummary,
    pub judgment: Judgment,
    pub verification: Option<IterationVerification>,
    /// Both halves of verified completion agreed.
    pub complete: bool,
}

impl IterationRecord {
    pub fn from_json(text: &str) -> Result<IterationRecord, serde_json::Error> {
        serde_json::from_str(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreadable_run_data_is_an_error_and_partial_data_reads_with_defaults() {
        assert!(RunData::from_json("not json").is_err());
        assert!(RunData::from_json(r#"{"issue_author": 7}"#).is_err());
        let d = RunData::from_json(r#"{"issue_author": "maria", "unknown": 1}"#).unwrap();
        assert_eq!(d.issue_author, "maria");
        assert!(!d.awaiting_merge);
        let back = RunData::from_json(&d.to_json()).unwrap();
        assert_eq!(back.issue_author, "maria");
    }

    #[test]
    fn the_phase_label_is_stored_as_the_label() {
        let d = RunData {
            phase_label: Some(Phase::Review),
            ..RunData::default()
        };
        assert!(d.to_json().contains(r#""phase_label":"phase:review""#));
        let back = RunData::from_json(&d.to_json()).unwrap();
        assert_eq!(back.phase_label, Some(Phase::Review));
        assert!(RunData::from_json(r#"{"phase_label": "phase:dreaming"}"#).is_err());
    }

    #[test]
    fn a_failure_stored_as_text_by_an_earlier_version_still_reads() {
        let old = r#"{"failure": "{\"kind\":\"iteration_limit\",\"max\":3}"}"#;
        let d = RunData::from_json(old).unwrap();
        assert_eq!(
            d.failure,
            Some(super::super::failure::RunFailure::IterationLimit { max: 3 })
        );
    }

    #[test]
    fn an_iteration_record_that_is_not_ours_is_an_error() {
        assert!(IterationRecord::from_json("{}").is_err());
        assert!(IterationRecord::from_json("").is_err());
    }
}
