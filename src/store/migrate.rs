//! Schema migrations, embedded in the binary: one folder per backend because
//! the DDL differs, the same version numbers in both. A released migration is
//! never edited; a change is a new file. Applied at start and by
//! `closer migrate`; on PostgreSQL an advisory lock keeps two replicas from
//! migrating at once. That lock is waited for as long as it takes; the
//! migrations' own statements keep the connection's 10 s lock timeout, so
//! one that would queue behind another replica's long query fails the
//! start instead of stalling every query queued behind it.

use sqlx::{AnyPool, Row};

use super::{Backend, Store, StoreError};

struct Migration {
    version: i64,
    name: &'static str,
    sqlite: &'static str,
    postgres: &'static str,
}

const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "foundation",
        sqlite: include_str!("../../migrations/sqlite/0001_foundation.sql"),
        postgres: include_str!("../../migrations/postgres/0001_foundation.sql"),
    },
    Migration {
        version: 2,
        name: "verification",
        sqlite: include_str!("../../migrations/sqlite/0002_verification.sql"),
        postgres: include_str!("../../migrations/postgres/0002_verification.sql"),
    },
    Migration {
        version: 3,
        name: "runs",
        sqlite: include_str!("../../migrations/sqlite/0003_runs.sql"),
        postgres: include_str!("../../migrations/postgres/0003_runs.sql"),
    },
    Migration {
        version: 4,
        name: "handled_commands",
        sqlite: include_str!("../../migrations/sqlite/0004_handled_commands.sql"),
        postgres: include_str!("../../migrations/postgres/0004_handled_commands.sql"),
    },
    Migration {
        version: 5,
        name: "triage",
        sqlite: include_str!("../../migrations/sqlite/0005_triage.sql"),
        postgres: include_str!("../../migrations/postgres/0005_triage.sql"),
    },
    Migration {
        version: 6,
        name: "handled_events",
        sqlite: include_str!("../../migrations/sqlite/0006_handled_events.sql"),
        postgres: include_str!("../../migrations/postgres/0006_handled_events.sql"),
    },
    Migration {
        version: 7,
        name: "run_generation",
        sqlite: include_str!("../../migrations/sqlite/0007_run_generation.sql"),
        postgres: include_str!("../../migrations/postgres/0007_run_generation.sql"),
    },
    Migration {
        version: 8,
        name: "finished_jobs_by_key",
        sqlite: include_str!("../../migrations/sqlite/0008_finished_jobs_by_key.sql"),
        postgres: include_str!("../../migrations/postgres/0008_finished_jobs_by_key.sql"),
    },
    Migration {
        version: 9,
        name: "review_texts",
        sqlite: include_str!("../../migrations/sqlite/0009_review_texts.sql"),
        postgres: include_str!("../../migrations/postgres/0009_review_texts.sql"),
    },
    Migration {
        version: 10,
        name: "queued_jobs_by_key",
        sqlite: include_str!("../../migrations/sqlite/0010_queued_jobs_by_key.sql"),
        postgres: include_str!("../../migrations/postgres/0010_queued_jobs_by_key.sql"),
    },
    Migration {
        version: 11,
        name: "message_standing",
        sqlite: include_str!("../../migrations/sqlite/0011_message_standing.sql"),
        postgres: include_str!("../../migrations/postgres/0011_message_standing.sql"),
    },
    Migration {
        version: 12,
        name: "run_repository_id",
        sqlite: include_str!("../../migrations/sqlite/0012_run_repository_id.sql"),
        postgres: include_str!("../../migrations/postgres/0012_run_repository_id.sql"),
    },
    Migration {
        version: 13,
        name: "deleted_comments",
        sqlite: include_str!("../../migrations/sqlite/0013_deleted_comments.sql"),
        postgres: include_str!("../../migrations/postgres/0013_deleted_comments.sql"),
    },
    Migration {
        version: 14,
        name: "workspaces",
        sqlite: include_str!("../../migrations/sqlite/0014_workspaces.sql"),
        postgres: include_str!("../../migrations/postgres/0014_workspaces.sql"),
    },
];

