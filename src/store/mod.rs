//! The database: SQLite by default, PostgreSQL for several replicas.
//!
//! One [`Store`] wraps an `AnyPool`; the queries are written once with `$n`
//! placeholders and run on both backends (times as i64 milliseconds, JSON as
//! text). Each table family has its own module of free functions over an
//! executor; `Store` is the thin facade the rest of the program holds.
//! The store depends on the model (`crate::model`) and never on the engine:
//! text read back becomes the model's types here, and the engine's own
//! documents (run data, evidence) stay JSON text to it. It knows no HTTP and
//! no GitHub API; the one exception is `dry_run.rs`, which implements the
//! GitHub client's recorder hook so that `--dry-run` writes are kept.

pub mod commands;
pub mod deleted_comments;
pub mod deliveries;
pub mod dry_run;
pub mod handled_events;
pub mod installations;
pub mod jobs;
pub mod messages;
pub mod migrate;
mod nodelay;
pub mod open_work;
pub mod replaced;
pub mod review_texts;
pub mod runs;
pub mod verification;
pub mod withdrawn;
pub mod workspaces;
pub mod writer;

use std::path::{Path, PathBuf};
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
    #[error(
        "an in-memory SQLite database would lose every delivery when closer stops; \
         name a file (sqlite://closer.db)"
    )]
    InMemorySqlite,
    #[error("database error: {0}")]
    Sqlx(#[from] sqlx::Error),
    #[error("database error (intake writer): {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("migration {version} ({name}) failed: {source}")]
    Migration {
        version: i64,
        name: &'static str,
        source: sqlx::Error,
    },
    #[error("cannot create the database file {}: {source}", path.display())]
    CreateFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the database has migration {0}, newer than this binary knows; upgrade closer")]
    NewerSchema(i64),
    #[error("stored payload could not be decoded: {0}")]
    Payload(String),
    /// A stored value closer does not know (written by a newer version, or
    /// by hand): an error naming the column and the value, never a default.
    #[error("database holds {0}")]
    Unknown(#[from] crate::model::UnknownValue),
}

impl StoreError {
    /// Whether the same statement may succeed when tried again: the
    /// database was busy, locked, full or out of reach, not a statement or
    /// a value it can never accept.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Sqlx(e) => match e {
                sqlx::Error::Database(db) => db.code().is_some_and(|code| transient_code(&code)),
                sqlx::Error::Io(_)
                | sqlx::Error::Tls(_)
                | sqlx::Error::Protocol(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::WorkerCrashed => true,
                _ => false,
            },
            StoreError::Sqlite(e) => e
                .sqlite_error()
                .is_some_and(|e| sqlite_transient(e.extended_code)),
            _ => false,
        }
    }
}

/// Whether a database error code says "busy, locked, full or out of
/// reach": SQLite's result codes (busy, locked, I/O error, full, by their
/// primary code) or PostgreSQL's SQLSTATEs (connection exceptions,
/// serialization failures and deadlocks, insufficient resources, the
/// server shutting down, a lock not available).
///
/// A SQLSTATE has five characters; SQLite's extended codes (in decimal)
/// have at most four.
fn transient_code(code: &str) -> bool {
    if code.len() == 5 {
        return code.starts_with("08")
            || code.starts_with("53")
            || matches!(
                code,
                "40001" | "40P01" | "57P01" | "57P02" | "57P03" | "55P03"
            );
    }
    code.parse::<i32>().is_ok_and(sqlite_transient)
}

/// SQLite's busy, locked, I/O error and full, by the primary code of an
/// (extended) result code.
fn sqlite_transient(code: i32) -> bool {
    matches!(code & 0xff, 5 | 6 | 10 | 13)
}

/// Connection settings.
#[derive(Clone)]
pub struct StoreOptions {
    pub url: String,
    pub max_connections: u32,
    pub durability: Durability,
}

