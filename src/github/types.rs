//! Our own GitHub vocabulary. Strings that arrive from GitHub (names,
//! permissions, actions) become these types at the boundary; octocrab's models
//! never leave `github/`. The identifiers and the permission ladder are the
//! model's (`crate::model`), shared by every layer; they are re-exported here
//! for the GitHub layer's callers.

pub use crate::model::{
    DeliveryId, InstallationId, IssueNumber, Permission, RepoName, RepositoryId,
};
