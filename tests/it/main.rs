//! The integration-test binary: one module per area, shared helpers in `support`.

mod support;

mod judgment;
mod repo_config;
