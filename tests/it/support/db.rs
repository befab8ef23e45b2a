//! A fresh database per test: a SQLite file in a temp dir, or, when
//! `TEST_DATABASE_URL` names a PostgreSQL server, a new database on it
//! (named `closer_test_…`, which CI drops before each run).

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
        let db_name = format!(
            "closer_test_{name}_{}_{}",
            std::process::id(),
            fastrand::u32(..)
        )
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

    /// Opens (and migrates) the database with the wall clock.
    pub async fn store(&self) -> Store {
        Store::open(&self.options(), closer::clock::system())
            .await
            .unwrap_or_else(|e| panic!("open {}: {e}", self.url))
    }
}
