//! The few facts of a delivery that decide whether it can matter to closer
//! (the rule is `engine::triage`), read the same way from the intake's cheap
//! [`Envelope`](super::envelope::Envelope) and from a worker's typed
//! [`Event`]: intake and engine answer from one definition.

use super::{Event, EventKind, PullRef};

/// What triage looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signals<'a> {
    pub kind: EventKind,
    /// The `action`, as GitHub spells it (`""` when there is none).
    pub action: &'a str,
    /// How many labels the issue has (`issues.opened` starts a run on one).
    pub issue_labels: usize,
    /// The body of the comment an `issue_comment` carries.
    pub comment: Option<&'a str>,
    /// The head branch of the pull request the event is about.
    pub head_ref: Option<&'a str>,
}

impl<'a> Signals<'a> {
    /// Nothing but the event kind.
    pub fn bare(kind: EventKind) -> Signals<'a> {
        Signals {
            kind,
            action: "",
            issue_labels: 0,
            comment: None,
            head_ref: None,
        }
    }

    /// The same facts from a typed event.
    pub fn of(event: &'a Event) -> Signals<'a> {
        match event {
            Event::Ping { .. } => Signals::bare(EventKind::Ping),
            Event::Installation { action, .. } => Signals {
                action: action.as_str(),
                ..Signals::bare(EventKind::Installation)
            },
            Event::InstallationRepositories { action, .. } => Signals {
                action: action.as_str(),
                ..Signals::bare(EventKind::InstallationRepositories)
            },
            Event::Issues { action, issue, .. } => Signals {
                action: action.as_str(),
                issue_labels: issue.labels.len(),
                ..Signals::bare(EventKind::Issues)
            },
            Event::IssueComment {
                action,
                issue,
                comment,
                ..
            } => Signals {
                action: action.as_str(),
                issue_labels: issue.labels.len(),
                comment: Some(&comment.body),
                ..Signals::bare(EventKind::IssueComment)
            },
            Event::PullRequest { action, pull, .. } => {
                pull_signals(EventKind::PullRequest, action.as_str(), pull)
            }
            Event::PullRequestReview { action, pull, .. } => {
                pull_signals(EventKind::PullRequestReview, action.as_str(), pull)
            }
            Event::PullRequestReviewComment { action, pull, .. } => {
                pull_signals(EventKind::PullRequestReviewComment, action.as_str(), pull)
            }
            Event::Repository { action, .. } => Signals {
                action: action.as_str(),
                ..Signals::bare(EventKind::Repository)
            },
        }
    }
}

fn pull_signals<'a>(kind: EventKind, action: &'a str, pull: &'a PullRef) -> Signals<'a> {
    Signals {
        action,
        head_ref: Some(&pull.head_ref),
        ..Signals::bare(kind)
    }
}
