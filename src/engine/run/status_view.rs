//! The status comment's view of a run: its state, phase, stage, the last
//! iteration's checklist, pending actions and verification table, the
//! budget. Rendering lives in `crate::comment`; this only maps.

use super::context::RunContext;
use super::data::IterationRecord;
use super::failure::RunFailure;
use crate::comment::{
    BaselineRow, ChecklistRow, GoalRow, GoalStatus, NextStep, QuestionView, RunState, ScopeRow,
    SignalRow, StatusView, UsageView, VerificationView,
};
use crate::config::repo::CloseOn;
use crate::engine::fingerprint::Failure;
use crate::engine::goals::GoalResult;
use crate::engine::question::{QuestionVerdict, SignalKind, THRESHOLD};
use crate::engine::tolerance::failure_id;
use crate::engine::verify::IterationVerification;
use crate::model::IssueNumber;

/// Everything the status comment shows, from the run and its last record.
pub fn status_view(
    ctx: &RunContext,
    last: Option<&IterationRecord>,
    dashboard_url: Option<&str>,
) -> StatusView {
    let run = &ctx.run;
    let next = next_step(ctx, last);
    // A run whose pull request was closed unmerged holds no phase (its
    // label is gone).
    let pull_closed = matches!(next, NextStep::PullClosed { .. });
    let mut view = StatusView {
        run_id: run.id.to_string(),
        state: run.state,
        phase: Some(run.phase).filter(|_| !pull_closed),
        task_type: run.task_type,
        iteration: run.iteration,
        max_iterations: run.max_iterations,
        stage: ctx.data.convergence.stage,
        summary: None,
        checklist: Vec::new(),
        pending_actions: Vec::new(),
        verification: None,
        question: None,
        usage: UsageView {
            tokens: run.tokens_used,
            cost_usd: run.cost_usd,
            max_tokens: ctx.config.budget.max_tokens,
            max_cost_usd: ctx.config.budget.max_cost_usd,
        },
        dashboard_url: dashboard_url
            .map(|u| format!("{}/runs/{}", u.trim_end_matches('/'), run.id)),
        next,
        notices: ctx.data.board_problem.iter().cloned().collect(),
        agent_problem: last.and_then(|l| l.summary.agent_failure.clone()),
        progress: None,
    };
    if let Some(last) = last {
        fill_from_record(&mut view, last);
    }
    if let Some(outage) = ctx.data.model_outage.as_ref()
        && run.state == RunState::Running
    {
        view.next = NextStep::WaitingForModel {
            iteration: run.iteration + 1,
        };
        view.agent_problem = Some(outage.describe());
    }
    view
}

/// The line that says what happens next.
fn next_step(ctx: &RunContext, last: Option<&IterationRecord>) -> NextStep {
    let run = &ctx.run;
    match run.state {
        RunState::Queued => NextStep::Queued,
        RunState::Running if run.iteration == 0 => NextStep::Working { iteration: 1 },
        RunState::Running => {
            // Shown by the edit that ends a step: the iteration that runs
            // next (or runs again after a crash).
            let judged = last.is_some_and(|r| r.summary.iteration == run.iteration);
            NextStep::Working {
                iteration: run.iteration + u32::from(judged),
            }
        }
        RunState::Verifying => match run.pull_request {
            Some(number) => NextStep::PullRequestOpen {
                number,
                close_on_merge: ctx.config.close_on == CloseOn::Merged,
            },
            None => NextStep::Verifying {
                iteration: run.iteration,
            },
        },
        RunState::AwaitingResponse => NextStep::WaitingFor {
            author: ctx.data.issue_author.clone(),
        },
        RunState::Done => match &ctx.data.merged_unverified {
            Some(head) => NextStep::MergedUnverified { head: head.clone() },
            None => NextStep::Closed,
        },
        RunState::Failed => match ctx.data.failure {
            Some(RunFailure::PullRequestClosed { number }) => NextStep::PullClosed {
                number: IssueNumber(number),
            },
            _ => NextStep::Failed,
        },
        RunState::Stopped => NextStep::Stopped,
    }
}

