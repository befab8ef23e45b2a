//! A test that needs a process of its own: process-wide state it sets
//! (secrets in the environment) or reads (tracing's callsite cache, which
//! other tests' threads fill concurrently) would otherwise be shared with
//! every test running beside it. The test starts a child copy of this test
//! binary that runs only its probe, and the probe returns at once anywhere
//! else.

use super::OutputApart as _;

/// Names, in the child's environment, the one probe it runs.
const PROBE: &str = "CLOSER_TEST_PROBE";

/// Runs the test `probe` (its path in this binary) alone in a child copy
/// of this binary with `env` added; fails, with the child's output, unless
/// the probe ran to its end ([`finished`]).
pub fn run(probe: &str, env: &[(&str, &str)]) {
    let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", probe, "--nocapture", "--test-threads=1"])
        .env(PROBE, probe)
        .envs(env.iter().copied())
        .output_apart()
        .expect("the probe runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(&done(probe)),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether this process is the child started for `probe`.
pub fn is_the_child_for(probe: &str) -> bool {
    std::env::var(PROBE).is_ok_and(|p| p == probe)
}

/// Says, in the child, that `probe` ran to its end.
pub fn finished(probe: &str) {
    println!("{}", done(probe));
}

/// The variable, as `NAME=value`, in the environment of the child for
/// `probe` (and of whatever it starts).
pub fn marker(probe: &str) -> String {
    format!("{PROBE}={probe}")
}

fn done(probe: &str) -> String {
    format!("PROBE_DONE {probe}")
}
