//! The one call the engine makes after each iteration: "is it complete, and
//! if not what is pending, and is the agent asking the maintainer
//! something?" It combines question detection, the completion check
//! and the completion handler. Goal results arrive as
//! `GoalOutcome`s inside the summary; this module never runs a goal, and
//! nothing here turns an error into "complete".

use crate::model::Named;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::engine::completion_check::{
    CheckContext, CheckInput, CheckResult, CompletionCheck, PreviousCheck,
};
use crate::engine::goal_outcome::failed_required;
use crate::engine::handlers::{CompletionHandler, HandlerVerdict, IssueContext, IterationSummary};
use crate::engine::question::{AnswerStatus, QuestionVerdict, detect};
use crate::engine::tasklist::parse_task_list;
use crate::llm::Usage;
use crate::model::TaskType;

/// What stays the same for every iteration of a run.
#[derive(Debug, Clone)]
pub struct JudgeContext {
    /// The completion check, with the repository's threshold.
    pub check: CompletionCheck,
    /// The repository's completion handler.
    pub handler: Arc<dyn CompletionHandler>,
    /// The issue's task type.
    pub task_type: TaskType,
    /// The issue (its body holds the task list).
    pub issue: IssueContext,
}

/// One iteration to judge.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JudgeInput {
    /// What the iteration produced, goal results included.
    pub summary: IterationSummary,
    /// The previous check, when it found the work incomplete.
    pub previous: Option<PreviousCheck>,
}

/// The decision (the model's one definition).
pub use crate::model::Decision;

/// The answer to the one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgment {
    /// What to do next.
    pub decision: Decision,
    /// Question detection, with the signals that fired.
    pub question: QuestionVerdict,
    /// What to ask the maintainer when awaiting a response.
    pub questions: Vec<String>,
    /// The completion check's answer, when it ran.
    #[serde(alias = "closer")]
    pub check: Option<CheckResult>,
    /// The completion handler's verdict, when it ran.
    pub handler: Option<HandlerVerdict>,
    /// What is left, for the status comment and the next prompt.
    pub pending_actions: Vec<String>,
    /// Why, in short lines.
    pub reasons: Vec<String>,
    /// LLM tokens this judgment spent.
    pub usage: Usage,
}

impl Judgment {
    /// The judgment of an iteration whose agent could not run at all:
    /// nothing to judge, the reason says why.
    pub fn not_run(reason: String) -> Judgment {
        Judgment {
            decision: Decision::Error,
            question: QuestionVerdict {
                status: AnswerStatus::Error,
                score: 0.0,
                signals: Vec::new(),
            },
            questions: Vec::new(),
            check: None,
            handler: None,
            pending_actions: Vec::new(),
            reasons: vec![reason],
            usage: Usage::default(),
        }
    }
}

/// Judges one iteration.
pub async fn judge(ctx: &JudgeContext, input: JudgeInput) -> Judgment {
    let summary = input.summary;
    let explicit = explicit_questions(&summary.structured_output);
    let text = if summary.output_text.trim().is_empty() {
        prose_of(&summary.structured_output)
    } else {
        summary.output_text.clone()
    };
    let question = detect(&text, summary.failed, &explicit);
    let mut judgment = Judgment {
        decision: Decision::Incomplete,
        question: question.clone(),
        questions: Vec::new(),
        check: None,
        handler: None,
        pending_actions: Vec::new(),
        reasons: Vec::new(),
        usage: Usage::default(),
    };
    // A code task is judged on its work: a question the agent did not list
    // in `questions` only pauses the run when the work is not complete (an
    // offer at the end of a finished fix is not a question).
    let work_decides = ctx.task_type.changes_code()
        && explicit.is_empty()
        && question.status == AnswerStatus::AwaitingResponse;
    if !work_decides && settled_by_question(&mut judgment, explicit, &text) {
        if let (Decision::Error, Some(why)) = (judgment.decision, &summary.agent_failure) {
            judgment.reasons = vec![why.clone()];
        }
        return judgment;
    }

    let check = ctx
        .check
        .check(&check_input(ctx, &summary, input.previous))
        .await;
    judgment.usage = check.usage;
    let mut verdict = ctx.handler.is_complete(&summary, Some(&check)).await;
    if verdict.complete
        && let Some(why) = tolerated_in_scope(&summary, &check)
    {
        verdict = HandlerVerdict::done(false, why);
    }

    judgment.pending_actions = check.output.pending_actions.clone();
    for goal in failed_required(&summary.goals) {
        let action = format!("Make the goal `{}` pass", goal.name);
        if !judgment.pending_actions.contains(&action) {
            judgment.pending_actions.push(action);
        }
    }
    if let Some(e) = &check.error {
        judgment
            .reasons
            .push(format!("completion check failed: {e}"));
    }
    judgment.reasons.push(verdict.description.clone());
    judgment.decision = if verdict.error.is_some() {
        Decision::Error
    } else if verdict.complete {
        Decision::Complete
    } else {
        Decision::Incomplete
    };
    judgment.check = Some(check);
    judgment.handler = Some(verdict);
    if work_decides && judgment.decision != Decision::Complete {
        settled_by_question(&mut judgment, Vec::new(), &text);
    }
    judgment
}