/// The advisory lock a replica holds on PostgreSQL while it migrates, an
/// arbitrary constant (`pg_locks` shows it as `classid` 25452 (0x636c),
/// `objid` 1869833586 (0x6f736572)).
pub const PG_LOCK_KEY: i64 = 0x636c_6f73_6572;

/// The newest version this binary knows.
pub fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// The newest version applied to the database (0 for an empty one).
pub async fn current_version(pool: &AnyPool) -> Result<i64, StoreError> {
    let row = sqlx::query("SELECT COALESCE(MAX(version), 0) AS v FROM closer_migrations")
        .fetch_one(pool)
        .await?;
    Ok(row.try_get::<i64, _>("v")?)
}

/// Applies every migration newer than the database, each in its own
/// transaction. Returns the versions applied.
pub async fn run(store: &Store) -> Result<Vec<i64>, StoreError> {
    let pool = store.pool();
    let mut lock_conn = pool.acquire().await?;
    if store.backend() == Backend::Postgres {
        // Another replica may be migrating for longer than the connection's
        // lock timeout: the wait for its lock is not bounded (the lock is the
        // session's, so it outlives the transaction that takes it).
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "BEGIN; SET LOCAL lock_timeout = 0; SELECT pg_advisory_lock({PG_LOCK_KEY}); COMMIT"
        )))
        .execute(&mut *lock_conn)
        .await?;
    }
    let result = apply_pending(store, &mut lock_conn).await;
    if store.backend() == Backend::Postgres {
        sqlx::query("SELECT pg_advisory_unlock($1)")
            .bind(PG_LOCK_KEY)
            .execute(&mut *lock_conn)
            .await?;
    }
    result
}

async fn apply_pending(
    store: &Store,
    conn: &mut sqlx::pool::PoolConnection<sqlx::Any>,
) -> Result<Vec<i64>, StoreError> {
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS closer_migrations (
            version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)",
    )
    .execute(&mut **conn)
    .await?;
    let current = {
        let row = sqlx::query("SELECT COALESCE(MAX(version), 0) AS v FROM closer_migrations")
            .fetch_one(&mut **conn)
            .await?;
        row.try_get::<i64, _>("v")?
    };
    if current > latest_version() {
        return Err(StoreError::NewerSchema(current));
    }
    let mut applied = Vec::new();
    for migration in MIGRATIONS.iter().filter(|m| m.version > current) {
        let sql = match store.backend() {
            Backend::Sqlite => migration.sqlite,
            Backend::Postgres => migration.postgres,
        };
        let wrap = |source| StoreError::Migration {
            version: migration.version,
            name: migration.name,
            source,
        };
        // On SQLite the write lock is taken at `BEGIN`, and the version read
        // again under it: another process may have applied it meanwhile
        // (PostgreSQL's replicas wait on the advisory lock instead).
        let begin = match store.backend() {
            Backend::Sqlite => "BEGIN IMMEDIATE",
            Backend::Postgres => "BEGIN",
        };
        let mut tx = sqlx::Connection::begin_with(&mut **conn, begin)
            .await
            .map_err(wrap)?;
        let done: i64 =
            sqlx::query("SELECT COUNT(*) AS n FROM closer_migrations WHERE version = $1")
                .bind(migration.version)
                .fetch_one(&mut *tx)
                .await
                .and_then(|row| row.try_get("n"))
                .map_err(wrap)?;
        if done > 0 {
            continue;
        }
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut *tx)
            .await
            .map_err(wrap)?;
        sqlx::query(
            "INSERT INTO closer_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
        )
        .bind(migration.version)
        .bind(migration.name)
        .bind(store.now_ms())
        .execute(&mut *tx)
        .await
        .map_err(wrap)?;
        tx.commit().await.map_err(wrap)?;
        tracing::info!(
            version = migration.version,
            name = migration.name,
            "migration applied"
        );
        applied.push(migration.version);
    }
    Ok(applied)
}
