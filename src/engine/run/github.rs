//! The engine's access to GitHub as the App: its identity (asked once) and
//! one client per installation. Telling our own and bots' actions apart
//! lives here, so that the engine never reacts to itself.

use std::sync::{Arc, Mutex};

use super::EngineError;
use crate::events::Actor;
use crate::github::{AppInfo, Comment, GitHubApp, InstallationClient};
use crate::model::InstallationId;

/// The App and its installations.
#[derive(Clone)]
pub struct GitHubAccess {
    app: Arc<GitHubApp>,
    info: Arc<Mutex<Option<AppInfo>>>,
}

impl GitHubAccess {
    pub fn new(app: Arc<GitHubApp>) -> GitHubAccess {
        GitHubAccess {
            app,
            info: Arc::new(Mutex::new(None)),
        }
    }

    /// The App's identity (id and slug), asked of GitHub once.
    pub async fn app_info(&self) -> Result<AppInfo, EngineError> {
        if let Ok(guard) = self.info.lock()
            && let Some(app) = guard.as_ref()
        {
            return Ok(app.clone());
        }
        let app = self.app.app_info().await?;
        if let Ok(mut guard) = self.info.lock() {
            *guard = Some(app.clone());
        }
        Ok(app)
    }

    /// The outgoing filter every GitHub write passes (the App's key, its
    /// tokens, the agents' secret values, the credential scanner).
    pub fn redactor(&self) -> &crate::redact::Redactor {
        self.app.redactor()
    }

    pub async fn client(
        &self,
        installation: InstallationId,
    ) -> Result<Arc<InstallationClient>, EngineError> {
        Ok(self.app.installation(installation).await?)
    }

    /// A bot, or our App's own user.
    pub async fn is_us_or_bot(&self, actor: &Actor) -> Result<bool, EngineError> {
        if actor.is_bot || actor.login.ends_with("[bot]") {
            return Ok(true);
        }
        Ok(actor.login == self.app_info().await?.bot_login)
    }

    /// Whether a comment was made through our App.
    pub async fn is_our_app(&self, via: Option<i64>) -> Result<bool, EngineError> {
        Ok(match via {
            Some(id) => id == self.app_info().await?.id,
            None => false,
        })
    }
}

/// Whether a comment was written by our App.
pub fn is_ours(app: &AppInfo, c: &Comment) -> bool {
    c.performed_via_app_id == Some(app.id) || c.author == app.bot_login
}
