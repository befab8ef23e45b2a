//! `repository` events: a repository renamed, or moved to another owner,
//! with the name it had (its other actions carry none), or deleted.

use serde::Deserialize;

use super::{Parts, RawFrom, RawPayload, repo};
use crate::events::{Event, ParseError, RepositoryAction};
use crate::github::types::RepoName;

/// `changes.repository` of a `renamed`: `{"name": {"from": "<old name>"}}`.
#[derive(Deserialize)]
pub(super) struct RawRenamed {
    name: RawFrom,
}

/// `changes.owner` of a `transferred`:
/// `{"from": {"user" | "organization": {"login": …}}}`.
#[derive(Deserialize)]
pub(super) struct RawOwnerFrom {
    from: RawOwner,
}

#[derive(Deserialize)]
struct RawOwner {
    #[serde(default)]
    user: Option<RawLogin>,
    #[serde(default)]
    organization: Option<RawLogin>,
}

#[derive(Deserialize)]
struct RawLogin {
    login: String,
}

/// The event, with the earlier name for `renamed` and `transferred`.
pub(super) fn event(raw: RawPayload, p: Parts) -> Result<Event, ParseError> {
    let repo = repo(raw.repository, &|m| p.err(m))?;
    let action = RepositoryAction::parse(&p.action);
    let changes = raw.changes.as_ref();
    let previous = match action {
        RepositoryAction::Renamed => changes
            .and_then(|c| c.repository.as_ref())
            .and_then(|r| r.name.from.as_deref())
            .map(|old| RepoName::new(repo.name.owner(), old)),
        RepositoryAction::Transferred => changes
            .and_then(|c| c.owner.as_ref())
            .and_then(|o| match (&o.from.user, &o.from.organization) {
                (_, Some(owner)) | (Some(owner), None) => Some(owner.login.clone()),
                (None, None) => None,
            })
            .map(|old| RepoName::new(old, repo.name.name())),
        RepositoryAction::Deleted | RepositoryAction::Other(_) => None,
    };
    Ok(Event::Repository {
        action,
        installation: p.installation,
        repo,
        previous,
        sender: p.sender,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::events::{Event, EventKind, parse_event};

    fn fixture(name: &str) -> Value {
        let path = format!(
            "{}/tests/fixtures/github-webhooks/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {path}: {e}"));
        serde_json::from_slice(&text).expect("fixtures are JSON")
    }

    /// The repository's name now and the one it had, as parsed.
    fn names(v: &Value) -> (String, Option<String>) {
        match parse_event(EventKind::Repository, v.to_string().as_bytes()) {
            Ok(Event::Repository { repo, previous, .. }) => {
                (repo.name.to_string(), previous.map(|p| p.to_string()))
            }
            other => panic!("{other:?}"),
        }
    }

    /// A renamed or moved repository's earlier name, from `changes`.
    #[test]
    fn a_repository_event_names_what_the_repository_was_called() {
        let mut renamed = fixture("repository.renamed.json");
        let (now, was) = names(&renamed);
        assert_eq!(now, "Octocoders/Hello-World");
        assert_eq!(was.as_deref(), Some("Octocoders/Hello-World"));
        // GitHub's example renames to the name it had; the name comes
        // from `changes`, not from the repository.
        renamed["changes"]["repository"]["name"]["from"] = json!("Old-World");
        assert_eq!(names(&renamed).1.as_deref(), Some("Octocoders/Old-World"));

        let mut moved = fixture("repository.transferred.json");
        assert_eq!(names(&moved).1.as_deref(), Some("octocat/Hello-World"));
        moved["changes"]["owner"]["from"] = json!({"organization": {"login": "acme"}});
        assert_eq!(names(&moved).1.as_deref(), Some("acme/Hello-World"));
        moved["action"] = json!("edited");
        assert_eq!(names(&moved).1, None);
    }

    /// A deleted repository: the action, its name and id, no earlier name.
    #[test]
    fn a_deleted_repository_is_read_with_its_id() {
        let mut deleted = fixture("repository.renamed.json");
        deleted["action"] = json!("deleted");
        let body = deleted.to_string();
        match parse_event(EventKind::Repository, body.as_bytes()) {
            Ok(Event::Repository {
                action,
                repo,
                previous,
                ..
            }) => {
                assert_eq!(action, crate::events::RepositoryAction::Deleted);
                assert_eq!(repo.name.to_string(), "Octocoders/Hello-World");
                assert!(repo.id.is_some());
                assert_eq!(previous, None);
            }
            other => panic!("{other:?}"),
        }
    }
}
