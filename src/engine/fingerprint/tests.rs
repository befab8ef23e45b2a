//! Fingerprints of real captured runner outputs (tests/fixtures/fingerprint):
//! the same failures across two runs with different noise hash the same,
//! different failures hash differently.

use super::*;

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/fingerprint/",
            $name
        ))
    };
}

fn names(failures: &[Failure]) -> Vec<&str> {
    failures.iter().filter_map(|f| f.test.as_deref()).collect()
}

fn fingerprints(failures: &[Failure]) -> Vec<&str> {
    failures.iter().map(|f| f.fingerprint.as_str()).collect()
}

fn same_across_runs(
    command: &str,
    run1: &str,
    run2: &str,
    runner: Runner,
    expected: &[&str],
    root: Option<&str>,
) {
    let a = parse_failures(command, run1, root);
    let b = parse_failures(command, run2, root);
    assert_eq!(names(&a), expected, "{a:#?}");
    assert!(a.iter().all(|f| f.runner == runner), "{a:#?}");
    assert_eq!(fingerprints(&a), fingerprints(&b), "\n{a:#?}\n{b:#?}");
    let mut unique = fingerprints(&a);
    unique.dedup();
    assert_eq!(
        unique.len(),
        expected.len(),
        "different failures must differ"
    );
}

#[test]
fn cargo_test_quiet_and_verbose_runs_agree() {
    same_across_runs(
        "cargo test",
        fixture!("cargo-run1.txt"),
        fixture!("cargo-run2.txt"),
        Runner::Cargo,
        &["tests::parses_config", "tests::reads_file"],
        None,
    );
    let f = parse_failures("cargo test", fixture!("cargo-run1.txt"), None);
    assert_eq!(f[0].location.as_deref(), Some("src/lib.rs:12"));
    assert!(f[0].error.contains("left: 4 right: 5"), "{}", f[0].error);
    assert!(
        f[0].error.contains("<TMP>") && f[0].error.contains("<N>"),
        "{}",
        f[0].error
    );
}

/// Real `cargo test --no-fail-fast` output of a crate with a unit test
/// failing as it did at base (`tests::legacy`), a `#[should_panic]` test
/// and a doctest failing, the same test name failing in two integration
/// test binaries, and a test binary whose test exits the process. Every
/// failure libtest counts must be named, or one failure names no test (no
/// tolerance excuses it): otherwise a new failure could hide behind the
/// tolerated one.
#[test]
fn cargo_failures_it_cannot_name_apart_are_never_all_named() {
    let head = parse_failures("cargo test", fixture!("cargo-workspace.txt"), None);
    assert_eq!(
        names(&head),
        [
            "roundtrip",
            "src/lib.rs - div (line 12)",
            "tests::legacy",
            "tests::rejects_zero"
        ],
        "{head:#?}"
    );
    let unnamed: Vec<&Failure> = head.iter().filter(|f| f.test.is_none()).collect();
    assert_eq!(unnamed.len(), 1, "{head:#?}");
    assert!(
        unnamed[0]
            .error
            .contains("`roundtrip` failed in more than one test binary"),
        "{}",
        unnamed[0].error
    );
    let rejects = head
        .iter()
        .find(|f| f.test.as_deref() == Some("tests::rejects_zero"));
    assert!(
        rejects.is_some_and(|f| f.error.contains("did not panic as expected")),
        "{rejects:#?}"
    );

    // The same crate at base: every failure named, every binary's result
    // read, so nothing is added; passes are read in every form.
    let base_output = fixture!("cargo-workspace-base.txt");
    let base = parse_failures("cargo test", base_output, None);
    assert_eq!(
        names(&base),
        ["roundtrip", "src/lib.rs - div (line 12)", "tests::legacy"],
        "{base:#?}"
    );
    assert!(base.iter().all(|f| f.test.is_some()), "{base:#?}");
    let passed = passed_tests(base_output);
    for name in [
        "tests::rejects_zero",
        "src/lib.rs - add (line 3)",
        "roundtrip",
    ] {
        assert!(passed.iter().any(|p| p == name), "{name}: {passed:?}");
    }
    assert!(
        started_tests(base_output)
            .iter()
            .any(|s| s == "src/lib.rs - div (line 12)")
    );

    // A binary that printed no result line: one more failure.
    let early = "     Running tests/early.rs (target/debug/deps/early-1)\n\nrunning 1 test\n\
                 test legacy ... FAILED\n\ntest result: FAILED. 0 passed; 1 failed;\n\
                 \x20    Running tests/other.rs (target/debug/deps/other-1)\n\nrunning 2 tests\n";
    let f = parse_failures("cargo test", early, None);
    assert!(
        f.iter()
            .any(|f| f.test.is_none() && f.error.contains("1 test binaries ended")),
        "{f:#?}"
    );

    // What ordinary projects print adds nothing: the same target run twice
    // (`cargo test; cargo test --release`), a target without libtest's
    // harness (a criterion bench), a crate-level doctest.
    let section = |target: &str, failing: &str| {
        format!(
            "     Running {target} (target/debug/deps/x-1)\n\nrunning 2 tests\n\
             test {failing} ... FAILED\ntest other ... ok\n\n\
             test result: FAILED. 1 passed; 1 failed; 0 ignored;\n"
        )
    };
    let twice = format!(
        "{}{}",
        section("unittests src/lib.rs", "tests::legacy"),
        section("unittests src/lib.rs", "tests::legacy")
    );
    let bench = "     Running benches/speed.rs (target/debug/deps/speed-1)\nGnuplot not found\n";
    let doc = "   Doc-tests x\n\nrunning 1 test\ntest src/lib.rs - (line 23) ... FAILED\n\n\
               test result: FAILED. 0 passed; 1 failed; 0 ignored;\n";
    for out in [
        twice.clone(),
        format!("{twice}{bench}"),
        format!("{twice}{doc}"),
    ] {
        let f = parse_failures("cargo test", &out, None);
        assert!(f.iter().all(|f| f.test.is_some()), "{out}\n{f:#?}");
    }
    let f = parse_failures("cargo test", &format!("{twice}{doc}"), None);
    assert_eq!(names(&f), ["src/lib.rs - (line 23)", "tests::legacy"]);
    // The control: two targets failing one name.
    let two = format!(
        "{}{}",
        section("tests/json.rs", "roundtrip"),
        section("tests/yaml.rs", "roundtrip")
    );
    let f = parse_failures("cargo test", &two, None);
    assert!(f.iter().any(|f| f.test.is_none()), "{f:#?}");
}

