//! For unit tests that need a process of their own (they place a
//! descriptor at 3, or must be the only ones forking): the test starts a
//! child copy of this test binary that runs only `probe`, marked by an
//! environment variable, and the probe returns at once anywhere else.

/// Runs the unit test `probe` (its path in this binary) alone in a child
/// copy of the binary with `marker` set; fails, with the child's output,
/// unless it passed and printed `done`.
pub fn run(probe: &str, marker: &str, done: &str) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", probe, "--nocapture", "--test-threads=1"])
        .env(marker, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(done),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether this process is the child [`run`] started with `marker`.
pub fn is_the_child(marker: &str) -> bool {
    std::env::var_os(marker).is_some()
}
