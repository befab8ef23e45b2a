//! The GitHub App: settings, the App JWT, and the map of installation clients
//! (one per installation, created on first use, shared by every caller so
//! their token cache is shared too). It must never start with an unusable
//! key, and never send a write in dry run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use secrecy::SecretString;

use super::client::{AppContext, InstallationClient};
use super::decode;
use super::dry_run::WriteRecorder;
use super::error::GitHubError;
use super::jwt::AppKey;
use super::models::AppInfo;
use super::retry::RetrySettings;
use super::transport::{ApiRequest, Transport};
use super::types::InstallationId;
use crate::clock::SharedClock;
use crate::redact::Redactor;

/// GitHub's public API root.
pub const DEFAULT_API_URL: &str = "https://api.github.com";

/// How to reach GitHub and as whom.
#[derive(Debug, Clone)]
pub struct GitHubSettings {
    /// `GITHUB_API_URL`: `https://api.github.com`, or GHES's `https://host/api/v3`.
    pub api_url: String,
    /// `GITHUB_APP_ID`.
    pub app_id: Option<u64>,
    /// The App's private key (PEM).
    pub private_key: Option<SecretString>,
    /// Record writes instead of sending them.
    pub dry_run: bool,
    /// The retry policy's knobs.
    pub retry: RetrySettings,
    /// Connecting to GitHub may take this long.
    pub connect_timeout: Duration,
    /// Waiting for an answer may take this long (then: a network error).
    pub request_timeout: Duration,
    /// Seed for the backoff jitter; `None` seeds from the OS.
    pub jitter_seed: Option<u64>,
    /// The outgoing filter every write's body passes through; the App adds
    /// its key material and each installation token it mints.
    pub redactor: Redactor,
}

impl Default for GitHubSettings {
    fn default() -> Self {
        Self {
            api_url: DEFAULT_API_URL.to_owned(),
            app_id: None,
            private_key: None,
            dry_run: false,
            retry: RetrySettings::default(),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            jitter_seed: None,
            redactor: Redactor::new(),
        }
    }
}

/// The App, and the door to its installations.
pub struct GitHubApp {
    ctx: Arc<AppContext>,
    installations: Mutex<HashMap<InstallationId, Arc<InstallationClient>>>,
}

impl std::fmt::Debug for GitHubApp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHubApp")
            .field("app_id", &self.ctx.app_id())
            .field("dry_run", &self.ctx.dry_run)
            .finish_non_exhaustive()
    }
}

impl GitHubApp {
    /// Checks the settings (a bad PEM fails here) and builds the transport.
    /// Must be called inside the Tokio runtime. Without credentials only a
    /// dry run is allowed.
    pub fn new(
        settings: GitHubSettings,
        clock: SharedClock,
        recorder: Option<Arc<dyn WriteRecorder>>,
    ) -> Result<Self, GitHubError> {
        let key = match (settings.app_id, &settings.private_key) {
            (Some(id), Some(pem)) => Some(AppKey::from_pem(id, pem)?),
            (None, None) if settings.dry_run => None,
            (None, None) => return Err(GitHubError::NoCredentials),
            (Some(_), None) => {
                return Err(GitHubError::Config(
                    "GITHUB_APP_ID is set but the private key is missing".to_owned(),
                ));
            }
            (None, Some(_)) => {
                return Err(GitHubError::Config(
                    "a private key is set but GITHUB_APP_ID is missing".to_owned(),
                ));
            }
        };
        if let Some(pem) = &settings.private_key {
            settings.redactor.register_key_material(pem);
        }
        let transport = Transport::new(
            &settings.api_url,
            clock,
            settings.retry,
            settings.connect_timeout,
            settings.request_timeout,
            settings.jitter_seed,
        )?;
        Ok(Self {
            ctx: Arc::new(AppContext {
                transport,
                key,
                dry_run: settings.dry_run,
                recorder,
                redactor: settings.redactor,
            }),
            installations: Mutex::new(HashMap::new()),
        })
    }

    /// Whether writes are recorded instead of sent.
    pub fn is_dry_run(&self) -> bool {
        self.ctx.dry_run
    }

    /// The outgoing filter of every GitHub write (shared with the LLM's).
    pub fn redactor(&self) -> &Redactor {
        &self.ctx.redactor
    }

    /// The client for one installation; the same `Arc` for every caller.
    pub async fn installation(
        &self,
        id: InstallationId,
    ) -> Result<Arc<InstallationClient>, GitHubError> {
        let mut map = self
            .installations
            .lock()
            .map_err(|_| GitHubError::Config("installation map poisoned".to_owned()))?;
        let client = map
            .entry(id)
            .or_insert_with(|| Arc::new(InstallationClient::new(id, self.ctx.clone())));
        Ok(client.clone())
    }

    /// GET /app with the JWT: the App's id, slug and bot login.
    pub async fn app_info(&self) -> Result<AppInfo, GitHubError> {
        let jwt = self.ctx.jwt()?;
        let resp = self
            .ctx
            .transport
            .send(&ApiRequest::get("/app".to_owned()), &jwt, "app")
            .await?;
        decode::app(&resp.body)
    }
}
