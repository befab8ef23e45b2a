//! Who may steer the bot: GitHub's repository permissions as a ladder.

use serde::{Deserialize, Serialize};

/// A user's permission on a repository, ordered from least to most.
/// Parsed from the collaborator-permission API's `role_name`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    None,
    Read,
    Triage,
    #[default]
    Write,
    Maintain,
    Admin,
}

impl Permission {
    /// Maps GitHub's `role_name` (or legacy `permission`) onto the ladder.
    /// Custom roles are not understood and count as `None`.
    pub fn from_role_name(role: &str) -> Permission {
        match role {
            "admin" => Permission::Admin,
            "maintain" => Permission::Maintain,
            "write" | "push" => Permission::Write,
            "triage" => Permission::Triage,
            "read" | "pull" => Permission::Read,
            _ => Permission::None,
        }
    }

    /// A role GitHub defines; `None` for a custom role.
    pub fn known_role(role: &str) -> Option<Permission> {
        match Permission::from_role_name(role) {
            Permission::None if role != "none" => None,
            p => Some(p),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Permission::None => "none",
            Permission::Read => "read",
            Permission::Triage => "triage",
            Permission::Write => "write",
            Permission::Maintain => "maintain",
            Permission::Admin => "admin",
        }
    }
}
