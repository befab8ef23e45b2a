//! What one run step works on, loaded once: the run, its data, the
//! repository config it was triggered with, and the installation client.
//!
//! One error policy for all of it: data that does not parse is an error
//! (the stored run is corrupt; no defaults are invented), and a config that
//! no longer parses fails the run with the config's own error message in
//! the status comment.

use std::sync::Arc;

use super::EngineError;
use super::data::RunData;
use crate::config::repo::RepoConfig;
use crate::config::{ConfigErrors, parse_repo_config};
use crate::github::InstallationClient;
use crate::model::{IssueNumber, RepoName, Run};
use crate::store::runs::IterationFinish;

/// Where the repository config lives.
pub const CONFIG_PATH: &str = ".github/closer.yml";

/// A run step's context.
#[derive(Clone)]
pub struct RunContext {
    pub run: Run,
    pub data: RunData,
    /// `.github/closer.yml` as it was when the run was triggered, parsed.
    pub config: RepoConfig,
    pub client: Arc<InstallationClient>,
    /// The end of the iteration just judged, written by the next save with
    /// the run's decision on it (`Runs::save`).
    pub judged: Option<IterationFinish>,
}

/// Why a context could not be loaded.
pub enum LoadError {
    /// The config no longer parses; the context carries the default config
    /// so that the run can be failed with the message.
    Config(Box<RunContext>, String),
    /// The run's data does not parse.
    Data(EngineError),
}

impl RunContext {
    /// Reads the run's data and parses its config, once.
    pub fn load(
        run: Run,
        client: Arc<InstallationClient>,
        agents: &[&str],
    ) -> Result<RunContext, LoadError> {
        let data = RunData::of(&run).map_err(LoadError::Data)?;
        match parse_config(data.config_text.as_deref(), agents) {
            Ok(config) => Ok(RunContext {
                run,
                data,
                config,
                client,
                judged: None,
            }),
            Err(e) => {
                let message = format!("the repository config is invalid: {e}");
                let ctx = RunContext {
                    run,
                    data,
                    config: RepoConfig::default(),
                    client,
                    judged: None,
                };
                Err(LoadError::Config(Box::new(ctx), message))
            }
        }
    }

    /// `ctx`'s run as it is stored now, `stored`, stopped by another job.
    pub fn stopped(ctx: &RunContext, stored: Run) -> Result<RunContext, EngineError> {
        Ok(RunContext {
            data: RunData::of(&stored)?,
            run: stored,
            config: ctx.config.clone(),
            client: ctx.client.clone(),
            judged: None,
        })
    }

    /// The context outside a step: a config that no longer parses reads as
    /// the defaults (the run's next step fails the run with it).
    pub fn load_lenient(
        run: Run,
        client: Arc<InstallationClient>,
        agents: &[&str],
    ) -> Result<RunContext, EngineError> {
        match RunContext::load(run, client, agents) {
            Ok(ctx) => Ok(ctx),
            Err(LoadError::Config(ctx, _)) => Ok(*ctx),
            Err(LoadError::Data(e)) => Err(e),
        }
    }

    pub fn repo(&self) -> &RepoName {
        &self.run.repository
    }

    pub fn issue(&self) -> IssueNumber {
        self.run.issue_number
    }
}

/// Parses the config text (`None`: no file, the defaults).
pub fn parse_config(text: Option<&str>, agents: &[&str]) -> Result<RepoConfig, ConfigErrors> {
    parse_repo_config(text.unwrap_or(""), CONFIG_PATH, agents)
}
