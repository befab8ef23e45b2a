//! The integration-test binary: one module per area, shared helpers in `support`.

mod support;

mod handlers;
mod judgment;
mod prompts;
mod question_corpus;
mod repo_config;
