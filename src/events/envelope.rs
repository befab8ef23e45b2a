//! The intake's cheap read of a delivery: just what it needs to store and
//! route it. Deserialising into this struct still checks that the whole body
//! is well-formed JSON (unknown fields are skipped, not trusted).

use serde::Deserialize;

use super::EventKind;

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

/// The routing fields of a delivery.
#[derive(Debug, Default, Deserialize)]
pub struct Envelope {
    #[serde(default)]
    pub action: Option<String>,
    #[serde(default)]
    installation: Option<IdOnly>,
    #[serde(default)]
    repository: Option<RepoOnly>,
    #[serde(default)]
    issue: Option<NumberOnly>,
    #[serde(default)]
    pull_request: Option<NumberOnly>,
}

impl Envelope {
    /// Reads the routing fields; an error when the body is not a JSON object
    /// of the expected shape.
    pub fn parse(body: &[u8]) -> Result<Envelope, serde_json::Error> {
        serde_json::from_slice(body)
    }

    pub fn installation_id(&self) -> Option<i64> {
        self.installation.as_ref().map(|i| i.id)
    }

    pub fn repository(&self) -> Option<&str> {
        self.repository.as_ref().map(|r| r.full_name.as_str())
    }

    /// The queue key of the job that processes this delivery: deliveries about
    /// one issue or pull request (or one installation) are processed one at a
    /// time, so their effects happen in order.
    pub fn job_key(&self, kind: EventKind, delivery_id: &str) -> String {
        let thread = self
            .issue
            .as_ref()
            .or(self.pull_request.as_ref())
            .map(|n| n.number);
        match (self.repository(), thread, kind) {
            (Some(repo), Some(number), _) => format!("thread:{repo}#{number}"),
            (_, _, EventKind::Installation | EventKind::InstallationRepositories) => {
                match self.installation_id() {
                    Some(id) => format!("installation:{id}"),
                    None => format!("delivery:{delivery_id}"),
                }
            }
            _ => format!("delivery:{delivery_id}"),
        }
    }
}
