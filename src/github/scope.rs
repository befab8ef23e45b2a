//! What an installation token may do: the least each use needs. A token is
//! minted for one repository and one of these permission sets (GitHub's
//! `repositories` and `permissions` in the token exchange), so a token that
//! leaks from one step can do no more than that step could: the API token
//! cannot push, the push token cannot comment, neither reaches another
//! repository of the installation.

use serde_json::{Value, json};

/// The permission set a token is minted with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TokenScope {
    /// Reading the repository: clone and fetch, files, issues, pull
    /// requests, a collaborator's permission.
    Read,
    /// The API writes: comments, labels, issue and pull request edits,
    /// reactions, opening the pull request. Cannot push.
    Write,
    /// `git push` of the run's branch: contents write, nothing else.
    Push,
}

impl TokenScope {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenScope::Read => "read",
            TokenScope::Write => "write",
            TokenScope::Push => "push",
        }
    }

    /// The `permissions` object of the token exchange.
    pub fn permissions(self) -> Value {
        match self {
            TokenScope::Read => json!({
                "metadata": "read",
                "contents": "read",
                "issues": "read",
                "pull_requests": "read",
            }),
            TokenScope::Write => json!({
                "metadata": "read",
                "issues": "write",
                "pull_requests": "write",
            }),
            TokenScope::Push => json!({
                "metadata": "read",
                "contents": "write",
            }),
        }
    }
}

/// The repository name (without owner) a REST path is about:
/// `/repos/{owner}/{name}/…` → `name`. Names are ASCII letters, digits and
/// `.-_`, which `client::encode` leaves as they are.
pub(crate) fn repository_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/repos/")?;
    let mut parts = rest.splitn(3, '/');
    let _owner = parts.next().filter(|o| !o.is_empty())?;
    let name = parts.next()?;
    let name = name.split(['?', '#']).next()?;
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_comes_from_the_path() {
        assert_eq!(repository_of("/repos/octo/calc"), Some("calc"));
        assert_eq!(repository_of("/repos/octo/calc/issues/1"), Some("calc"));
        assert_eq!(repository_of("/repos/octo/calc?x=1"), Some("calc"));
        assert_eq!(repository_of("/graphql"), None);
        assert_eq!(repository_of("/repos/octo"), None);
        assert_eq!(repository_of("/app/installations/1/access_tokens"), None);
    }

    #[test]
    fn only_the_push_may_write_contents() {
        for scope in [TokenScope::Read, TokenScope::Write] {
            assert_ne!(scope.permissions()["contents"], "write");
        }
        assert_eq!(TokenScope::Push.permissions()["contents"], "write");
        assert!(TokenScope::Push.permissions().get("issues").is_none());
    }
}