fn fill_from_record(view: &mut StatusView, last: &IterationRecord) {
    let judgment = &last.judgment;
    if let Some(check) = &judgment.check {
        view.summary = Some(check.output.summary.clone()).filter(|s| !s.is_empty());
        view.checklist = check
            .output
            .checklist
            .iter()
            .map(|i| ChecklistRow {
                description: i.description.clone(),
                completed: i.completed,
                evidence: i.evidence.clone(),
            })
            .collect();
    }
    if !last.complete {
        view.pending_actions = judgment.pending_actions.clone();
        if let Some(v) = &last.verification {
            for reason in &v.decision.reasons {
                let action = format!("Fix: {reason}");
                if !view.pending_actions.contains(&action) && !v.complete() {
                    view.pending_actions.push(action);
                }
            }
        }
    }
    view.verification = last.verification.as_ref().map(verification_view);
    if view.state == RunState::AwaitingResponse {
        view.question = Some(question_view(&judgment.question));
    }
}

/// Why the run thinks the agent asked: the score, the signals, and whether
/// the agent said so itself (its structured output lists questions, which
/// question detection reports as an explicit-question signal).
fn question_view(verdict: &QuestionVerdict) -> QuestionView {
    QuestionView {
        score: verdict.score,
        threshold: THRESHOLD,
        signals: verdict
            .signals
            .iter()
            .map(|s| SignalRow {
                kind: format!("{:?}", s.kind),
                weight: s.weight,
                excerpt: s.excerpt.clone(),
            })
            .collect(),
        stated_by_agent: verdict
            .signals
            .iter()
            .any(|s| s.kind == SignalKind::ExplicitQuestion),
    }
}

/// The verification table: every check, the failures sorted against the
/// baseline, the scope.
pub fn verification_view(v: &IterationVerification) -> VerificationView {
    let ids = |failures: &[Failure]| failures.iter().map(failure_id).collect::<Vec<_>>();
    VerificationView {
        goals: v.goals.iter().map(goal_row).collect(),
        baseline: Some(BaselineRow {
            new_failures: v.new_failures.iter().map(|f| f.summary()).collect(),
            // The required goals' failures the base had too; not every
            // failure but the new ones (an optional goal's are neither).
            already_failing: v.since_base.len() + v.tolerated.len(),
            failing_since_base: ids(&v.since_base),
            tolerated: ids(&v.tolerated),
            fixed_since_base: ids(&v.fixed_since_base),
        }),
        scope: Some(if v.scope.out_of_scope.is_empty() {
            ScopeRow::Ok
        } else {
            ScopeRow::OutOfScope(v.scope.out_of_scope.clone())
        }),
        blockers: match v.complete() {
            true => Vec::new(),
            false => v.decision.reasons.clone(),
        },
    }
}

