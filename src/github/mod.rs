//! GitHub: App authentication, one client per installation, our own types for
//! what GitHub sends. octocrab stays inside this module.

pub mod types;
