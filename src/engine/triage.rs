//! Triage: can a delivery matter to closer? The one definition, used by the
//! intake (a delivery that cannot matter is stored as `ignored`, with no
//! job, in the same batch as the rest) and by the engine (which answers the
//! same for a delivery that reaches it anyway, e.g. one stored before).
//!
//! A delivery matters by rule when something in the event itself can start
//! or steer work: an installation change, a label added (the trigger label is
//! the repository's choice, read from `.github/closer.yml` on GitHub, so any
//! label may be it), labels on a new issue, an assignment, a comment
//! addressed to closer (`/closer …` or a mention of the App), a deleted
//! comment (its tombstone is kept whatever the run), anything about
//! a pull request on closer's own branch. Everything else about an issue or
//! pull request matters only while closer has work there: an open run on it,
//! or a delivery about it still waiting in the queue (it may be the one that
//! starts a run). The intake checks that in the database, in the batch's own
//! transaction (`store::writer`); the engine checks the run.
//!
//! It must never answer "ignored" for a delivery the engine would act on: a
//! false "matters" costs a job, a false "ignored" loses work. Where a fact is
//! unknown (the App's slug before closer asked GitHub for it) it answers
//! "matters".

use crate::engine::command::is_addressed_to_bot;
use crate::events::EventKind;
use crate::events::signals::Signals;
use crate::model::branch_issue;

/// What triage decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Processed whatever closer is doing; names the rule.
    Matters(&'static str),
    /// Processed only while the issue or pull request has an open run (or a
    /// delivery about it is still queued); otherwise stored as ignored.
    IfOpenRun,
    /// Never processed: stored as ignored (a `repository` event that does
    /// not change the repository's name).
    Never,
}

/// The outcome recorded on a delivery stored as ignored by triage.
pub const IGNORED: &str = "triage: nothing to act on and no open run";

/// Decides for a delivery with these facts; `app_slug` is the App's slug
/// when known.
pub fn triage(signals: &Signals<'_>, app_slug: Option<&str>) -> Verdict {
    match signals.kind {
        EventKind::Ping => Verdict::Matters("ping"),
        EventKind::Installation | EventKind::InstallationRepositories => {
            Verdict::Matters("installation change")
        }
        EventKind::Issues => issues(signals),
        EventKind::IssueComment => match signals.action {
            "created" | "edited" if addressed(signals.comment.unwrap_or(""), app_slug) => {
                Verdict::Matters("comment addressed to closer")
            }
            // Its tombstone is kept whatever the run's state: a reply an
            // ended run stored waits for a retry, and a late `created`
            // must find it (decision 217).
            "deleted" => Verdict::Matters("comment deleted"),
            _ => Verdict::IfOpenRun,
        },
        EventKind::PullRequest
        | EventKind::PullRequestReview
        | EventKind::PullRequestReviewComment => match signals.head_ref.and_then(branch_issue) {
            Some(_) => Verdict::Matters("closer's pull request"),
            None => Verdict::IfOpenRun,
        },
        EventKind::Repository => match signals.action {
            "renamed" | "transferred" => Verdict::Matters("repository renamed or moved"),
            "deleted" => Verdict::Matters("repository deleted"),
            _ => Verdict::Never,
        },
    }
}

fn issues(signals: &Signals<'_>) -> Verdict {
    match signals.action {
        "labeled" => Verdict::Matters("label added"),
        "opened" if signals.issue_labels > 0 => Verdict::Matters("new issue with labels"),
        "assigned" | "unassigned" => Verdict::Matters("assignment"),
        _ => Verdict::IfOpenRun,
    }
}

/// Whether a comment speaks to closer: a command line (`/closer …`,
/// `@<slug> …`, the engine's own parser) or a mention of the App anywhere.
/// Without the slug, any `@` counts.
fn addressed(body: &str, app_slug: Option<&str>) -> bool {
    if !body.contains(['/', '@']) {
        return false;
    }
    match app_slug {
        Some(slug) => mentions(body, slug) || is_addressed_to_bot(body, slug),
        None => body.contains('@') || is_addressed_to_bot(body, ""),
    }
}

