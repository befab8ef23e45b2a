//! closer's integration tests: one binary, one module per area.

mod support;

mod github_client;
