//! `GET /app` and the token exchange, both authenticated by the App JWT.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde_json::json;

use super::super::auth;
use super::super::json;
use super::super::state::IssuedToken;
use super::{Answer, Fake, lock, reply};

pub async fn get_app(State(fake): State<Fake>, headers: HeaderMap) -> Answer {
    let st = lock(&fake);
    auth::require_app(&st, &headers)?;
    Ok(reply(StatusCode::OK, json::app(&st)))
}

pub async fn create_token(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path(id): Path<i64>,
) -> Answer {
    let mut st = lock(&fake);
    auth::require_app(&st, &headers)?;
    if !st.installations.contains_key(&id) {
        return Err(auth::not_found());
    }
    st.token_exchanges += 1;
    let token = format!("ghs_{:036}", st.token_exchanges);
    let expires_at = st.now() + st.token_ttl.as_millis() as i64;
    st.tokens.insert(
        token.clone(),
        IssuedToken {
            installation: id,
            expires_at,
        },
    );
    Ok(reply(
        StatusCode::CREATED,
        json!({
            "token": token,
            "expires_at": json::time(expires_at),
            "permissions": { "issues": "write", "contents": "write", "pull_requests": "write" },
            "repository_selection": "selected",
        }),
    ))
}
