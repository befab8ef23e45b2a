//! The observer of a working tool: it reads the tool's stdout lines as they
//! come, passes progress on, and stops the tool for a fatal observation,
//! for its model provider being unreachable [`UNREACHABLE_NOTICES`] times in
//! a row, once it lingers [`FINISH_GRACE`] after its final report, or when
//! its run is stopped (`AgentRequest::stop`). Progress after a final report
//! calls the grace off: the tool was not done.

use super::adapter::{AgentAdapter, FINISH_GRACE, Observation, Progress, UNREACHABLE_NOTICES};
use super::outcome::AgentFailure;
use super::process;

/// What the observer saw: the failure it stopped the tool for, and whether
/// the tool finished.
#[derive(Debug, Default)]
pub(super) struct Observed {
    pub stopped_for: Option<AgentFailure>,
    pub finished: bool,
}

impl Observed {
    /// Stops the tool for `failure`, unless it was stopped for another.
    fn stop_for(&mut self, failure: AgentFailure, stop: &tokio::sync::watch::Sender<bool>) {
        if self.stopped_for.is_none() {
            self.stopped_for = Some(failure);
            let _ = stop.send(true);
        }
    }
}

/// Reads the tool's stdout lines as they come: progress goes to `progress`,
/// a fatal observation (or [`UNREACHABLE_NOTICES`] in a row) stops the tool
/// and is the task's answer.
pub(super) fn observe(
    adapter: &'static dyn AgentAdapter,
    progress: Option<tokio::sync::mpsc::UnboundedSender<Progress>>,
    stopped: Option<tokio::sync::watch::Receiver<bool>>,
) -> (process::Watch, tokio::task::JoinHandle<Observed>) {
    observe_with(adapter, progress, stopped, FINISH_GRACE)
}

/// [`observe`], with a tool given `grace` to exit after its final report.
fn observe_with(
    adapter: &'static dyn AgentAdapter,
    progress: Option<tokio::sync::mpsc::UnboundedSender<Progress>>,
    mut stopped: Option<tokio::sync::watch::Receiver<bool>>,
    grace: std::time::Duration,
) -> (process::Watch, tokio::task::JoinHandle<Observed>) {
    let (lines_tx, mut lines) = tokio::sync::mpsc::unbounded_channel::<String>();
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let observer = tokio::spawn(async move {
        let mut seen = Observed::default();
        let mut linger_until = None;
        let mut unreachable = 0;
        loop {
            let line = tokio::select! {
                line = lines.recv() => line,
                () = lingered(linger_until) => {
                    let _ = stop_tx.send(true);
                    linger_until = None;
                    continue;
                }
                () = run_stopped(stopped.as_mut()) => {
                    seen.stop_for(AgentFailure::Stopped, &stop_tx);
                    stopped = None;
                    continue;
                }
            };
            let Some(line) = line else { break };
            match adapter.observe(&line) {
                Some(Observation::Progress(p)) => {
                    unreachable = 0;
                    // It carries on after what looked like its final report
                    // (OpenCode's automatic compaction ends a step with
                    // `stop`, then continues): no grace until it ends again.
                    seen.finished = false;
                    linger_until = None;
                    if let Some(progress) = &progress {
                        let _ = progress.send(p);
                    }
                }
                Some(Observation::Unreachable(detail)) => {
                    unreachable += 1;
                    if unreachable >= UNREACHABLE_NOTICES {
                        seen.stop_for(AgentFailure::ModelUnavailable { detail }, &stop_tx);
                    }
                }
                Some(Observation::Fatal(f)) => seen.stop_for(f, &stop_tx),
                Some(Observation::Finished) if !seen.finished => {
                    seen.finished = true;
                    linger_until = Some(tokio::time::Instant::now() + grace);
                }
                _ => {}
            }
        }
        seen
    });
    let watch = process::Watch {
        lines: Some(lines_tx),
        stop: Some(stop),
    };
    (watch, observer)
}

/// Resolves at `until` (the end of a finished tool's grace); never without.
async fn lingered(until: Option<tokio::time::Instant>) {
    match until {
        Some(until) => tokio::time::sleep_until(until).await,
        None => std::future::pending().await,
    }
}

