//! What judges an iteration: the LLM (classification and the completion
//! check), the goal settings, and the prompts — the repository's overrides
//! over the built-in set, with one ETag cache per repository for the
//! process's life, so an unchanged override costs a `304`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::context::RunContext;
use crate::agent::confine::Confinement;
use crate::agent::process::BaseEnv;
use crate::engine::goals::GoalSettings;
use crate::llm::LlmClient;
use crate::model::RepoName;
use crate::prompts::{EtagCache, GitHubPromptSource, PromptResolver, Renderer};

/// The agent id prompts are resolved under (`.agent/<id>/prompts/…`).
const PROMPT_AGENT_ID: &str = "closer";

/// The LLM, the goals and the prompts.
pub struct Checks {
    llm: Option<Arc<dyn LlmClient>>,
    goals: GoalSettings,
    prompt_caches: Mutex<HashMap<RepoName, EtagCache>>,
    /// Renders the repositories' prompt overrides out of process.
    renderer: Renderer,
}

impl Checks {
    pub fn new(
        llm: Option<Arc<dyn LlmClient>>,
        base_env: &BaseEnv,
        confinement: &Confinement,
        scratch: PathBuf,
        renderer: Renderer,
    ) -> Checks {
        Checks {
            llm,
            goals: GoalSettings::new(base_env.clone(), confinement.clone(), scratch)
                .with_prober(renderer.program_file()),
            prompt_caches: Mutex::new(HashMap::new()),
            renderer,
        }
    }

    /// The LLM, when the operator configured one.
    pub fn llm(&self) -> Option<Arc<dyn LlmClient>> {
        self.llm.clone()
    }

    pub fn goals(&self) -> &GoalSettings {
        &self.goals
    }

    /// The prompts of the run's repository, read from its default branch.
    pub fn prompts(&self, ctx: &RunContext) -> PromptResolver {
        let branch = ctx.run.default_branch.as_deref().unwrap_or("main");
        let source = Arc::new(GitHubPromptSource::new(
            ctx.client.clone(),
            ctx.repo().clone(),
            branch,
        ));
        PromptResolver::new(
            source,
            PROMPT_AGENT_ID,
            self.cache(ctx.repo()),
            self.renderer.clone(),
        )
        .unwrap_or_else(|_| PromptResolver::builtin_only())
    }

    fn cache(&self, repo: &RepoName) -> EtagCache {
        match self.prompt_caches.lock() {
            Ok(mut caches) => caches.entry(repo.clone()).or_default().clone(),
            Err(_) => EtagCache::default(),
        }
    }
}