/// nextest counts its failures too: the same name failing in two binaries
/// is one name read for two counted.
#[test]
fn nextest_failures_it_cannot_name_apart_are_never_all_named() {
    let out = "        FAIL [   0.004s] (1/3) democrate::json roundtrip\n\
                       FAIL [   0.004s] (2/3) democrate::yaml roundtrip\n\
               ------------\n     Summary [   0.010s] 3 tests run: 1 passed, 2 failed, 0 skipped\n";
    let f = parse_failures("cargo nextest run", out, None);
    assert_eq!(names(&f), ["roundtrip"], "{f:#?}");
    assert!(f.iter().any(|f| f.test.is_none()), "{f:#?}");
    let one = "        FAIL [   0.004s] (1/3) democrate::json roundtrip\n\
               ------------\n     Summary [   0.010s] 3 tests run: 2 passed, 1 failed, 0 skipped\n";
    assert!(
        parse_failures("cargo nextest run", one, None)
            .iter()
            .all(|f| f.test.is_some())
    );
    // Cancelled after the first failure (nextest's fail-fast): still counted.
    let cancelled = "        FAIL [   0.004s] (1/3) democrate::json roundtrip\n\
                     ------------\n     Summary [   0.010s] 2/10 tests run: 0 passed, 2 failed, 0 skipped\n";
    let f = parse_failures("cargo nextest run", cancelled, None);
    assert!(f.iter().any(|f| f.test.is_none()), "{f:#?}");
    // A nextest failure line a test printed into libtest's output: no
    // summary, so the failure it names does not pass for all of them.
    let forged = format!(
        "{}        FAIL [   0.001s] x tests::legacy\n",
        fixture!("cargo-workspace-base.txt")
    );
    let f = parse_failures("cargo test", &forged, None);
    assert!(f.iter().any(|f| f.test.is_none()), "{f:#?}");
}

#[test]
fn nextest_runs_agree_and_match_libtest_names() {
    same_across_runs(
        "cargo nextest run",
        fixture!("nextest-run1.txt"),
        fixture!("nextest-run2.txt"),
        Runner::Nextest,
        &["tests::parses_config", "tests::reads_file"],
        None,
    );
}

#[test]
fn go_test_runs_agree() {
    same_across_runs(
        "go test ./...",
        fixture!("go-run1.txt"),
        fixture!("go-run2.txt"),
        Runner::Go,
        &["TestRender/empty_values", "TestTemplateHeader"],
        None,
    );
    let f = parse_failures("go test ./...", fixture!("go-run1.txt"), None);
    assert_eq!(f[1].location.as_deref(), Some("template_test.go:104"));
    assert_eq!(
        f[1].error,
        "gateway-api-crds-template should contain standard install header"
    );
}

