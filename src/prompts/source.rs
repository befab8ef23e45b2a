//! Where repository prompt overrides come from. The GitHub client implements
//! [`PromptSource`] over the contents API at the default branch; an in-memory
//! and a directory-backed source ship here for tests and local runs. A source
//! only reads: it must never write, and never read outside its root.

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use sha2::{Digest, Sha256};

use crate::llm::BoxFuture;
use crate::prompts::PromptError;

/// One read of a repository file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceFile {
    /// The file, with its ETag when the source has one.
    Found { text: String, etag: Option<String> },
    /// The file has the ETag the caller sent; use the cached text.
    NotModified,
    /// No such file.
    NotFound,
}

/// Reads files of one repository (at its default branch) by path.
pub trait PromptSource: Send + Sync {
    /// Reads `path` (relative to the repository root, `/`-separated). With
    /// `etag`, a source may answer [`SourceFile::NotModified`].
    fn read(
        &self,
        path: &str,
        etag: Option<&str>,
    ) -> impl Future<Output = Result<SourceFile, PromptError>> + Send;
}

/// [`PromptSource`] made object-safe, so the resolver is not generic.
pub(crate) trait ErasedSource: Send + Sync {
    fn read_boxed<'a>(
        &'a self,
        path: &'a str,
        etag: Option<&'a str>,
    ) -> BoxFuture<'a, Result<SourceFile, PromptError>>;
}

impl<T: PromptSource> ErasedSource for T {
    fn read_boxed<'a>(
        &'a self,
        path: &'a str,
        etag: Option<&'a str>,
    ) -> BoxFuture<'a, Result<SourceFile, PromptError>> {
        Box::pin(self.read(path, etag))
    }
}

/// A content hash, used as the ETag by the sources here.
fn etag_of(text: &str) -> String {
    format!("\"{}\"", hex::encode(&Sha256::digest(text.as_bytes())[..8]))
}

fn answer(text: &str, etag: Option<&str>) -> SourceFile {
    let tag = etag_of(text);
    if etag == Some(tag.as_str()) {
        SourceFile::NotModified
    } else {
        SourceFile::Found {
            text: text.to_owned(),
            etag: Some(tag),
        }
    }
}

/// Files held in memory; counts reads so tests can see the cache at work.
#[derive(Debug, Default)]
pub struct InMemorySource {
    files: Mutex<HashMap<String, String>>,
    reads: AtomicUsize,
    full_reads: AtomicUsize,
}

impl InMemorySource {
    /// An empty source.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a file.
    pub fn insert(&self, path: &str, text: &str) {
        if let Ok(mut files) = self.files.lock() {
            files.insert(path.to_owned(), text.to_owned());
        }
    }

    /// Removes a file.
    pub fn remove(&self, path: &str) {
        if let Ok(mut files) = self.files.lock() {
            files.remove(path);
        }
    }

    /// Reads so far.
    pub fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }

    /// Reads that returned the whole file (not `NotModified`/`NotFound`).
    pub fn full_reads(&self) -> usize {
        self.full_reads.load(Ordering::SeqCst)
    }
}

impl PromptSource for InMemorySource {
    async fn read(&self, path: &str, etag: Option<&str>) -> Result<SourceFile, PromptError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let text = self
            .files
            .lock()
            .map_err(|_| PromptError::Source {
                path: path.to_owned(),
                message: "the in-memory source is poisoned".to_owned(),
            })?
            .get(path)
            .cloned();
        let file = text.map_or(SourceFile::NotFound, |t| answer(&t, etag));
        if matches!(file, SourceFile::Found { .. }) {
            self.full_reads.fetch_add(1, Ordering::SeqCst);
        }
        Ok(file)
    }
}

/// Files under a directory (a checkout); paths with `..` or a leading `/`
/// are refused.
#[derive(Debug, Clone)]
pub struct DirectorySource {
    root: PathBuf,
}

impl DirectorySource {
    /// A source rooted at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }
}

impl PromptSource for DirectorySource {
    async fn read(&self, path: &str, etag: Option<&str>) -> Result<SourceFile, PromptError> {
        if path.starts_with('/') || path.split('/').any(|p| p == ".." || p.is_empty()) {
            return Err(PromptError::InvalidPath(path.to_owned()));
        }
        match tokio::fs::read_to_string(self.root.join(path)).await {
            Ok(text) => Ok(answer(&text, etag)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(SourceFile::NotFound),
            Err(e) => Err(PromptError::Source {
                path: path.to_owned(),
                message: e.to_string(),
            }),
        }
    }
}
