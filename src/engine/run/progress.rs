//! Live progress: while the agent works (an iteration can last half an
//! hour), the status comment says what it is doing — "running `cargo
//! test`", the time in, the tokens so far — read from the tool's event
//! stream. The comment is edited once per interval (30 s in `closer
//! serve`), through the per-installation write throttle; a failed edit is
//! logged, never the iteration's failure. Each edit runs in a task of its
//! own, which a stop does not cancel: an edit sent just before the stop is
//! followed by the stopped status again, so the stop has the last word.

use tokio::time::Instant;

use super::Engine;
use super::context::RunContext;
use crate::agent::adapter::{AgentRequest, AgentResult, Progress};
use crate::config::agents::AgentConfig;

/// What the agent has been seen doing so far.
#[derive(Debug)]
struct Seen {
    started: Instant,
    activity: Option<String>,
    tokens: u64,
}

impl Seen {
    fn absorb(&mut self, progress: Progress) {
        if progress.activity.is_some() {
            self.activity = progress.activity;
        }
        self.tokens = self.tokens.saturating_add(progress.tokens);
    }

    /// "running `cargo test` · 4 min in · 41k tokens so far".
    fn line(&self) -> String {
        let mut parts = vec![
            self.activity
                .clone()
                .unwrap_or_else(|| "working".to_owned()),
        ];
        let secs = self.started.elapsed().as_secs();
        parts.push(match secs {
            0..60 => format!("{secs} s in"),
            _ => format!("{} min in", secs / 60),
        });
        if self.tokens > 0 {
            parts.push(match self.tokens {
                0..1_000 => format!("{} tokens so far", self.tokens),
                _ => format!("{}k tokens so far", self.tokens / 1_000),
            });
        }
        parts.join(" · ")
    }
}

impl Engine {
    /// Runs the agent; with live progress on, edits the status comment with
    /// what it is doing once per `every`.
    pub(super) async fn run_agent_watched(
        &self,
        ctx: &RunContext,
        (name, agent): (&str, &AgentConfig),
        mut request: AgentRequest,
    ) -> AgentResult {
        let every = self.agents.progress_every();
        let Some(every) = every.filter(|e| !e.is_zero()) else {
            return self.agents.run(name, agent, &request).await;
        };
        let (progress, mut events) = tokio::sync::mpsc::unbounded_channel();
        request.progress = Some(progress);
        let run = self.agents.run(name, agent, &request);
        tokio::pin!(run);
        let mut seen = Seen {
            started: Instant::now(),
            activity: None,
            tokens: 0,
        };
        let mut tick = tokio::time::interval_at(Instant::now() + every, every);
        // One edit at a time, in a task of its own: a stop drops this
        // future, and an edit already sent must still be followed by its
        // check for the stop (`publish_progress`).
        let mut edit: Option<tokio::task::JoinHandle<()>> = None;
        loop {
            tokio::select! {
                result = &mut run => {
                    // The step's next status must not be overtaken by it.
                    if let Some(edit) = edit {
                        let _ = edit.await;
                    }
                    return result;
                }
                Some(event) = events.recv() => seen.absorb(event),
                _ = tick.tick() => {
                    if edit.as_ref().is_none_or(|e| e.is_finished()) {
                        let (status, ctx, line) = (self.status.clone(), ctx.clone(), seen.line());
                        edit = Some(tokio::spawn(async move {
                            status.publish_progress(&ctx, line).await;
                        }));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_what_when_and_how_much() {
        let mut seen = Seen {
            started: Instant::now(),
            activity: None,
            tokens: 0,
        };
        assert_eq!(seen.line(), "working · 0 s in");
        seen.absorb(Progress {
            activity: Some("running `cargo test`".into()),
            tokens: 41_200,
        });
        seen.absorb(Progress {
            activity: None,
            tokens: 800,
        });
        assert_eq!(
            seen.line(),
            "running `cargo test` · 0 s in · 42k tokens so far"
        );
    }
}
