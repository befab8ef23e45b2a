//! closer's integration tests: one binary, one module per area. Tests run on
//! SQLite, and on PostgreSQL when `TEST_DATABASE_URL` is set (a fresh
//! database per test).

mod support;

mod durability;
mod github_client;
mod intake;
mod queue;
mod store;
