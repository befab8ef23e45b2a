//! `installation` events (the App installed, uninstalled, suspended…) and
//! `installation_repositories` (repositories added to or removed from an
//! installation).

use serde::Deserialize;

use super::{ParseError, Parts, RawPayload, RawRepoName};
use crate::events::{
    Event, EventKind, InstallationAction, InstallationId, ListedRepo, RepositoriesAction,
    RepositoryId,
};

#[derive(Deserialize)]
struct RawAccount {
    login: String,
    #[serde(rename = "type", default)]
    kind: String,
}

#[derive(Deserialize)]
struct RawInstallation {
    id: i64,
    /// `null` for an enterprise installation.
    #[serde(default)]
    account: Option<RawAccount>,
}

/// The event, with the repositories it lists.
pub(super) fn event(kind: EventKind, raw: RawPayload, p: Parts) -> Result<Event, ParseError> {
    let names = |list: Vec<RawRepoName>| list.into_iter().map(|r| r.full_name).collect();
    if kind != EventKind::Installation {
        return Ok(Event::InstallationRepositories {
            action: RepositoriesAction::parse(&p.action),
            installation: p.installation.ok_or_else(|| p.missing("installation"))?,
            added: names(raw.repositories_added),
            removed: raw
                .repositories_removed
                .into_iter()
                .map(|r| ListedRepo {
                    name: r.full_name,
                    id: r.id.map(RepositoryId),
                })
                .collect(),
            sender: p.sender,
        });
    }
    let value = raw.installation.ok_or_else(|| p.missing("installation"))?;
    let inst: RawInstallation =
        serde_json::from_value(value).map_err(|e| p.err(format!("installation: {e}")))?;
    Ok(Event::Installation {
        action: InstallationAction::parse(&p.action),
        installation: InstallationId(inst.id),
        account_login: inst
            .account
            .as_ref()
            .map(|a| a.login.clone())
            .unwrap_or_default(),
        account_type: inst.account.map(|a| a.kind).unwrap_or_default(),
        repositories: names(raw.repositories),
        sender: p.sender,
    })
}
