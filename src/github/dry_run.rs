//! Dry run: writes to GitHub are logged and handed to a [`WriteRecorder`]
//! instead of being sent, so `closer serve --dry-run` and `closer replay` show
//! what the bot would do. It must never let a write through, and never log a
//! token (only method, path and body size).

use std::sync::Mutex;

/// Receives every write a dry-run client would have sent. The server wires a
/// database-backed one; [`MemoryRecorder`] keeps them in memory.
pub trait WriteRecorder: Send + Sync {
    /// `path` is the API path with its query; `body` the JSON body, if any.
    fn record(&self, method: &str, path: &str, body: Option<&str>);
}

/// One write that was not sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedWrite {
    pub method: String,
    pub path: String,
    pub body: Option<String>,
}

/// Keeps recorded writes in memory, in order.
#[derive(Debug, Default)]
pub struct MemoryRecorder {
    writes: Mutex<Vec<RecordedWrite>>,
}

impl MemoryRecorder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every write recorded so far.
    pub fn writes(&self) -> Vec<RecordedWrite> {
        self.writes.lock().map(|w| w.clone()).unwrap_or_default()
    }
}

impl WriteRecorder for MemoryRecorder {
    fn record(&self, method: &str, path: &str, body: Option<&str>) {
        if let Ok(mut writes) = self.writes.lock() {
            writes.push(RecordedWrite {
                method: method.to_owned(),
                path: path.to_owned(),
                body: body.map(str::to_owned),
            });
        }
    }
}
