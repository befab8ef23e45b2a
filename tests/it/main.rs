//! closer's integration tests: one binary, one module per area. Tests run on
//! SQLite, and on PostgreSQL when `TEST_DATABASE_URL` is set (a fresh
//! database per test).

mod support;

mod agent_cli_claude;
mod agent_cli_codex;
mod agent_cli_opencode;
mod bench_agents;
mod bench_checkout;
mod bench_sandbox;
mod cli;
mod confinement;
mod crash_story;
mod doctor;
mod durability;
mod edge;
mod fault_stories;
mod fresh_dir;
mod github_client;
mod github_projects;
mod github_redirects;
mod handler_source;
mod handlers;
mod intake;
mod judgment;
mod model_outage;
mod outgoing;
mod prompts;
mod question_corpus;
mod question_corpus_real;
mod queue;
mod replicas;
mod repo_config;
mod retention;
mod retry_permission;
mod security;
mod store;
mod stories;
mod story_agents;
mod story_branch_rewritten;
mod story_issue_edit;
mod story_label_removed;
mod story_renamed;
mod story_review;
mod story_review_edits;
mod story_review_ended;
mod story_review_rest;
mod story_review_threads;
mod story_transfer;
mod story_verified;
mod token_scope;
mod triage;
mod upgrade;
mod verification;
mod verified_push;
mod worktree_limits;
