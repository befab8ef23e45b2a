//! How the fake decides who is calling: an App JWT (RS256 signature checked
//! with the App's public key, `iss`, `iat`/`exp` against the fake's clock,
//! lifetime at most 10 minutes, like GitHub) or an installation token it
//! issued and that has not expired. Anything else is a 401.

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;

use super::json;
use super::state::State;

#[derive(Debug, Deserialize)]
struct Claims {
    iss: serde_json::Value,
    iat: i64,
    exp: i64,
}

pub fn unauthorized(message: &str) -> Response {
    (StatusCode::UNAUTHORIZED, axum::Json(json::error(message))).into_response()
}

pub fn not_found() -> Response {
    (StatusCode::NOT_FOUND, axum::Json(json::error("Not Found"))).into_response()
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get("authorization")?.to_str().ok()?;
    value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("token "))
}

/// Accepts only a valid App JWT.
pub fn require_app(st: &State, headers: &HeaderMap) -> Result<(), Response> {
    let token = bearer(headers).ok_or_else(|| unauthorized("Requires authentication"))?;
    let mut validation = Validation::new(Algorithm::RS256);
    validation.validate_exp = false; // checked below against the fake's clock
    validation.set_required_spec_claims(&["iss", "iat", "exp"]);
    let data = jsonwebtoken::decode::<Claims>(token, &st.app.public_key, &validation)
        .map_err(|_| unauthorized("A JSON web token could not be decoded"))?;
    let claims = data.claims;
    let iss_ok = match &claims.iss {
        serde_json::Value::String(s) => s == &st.app.id.to_string(),
        serde_json::Value::Number(n) => n.as_u64() == Some(st.app.id),
        _ => false,
    };
    if !iss_ok {
        return Err(unauthorized("'Issuer' claim ('iss') must be the App id"));
    }
    let now = st.now() / 1000;
    if claims.iat > now + 1 {
        return Err(unauthorized(
            "'Issued at' claim ('iat') must be an Integer representing a time in the past",
        ));
    }
    if claims.exp <= now {
        return Err(unauthorized(
            "'Expiration time' claim ('exp') is too far in the past",
        ));
    }
    if claims.exp - claims.iat > 600 {
        return Err(unauthorized(
            "'Expiration time' claim ('exp') is too far in the future",
        ));
    }
    Ok(())
}

/// Accepts only an unexpired installation token; answers its installation.
pub fn require_installation(st: &State, headers: &HeaderMap) -> Result<i64, Response> {
    let token = bearer(headers).ok_or_else(|| unauthorized("Requires authentication"))?;
    let issued = st
        .tokens
        .get(token)
        .ok_or_else(|| unauthorized("Bad credentials"))?;
    if issued.expires_at <= st.now() {
        return Err(unauthorized("Bad credentials"));
    }
    Ok(issued.installation)
}

/// The repository `owner/name` if the caller's installation covers it.
pub fn require_repo(
    st: &State,
    headers: &HeaderMap,
    owner: &str,
    name: &str,
) -> Result<String, Response> {
    let installation = require_installation(st, headers)?;
    let full_name = format!("{owner}/{name}");
    let covered = st
        .installations
        .get(&installation)
        .is_some_and(|i| i.repos.contains(&full_name));
    if covered && st.repos.contains_key(&full_name) {
        Ok(full_name)
    } else {
        Err(not_found())
    }
}
