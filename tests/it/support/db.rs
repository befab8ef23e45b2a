//! A fresh database per test: a SQLite file in a temp dir, or, when
//! `TEST_DATABASE_URL` names a PostgreSQL server, a new database on it.

use std::sync::Arc;

use closer::clock::SharedClock;
use closer::store::{Backend, Store, StoreOptions};
use sqlx::Connection;

pub struct TestDb {
    pub url: String,
    pub backend: Backend,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    pub async fn new(name: &str) -> TestDb {
        match std::env::var("TEST_DATABASE_URL") {
            Ok(server) if !server.is_empty() => Self::postgres(&server, name).await,
            _ => Self::sqlite(),
        }
    }

    /// A SQLite database file in `dir` (e.g. on a small disk of its own).
    pub fn sqlite_in(dir: &std::path::Path) -> TestDb {
        TestDb {
            url: format!("sqlite://{}", dir.join("closer.db").display()),
            backend: Backend::Sqlite,
            _dir: None,
        }
    }

    fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("closer.db").display());
        TestDb {
            url,
            backend: Backend::Sqlite,
            _dir: Some(dir),
        }
    }

    async fn postgres(server: &str, name: &str) -> TestDb {
        sqlx::any::install_default_drivers();
        let db_name = super::unique(&format!("closer_test_{name}"))
            .to_lowercase()
            .replace(|c: char| !c.is_ascii_alphanumeric() && c != '_', "_");
        let mut conn = sqlx::AnyConnection::connect(server)
            .await
            .unwrap_or_else(|e| panic!("TEST_DATABASE_URL is set but unreachable: {e}"));
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "CREATE DATABASE \"{db_name}\""
        )))
        .execute(&mut conn)
        .await
        .expect("create test database");
        let base = server.split('?').next().unwrap_or(server);
        let root = base.rsplit_once('/').map_or(base, |(root, _)| root);
        TestDb {
            url: format!("{root}/{db_name}"),
            backend: Backend::Postgres,
            _dir: None,
        }
    }

    pub fn options(&self) -> StoreOptions {
        StoreOptions::new(self.url.clone())
    }

    /// The database as it is, not migrated: for reading what another
    /// process (an earlier release, say) wrote.
    pub async fn as_it_is(&self) -> sqlx::AnyPool {
        sqlx::any::install_default_drivers();
        sqlx::any::AnyPoolOptions::new()
            .max_connections(1)
            .connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("connect {}: {e}", self.url))
    }

    /// Opens (and migrates) the database with the wall clock.
    pub async fn store(&self) -> Store {
        self.store_with_clock(closer::clock::system()).await
    }

    pub async fn store_with_clock(&self, clock: SharedClock) -> Store {
        Store::open(&self.options(), clock)
            .await
            .unwrap_or_else(|e| panic!("open {}: {e}", self.url))
    }
}

/// A manual clock shared between a test and the code under test.
pub fn manual_clock(start: i64) -> (Arc<closer::clock::ManualClock>, SharedClock) {
    let clock = Arc::new(closer::clock::ManualClock::new(start));
    let shared: SharedClock = clock.clone();
    (clock, shared)
}