#[test]
fn go_panic_names_the_frame_in_the_module() {
    let f = parse_failures("go test ./...", fixture!("go-panic.txt"), None);
    assert_eq!(names(&f), ["TestParse"]);
    assert_eq!(
        f[0].location.as_deref(),
        Some("/home/ci/work/p/parse.go:17")
    );
    assert!(
        f[0].error
            .starts_with("panic: runtime error: index out of range")
    );
}

/// Real `go test -timeout 2s ./...` output (go 1.19): a test failing in
/// package a, while b does not build, c's `TestMain` panics and d times
/// out, none of them naming a failing test. Each is a failure with no test
/// name, so a tolerated `TestLegacy` never stands for them (decision 251).
#[test]
fn go_packages_failing_without_a_test_name_are_failures_of_their_own() {
    let f = parse_failures("go test ./...", fixture!("go-unnamed.txt"), None);
    assert!(f.iter().all(|f| f.runner == Runner::Go), "{f:#?}");
    assert_eq!(names(&f), ["TestLegacy"]);
    let unnamed: Vec<&str> = f
        .iter()
        .filter(|f| f.test.is_none())
        .map(|f| f.error.as_str())
        .collect();
    assert_eq!(unnamed.len(), 3, "{f:#?}");
    assert!(
        unnamed
            .iter()
            .any(|e| e.starts_with("package example.com/m/b build failed: undefined: foo")),
        "{unnamed:?}"
    );
    assert!(
        unnamed
            .iter()
            .any(|e| e.starts_with("package example.com/m/c failed: panic: boom in TestMain")),
        "{unnamed:?}"
    );
    assert!(
        unnamed
            .iter()
            .any(|e| e.starts_with("package example.com/m/d failed: panic: test timed out")),
        "{unnamed:?}"
    );
    let b = f.iter().find(|f| f.error.contains("m/b")).unwrap();
    assert_eq!(b.location.as_deref(), Some("b/b.go:3"));
    // The earlier fixtures name every failing package's test: nothing added.
    let named = parse_failures("go test ./...", fixture!("go-run1.txt"), None);
    assert!(named.iter().all(|f| f.test.is_some()), "{named:#?}");
    // A test's own log line, or another tool's `FAIL pkg.TestX`, is no
    // package's result; a timeout beside a named failure still counts.
    let logged = "--- FAIL: TestA (0.00s)\n    a_test.go:3: x\nok  done\nFAIL example.com/m.TestA (0.00s)\n--- FAIL: TestB (0.00s)\n    b_test.go:3: y\nFAIL\nFAIL\texample.com/m\t0.01s\n";
    let f = parse_failures("go test ./...", logged, None);
    assert_eq!(names(&f), ["TestA", "TestB"]);
    assert!(f.iter().all(|f| f.test.is_some()), "{f:#?}");
    let timeout = "--- FAIL: TestA (0.00s)\n    a_test.go:3: x\npanic: test timed out after 2s\n\nFAIL\texample.com/m\t2.01s\n";
    let f = parse_failures("go test ./...", timeout, None);
    let unnamed: Vec<&str> = f
        .iter()
        .filter(|f| f.test.is_none())
        .map(|f| f.error.as_str())
        .collect();
    assert_eq!(
        unnamed,
        ["package example.com/m failed: panic: test timed out after <DUR>"]
    );
}

#[test]
fn pytest_runs_agree() {
    same_across_runs(
        "python3 -m pytest",
        fixture!("pytest-run1.txt"),
        fixture!("pytest-run2.txt"),
        Runner::Pytest,
        &[
            "test_calc.py::CalcTest::test_timing",
            "test_calc.py::test_plain",
        ],
        None,
    );
    let f = parse_failures("python3 -m pytest", fixture!("pytest-run1.txt"), None);
    assert_eq!(f[0].location.as_deref(), Some("test_calc.py:10"));
}

#[test]
fn unittest_runs_agree_with_the_worktree_made_relative() {
    same_across_runs(
        "python3 -m unittest",
        fixture!("unittest-run1.txt"),
        fixture!("unittest-run2.txt"),
        Runner::Unittest,
        &["test_calc.CalcTest.test_timing"],
        Some("/tmp/fp/py"),
    );
    let f = parse_failures(
        "python3 -m unittest",
        fixture!("unittest-run1.txt"),
        Some("/tmp/fp/py"),
    );
    assert_eq!(f[0].location.as_deref(), Some("test_calc.py:10"));
}

#[test]
fn jest_runs_agree() {
    same_across_runs(
        "npx jest",
        fixture!("jest-run1.txt"),
        fixture!("jest-run2.txt"),
        Runner::Jest,
        &["parses the date"],
        None,
    );
    let f = parse_failures("npx jest", fixture!("jest-run1.txt"), None);
    assert_eq!(f[0].location.as_deref(), Some("t/math.test.js:3"));
}

