//! The intake's cheap read of a delivery: what it needs to store, route and
//! triage it. Deserialising into these structs still checks that the whole
//! body is well-formed JSON (unknown fields are skipped, not trusted).
//!
//! Triage reads a few more fields than routing (the issue's labels, the
//! comment's body, the pull request's head branch). A payload whose routing
//! fields read but whose triage fields do not have the shape GitHub documents
//! is still stored, with no triage facts: it is then kept for a worker
//! (who records why it cannot be typed), never dropped as irrelevant.

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::EventKind;
use super::signals::Signals;

#[derive(Debug, Deserialize)]
struct IdOnly {
    id: i64,
}

#[derive(Debug, Deserialize)]
struct RepoOnly {
    full_name: String,
}

#[derive(Debug, Deserialize)]
struct NumberOnly {
    number: u64,
}

/// Routing only: what every stored delivery needs.
#[derive(Debug, Default, Deserialize)]
struct Routing {
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    installation: Option<IdOnly>,
    #[serde(default)]
    repository: Option<RepoOnly>,
    #[serde(default)]
    issue: Option<NumberOnly>,
    #[serde(default)]
    pull_request: Option<NumberOnly>,
}

#[derive(Debug, Deserialize)]
struct TriageIssue {
    number: u64,
    #[serde(default)]
    labels: Option<Vec<IgnoredAny>>,
}

#[derive(Debug, Deserialize)]
struct Branch {
    #[serde(rename = "ref", default)]
    name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct TriagePull {
    number: u64,
    #[serde(default)]
    head: Option<Branch>,
}

#[derive(Debug, Deserialize)]
struct TriageComment {
    #[serde(default)]
    body: Option<String>,
}

/// Routing and triage in one pass.
#[derive(Debug, Default, Deserialize)]
struct Full {
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    installation: Option<IdOnly>,
    #[serde(default)]
    repository: Option<RepoOnly>,
    #[serde(default)]
    issue: Option<TriageIssue>,
    #[serde(default)]
    pull_request: Option<TriagePull>,
    #[serde(default)]
    comment: Option<TriageComment>,
}

/// What triage reads beyond routing.
#[derive(Debug, Default)]
struct TriageFacts {
    issue_labels: usize,
    comment: Option<String>,
    head_ref: Option<String>,
}

/// The routing (and, when readable, triage) fields of a delivery.
#[derive(Debug, Default)]
pub struct Envelope {
    pub action: Option<String>,
    installation: Option<i64>,
    repository: Option<String>,
    thread: Option<u64>,
    /// `None` when the triage fields do not have the documented shape.
    facts: Option<TriageFacts>,
}

impl Envelope {
    /// Reads the routing fields; an error when the body is not a JSON object
    /// of the expected shape.
    pub fn parse(body: &[u8]) -> Result<Envelope, serde_json::Error> {
        match serde_json::from_slice::<Full>(body) {
            Ok(full) => Ok(Envelope::from(full)),
            Err(_) => serde_json::from_slice::<Routing>(body).map(Envelope::from),
        }
    }

    pub fn installation_id(&self) -> Option<i64> {
        self.installation
    }

    pub fn repository(&self) -> Option<&str> {
        self.repository.as_deref()
    }

    /// The repository and the issue or pull request number, when the
    /// delivery is about one.
    pub fn thread(&self) -> Option<(&str, u64)> {
        Some((self.repository()?, self.thread?))
    }

    /// The triage facts of a delivery of `kind`; `None` when its payload
    /// does not have the shape they are read from.
    pub fn signals(&self, kind: EventKind) -> Option<Signals<'_>> {
        let facts = self.facts.as_ref()?;
        Some(Signals {
            action: self.action.as_deref().unwrap_or(""),
            issue_labels: facts.issue_labels,
            comment: match kind {
                EventKind::IssueComment => facts.comment.as_deref(),
                _ => None,
            },
            head_ref: facts.head_ref.as_deref(),
            ..Signals::bare(kind)
        })
    }

    /// The queue key of the job that processes this delivery: deliveries about
    /// one issue or pull request (or one installation) are processed one at a
    /// time, so their effects happen in order.
    pub fn job_key(&self, kind: EventKind, delivery_id: &str) -> String {
        match (self.thread(), kind) {
            (Some((repo, number)), _) => thread_key(repo, number),
            (_, EventKind::Installation | EventKind::InstallationRepositories) => {
                match self.installation_id() {
                    Some(id) => format!("installation:{id}"),
                    None => format!("delivery:{delivery_id}"),
                }
            }
            _ => format!("delivery:{delivery_id}"),
        }
    }
}

/// The queue key of the deliveries about one issue or pull request.
pub fn thread_key(repo: &str, number: u64) -> String {
    format!("thread:{repo}#{number}")
}

impl From<Full> for Envelope {
    fn from(full: Full) -> Envelope {
        let facts = TriageFacts {
            issue_labels: full
                .issue
                .as_ref()
                .and_then(|i| i.labels.as_ref())
                .map_or(0, Vec::len),
            comment: full.comment.and_then(|c| c.body),
            head_ref: full
                .pull_request
                .as_ref()
                .and_then(|p| p.head.as_ref())
                .and_then(|h| h.name.clone()),
        };
        Envelope {
            action: full.action,
            installation: full.installation.map(|i| i.id),
            repository: full.repository.map(|r| r.full_name),
            thread: full
                .issue
                .map(|i| i.number)
                .or(full.pull_request.map(|p| p.number)),
            facts: Some(facts),
        }
    }
}

impl From<Routing> for Envelope {
    fn from(routing: Routing) -> Envelope {
        Envelope {
            action: routing.action,
            installation: routing.installation.map(|i| i.id),
            repository: routing.repository.map(|r| r.full_name),
            thread: routing.issue.or(routing.pull_request).map(|n| n.number),
            facts: None,
        }
    }
}