/// `@slug` anywhere in `body`, without regard to ASCII case.
fn mentions(body: &str, slug: &str) -> bool {
    let bytes = body.as_bytes();
    bytes.iter().enumerate().any(|(i, &b)| {
        b == b'@'
            && bytes
                .get(i + 1..i + 1 + slug.len())
                .is_some_and(|s| s.eq_ignore_ascii_case(slug.as_bytes()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::envelope::Envelope;
    use crate::events::parse_event;

    const SLUG: &str = "closer-bot";

    fn signals(kind: EventKind, action: &'static str) -> Signals<'static> {
        Signals {
            action,
            ..Signals::bare(kind)
        }
    }

    fn comment(body: &'static str) -> Signals<'static> {
        Signals {
            comment: Some(body),
            ..signals(EventKind::IssueComment, "created")
        }
    }

    fn on_branch(kind: EventKind, head: &'static str) -> Signals<'static> {
        Signals {
            head_ref: Some(head),
            ..signals(kind, "submitted")
        }
    }

    #[test]
    fn each_rule() {
        use EventKind::*;
        use Verdict::{IfOpenRun, Matters};
        let labelled_issue = Signals {
            issue_labels: 1,
            ..signals(Issues, "opened")
        };
        let cases: Vec<(&str, Signals<'static>, Verdict)> = vec![
            ("ping", signals(Ping, ""), Matters("ping")),
            (
                "installation",
                signals(Installation, "created"),
                Matters("installation change"),
            ),
            (
                "repositories",
                signals(InstallationRepositories, "added"),
                Matters("installation change"),
            ),
            (
                "label added",
                signals(Issues, "labeled"),
                Matters("label added"),
            ),
            (
                "opened with a label",
                labelled_issue,
                Matters("new issue with labels"),
            ),
            ("opened bare", signals(Issues, "opened"), IfOpenRun),
            (
                "assigned",
                signals(Issues, "assigned"),
                Matters("assignment"),
            ),
            (
                "unassigned",
                signals(Issues, "unassigned"),
                Matters("assignment"),
            ),
            ("edited issue", signals(Issues, "edited"), IfOpenRun),
            (
                "renamed repository",
                signals(Repository, "renamed"),
                Matters("repository renamed or moved"),
            ),
            (
                "moved repository",
                signals(Repository, "transferred"),
                Matters("repository renamed or moved"),
            ),
            (
                "deleted repository",
                signals(Repository, "deleted"),
                Matters("repository deleted"),
            ),
            (
                "edited repository",
                signals(Repository, "edited"),
                Verdict::Never,
            ),
            ("closed issue", signals(Issues, "closed"), IfOpenRun),
            ("label removed", signals(Issues, "unlabeled"), IfOpenRun),
            (
                "command",
                comment("/closer run"),
                Matters("comment addressed to closer"),
            ),
            (
                "command, any case",
                comment("/Closer status"),
                Matters("comment addressed to closer"),
            ),
            (
                "mention command",
                comment("@closer-bot retry"),
                Matters("comment addressed to closer"),
            ),
            (
                "mention in a sentence",
                comment("thanks @Closer-Bot!"),
                Matters("comment addressed to closer"),
            ),
            (
                "command behind an html comment",
                comment("/clo<!-- x -->ser run"),
                Matters("comment addressed to closer"),
            ),
            ("plain comment", comment("Looks good to me."), IfOpenRun),
            ("someone else mentioned", comment("cc @octocat"), IfOpenRun),
            ("a path", comment("see src/main.rs"), IfOpenRun),
            (
                "deleted command",
                Signals {
                    action: "deleted",
                    ..comment("/closer run")
                },
                Matters("comment deleted"),
            ),
            (
                "closer's pr",
                on_branch(PullRequest, "closer/issue-7"),
                Matters("closer's pull request"),
            ),
            (
                "review on closer's pr",
                on_branch(PullRequestReview, "closer/issue-7"),
                Matters("closer's pull request"),
            ),
            (
                "line comment on closer's pr",
                on_branch(PullRequestReviewComment, "closer/issue-7"),
                Matters("closer's pull request"),
            ),
            ("another pr", on_branch(PullRequest, "feature/x"), IfOpenRun),
            (
                "review on another pr",
                on_branch(PullRequestReview, "closer/issue-x"),
                IfOpenRun,
            ),
        ];
        for (name, signals, expected) in cases {
            assert_eq!(triage(&signals, Some(SLUG)), expected, "{name}");
        }
    }

    /// Before closer knows its slug, a comment with any `@` may mention it.
    #[test]
    fn without_the_slug_any_mention_matters() {
        assert_eq!(
            triage(&comment("cc @octocat"), None),
            Verdict::Matters("comment addressed to closer")
        );
        assert_eq!(
            triage(&comment("/closer stop"), None),
            Verdict::Matters("comment addressed to closer")
        );
        assert_eq!(triage(&comment("no address"), None), Verdict::IfOpenRun);
    }

    /// The intake's envelope and the worker's typed event read the same
    /// facts from every fixture, so both answer the same.
    #[test]
    fn intake_and_engine_read_the_same_facts_from_every_fixture() {
        let dir = format!(
            "{}/tests/fixtures/github-webhooks",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            let Some(stem) = name.strip_suffix(".json") else {
                continue;
            };
            let kind = EventKind::from_header(stem.split('.').next().unwrap()).unwrap();
            let body = std::fs::read(format!("{dir}/{name}")).unwrap();
            let envelope = Envelope::parse(&body).unwrap();
            let event = parse_event(kind, &body).unwrap();
            let at_intake = envelope.signals(kind).expect("documented shape");
            assert_eq!(at_intake, Signals::of(&event), "{name}");
            seen += 1;
        }
        assert!(seen >= 50, "{seen}");
    }
}
