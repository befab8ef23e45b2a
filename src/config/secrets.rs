//! The secrets of the server's configuration as an operator gives them:
//! from a flag or variable, a file, or the TOML, less the line end a file
//! leaves, an empty one told apart from an unset one (decision 236).

use std::path::Path;

use secrecy::{ExposeSecret, SecretString};

use super::server::ConfigError;

pub(super) fn read_key(path: &Path) -> Result<SecretString, ConfigError> {
    std::fs::read_to_string(path)
        .map(SecretString::from)
        .map_err(|source| ConfigError::ReadKey {
            path: path.to_owned(),
            source,
        })
}

pub(super) fn secret(value: &Option<String>) -> Option<SecretString> {
    value.as_deref().map(|s| SecretString::from(s.to_owned()))
}

/// A secret as given, less the line end a file or a `kubectl create secret
/// --from-file` leaves (no secret GitHub or a provider shows ends in one);
/// `None` when that leaves nothing. An empty value is what an unset
/// variable in a compose file or an empty Secret key gives (decision 236).
pub(super) fn trimmed(value: &SecretString) -> Option<SecretString> {
    let text = value.expose_secret().trim_end_matches(['\r', '\n']);
    (!text.trim().is_empty()).then(|| SecretString::from(text.to_owned()))
}

/// The webhook secret less its line end; set but empty stays so, and
/// [`ServerConfig::require_webhook_secret`] refuses it where intake needs
/// it (a worker-only process or `closer migrate` never reads it).
pub(super) fn webhook_secret(value: Option<SecretString>) -> Option<SecretString> {
    value.map(|set| trimmed(&set).unwrap_or_else(|| SecretString::from(String::new())))
}

/// The App's key, refused when set but empty. A key written on one line
/// with `\n` for its line breaks (a `.env` file, `docker --env-file`) is
/// given its line breaks back.
pub(super) fn private_key(
    value: Option<SecretString>,
) -> Result<Option<SecretString>, ConfigError> {
    let Some(set) = value else {
        return Ok(None);
    };
    let Some(key) = trimmed(&set) else {
        return Err(ConfigError::Invalid(
            "the GitHub App private key (GITHUB_PRIVATE_KEY, its file or [github] private_key) \
             is set but empty"
                .to_owned(),
        ));
    };
    let text = key.expose_secret();
    if !text.contains('\n') && text.contains("\\n") {
        return Ok(Some(SecretString::from(text.replace("\\n", "\n"))));
    }
    Ok(Some(key))
}