#[test]
fn vitest_runs_agree() {
    same_across_runs(
        "npx vitest run",
        fixture!("vitest-run1.txt"),
        fixture!("vitest-run2.txt"),
        Runner::Vitest,
        &["t/math.vitest.test.js > math > parses the date"],
        None,
    );
}

/// mocha 11.8.0 (npm) on Node 20, its default `spec` reporter; a test
/// logs a timestamp at the margin.
#[test]
fn mocha_runs_agree() {
    same_across_runs(
        "npx mocha",
        fixture!("mocha-run1.txt"),
        fixture!("mocha-run2.txt"),
        Runner::Mocha,
        &["Calc add adds two numbers", "Calc parses the date"],
        None,
    );
    let f = parse_failures("npx mocha", fixture!("mocha-run1.txt"), None);
    assert_eq!(f[0].location.as_deref(), Some("test/calc.test.js:6"));
    assert_eq!(
        f[0].error,
        "AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:"
    );
    // Its passes, named as its failures are; not the pending test, nor
    // the line a test logged.
    assert_eq!(
        passed_tests(fixture!("mocha-run1.txt")),
        ["Calc add adds zero", "Calc multiplies", "top level test"]
    );
}

/// RSpec 3.12 (Debian's ruby-rspec): `--format documentation`, then the
/// default progress formatter; examples print to stdout. The same
/// failures either way, named as the `Failed examples:` list names them
/// (`Calc.add …`: RSpec joins a method's description without a space).
#[test]
fn rspec_runs_agree_whatever_the_formatter() {
    same_across_runs(
        "rspec",
        fixture!("rspec-run1.txt"),
        fixture!("rspec-run2.txt"),
        Runner::Rspec,
        &["Calc parses the date", "Calc.add adds two numbers"],
        None,
    );
    let f = parse_failures("rspec", fixture!("rspec-run1.txt"), None);
    assert_eq!(f[1].location.as_deref(), Some("spec/calc_spec.rb:5"));
    assert_eq!(f[1].error, "expected: 5 got: -1");
    // Its passes are not read (see rspec.rs): nothing is named.
    assert!(passed_tests(fixture!("rspec-run1.txt")).is_empty());
}

#[test]
fn generic_fallback_keeps_the_last_error_lines() {
    let run1 = "building...\nstep 1 ok (0.2s)\nERROR at 12:01:02: config file /tmp/abc123/x.yml not found\n";
    let run2 =
        "building...\nstep 1 ok (1.9s)\nERROR at 18:44:09: config file /tmp/zz9/x.yml not found\n";
    let a = parse_failures("make check", run1, None);
    let b = parse_failures("make check", run2, None);
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].runner, Runner::Generic);
    assert_eq!(a[0].fingerprint, b[0].fingerprint);
    let other = parse_failures("make check", "ERROR: permission denied on ./out\n", None);
    assert_ne!(a[0].fingerprint, other[0].fingerprint);
    assert_eq!(
        parse_failures("x", "", None).len(),
        1,
        "a failed command always yields a failure"
    );
}

#[test]
fn rustc_compile_errors_are_located() {
    let out = "   Compiling x v0.1.0\nerror[E0308]: mismatched types\n --> src/lib.rs:3:5\n  |\n3 |     \"a\"\n  |     ^^^ expected `u32`, found `&str`\n\nerror: could not compile `x` (lib) due to 1 previous error\n";
    let f = parse_failures("cargo build", out, None);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].runner, Runner::Cargo);
    assert_eq!(f[0].location.as_deref(), Some("src/lib.rs:3"));
    assert_eq!(f[0].error, "error[E0308]: mismatched types");
}

#[test]
fn the_same_test_in_another_command_is_another_failure() {
    let a = parse_failures("cargo test", fixture!("cargo-run1.txt"), None);
    let b = parse_failures("cargo test --release", fixture!("cargo-run1.txt"), None);
    assert_ne!(a[0].fingerprint, b[0].fingerprint);
}

#[test]
fn set_hash_ignores_order_and_duplicates() {
    assert_eq!(set_hash(["a", "b", "a"]), set_hash(["b", "a"]));
    assert_ne!(set_hash(["a"]), set_hash(["a", "b"]));
}

/// mocha output cut after a failure's titles (no `:` ending them, nothing
/// after): read without a panic, the failure named. The fuzz target found
/// it (`CLOSER_FUZZ_REPLAY=fingerprint:0x74705539f8b839e6`).
#[test]
fn mocha_titles_running_to_the_end_are_read_without_a_panic() {
    let out = "  1 passing (3ms)\n  1 failing\n\n  1) Calc\n       adds";
    let f = parse_failures("npx mocha", out, None);
    assert_eq!(names(&f), ["Calc adds"], "{f:#?}");
}
