//! How the fake decides who is calling: an App JWT (RS256 signature checked
//! with the App's public key, `iss`, `iat`/`exp` against the fake's clock,
//! lifetime at most 10 minutes, like GitHub) or an installation token it
//! issued and that has not expired. Anything else is a 401. A token minted
//! for some repositories reaches no other (404); one minted with some
//! permissions is refused a call that needs another (403), as on GitHub.

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;

use super::json;
use super::state::{IssuedToken, State};

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

/// Accepts only an unexpired installation token; answers it.
pub fn require_token<'s>(st: &'s State, headers: &HeaderMap) -> Result<&'s IssuedToken, Response> {
    let token = bearer(headers).ok_or_else(|| unauthorized("Requires authentication"))?;
    let issued = st
        .tokens
        .get(token)
        .ok_or_else(|| unauthorized("Bad credentials"))?;
    if issued.expires_at <= st.now() {
        return Err(unauthorized("Bad credentials"));
    }
    Ok(issued)
}

/// Accepts only an unexpired installation token; answers its installation.
pub fn require_installation(st: &State, headers: &HeaderMap) -> Result<i64, Response> {
    require_token(st, headers).map(|t| t.installation)
}

/// GitHub's answer to a token without the permission a call needs.
pub fn forbidden() -> Response {
    (
        StatusCode::FORBIDDEN,
        axum::Json(json::error("Resource not accessible by integration")),
    )
        .into_response()
}

/// Whether `token` may act on repository `name` (without owner) with
/// `permission` at `level` (`read` < `write`).
pub fn allows(
    token: &IssuedToken,
    name: &str,
    permission: &str,
    level: &str,
) -> Result<(), Response> {
    if let Some(repos) = &token.repositories
        && !repos.contains(name)
    {
        return Err(not_found());
    }
    let Some(granted) = &token.permissions else {
        return Ok(());
    };
    let enough = match granted.get(permission).map(String::as_str) {
        Some("write") => true,
        Some("read") => level == "read",
        _ => false,
    };
    if enough { Ok(()) } else { Err(forbidden()) }
}

/// The repository `owner/name` if the caller's token covers it and has
/// `need` (a permission and a level: `("issues", "write")`), as GitHub
/// checks a token minted with `repositories` and `permissions`: another
/// repository is not found (404), a missing permission forbidden (403).
pub fn require_repo(
    st: &State,
    headers: &HeaderMap,
    owner: &str,
    name: &str,
    need: (&str, &str),
) -> Result<String, Response> {
    let token = require_token(st, headers)?;
    let full_name = format!("{owner}/{name}");
    let covered = st
        .installations
        .get(&token.installation)
        .is_some_and(|i| i.repos.contains(&full_name));
    if !(covered && st.repos.contains_key(&full_name)) {
        return Err(not_found());
    }
    allows(token, name, need.0, need.1)?;
    Ok(full_name)
}