/// Resolves once `stopped` turns `true`; never without one (or once its
/// sender is gone).
async fn run_stopped(stopped: Option<&mut tokio::sync::watch::Receiver<bool>>) {
    if let Some(stopped) = stopped
        && stopped.wait_for(|s| *s).await.is_ok()
    {
        return;
    }
    std::future::pending().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::adapters;

    /// The observer stops a tool after five "cannot reach" notices in a
    /// row; progress between them starts the count again.
    #[tokio::test]
    async fn a_tool_waiting_for_its_provider_is_stopped_after_five_notices() {
        let waiting = r#"{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}"#;
        let working =
            r#"{"type":"item.started","item":{"type":"command_execution","command":"ls"}}"#;
        let codex: &'static dyn AgentAdapter = &adapters::codex::Codex;

        let (watch, observer) = observe(codex, None, None);
        let (lines, mut stop) = (watch.lines.unwrap(), watch.stop.unwrap());
        for line in [
            waiting, waiting, working, waiting, waiting, waiting, waiting,
        ] {
            lines.send(line.into()).unwrap();
        }
        tokio::task::yield_now().await;
        assert!(!*stop.borrow_and_update(), "four in a row stop nothing");
        lines.send(waiting.into()).unwrap();
        stop.changed().await.unwrap();
        assert!(*stop.borrow());
        drop(lines);
        let seen = observer.await.unwrap();
        assert!(matches!(
            seen.stopped_for,
            Some(AgentFailure::ModelUnavailable { detail }) if detail.starts_with("Reconnecting... waiting for network")
        ));
    }

    /// A stop of the run stops the tool, also while it lingers after its
    /// final report, and the tool's result says it was stopped.
    #[tokio::test]
    async fn a_run_stopped_stops_the_tool_even_while_it_lingers() {
        let finished = r#"{"type":"result","subtype":"success","result":"Done."}"#;
        let claude: &'static dyn AgentAdapter = &adapters::claude_code::ClaudeCode;
        assert_eq!(claude.observe(finished), Some(Observation::Finished));
        let (run_stop, stopped) = tokio::sync::watch::channel(false);
        let (watch, observer) = observe(claude, None, Some(stopped));
        let (lines, mut stop) = (watch.lines.unwrap(), watch.stop.unwrap());
        lines.send(finished.into()).unwrap();
        tokio::task::yield_now().await;
        assert!(!*stop.borrow_and_update(), "the tool may linger a while");

        run_stop.send(true).unwrap();
        // Well before the lingering tool's grace ends.
        tokio::time::timeout(FINISH_GRACE / 10, stop.changed())
            .await
            .expect("the tool is stopped at once")
            .unwrap();
        assert!(*stop.borrow());
        drop(lines);
        let seen = observer.await.unwrap();
        assert_eq!(seen.stopped_for, Some(AgentFailure::Stopped));
    }

    /// OpenCode's automatic compaction ends a step with `stop` and then
    /// carries on (a new step, tool calls): the tool is not stopped at the
    /// end of that grace, only once it has finished again and lingers.
    #[tokio::test]
    async fn a_tool_that_carries_on_after_its_final_report_is_not_stopped() {
        let grace = std::time::Duration::from_millis(200);
        let stop_step = r#"{"type":"step_finish","sessionID":"s","part":{"reason":"stop","tokens":{"input":1,"output":1}}}"#;
        let opencode: &'static dyn AgentAdapter = &adapters::opencode::Opencode;

        // The control: a tool that lingers after its report is stopped.
        let (watch, observer) = observe_with(opencode, None, None, grace);
        let (lines, mut stop) = (watch.lines.unwrap(), watch.stop.unwrap());
        lines.send(stop_step.into()).unwrap();
        tokio::time::timeout(grace * 10, stop.changed())
            .await
            .expect("stopped after its grace")
            .unwrap();
        drop(lines);
        assert!(observer.await.unwrap().finished);

        let (watch, observer) = observe_with(opencode, None, None, grace);
        let (lines, mut stop) = (watch.lines.unwrap(), watch.stop.unwrap());
        for line in [
            stop_step,
            r#"{"type":"step_start","sessionID":"s","part":{"type":"step-start"}}"#,
            r#"{"type":"tool_use","sessionID":"s","part":{"tool":"bash","state":{"status":"completed","input":{"command":"cargo test"}}}}"#,
        ] {
            lines.send(line.into()).unwrap();
        }
        let waited = tokio::time::timeout(grace * 5, stop.changed()).await;
        assert!(waited.is_err(), "stopped while it carried on");
        lines.send(stop_step.into()).unwrap();
        tokio::time::timeout(grace * 10, stop.changed())
            .await
            .expect("stopped once it lingers after its next report")
            .unwrap();
        drop(lines);
        let seen = observer.await.unwrap();
        assert!(seen.finished);
        assert_eq!(seen.stopped_for, None);
    }
}
