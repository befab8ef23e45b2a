//! The database: SQLite by default, PostgreSQL for several replicas.
//!
//! One [`Store`] wraps an `AnyPool`; the queries are written once with `$n`
//! placeholders and run on both backends (times as i64 milliseconds, JSON as
//! text). Each table family has its own module of free functions over an
//! executor; `Store` is the thin facade the rest of the program holds.
//! Nothing here knows about HTTP or GitHub.

pub mod deliveries;
pub mod dry_run;
pub mod installations;
pub mod jobs;
pub mod migrate;
mod nodelay;
pub mod runs;
pub mod verification;
pub mod writer;

use std::str::FromStr;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, ConnectOptions, Executor};

use crate::clock::SharedClock;

/// Which database the URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// `sqlite:` or `postgres:`/`postgresql:`; anything else is refused.
    pub fn from_url(url: &str) -> Result<Backend, StoreError> {
        if url.starts_with("sqlite:") {
            Ok(Backend::Sqlite)
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Ok(Backend::Postgres)
        } else {
            Err(StoreError::UnsupportedUrl)
        }
    }
}

/// How durable a SQLite commit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// WAL with `synchronous=NORMAL`: a committed delivery survives the
    /// process being killed, not necessarily a power loss.
    #[default]
    Process,
    /// WAL with `synchronous=FULL`: every commit (one per intake batch) is
    /// fsynced and survives a power loss too.
    Fsync,
}

/// Errors of the store layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("DATABASE_URL must start with sqlite: or postgres:")]
    UnsupportedUrl,
    #[error("database error: {0}")]
    Sqlx(#[from] sqlx::Error),
    #[error("migration {version} ({name}) failed: {source}")]
    Migration {
        version: i64,
        name: &'static str,
        source: sqlx::Error,
    },
    #[error("the database has migration {0}, newer than this binary knows; upgrade closer")]
    NewerSchema(i64),
    #[error("stored payload could not be decoded: {0}")]
    Payload(String),
}

/// Connection settings.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub url: String,
    pub max_connections: u32,
    pub durability: Durability,
}

impl StoreOptions {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            max_connections: 8,
            durability: Durability::Process,
        }
    }
}

/// The database handle the program shares.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    clock: SharedClock,
}

impl Store {
    /// Connects (creating a SQLite file if needed); does not migrate.
    pub async fn connect(options: &StoreOptions, clock: SharedClock) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        let backend = Backend::from_url(&options.url)?;
        let url = match backend {
            Backend::Sqlite if !options.url.contains("mode=") => {
                let sep = if options.url.contains('?') { '&' } else { '?' };
                format!("{}{sep}mode=rwc", options.url)
            }
            _ => options.url.clone(),
        };
        let connect = AnyConnectOptions::from_str(&url)?.disable_statement_logging();
        let durability = options.durability;
        let pool = AnyPoolOptions::new()
            .max_connections(options.max_connections)
            .min_connections(if backend == Backend::Sqlite { 1 } else { 0 })
            .acquire_timeout(Duration::from_secs(10))
            // A ping per checkout cost ~23% of intake throughput; a dead
            // connection surfaces as an error on use and is replaced.
            .test_before_acquire(false)
            .after_connect(move |conn, _meta| {
                Box::pin(async move {
                    if backend == Backend::Postgres {
                        nodelay::set_on_all_tcp_sockets();
                    }
                    if backend == Backend::Sqlite {
                        let sync = match durability {
                            Durability::Process => "NORMAL",
                            Durability::Fsync => "FULL",
                        };
                        conn.execute(sqlx::AssertSqlSafe(format!(
                            "PRAGMA journal_mode = WAL; PRAGMA synchronous = {sync}; \
                             PRAGMA busy_timeout = 10000; PRAGMA foreign_keys = ON;"
                        )))
                        .await?;
                    }
                    Ok(())
                })
            })
            .connect_with(connect)
            .await?;
        Ok(Store {
            pool,
            backend,
            clock,
        })
    }

    /// Connects and applies every pending migration.
    pub async fn open(options: &StoreOptions, clock: SharedClock) -> Result<Store, StoreError> {
        let store = Store::connect(options, clock).await?;
        migrate::run(&store).await?;
        Ok(store)
    }

    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Database reachable and schema current: what `/readyz` reports.
    pub async fn ready(&self) -> Result<(), StoreError> {
        let applied = migrate::current_version(&self.pool).await?;
        if applied < migrate::latest_version() {
            return Err(StoreError::Migration {
                version: migrate::latest_version(),
                name: "pending",
                source: sqlx::Error::Protocol("migrations not applied".into()),
            });
        }
        Ok(())
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}
