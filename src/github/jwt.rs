//! The App's own credential: an RS256 JWT signed with its private key, used
//! only to ask for installation tokens and to read `/app`. The key is parsed
//! once at start so a bad PEM fails loudly there; it never reaches a log.

use std::fmt;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use super::error::GitHubError;
use crate::clock::Millis;

/// GitHub rejects an `iat` in the future; backdating absorbs clock drift.
const BACKDATE_SECS: i64 = 60;
/// GitHub rejects `exp` more than 10 minutes ahead.
const LIFETIME_SECS: i64 = 9 * 60;

/// The claims GitHub reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppClaims {
    /// The App id.
    pub iss: String,
    pub iat: i64,
    pub exp: i64,
}

impl AppClaims {
    /// Claims for a JWT issued at `now`: `iat` 60 s back, `exp` 9 min ahead.
    pub fn at(app_id: u64, now: Millis) -> Self {
        let now_secs = now.div_euclid(1000);
        AppClaims {
            iss: app_id.to_string(),
            iat: now_secs - BACKDATE_SECS,
            exp: now_secs + LIFETIME_SECS,
        }
    }
}

/// The App id and its signing key.
pub(crate) struct AppKey {
    app_id: u64,
    key: EncodingKey,
}

impl fmt::Debug for AppKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppKey")
            .field("app_id", &self.app_id)
            .field("key", &"[redacted]")
            .finish()
    }
}

impl AppKey {
    /// Parses the PEM and signs one token to prove the key works.
    pub fn from_pem(app_id: u64, pem: &SecretString) -> Result<Self, GitHubError> {
        let key = EncodingKey::from_rsa_pem(pem.expose_secret().as_bytes()).map_err(|_| {
            GitHubError::Config("the GitHub App private key is not a valid RSA PEM key".to_owned())
        })?;
        let app_key = AppKey { app_id, key };
        app_key.sign(0).map_err(|_| {
            GitHubError::Config("the GitHub App private key cannot sign RS256 tokens".to_owned())
        })?;
        Ok(app_key)
    }

    pub fn app_id(&self) -> u64 {
        self.app_id
    }

    /// A JWT valid from a minute before `now` to nine minutes after.
    pub fn sign(&self, now: Millis) -> Result<SecretString, GitHubError> {
        let claims = AppClaims::at(self.app_id, now);
        jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims, &self.key)
            .map(SecretString::from)
            .map_err(|e| GitHubError::Config(format!("signing the App JWT failed: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{DecodingKey, Validation};

    const PRIVATE: &str = include_str!("../../tests/fixtures/github-app/test-app-private-key.pem");
    const PUBLIC: &str = include_str!("../../tests/fixtures/github-app/test-app-public-key.pem");

    #[test]
    fn claims_backdate_iat_and_expire_within_ten_minutes() {
        let now = 1_700_000_000_500;
        let c = AppClaims::at(7, now);
        assert_eq!(c.iss, "7");
        assert_eq!(c.iat, 1_700_000_000 - 60);
        assert_eq!(c.exp, 1_700_000_000 + 540);
        assert!(c.exp - 1_700_000_000 < 600);
    }

    #[test]
    fn signed_token_verifies_with_the_public_key() {
        let key = AppKey::from_pem(7, &SecretString::from(PRIVATE)).unwrap();
        let now = 1_700_000_000_000;
        let jwt = key.sign(now).unwrap();
        let mut validation = Validation::new(Algorithm::RS256);
        validation.validate_exp = false;
        let decoded = jsonwebtoken::decode::<AppClaims>(
            jwt.expose_secret(),
            &DecodingKey::from_rsa_pem(PUBLIC.as_bytes()).unwrap(),
            &validation,
        )
        .unwrap();
        assert_eq!(decoded.header.alg, Algorithm::RS256);
        assert_eq!(decoded.claims, AppClaims::at(7, now));
    }

    #[test]
    fn bad_pem_is_a_config_error_without_the_key_in_it() {
        let err = AppKey::from_pem(7, &SecretString::from("not a key")).unwrap_err();
        assert!(matches!(err, GitHubError::Config(_)));
        assert!(!err.to_string().contains("not a key"));
    }

    #[test]
    fn debug_hides_the_key() {
        let key = AppKey::from_pem(7, &SecretString::from(PRIVATE)).unwrap();
        assert!(format!("{key:?}").contains("redacted"));
    }
}