fn goal_row(g: &GoalResult) -> GoalRow {
    let status = match (g.passed, g.tolerated) {
        _ if g.not_run_after_setup() => GoalStatus::NotRun,
        (true, _) => GoalStatus::Passed,
        (false, true) => GoalStatus::Tolerated,
        (false, false) => GoalStatus::Failed,
    };
    GoalRow {
        name: g.name(),
        status,
        required: g.required,
        evidence: g.evidence.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::repo::{GoalKind, GoalSpec};
    use crate::engine::goals::{self, GoalLevel};
    use crate::engine::question::detect;

    /// The agent listed a question in its structured output: detection
    /// reports that as an explicit-question signal, and the status comment
    /// says the agent asked. Before, it said so only when there were no
    /// signals at all, which an explicit question never leaves.
    #[test]
    fn an_explicit_question_is_stated_by_the_agent() {
        let listed = detect("Done with the survey.", false, &["Which DB?".to_owned()]);
        let view = question_view(&listed);
        assert!(view.stated_by_agent);
        assert_eq!(view.signals[0].kind, "ExplicitQuestion");
        assert!(
            crate::comment::status_comment(&with_question(view))
                .contains("The agent said it needs input.")
        );

        // The control: a question found only in the prose is not stated.
        let prose = detect("Should I proceed with Postgres?", false, &[]);
        assert!(prose.is_asking());
        let view = question_view(&prose);
        assert!(!view.stated_by_agent);
        assert!(
            !crate::comment::status_comment(&with_question(view))
                .contains("The agent said it needs input.")
        );
    }

    /// A run awaiting a response, with `question` as its view of why.
    fn with_question(question: QuestionView) -> StatusView {
        StatusView {
            run_id: "r-1".to_owned(),
            state: RunState::AwaitingResponse,
            phase: Some(crate::model::Phase::Processing),
            task_type: None,
            iteration: 1,
            max_iterations: 10,
            stage: crate::model::Stage::Normal,
            summary: None,
            checklist: Vec::new(),
            pending_actions: Vec::new(),
            verification: None,
            question: Some(question),
            usage: UsageView::default(),
            dashboard_url: None,
            next: NextStep::WaitingFor {
                author: "maria".to_owned(),
            },
            notices: Vec::new(),
            agent_problem: None,
            progress: None,
        }
    }

    /// A new failure in an optional goal is not "already failing at the
    /// baseline": only the required goals' failures the base had are.
    /// Before, every failure but the required goals' new ones counted.
    #[test]
    fn only_failures_the_base_had_count_as_already_failing() {
        let failure = |test: &str| {
            crate::engine::fingerprint::parse_failures(
                "cargo test",
                &format!("test {test} ... FAILED\n\ntest result: FAILED. 0 passed; 1 failed\n"),
                None,
            )
            .remove(0)
        };
        let (optional_new, old) = (failure("lint::new"), failure("tests::old"));
        let decision = crate::engine::convergence::ConvergenceState::default().observe(
            crate::engine::convergence::Observation {
                iteration: 1,
                blocking: vec![old.clone()],
                reasons: Vec::new(),
                diff_hash: "d".into(),
                evidence: Vec::new(),
            },
            &crate::config::repo::ConvergenceConfig::default(),
            crate::engine::convergence::CheckId("c".into()),
        );
        let mut v: IterationVerification = serde_json::from_value(serde_json::json!({
            "iteration": 1,
            "artifacts": {"base_commit": "b", "head": "h", "branch": null, "commits": [],
                "changed_files": [], "untracked": [], "diff_hash": "d"},
            "missing_artifacts": [], "goals": [], "failures": [], "new_failures": [],
            "scope": {"out_of_scope": [], "changed_lines": 0, "diff_budget": null,
                "over_budget": false},
            "decision": decision,
        }))
        .unwrap();
        v.failures = vec![optional_new];
        let row = verification_view(&v).baseline.unwrap();
        assert_eq!(row.already_failing, 0);
        v.failures.push(old.clone());
        v.since_base = vec![old];
        let row = verification_view(&v).baseline.unwrap();
        assert_eq!(row.already_failing, 1);
    }

    #[test]
    fn a_goal_not_run_after_a_failed_setup_shows_as_not_run_and_a_failed_one_as_failed() {
        let spec = GoalSpec {
            kind: GoalKind::TestsPass {
                command: "cargo test".into(),
            },
            required: true,
            timeout_secs: None,
        };
        let not_run = goal_row(&goals::not_run(GoalLevel::Dod, &spec));
        assert_eq!(not_run.status, GoalStatus::NotRun);
        assert_eq!(not_run.status.label(), "⏸️ not run");
        assert_eq!(not_run.evidence, goals::NOT_RUN_AFTER_SETUP);

        // The control: a command that could not run for another reason
        // (missing, timed out) is a failure.
        let mut missing = goals::not_run(GoalLevel::Dod, &spec);
        missing.evidence = "command not runnable (exit 127)".into();
        assert_eq!(goal_row(&missing).status, GoalStatus::Failed);
    }
}
