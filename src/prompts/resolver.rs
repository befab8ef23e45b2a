//! C3L resolution: `steps/<c2>/<c3>/f_<edition>.md`, looked up first in the
//! repository at `.agent/<agentId>/prompts/steps/…`, then in the built-in
//! set; an edition nobody has falls back to `default`. Repository reads are
//! cached by ETag. Path parts are checked so a config value can never reach
//! outside the prompt tree.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::prompts::builtin::builtin;
use crate::prompts::source::{ErasedSource, PromptSource, SourceFile};
use crate::prompts::template::PromptTemplate;
use crate::prompts::{PromptError, Renderer};

/// The biggest override accepted, in bytes.
const MAX_OVERRIDE_BYTES: usize = 64 * 1024;

/// A prompt's C3L address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PromptId {
    /// The step family, e.g. `complete`, `initial`, `continuation`, `classify`.
    pub c2: String,
    /// The target within it, e.g. a task type or a completion type.
    pub c3: String,
    /// `default`, `default_retry`, …
    pub edition: String,
}

impl PromptId {
    /// `steps/<c2>/<c3>/f_<edition>.md`.
    pub fn new(c2: &str, c3: &str, edition: &str) -> Self {
        Self {
            c2: c2.to_owned(),
            c3: c3.to_owned(),
            edition: edition.to_owned(),
        }
    }

    /// The same step at another edition.
    pub fn with_edition(&self, edition: &str) -> Self {
        Self::new(&self.c2, &self.c3, edition)
    }

    /// The path under the prompt root.
    pub fn path(&self) -> String {
        format!("steps/{}/{}/f_{}.md", self.c2, self.c3, self.edition)
    }

    fn check(&self) -> Result<(), PromptError> {
        let ok = |s: &str| {
            !s.is_empty()
                && s.len() <= 64
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        };
        if ok(&self.c2) && ok(&self.c3) && ok(&self.edition) {
            Ok(())
        } else {
            Err(PromptError::InvalidPath(self.path()))
        }
    }
}

/// Where a resolved prompt came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptOrigin {
    /// The repository's override at this path.
    Repository(String),
    /// The built-in default at this path.
    BuiltIn(String),
}

impl std::fmt::Display for PromptOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PromptOrigin::Repository(p) => write!(f, "{p} (repository)"),
            PromptOrigin::BuiltIn(p) => write!(f, "{p} (built-in)"),
        }
    }
}

/// A rendered prompt and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedPrompt {
    /// The text to send.
    pub text: String,
    /// The file used.
    pub origin: PromptOrigin,
}

/// ETag cache of repository files: path → (etag, text, or `None` for a file
/// that was not there). Share one per repository.
#[derive(Debug, Clone, Default)]
pub struct EtagCache {
    entries: Arc<Mutex<HashMap<String, (String, String)>>>,
}

impl EtagCache {
    fn get(&self, path: &str) -> Option<(String, String)> {
        self.entries.lock().ok()?.get(path).cloned()
    }

    fn put(&self, path: &str, etag: String, text: String) {
        if let Ok(mut m) = self.entries.lock() {
            m.insert(path.to_owned(), (etag, text));
        }
    }

    fn forget(&self, path: &str) {
        if let Ok(mut m) = self.entries.lock() {
            m.remove(path);
        }
    }
}

/// Resolves and renders prompts for one repository and agent id.
#[derive(Clone)]
pub struct PromptResolver {
    source: Option<Arc<dyn ErasedSource>>,
    agent_id: String,
    cache: EtagCache,
    /// Renders the repository's overrides (untrusted) out of process.
    renderer: Option<Renderer>,
}

impl std::fmt::Debug for PromptResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptResolver")
            .field("agent_id", &self.agent_id)
            .field("has_source", &self.source.is_some())
            .finish()
    }
}

impl PromptResolver {
    /// Built-in prompts only.
    pub fn builtin_only() -> Self {
        Self {
            source: None,
            agent_id: "closer".to_owned(),
            cache: EtagCache::default(),
            renderer: None,
        }
    }