/// Why a complete verdict waits when the repository tolerates failures:
/// only the completion check judges whether one is part of the issue
/// (`tolerated-<n>`), and that holds whatever the handler. A `manual`,
/// `iterate` or `custom` handler does not read the checklist, and would
/// otherwise close an issue whose very test still fails (decision 250).
fn tolerated_in_scope(summary: &IterationSummary, check: &CheckResult) -> Option<String> {
    if summary.tolerated.is_empty() {
        return None;
    }
    if check.error.is_some() {
        return Some(
            "the tolerated failures were not judged (the completion check failed)".to_owned(),
        );
    }
    let open: Vec<&str> = check
        .output
        .checklist
        .iter()
        .filter(|i| i.id.starts_with("tolerated-") && !i.completed)
        .map(|i| i.id.as_str())
        .collect();
    (!open.is_empty()).then(|| {
        format!(
            "a tolerated failure is part of the issue ({}): it must pass",
            open.join(", ")
        )
    })
}

/// Decides the iteration from question detection alone where it can: a
/// failed run, a question for the maintainer (asked in `questions`, or
/// else in the passages of the agent's `text` that ask), no output. `true`
/// when it did.
fn settled_by_question(judgment: &mut Judgment, explicit: Vec<String>, text: &str) -> bool {
    let question = &judgment.question;
    match question.status {
        AnswerStatus::Error => {
            judgment.decision = Decision::Error;
            judgment.reasons.push("the agent run failed".to_owned());
        }
        AnswerStatus::AwaitingResponse => {
            judgment.decision = Decision::AwaitingResponse;
            let reason = format!(
                "the agent asks the maintainer (score {:.2})",
                question.score
            );
            judgment.questions = if explicit.is_empty() {
                crate::engine::asked::asking_passages(text, &question.signals)
            } else {
                explicit
            };
            judgment.reasons.push(reason);
        }
        AnswerStatus::Incomplete => {
            judgment
                .reasons
                .push("the agent produced no output".to_owned());
            judgment
                .pending_actions
                .push("Produce the deliverable the issue asks for".to_owned());
        }
        AnswerStatus::Complete => return false,
    }
    true
}

fn check_input(
    ctx: &JudgeContext,
    summary: &IterationSummary,
    previous: Option<PreviousCheck>,
) -> CheckInput {
    let task = ctx.task_type.as_str();
    CheckInput {
        structured_output: summary.structured_output.clone(),
        step_id: format!("complete.{task}"),
        c2: "complete".to_owned(),
        c3: task.to_owned(),
        context: CheckContext {
            issue_ref: ctx.issue.issue_ref.clone(),
            issue_title: crate::prompts::fence::one_line(
                &ctx.issue.title,
                crate::engine::handlers::TITLE_MAX,
            ),
            task_list: parse_task_list(&ctx.issue.body),
            goal_results: summary.goals.clone(),
            tolerated_failures: summary.tolerated.clone(),
        },
        previous,
    }
}

/// `questions: [..]` of the structured output, if it lists any.
fn explicit_questions(output: &Value) -> Vec<String> {
    output
        .get("questions")
        .and_then(Value::as_array)
        .map(|qs| {
            qs.iter()
                .filter_map(Value::as_str)
                .filter(|q| !q.trim().is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The prose fields of a structured output, when the agent gave no text.
fn prose_of(output: &Value) -> String {
    ["summary", "message", "answer", "report"]
        .iter()
        .filter_map(|k| output.get(*k).and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n\n")
}
