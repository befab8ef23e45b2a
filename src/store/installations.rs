//! Installations of the App and the repositories each one covers, kept from
//! `installation` and `installation_repositories` events.

use sqlx::{AnyPool, Row};

use super::StoreError;
use crate::clock::Millis;

/// One installation as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installation {
    pub id: i64,
    pub account_login: String,
    pub account_type: String,
    pub suspended_at: Option<Millis>,
}

/// Creates or refreshes an installation (a new one is not suspended).
pub async fn upsert(
    pool: &AnyPool,
    id: i64,
    account_login: &str,
    account_type: &str,
    now: Millis,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO installations (id, account_login, account_type, suspended_at, created_at, \
         updated_at) VALUES ($1, $2, $3, NULL, $4, $4) ON CONFLICT (id) DO UPDATE SET \
         account_login = excluded.account_login, account_type = excluded.account_type, \
         updated_at = excluded.updated_at",
    )
    .bind(id)
    .bind(account_login)
    .bind(account_type)
    .bind(now)
    .execute(pool)
    .await?;
    Ok(())
}

/// Removes an installation and its repository list.
pub async fn delete(pool: &AnyPool, id: i64) -> Result<(), StoreError> {
    let mut tx = pool.begin().await?;
    sqlx::query("DELETE FROM installation_repositories WHERE installation_id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM installations WHERE id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// Marks an installation suspended (`Some(time)`) or active again (`None`).
pub async fn set_suspended(
    pool: &AnyPool,
    id: i64,
    suspended_at: Option<Millis>,
    now: Millis,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE installations SET suspended_at = $1, updated_at = $2 WHERE id = $3")
        .bind(suspended_at)
        .bind(now)
        .bind(id)
        .execute(pool)
        .await?;
    Ok(())
}

/// Adds repositories to an installation (idempotent).
pub async fn add_repositories(
    pool: &AnyPool,
    id: i64,
    repositories: &[String],
) -> Result<(), StoreError> {
    let mut tx = pool.begin().await?;
    for repo in repositories {
        sqlx::query(
            "INSERT INTO installation_repositories (installation_id, repository) VALUES ($1, $2) \
             ON CONFLICT DO NOTHING",
        )
        .bind(id)
        .bind(repo)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Removes repositories from an installation.
pub async fn remove_repositories(
    pool: &AnyPool,
    id: i64,
    repositories: &[String],
) -> Result<(), StoreError> {
    let mut tx = pool.begin().await?;
    for repo in repositories {
        sqlx::query(
            "DELETE FROM installation_repositories WHERE installation_id = $1 AND repository = $2",
        )
        .bind(id)
        .bind(repo)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

pub async fn get(pool: &AnyPool, id: i64) -> Result<Option<Installation>, StoreError> {
    let row = sqlx::query(
        "SELECT id, account_login, account_type, suspended_at FROM installations WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?;
    row.map(|row| {
        Ok(Installation {
            id: row.try_get("id")?,
            account_login: row.try_get("account_login")?,
            account_type: row.try_get("account_type")?,
            suspended_at: row.try_get("suspended_at")?,
        })
    })
    .transpose()
}

/// Records repository `old` of installation `id`, if recorded, as `new`
/// (renamed or moved).
pub async fn rename_repository(
    pool: &AnyPool,
    id: i64,
    old: &str,
    new: &str,
) -> Result<(), StoreError> {
    let mut tx = pool.begin().await?;
    sqlx::query(
        "UPDATE installation_repositories SET repository = $1 \
         WHERE installation_id = $2 AND LOWER(repository) = LOWER($3) \
         AND NOT EXISTS (SELECT 1 FROM installation_repositories AS n \
         WHERE n.installation_id = $2 AND n.repository = $1)",
    )
    .bind(new)
    .bind(id)
    .bind(old)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "DELETE FROM installation_repositories \
         WHERE installation_id = $1 AND LOWER(repository) = LOWER($2) AND repository <> $3",
    )
    .bind(id)
    .bind(old)
    .bind(new)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// The repositories recorded for an installation, sorted.
pub async fn repositories(pool: &AnyPool, id: i64) -> Result<Vec<String>, StoreError> {
    let rows = sqlx::query(
        "SELECT repository FROM installation_repositories WHERE installation_id = $1 \
         ORDER BY repository",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;
    rows.iter().map(|r| Ok(r.try_get("repository")?)).collect()
}
