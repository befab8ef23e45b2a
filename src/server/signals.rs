//! The signals that stop `closer serve`: SIGTERM and SIGINT (Ctrl-C).
//!
//! Installed before anything else starts, not when the HTTP loop first
//! polls them: the port is bound first (decision 236), so a supervisor that
//! waits for the port, or a health check answered from the listen backlog,
//! may send SIGTERM before that first poll. Left to the default
//! disposition, that signal would kill the process mid-write instead of
//! letting it drain (decision 246). A signal that arrives while the
//! database is opened (a migration, or the wait for another replica's)
//! ends the process there; one that arrives later in start-up is kept and
//! ends it as soon as it is serving.

use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::watch;

/// The stop signals, caught from the moment this is made.
pub struct ShutdownSignals {
    terminate: Signal,
    interrupt: Signal,
}

impl ShutdownSignals {
    /// Replaces the default disposition of SIGTERM and SIGINT. Needs a
    /// tokio runtime.
    pub fn install() -> std::io::Result<ShutdownSignals> {
        Ok(ShutdownSignals {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }

    /// Waits for either signal, or one caught earlier.
    pub async fn recv(&mut self) {
        tokio::select! {
            _ = self.terminate.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }

    /// Waits for either signal (or one caught earlier), then tells everyone
    /// on `tx`.
    pub async fn wait(mut self, tx: watch::Sender<bool>) {
        self.recv().await;
        tracing::info!("shutdown signal received");
        let _ = tx.send(true);
    }
}
