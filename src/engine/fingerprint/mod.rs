//! Failure fingerprints: the failing tests and error locations a
//! command's output names, each hashed from `command + test + normalised
//! error + location`, so the same failure in two iterations (or in the
//! baseline and an iteration) has the same id whatever the timing noise.
//!
//! One parser per runner (`cargo test`/nextest, `go test`, pytest/unittest,
//! jest/vitest, mocha, RSpec, TAP) and a generic fallback; a failing command always yields at
//! least one failure. Parsing never panics on odd output.

mod cargo;
mod cargo_counts;
mod generic;
mod go;
mod jest;
mod mocha;
pub mod normalize;
mod passed;
mod passed_js;
mod pytest;
mod rspec;
mod tap;

pub use passed::{passed_tests, started_tests};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Which parser understood the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Runner {
    Cargo,
    Nextest,
    Go,
    Pytest,
    Unittest,
    Jest,
    Vitest,
    Mocha,
    Rspec,
    Tap,
    Generic,
    /// Not a test output: a scope violation or a missing artifact, recorded
    /// as a failure so the convergence controller sees it repeat.
    Closer,
}

/// One failure as a parser found it, before normalisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawFailure {
    pub test: Option<String>,
    /// `file:line` when the output names one.
    pub location: Option<String>,
    pub error: String,
}

/// One fingerprinted failure.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Failure {
    /// 16 hex digits of SHA-256.
    pub fingerprint: String,
    pub runner: Runner,
    /// The command (or check) that failed.
    pub command: String,
    pub test: Option<String>,
    pub location: Option<String>,
    /// The normalised error.
    pub error: String,
}

impl Failure {
    /// A failure closer itself names (scope violation, missing artifact).
    pub fn closer(check: &str, detail: &str) -> Failure {
        Failure::new(Runner::Closer, check, None, None, detail)
    }

    fn new(
        runner: Runner,
        command: &str,
        test: Option<String>,
        location: Option<String>,
        error: &str,
    ) -> Failure {
        let command = normalize::message(command);
        let error = normalize::message(error);
        let location = location.map(|l| normalize::path(&l));
        // A test name pins the failure; its line moves whenever the file above
        // it is edited, so the line only counts when there is no test name.
        let location_key = match (&test, &location) {
            (Some(_), Some(loc)) => loc
                .rsplit_once(':')
                .map_or(loc.as_str(), |(file, _)| file)
                .to_owned(),
            (None, Some(loc)) => loc.clone(),
            (_, None) => String::new(),
        };
        let mut hasher = Sha256::new();
        for part in [
            command.as_str(),
            test.as_deref().unwrap_or(""),
            error.as_str(),
            location_key.as_str(),
        ] {
            hasher.update(part.as_bytes());
            hasher.update([0u8]);
        }
        let fingerprint = hex::encode(&hasher.finalize()[..8]);
        Failure {
            fingerprint,
            runner,
            command,
            test,
            location,
            error,
        }
    }

    /// `test (location): error`, short, for evidence and prompts.
    pub fn summary(&self) -> String {
        let mut s = self.test.clone().unwrap_or_default();
        if let Some(loc) = &self.location {
            if !s.is_empty() {
                s.push(' ');
            }
            s.push_str(&format!("({loc})"));
        }
        if !s.is_empty() {
            s.push_str(": ");
        }
        let error: String = self.error.chars().take(160).collect();
        s.push_str(&error);
        s
    }
}

/// A runner's output detector and parser.
type Parser = (Runner, fn(&str) -> bool, fn(&str) -> Vec<RawFailure>);

/// Tried in order; the first that detects its format and finds failures wins.
const PARSERS: [Parser; 10] = [
    (Runner::Nextest, cargo::is_nextest, cargo::parse_nextest),
    (Runner::Cargo, cargo::is_cargo, cargo::parse),
    (Runner::Go, go::detect, go::parse),
    (Runner::Pytest, pytest::is_pytest, pytest::parse),
    (
        Runner::Unittest,
        pytest::is_unittest,
        pytest::parse_unittest,
    ),
    (Runner::Vitest, jest::is_vitest, jest::parse_vitest),
    (Runner::Jest, jest::is_jest, jest::parse),
    (Runner::Mocha, mocha::detect, mocha::parse),
    (Runner::Rspec, rspec::detect, rspec::parse),
    (Runner::Tap, tap::detect, tap::parse),
];

/// The failures in a failed command's output. `root` (the worktree path) is
/// made relative. Never empty for a failed command: when no runner format
/// matches, the generic fallback names the last error lines.
pub fn parse_failures(command: &str, output: &str, root: Option<&str>) -> Vec<Failure> {
    let text = normalize::relative_to(&normalize::strip_ansi(output), root);
    let found = PARSERS
        .iter()
        .filter(|(_, detect, _)| detect(&text))
        .map(|(runner, _, parse)| (*runner, parse(&text)))
        .find(|(_, raw)| !raw.is_empty());
    let (runner, raw) = found.unwrap_or_else(|| (Runner::Generic, generic::parse(&text)));
    let mut failures: Vec<Failure> = raw
        .into_iter()
        .map(|r| Failure::new(runner, command, r.test, r.location, &r.error))
        .collect();
    // Runners report in completion order; the set is what counts.
    failures.sort_by(|a, b| (&a.test, &a.fingerprint).cmp(&(&b.test, &b.fingerprint)));
    failures.dedup_by(|a, b| a.fingerprint == b.fingerprint);
    failures
}

/// A stable hash of a failure set (order-free), for stagnation detection.
pub fn set_hash<'a>(fingerprints: impl IntoIterator<Item = &'a str>) -> String {
    let mut sorted: Vec<&str> = fingerprints.into_iter().collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut hasher = Sha256::new();
    for fp in sorted {
        hasher.update(fp.as_bytes());
        hasher.update([0u8]);
    }
    hex::encode(&hasher.finalize()[..8])
}

#[cfg(test)]
mod tests;
