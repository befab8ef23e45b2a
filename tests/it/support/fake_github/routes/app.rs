//! `GET /app` and the token exchange, both authenticated by the App JWT.

use std::collections::{BTreeMap, BTreeSet};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::super::auth;
use super::super::json;
use super::super::state::IssuedToken;
use super::{Answer, Fake, body, invalid, lock, reply};

pub async fn get_app(State(fake): State<Fake>, headers: HeaderMap) -> Answer {
    let st = lock(&fake);
    auth::require_app(&st, &headers)?;
    Ok(reply(StatusCode::OK, json::app(&st)))
}

/// The token exchange, as GitHub does it: `repositories` (names) and
/// `permissions` narrow the token; a repository the installation does not
/// cover is a 422, and so is a permission the App does not have. Tokens
/// come in GitHub's newer shape (`ghs_<app id>_…`), which the secret
/// scanner's `ghs_` pattern does not match: only closer's exact match of
/// the tokens it minted catches one that leaks.
pub async fn create_token(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path(id): Path<i64>,
    bytes: Bytes,
) -> Answer {
    let mut st = lock(&fake);
    auth::require_app(&st, &headers)?;
    let Some(installation) = st.installations.get(&id).cloned() else {
        return Err(auth::not_found());
    };
    if installation.suspended {
        let message = json::error("This installation has been suspended");
        return Err((StatusCode::FORBIDDEN, axum::Json(message)).into_response());
    }
    let request = if bytes.is_empty() {
        json!({})
    } else {
        body(&bytes)?
    };
    let repositories = match request.get("repositories").and_then(Value::as_array) {
        None => None,
        Some(names) => {
            let names: BTreeSet<String> = names
                .iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect();
            let covered = names.iter().all(|n| {
                installation
                    .repos
                    .contains(&format!("{}/{n}", installation.account))
            });
            if !covered {
                return Err(invalid("Installation", "repositories", "invalid"));
            }
            Some(names)
        }
    };
    let permissions = match request.get("permissions").and_then(Value::as_object) {
        None => None,
        Some(map) => {
            let mut permissions = BTreeMap::new();
            for (name, level) in map {
                let level = level.as_str().unwrap_or_default();
                if !APP_PERMISSIONS.contains(&name.as_str()) || !["read", "write"].contains(&level)
                {
                    return Err(invalid("Installation", "permissions", "invalid"));
                }
                permissions.insert(name.clone(), level.to_owned());
            }
            Some(permissions)
        }
    };
    st.token_exchanges += 1;
    let token = format!(
        "ghs_{}_{:06}x{:016x}",
        st.app.id,
        st.token_exchanges,
        0x9e37_79b9_7f4a_7c15u64.wrapping_mul(st.token_exchanges as u64)
    );
    let expires_at = st.now() + st.token_ttl.as_millis() as i64;
    let granted = permissions.clone().map_or_else(
        || json!({ "issues": "write", "contents": "write", "pull_requests": "write", "metadata": "read" }),
        |p| json!(p),
    );
    st.tokens.insert(
        token.clone(),
        IssuedToken {
            installation: id,
            expires_at,
            repositories,
            permissions,
        },
    );
    st.token_log.push(token.clone());
    Ok(reply(
        StatusCode::CREATED,
        json!({
            "token": token,
            "expires_at": json::time(expires_at),
            "permissions": granted,
            "repository_selection": "selected",
        }),
    ))
}

/// The permissions the test App was granted.
const APP_PERMISSIONS: &[&str] = &["metadata", "contents", "issues", "pull_requests"];