    /// Repository overrides from `source` under `.agent/<agent_id>/prompts/`,
    /// cached in `cache`, over the built-in set; `renderer` renders them.
    pub fn new<S: PromptSource + 'static>(
        source: Arc<S>,
        agent_id: &str,
        cache: EtagCache,
        renderer: Renderer,
    ) -> Result<Self, PromptError> {
        let id = PromptId::new("x", agent_id, "default");
        id.check()
            .map_err(|_| PromptError::InvalidPath(format!(".agent/{agent_id}")))?;
        Ok(Self {
            source: Some(source as Arc<dyn ErasedSource>),
            agent_id: agent_id.to_owned(),
            cache,
            renderer: Some(renderer),
        })
    }

    /// Finds the template for `id`: the repository's edition, the built-in
    /// edition, then the same two for `default`.
    pub async fn template(
        &self,
        id: &PromptId,
    ) -> Result<(PromptTemplate, PromptOrigin), PromptError> {
        id.check()?;
        let mut ids = vec![id.clone()];
        if id.edition != "default" {
            ids.push(id.with_edition("default"));
        }
        for candidate in &ids {
            let path = candidate.path();
            let repo_path = format!(".agent/{}/prompts/{path}", self.agent_id);
            if let Some(text) = self.read_override(&repo_path).await? {
                let t = PromptTemplate::parse(&repo_path, &text)?;
                return Ok((t, PromptOrigin::Repository(repo_path)));
            }
            if let Some(text) = builtin(&path) {
                let t = PromptTemplate::parse(&path, text)?;
                return Ok((t, PromptOrigin::BuiltIn(path)));
            }
        }
        Err(PromptError::NotFound(id.path()))
    }

    /// Resolves `id` and renders it with `params` (a JSON object): a
    /// built-in prompt here, a repository's override in a process of its
    /// own (`prompts::confined`).
    pub async fn render(
        &self,
        id: &PromptId,
        params: &serde_json::Value,
    ) -> Result<RenderedPrompt, PromptError> {
        let (template, origin) = self.template(id).await?;
        let text = match (&origin, &self.renderer) {
            (PromptOrigin::BuiltIn(_), _) => template.render(params)?,
            (PromptOrigin::Repository(_), Some(renderer)) => {
                renderer.render(&template, params).await?
            }
            // Only `new` reads overrides, and it is given a renderer.
            (PromptOrigin::Repository(path), None) => {
                return Err(PromptError::Render {
                    prompt: path.clone(),
                    message: "no renderer for a repository's prompt".to_owned(),
                });
            }
        };
        Ok(RenderedPrompt { text, origin })
    }

    async fn read_override(&self, path: &str) -> Result<Option<String>, PromptError> {
        let Some(source) = &self.source else {
            return Ok(None);
        };
        let cached = self.cache.get(path);
        let etag = cached.as_ref().map(|(e, _)| e.as_str());
        match source.read_boxed(path, etag).await? {
            SourceFile::NotFound => {
                self.cache.forget(path);
                Ok(None)
            }
            SourceFile::NotModified => match cached {
                Some((_, text)) => Ok(Some(text)),
                None => Err(PromptError::Source {
                    path: path.to_owned(),
                    message: "answered `not modified` to a request without an ETag".to_owned(),
                }),
            },
            SourceFile::Found { text, etag } => {
                if text.len() > MAX_OVERRIDE_BYTES {
                    return Err(PromptError::Source {
                        path: path.to_owned(),
                        message: format!("the file is over {MAX_OVERRIDE_BYTES} bytes"),
                    });
                }
                match etag {
                    Some(e) => self.cache.put(path, e, text.clone()),
                    None => self.cache.forget(path),
                }
                Ok(Some(text))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompts::InMemorySource;
    use crate::prompts::builtin::builtin_paths;
    use serde_json::json;

    fn closer_params() -> serde_json::Value {
        json!({"step_id": "complete.bug", "issue_ref": "o/r#1", "issue_title": "t", "task_list": ["a"],
               "structured_output": "{}", "goal_results": [], "tolerated_failures": [],
               "validation_errors": ["x"]})
    }

    /// A renderer that cannot start: these tests read how a prompt is
    /// resolved and render it here; `tests/it/prompts.rs` renders overrides
    /// in the child (closer's binary exists only for those tests).
    fn no_renderer() -> Renderer {
        Renderer::new("/nonexistent/closer")
    }

    /// The template `id` resolves to, rendered in this process.
    async fn resolved(
        r: &PromptResolver,
        id: &PromptId,
        params: &serde_json::Value,
    ) -> (String, PromptOrigin) {
        let (template, origin) = r.template(id).await.unwrap();
        (template.render(params).unwrap(), origin)
    }

    #[tokio::test]
    async fn every_builtin_prompt_parses() {
        for path in builtin_paths() {
            PromptTemplate::parse(path, builtin(path).unwrap()).unwrap();
        }
        assert!(builtin_paths().count() >= 25);
    }

    #[tokio::test]
    async fn the_builtin_default_is_used_without_an_override() {
        let r = PromptResolver::builtin_only();
        let p = r
            .render(
                &PromptId::new("complete", "bug", "default"),
                &closer_params(),
            )
            .await
            .unwrap();
        assert_eq!(
            p.origin,
            PromptOrigin::BuiltIn("steps/complete/bug/f_default.md".into())
        );
        assert!(p.text.contains("1. a"), "{}", p.text);
    }

    #[tokio::test]
    async fn a_repository_override_wins_and_is_cached_by_etag() {
        let src = Arc::new(InMemorySource::new());
        let path = ".agent/closer/prompts/steps/complete/bug/f_default.md";
        src.insert(
            path,
            "---\nparams: [issue_ref]\n---\nOurs for {{ issue_ref }}",
        );
        let r = PromptResolver::new(src.clone(), "closer", EtagCache::default(), no_renderer())
            .unwrap();
        let id = PromptId::new("complete", "bug", "default");
        for _ in 0..3 {
            let (text, origin) = resolved(&r, &id, &closer_params()).await;
            assert_eq!(text, "Ours for o/r#1");
            assert_eq!(origin, PromptOrigin::Repository(path.into()));
        }
        assert_eq!(
            (src.reads(), src.full_reads()),
            (3, 1),
            "later reads were answered `not modified`"
        );
        src.insert(path, "---\nparams: []\n---\nChanged");
        assert_eq!(resolved(&r, &id, &closer_params()).await.0, "Changed");
        src.remove(path);
        assert!(matches!(
            r.render(&id, &closer_params()).await.unwrap().origin,
            PromptOrigin::BuiltIn(_)
        ));
    }

    #[tokio::test]
    async fn a_missing_parameter_names_the_file_and_the_parameter() {
        let src = Arc::new(InMemorySource::new());
        src.insert(
            ".agent/bot/prompts/steps/complete/bug/f_default.md",
            "---\nparams: [step_id, flavour]\n---\n{{ flavour }}",
        );
        let r = PromptResolver::new(src, "bot", EtagCache::default(), no_renderer()).unwrap();
        let err = r
            .render(
                &PromptId::new("complete", "bug", "default"),
                &closer_params(),
            )
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            ".agent/bot/prompts/steps/complete/bug/f_default.md: missing required parameter `flavour`"
        );
    }

    #[tokio::test]
    async fn an_unknown_edition_falls_back_to_default() {
        let r = PromptResolver::builtin_only();
        let p = r
            .render(
                &PromptId::new("complete", "docs", "fancy"),
                &closer_params(),
            )
            .await
            .unwrap();
        assert_eq!(
            p.origin,
            PromptOrigin::BuiltIn("steps/complete/docs/f_default.md".into())
        );
        let err = r
            .render(&PromptId::new("complete", "nothing", "default"), &json!({}))
            .await
            .unwrap_err();
        assert_eq!(
            err,
            PromptError::NotFound("steps/complete/nothing/f_default.md".into())
        );
        let err = r
            .render(&PromptId::new("..", "x", "default"), &json!({}))
            .await
            .unwrap_err();
        assert!(matches!(err, PromptError::InvalidPath(_)));
    }

    #[tokio::test]
    async fn a_directory_checkout_serves_overrides() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir
            .path()
            .join(".agent/closer/prompts/steps/classify/task/f_default.md");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "Classify {{ issue_title }}").unwrap();
        let src = Arc::new(crate::prompts::DirectorySource::new(dir.path()));
        let r = PromptResolver::new(src, "closer", EtagCache::default(), no_renderer()).unwrap();
        let id = PromptId::new("classify", "task", "default");
        let (text, _) = resolved(&r, &id, &json!({"issue_title": "T"})).await;
        assert_eq!(text, "Classify T");
    }
}
