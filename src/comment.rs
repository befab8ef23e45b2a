//! Every text the bot posts on GitHub, in one place: the status comment, the
//! question, the diagnosis, replies to commands, the invalid-config comment,
//! the answer of a `read_info`/`report` run, the pull request, the labels.
//!
//! Rendering only: the engine maps its state into the plain structs of
//! [`view`] (and a few local ones) and posts what comes back. This module must
//! never decide anything, do I/O, or place untrusted text (agent output, issue
//! text, user names, evidence) without escaping it (see [`markdown`]); and no
//! text it returns is over GitHub's 65,536-character limit.

pub mod labels;
pub mod markdown;
pub mod pull_request;
pub mod review;
pub mod status;
pub mod texts;
mod verification;
pub mod view;

#[cfg(test)]
mod tests;

pub use labels::{LABELS, LabelDef, same_label, trigger_label_def};
pub use markdown::redact;
pub use pull_request::{
    CommitRow, FileRow, PullRequestView, pull_request_body, pull_request_title,
};
pub use review::{
    ThreadAnswer, budget_spent_hint, ended_run_hint, pull_closed_comment, thread_reply,
};
pub use status::{MAX_COMMENT_LEN, parse_run_marker, run_marker, status_comment};
pub use texts::{
    BudgetExceeded, DeliverableFooter, DiagnosisView, FailureReason, FingerprintRow, StageAttempt,
    deliverable_comment, diagnosis_comment, invalid_config_comment, label_refusal_comment,
    label_removal_refusal_comment, nothing_to_retry_answer, question_comment, refusal_comment,
    status_answer, unknown_command_comment,
};
pub use view::{
    BaselineRow, ChecklistRow, GoalRow, GoalStatus, NextStep, Phase, QuestionView, RunState,
    ScopeRow, SignalRow, Stage, StatusView, UsageView, VerificationView,
};
