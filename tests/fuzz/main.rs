//! Property-based fuzz targets for every input closer reads from outside:
//! webhooks, comments, agent reports and streams, repository configs, test
//! runners' output, diffs, prompt overrides, LLM answers and GitHub's API
//! answers (bodies and headers). Each target
//! calls the library's real entry points with structured inputs (real
//! samples mutated, text built from the format's own vocabulary) and raw
//! bytes, and asserts no panic plus the property it documents.
//!
//! `cargo test` runs every target for a small fixed budget and seed (a few
//! seconds in all). `bench/fuzz.sh` runs them for a budget given on its
//! command line, through the ignored test `budget`, and prints inputs and
//! panics per target. `CLOSER_FUZZ_REPLAY=<target>:<seed>` re-runs one
//! reported input with the panic unhandled.

mod driver;
mod input;
mod targets;

use driver::{Budget, Report, Target};

/// Inputs per target in `cargo test`.
const CI_INPUTS: u64 = 1_500;
/// The base seed in `cargo test`, fixed so a failure there reproduces.
const CI_SEED: u64 = 0x00c1_05e7_f022;

fn ci(target: &Target) {
    let report = driver::run(target, Budget::Inputs(CI_INPUTS), CI_SEED);
    assert_eq!(report.inputs, CI_INPUTS);
    assert_eq!(report.panics, 0, "{}", report.line());
}

#[test]
fn webhook_intake_and_event_parsing() {
    ci(&targets::webhook::TARGET);
}

#[test]
fn command_parser() {
    ci(&targets::command::TARGET);
}

#[test]
fn question_detector() {
    ci(&targets::question::TARGET);
}

#[test]
fn repository_config() {
    ci(&targets::repo_config::TARGET);
}

#[test]
fn fingerprint_parsers() {
    ci(&targets::fingerprint::TARGET);
}

#[test]
fn diff_parser() {
    ci(&targets::diff::TARGET);
}

#[test]
fn secret_scanner() {
    ci(&targets::secrets::TARGET);
}

#[test]
fn prompt_override_templates() {
    ci(&targets::prompt_template::TARGET);
}

#[test]
fn llm_answers() {
    ci(&targets::llm_answer::TARGET);
}

#[test]
fn agent_streams() {
    ci(&targets::agent_stream::TARGET);
}

#[test]
fn json_path_subset() {
    ci(&targets::json_path::TARGET);
}

#[test]
fn github_answers() {
    ci(&targets::github_answer::TARGET);
}

#[test]
fn github_answer_headers() {
    ci(&targets::github_headers::TARGET);
}

/// The fuzz target's starting points: every documented GitHub answer
/// decodes (the GraphQL error example to `NotFound`), so a valid input
/// failing to decode in the target is the mutation's doing.
#[test]
fn every_github_answer_fixture_decodes() {
    for sample in targets::github_answer::SAMPLES.iter() {
        let file = sample.answer.file;
        match (file, &sample.expected) {
            ("graphql_error", Err(closer::github::GitHubError::NotFound)) => {}
            ("graphql_error", other) => panic!("graphql_error: {other:?}"),
            (_, Ok(_)) => {}
            (_, Err(e)) => panic!("{file}: {e}"),
        }
    }
}

/// The harness itself: a target that panics on some inputs is reported with
/// a seed that reproduces the panic, and the run goes on.
#[test]
fn a_panicking_target_is_counted_and_its_seed_reproduces_it() {
    let target = Target {
        name: "control",
        one: |rng| assert!(rng.u8(..) >= 16, "a small byte"),
    };
    let report = driver::run(&target, Budget::Inputs(2_000), 1);
    assert_eq!(report.inputs, 2_000);
    assert!(report.panics > 0, "the control never panicked");
    let (seed, message) = report.first.expect("the first panic is kept");
    assert!(message.contains("a small byte"), "{message}");
    let replayed = std::panic::catch_unwind(|| driver::replay(&target, seed));
    assert!(
        replayed.is_err(),
        "the reported seed did not reproduce the panic"
    );
}

/// `bench/fuzz.sh`: every target (or those named in `CLOSER_FUZZ_TARGETS`,
/// comma-separated) for `CLOSER_FUZZ_INPUTS` inputs or `CLOSER_FUZZ_SECONDS`
/// seconds each, from `CLOSER_FUZZ_SEED` (default: the time).
#[test]
#[ignore = "bench/fuzz.sh runs it with a budget"]
fn budget() {
    if let Some((name, seed)) = env("CLOSER_FUZZ_REPLAY").and_then(|r| {
        let (name, seed) = r.split_once(':')?;
        Some((name.to_owned(), parse_u64(seed)?))
    }) {
        let target = targets::ALL
            .iter()
            .find(|t| t.name == name)
            .expect("a known target");
        let started = std::time::Instant::now();
        driver::replay(target, seed);
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        println!("{name}:{seed:#x} ran without a panic in {ms:.2} ms");
        return;
    }
    let budget = match (env("CLOSER_FUZZ_INPUTS"), env("CLOSER_FUZZ_SECONDS")) {
        (Some(n), _) => Budget::Inputs(parse_u64(&n).expect("CLOSER_FUZZ_INPUTS is a count")),
        (None, Some(s)) => Budget::Seconds(s.parse().expect("CLOSER_FUZZ_SECONDS is a number")),
        (None, None) => Budget::Seconds(10.0),
    };
    let seed = env("CLOSER_FUZZ_SEED")
        .and_then(|s| parse_u64(&s))
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        });
    let wanted = env("CLOSER_FUZZ_TARGETS");
    let chosen: Vec<&Target> = targets::ALL
        .iter()
        .filter(|t| {
            wanted
                .as_deref()
                .is_none_or(|w| w.split(',').any(|n| n.trim() == t.name))
        })
        .collect();
    assert!(!chosen.is_empty(), "no target named in CLOSER_FUZZ_TARGETS");
    println!(
        "fuzz: {} targets, budget {budget:?} each, seed {seed:#x}",
        chosen.len()
    );
    let reports: Vec<Report> = chosen
        .iter()
        .map(|t| {
            let report = driver::run(t, budget, seed);
            println!("{}", report.line());
            report
        })
        .collect();
    let inputs: u64 = reports.iter().map(|r| r.inputs).sum();
    let panics: u64 = reports.iter().map(|r| r.panics).sum();
    println!("total            inputs {inputs:>10}  panics {panics:>3}");
    assert_eq!(
        panics, 0,
        "replay a failure with CLOSER_FUZZ_REPLAY=<target>:<seed>"
    );
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn parse_u64(text: &str) -> Option<u64> {
    let text = text.trim().replace('_', "");
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}
