//! The run's vocabulary as types: the bottom layer every other module
//! depends on and that depends on nothing of closer's but the clock.
//!
//! One definition per concept (a run's state, phase, stage, task type,
//! completion type, outcome; a job's kind and state; a delivery's status;
//! the identifiers). Text stored in the database becomes these types at the
//! store boundary, and an unknown value is an error naming the column
//! ([`UnknownValue`]), never a default.

mod completion;
mod decision;
mod delivery;
mod ids;
mod job;
mod named;
mod outcome;
mod permission;
mod phase;
mod run;
mod stage;
mod state;
mod task_type;
mod withdrawal;

pub use completion::CompletionType;
pub use decision::{Decision, IterationEnd};
pub use delivery::DeliveryStatus;
pub use ids::{DeliveryId, InstallationId, IssueNumber, RepoName, RepositoryId, RunId};
pub use job::{JobKind, JobState, run_job_key};
pub use named::{Named, UnknownValue};
pub use outcome::Outcome;
pub use permission::Permission;
pub use phase::Phase;
pub use run::{
    BRANCH_PREFIX, DEFAULT_TRIGGER_LABEL, Run, SET_ASIDE_MARK, branch_issue, issue_branch,
};
pub use stage::Stage;
pub use state::RunState;
pub use task_type::TaskType;
pub use withdrawal::Withdrawal;

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trips<T: Named + PartialEq + std::fmt::Debug>() {
        for value in T::ALL {
            assert_eq!(T::parse(value.as_str()), Some(*value));
        }
        let names: std::collections::HashSet<_> = T::ALL.iter().map(|v| v.as_str()).collect();
        assert_eq!(names.len(), T::ALL.len(), "names are distinct");
    }

    #[test]
    fn every_stored_name_reads_back_as_its_value() {
        round_trips::<RunState>();
        round_trips::<Phase>();
        round_trips::<TaskType>();
        round_trips::<CompletionType>();
        round_trips::<IterationEnd>();
        round_trips::<JobKind>();
        round_trips::<JobState>();
        round_trips::<DeliveryStatus>();
        for stage in [Stage::Normal, Stage::MinimalFix, Stage::Stopped] {
            assert_eq!(Stage::from_number(stage.number().into()), Some(stage));
        }
    }

    #[test]
    fn an_unknown_name_is_an_error_naming_the_column_and_the_value() {
        let e = RunState::read("runs.state", "paused").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown value \"paused\" in column runs.state"
        );
        assert_eq!(Stage::from_number(0), None);
        assert_eq!(Outcome::parse("maybe"), None);
    }

    #[test]
    fn outcomes_read_back_as_written() {
        for outcome in [
            Outcome::Completed,
            Outcome::Failed("iteration limit 3".into()),
            Outcome::Stopped("the issue was closed".into()),
        ] {
            assert_eq!(Outcome::parse(&outcome.to_string()), Some(outcome));
        }
    }

    #[test]
    fn branches_name_their_issue() {
        assert_eq!(issue_branch(IssueNumber(7)), "closer/issue-7");
        assert_eq!(branch_issue("closer/issue-7"), Some(IssueNumber(7)));
        assert_eq!(branch_issue("feature/issue-7"), None);
        assert_eq!(branch_issue("closer/issue-x"), None);
    }
}