/// The URL without its password (`postgres://user:…@host` keeps the
/// user): a configuration printed for debugging shows no secret.
impl std::fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreOptions")
            .field("url", &without_password(&self.url))
            .field("max_connections", &self.max_connections)
            .field("durability", &self.durability)
            .finish()
    }
}

/// `url` with the password of its authority (`user:password@`) replaced.
pub fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
            let masked = if userinfo.contains(':') {
                ":[REDACTED]"
            } else {
                ""
            };
            format!("{scheme}://{user}{masked}@{host}{path}")
        }
        None => url.to_owned(),
    }
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

/// Creates a SQLite database file that does not exist yet readable by its
/// owner only (0600): it holds private repositories' issues, comments and
/// prompts. SQLite gives its `-wal` and `-shm` files the database file's
/// mode. A file that exists is left as it is (decision 236); `closer
/// doctor` says when others can read it.
fn create_private(file: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file)
    {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(StoreError::CreateFile {
            path: file.to_owned(),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// The database handle the program shares.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    clock: SharedClock,
    /// The database file, on SQLite (the intake writer opens its own
    /// connection to it).
    sqlite_file: Option<PathBuf>,
    durability: Durability,
}

impl Store {
    /// Connects (creating a SQLite file if needed); does not migrate.
    pub async fn connect(options: &StoreOptions, clock: SharedClock) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        let backend = Backend::from_url(&options.url)?;
        if backend == Backend::Sqlite && sqlite_in_memory(&options.url) {
            return Err(StoreError::InMemorySqlite);
        }
        let url = match backend {
            Backend::Sqlite if !options.url.contains("mode=") => {
                let sep = if options.url.contains('?') { '&' } else { '?' };
                format!("{}{sep}mode=rwc", options.url)
            }
            _ => options.url.clone(),
        };
        let sqlite_file = match backend {
            Backend::Sqlite => Some(
                sqlx::sqlite::SqliteConnectOptions::from_str(&url)?
                    .get_filename()
                    .to_owned(),
            ),
            Backend::Postgres => None,
        };
        if let Some(file) = sqlite_file.as_ref().filter(|_| url.contains("mode=rwc")) {
            create_private(file)?;
        }
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
                        conn.execute(POSTGRES_WAIT_BOUNDS).await?;
                    }
                    if backend == Backend::Sqlite {
                        let pragmas = sqlite_pragmas(durability, POOL_CACHE_KIB);
                        conn.execute(sqlx::AssertSqlSafe(pragmas)).await?;
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
            sqlite_file,
            durability,
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

    /// The database file, on SQLite.
    pub fn sqlite_file(&self) -> Option<&Path> {
        self.sqlite_file.as_deref()
    }

    pub fn durability(&self) -> Durability {
        self.durability
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

/// The waits PostgreSQL leaves unbounded by default, bounded on each of the
/// pool's connections unless the operator bounded them already (for the
/// role, the database or the server, or with `options` in the URL): a
/// statement waits at most 10 s for a lock (SQLite's busy timeout), then
/// fails with SQLSTATE 55P03, which the callers treat as transient; and a
/// session left idle inside a transaction for 60 s is ended by the server,
/// releasing its locks. closer's transactions hold only database work, so
/// only a stuck or cut-off replica leaves one idle that long. Migrations
/// wait for their advisory lock without the bound (`migrate::run`).
const POSTGRES_WAIT_BOUNDS: &str = "SELECT \
    CASE WHEN current_setting('lock_timeout') = '0' \
         THEN set_config('lock_timeout', '10s', false) END, \
    CASE WHEN current_setting('idle_in_transaction_session_timeout') = '0' \
         THEN set_config('idle_in_transaction_session_timeout', '60s', false) END";

/// The settings every SQLite connection gets: WAL (readers never wait for the
/// writer), the durability asked for, a wait instead of an error when another
/// connection holds the write lock, enforced foreign keys, and a page cache
/// of `cache_kib`.
pub(crate) fn sqlite_pragmas(durability: Durability, cache_kib: u32) -> String {
    let sync = match durability {
        Durability::Process => "NORMAL",
        Durability::Fsync => "FULL",
    };
    format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = {sync}; \
         PRAGMA busy_timeout = 10000; PRAGMA foreign_keys = ON; \
         PRAGMA cache_size = -{cache_kib};"
    )
}

/// The page cache of each pool connection. Each of the pool's connections
/// keeps a cache of its own (SQLite's default, 2 MiB, made eight connections
/// up to 16 MiB); what they read is small and hot, and the operating
/// system's cache holds the file anyway. On the realistic mix a quarter
/// megabyte each cost no measurable rate and 3–4 MB of resident memory
/// (docs/benchmarks.md, run 4).
const POOL_CACHE_KIB: u32 = 256;

/// The intake writer's page cache, SQLite's default: its inserts land on
/// pages all over the delivery-id index.
pub(crate) const WRITER_CACHE_KIB: u32 = 2000;

/// `sqlite::memory:`, `sqlite://:memory:`, `sqlite://?mode=memory`: a
/// database that lives only as long as its connection.
fn sqlite_in_memory(url: &str) -> bool {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let path = path.trim_start_matches("sqlite:").trim_start_matches("//");
    path == ":memory:" || query.split('&').any(|pair| pair == "mode=memory")
}

#[cfg(test)]
mod tests {
    use super::{StoreError, StoreOptions, sqlite_in_memory};

    #[test]
    fn debug_output_shows_no_database_password() {
        let options = StoreOptions::new("postgres://closer:hunter2@db:5432/closer?sslmode=require");
        let shown = format!("{options:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(
            shown.contains("postgres://closer:[REDACTED]@db:5432/closer?sslmode=require"),
            "{shown}"
        );
        for plain in [
            "sqlite://closer.db",
            "postgres://db/closer",
            "postgres://u@db/x",
        ] {
            assert!(format!("{:?}", StoreOptions::new(plain)).contains(plain));
        }
    }

    #[test]
    fn a_busy_database_is_worth_another_try_a_refused_value_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.db");
        let holder = rusqlite::Connection::open(&file).unwrap();
        holder
            .execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY); INSERT INTO t VALUES (1);")
            .unwrap();
        let other = rusqlite::Connection::open(&file).unwrap();
        other.busy_timeout(std::time::Duration::ZERO).unwrap();

        let duplicate = other.execute("INSERT INTO t VALUES (1)", []).unwrap_err();
        assert!(!StoreError::Sqlite(duplicate).is_transient());

        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        let busy = other.execute("INSERT INTO t VALUES (2)", []).unwrap_err();
        assert!(StoreError::Sqlite(busy).is_transient());
        assert!(StoreError::Sqlx(sqlx::Error::PoolTimedOut).is_transient());
        // As sqlx reports them: SQLite's extended codes, PostgreSQL's SQLSTATEs.
        assert!(super::transient_code("5") && super::transient_code("517"));
        assert!(!super::transient_code("1555") && !super::transient_code("1"));
        assert!(super::transient_code("40P01") && super::transient_code("08006"));
        assert!(super::transient_code("8714")); // SQLITE_IOERR_IN_PAGE
        assert!(!super::transient_code("23505") && !super::transient_code("42P01"));
        assert!(!StoreError::Sqlx(sqlx::Error::RowNotFound).is_transient());
    }

    #[test]
    fn in_memory_urls_are_recognised() {
        for url in [
            "sqlite::memory:",
            "sqlite://:memory:",
            "sqlite://?mode=memory",
            "sqlite://x.db?cache=shared&mode=memory",
        ] {
            assert!(sqlite_in_memory(url), "{url}");
        }
        for url in [
            "sqlite://closer.db",
            "sqlite:closer.db?mode=rwc",
            "sqlite:///tmp/m.db",
        ] {
            assert!(!sqlite_in_memory(url), "{url}");
        }
    }
}
