//! Prompts: C3L path resolution (`steps/<c2>/<c3>/f_<edition>.md`), the
//! built-in defaults, repository overrides read through [`PromptSource`] and
//! cached by ETag, and strict rendering. Prompt text never decides anything
//! itself; a prompt that cannot be rendered is an error naming the file.

pub mod builtin;
pub mod confined;
pub mod fence;
pub mod github_source;
pub mod resolver;
pub mod source;
pub mod template;

pub use confined::Renderer;
pub use github_source::GitHubPromptSource;
pub use resolver::{EtagCache, PromptId, PromptOrigin, PromptResolver, RenderedPrompt};
pub use source::{DirectorySource, InMemorySource, PromptSource, SourceFile};
pub use template::PromptTemplate;

/// Why a prompt could not be produced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromptError {
    /// Neither the repository nor the built-in set has this prompt.
    #[error("no prompt at {0} (nor its `default` edition)")]
    NotFound(String),
    /// A path part is not `[a-z0-9_-]+`.
    #[error("invalid prompt path `{0}`")]
    InvalidPath(String),
    /// The front matter does not parse.
    #[error("{prompt}: invalid front matter: {message}")]
    FrontMatter { prompt: String, message: String },
    /// A declared parameter was not supplied.
    #[error("{prompt}: missing required parameter `{param}`")]
    MissingParam { prompt: String, param: String },
    /// The template does not parse or render.
    #[error("{prompt}: {message}")]
    Render { prompt: String, message: String },
    /// The repository source failed.
    #[error("cannot read {path} from the repository: {message}")]
    Source { path: String, message: String },
}
