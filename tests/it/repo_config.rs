//! `.github/closer.yml`: the example parses, defaults apply, and every kind of
//! mistake gets the exact message the bot would post.

use closer::config::repo::{CloseOn, CompletionType, GoalKind, RepoConfig};
use closer::config::{check_config_file, parse_repo_config};
use closer::model::TaskType;

const AGENTS: &[&str] = &["default", "codex"];
const FILE: &str = ".github/closer.yml";

fn err(text: &str) -> String {
    match parse_repo_config(text, FILE, AGENTS) {
        Ok(c) => panic!("expected an error for {text:?}, got {c:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_example_file_parses_with_its_documented_values() {
    let text = std::fs::read_to_string("docs/closer.example.yml").unwrap();
    let c = parse_repo_config(&text, "docs/closer.example.yml", AGENTS).unwrap();
    assert_eq!(c.trigger_label, "closer");
    assert_eq!(c.completion.kind, CompletionType::Issue);
    assert_eq!(c.completion.max_iterations, 10);
    assert_eq!(c.setup.commands, ["cargo fetch"]);
    assert_eq!(c.setup.timeout_secs, 900);
    assert_eq!(c.dod.len(), 3);
    assert!(!c.dod[2].required);
    assert_eq!(
        c.task_types[&TaskType::Bug].goals[0].kind,
        GoalKind::TestAdded {
            pattern: "tests/**".into()
        }
    );
    assert_eq!(
        c.convergence.allowed_paths,
        vec!["src/**", "tests/**", "docs/**", "Cargo.toml", "Cargo.lock"]
    );
    assert_eq!(c.budget.max_cost_usd, Some(5.0));
    assert_eq!(c.project.as_ref().unwrap().number, 7);
    assert_eq!(c.close_on, CloseOn::Verified);
}

#[test]
fn an_empty_file_is_the_default_config() {
    assert_eq!(
        parse_repo_config("", FILE, AGENTS).unwrap(),
        RepoConfig::default()
    );
    assert_eq!(
        parse_repo_config("# only a comment\n", FILE, AGENTS).unwrap(),
        RepoConfig::default()
    );
}

#[test]
fn a_setup_parses_with_its_default_timeout_and_none_is_the_default() {
    let c = parse_repo_config(
        "setup:\n  commands: [\"npm ci\", \"cargo fetch\"]\n",
        FILE,
        AGENTS,
    )
    .unwrap();
    assert_eq!(c.setup.commands, ["npm ci", "cargo fetch"]);
    assert_eq!(c.setup.timeout_secs, 900);
    assert!(RepoConfig::default().setup.commands.is_empty());
}

#[test]
fn every_goal_type_parses() {
    let text = r#"
dod:
  - { type: lint_passes, command: "cargo clippy" }
  - { type: build_succeeds, command: "cargo build" }
  - { type: tests_pass, command: "cargo test", timeout_secs: 600 }
  - { type: test_added, pattern: "tests/**" }
  - { type: files_changed, pattern: "src/**" }
  - { type: file_exists, path: "README.md" }
  - { type: no_secrets }
  - { type: endpoint_responds, command: "./serve", url: "http://127.0.0.1:8080/health" }
  - { type: response_contains, command: "./serve", url: "http://127.0.0.1:8080/v", json_path: "$.ok", expected: true }
  - { type: custom_script, command: "./check.sh", required: false }
"#;
    let c = parse_repo_config(text, FILE, AGENTS).unwrap();
    assert_eq!(c.dod.len(), 10);
    assert_eq!(c.dod[2].timeout_secs, Some(600));
    assert_eq!(
        c.dod[8].kind,
        GoalKind::ResponseContains {
            command: "./serve".into(),
            url: "http://127.0.0.1:8080/v".into(),
            json_path: Some("$.ok".into()),
            expected: Some(serde_json::json!(true)),
            contains: None,
        }
    );
    assert!(!c.dod[9].required);
}

#[test]
fn a_custom_handler_and_a_manual_keyword_are_accepted() {
    let c = parse_repo_config(
        "agent: codex\ncompletion: { type: custom, handler: .agent/closer/handler }\n",
        FILE,
        AGENTS,
    )
    .unwrap();
    assert_eq!(c.agent, "codex");
    assert_eq!(
        c.completion.handler.as_deref(),
        Some(".agent/closer/handler")
    );
    let c = parse_repo_config(
        "completion: { type: manual, keyword: DONE }\n",
        FILE,
        AGENTS,
    )
    .unwrap();
    assert_eq!(c.completion.keyword, "DONE");
}

#[test]
fn check_config_file_prints_a_summary_or_the_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.yml");
    std::fs::write(&good, "completion: { type: iterate, max_iterations: 3 }\n").unwrap();
    let (code, out) = check_config_file(&good, AGENTS);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out,
        format!(
            "{}: ok: agent default, completion iterate (max 3 iterations, confidence >= 0.8), \
             0 setup commands, 0 DoD goals, 0 task-type goals, trigger label closer, close on verified",
            good.display()
        )
    );
    let bad = dir.path().join("bad.yml");
    std::fs::write(&bad, "agent: nobody\n").unwrap();
    let (code, out) = check_config_file(&bad, AGENTS);
    assert_eq!(code, 1);
    assert_eq!(
        out,
        format!(
            "{}:1:8: unknown agent `nobody`, expected one of: default, codex",
            bad.display()
        )
    );
    let (code, out) = check_config_file(&dir.path().join("missing.yml"), AGENTS);
    assert_eq!(code, 1);
    assert!(out.contains("cannot read the file"), "{out}");
}

/// (input, the exact text the bot posts)
const MALFORMED: &[(&str, &str)] = &[
    (
        "trigger_label: closer\ncolour: red\n",
        ".github/closer.yml:2:1: unknown field `colour`, expected one of trigger_label, agent, completion, setup, dod, task_types, convergence, baseline, reproduction, test_files, close_on, budget, commands, project",
    ),
    (
        "setup:\n  commands: [\"npm ci\", \" \"]\n",
        ".github/closer.yml:2:13: a setup command must not be empty",
    ),
    (
        "setup:\n  commands: [\"npm ci\"]\n  timeout_secs: 0\n",
        ".github/closer.yml:3:17: must be from 1 to 86400, got 0",
    ),
    (
        "setup:\n  run: npm ci\n",
        ".github/closer.yml:2:3: unknown field `run`, expected one of commands, timeout_secs",
    ),
    (
        "baseline:\n  tolerate: sometimes\n",
        ".github/closer.yml:2:13: unknown variant `sometimes`, expected one of none, listed, preexisting",
    ),
    (
        "baseline:\n  tolerate: listed\n  known_failures: [\"tests/[a\"]\n",
        ".github/closer.yml:3:19: `tests/[a` is not a valid glob: unclosed character class; missing ']'",
    ),
    (
        "baseline:\n  ignore: all\n",
        ".github/closer.yml:2:3: unknown field `ignore`, expected one of tolerate, known_failures, removed_tests",
    ),
    (
        "dod:\n  - { type: tests_pass, command: \"make test\", timeout_secs: 10000000000000000000 }\n",
        ".github/closer.yml:2:5: `timeout_secs` must be at most 86400 (a day), got 10000000000000000000",
    ),
    (
        "dod:\n  - { type: endpoint_responds, command: \"./serve\", url: \"http://127.0.0.1:8080/\", status: 999 }\n",
        ".github/closer.yml:2:5: `status` must be an HTTP status from 100 to 599, got 999",
    ),
    (
        "reproduction: maybe\n",
        ".github/closer.yml:1:15: unknown variant `maybe`, expected one of required, report, off",
    ),
    (
        "convergence:\n  enabled: sometimes\n",
        ".github/closer.yml:2:12: invalid boolean",
    ),
    (
        "completion:\n  type: sometimes\n",
        ".github/closer.yml:2:9: unknown variant `sometimes`, expected one of issue, project, iterate, manual, custom",
    ),
    (
        "completion:\n  max_iterations: ten\n",
        ".github/closer.yml:2:19: expected a whole number that is not negative",
    ),
    (
        "completion:\n  max_iterations: -1\n",
        ".github/closer.yml:2:19: expected a whole number that is not negative",
    ),
    (
        "completion:\n  max_iterations: 0\n",
        ".github/closer.yml:2:19: must be from 1 to 1000, got 0",
    ),
    (
        "completion:\n  max_iterations: 4000000000\n",
        ".github/closer.yml:2:19: must be from 1 to 1000, got 4000000000",
    ),
    (
        "convergence:\n  diff_budget: 0\n",
        ".github/closer.yml:2:16: must be from 1 to 10000000, got 0",
    ),
    (
        "completion:\n  confidence_threshold: 1.5\n",
        ".github/closer.yml:2:25: must be a number from 0 to 1, got 1.5",
    ),
    (
        "completion:\n  confidence_threshold: high\n",
        ".github/closer.yml:2:25: expected a number",
    ),
    (
        "completion:\n  type: custom\n",
        ".github/closer.yml:2:9: completion type `custom` needs `handler`: the path of an executable in the repository",
    ),
    (
        "completion:\n  type: custom\n  handler: /usr/bin/true\n",
        ".github/closer.yml:3:12: `handler` must be a path inside the repository, not the absolute path `/usr/bin/true`",
    ),
    (
        "completion:\n  type: custom\n  handler: ../../etc/x\n",
        ".github/closer.yml:3:12: `handler` must stay inside the repository: `../../etc/x` contains `..`",
    ),
    (
        "completion:\n  type: issue\n  handler: .agent/h\n",
        ".github/closer.yml:3:12: `handler` is only used with completion type `custom`, not `issue`",
    ),
    (
        "completion:\n  type: manual\n  keyword: \"  \"\n",
        ".github/closer.yml:3:12: completion type `manual` needs a non-empty `keyword`",
    ),
    (
        "agent: gpt-unknown\n",
        ".github/closer.yml:1:8: unknown agent `gpt-unknown`, expected one of: default, codex",
    ),
    (
        "dod:\n  - { type: tests_pass }\n",
        ".github/closer.yml:2:5: a `tests_pass` goal needs `command`",
    ),
    (
        "dod:\n  - { type: tests_pass, command: x, pattern: y }\n",
        ".github/closer.yml:2:5: a `tests_pass` goal does not take `pattern` (it takes: command, required, timeout_secs)",
    ),
    (
        "dod:\n  - { type: teleport, command: x }\n",
        ".github/closer.yml:2:13: unknown variant `teleport`, expected one of lint_passes, build_succeeds, tests_pass, test_added, files_changed, file_exists, no_secrets, endpoint_responds, response_contains, custom_script",
    ),
    (
        "dod:\n  - type: tests_pass\n    command: [cargo, test]\n",
        ".github/closer.yml:3:14: expected a string",
    ),
    (
        "dod:\n  - { type: test_added, pattern: \"tests/[\" }\n",
        ".github/closer.yml:2:5: `pattern` is not a valid glob: unclosed character class; missing ']'",
    ),
    (
        "dod: { type: tests_pass, command: x }\n",
        ".github/closer.yml:1:6: expected a list",
    ),
    (
        "dod:\n  - { type: endpoint_responds, command: ./s, url: localhost:80 }\n",
        ".github/closer.yml:2:5: `url` must start with http:// or https://, got `localhost:80`",
    ),
    (
        "dod:\n  - { type: response_contains, command: ./s, url: \"http://x\" }\n",
        ".github/closer.yml:2:5: a `response_contains` goal needs `json_path` with `expected`, or `contains`",
    ),
    (
        "task_types:\n  chore: { goals: [] }\n",
        ".github/closer.yml:2:3: unknown variant `chore`, expected one of read_info, report, feature, bug, refactor, docs, test",
    ),
    (
        "task_types:\n  bug: { checks: [] }\n",
        ".github/closer.yml:2:10: unknown field `checks`, expected one of goals",
    ),
    (
        "convergence:\n  stagnation_threshold: 0\n",
        ".github/closer.yml:2:25: must be from 1 to 100, got 0",
    ),
    (
        "convergence:\n  allowed_paths: \"src/**\"\n",
        ".github/closer.yml:2:18: expected a list",
    ),
    (
        "close_on: eventually\n",
        ".github/closer.yml:1:11: unknown variant `eventually`, expected one of verified, merged",
    ),
    (
        "budget: { max_tokens: 1.5 }\n",
        ".github/closer.yml:1:23: expected a whole number that is not negative",
    ),
    (
        "budget: { max_cost_usd: -5 }\n",
        ".github/closer.yml:1:25: must be a number greater than 0, got -5",
    ),
    (
        "commands: { min_permission: owner }\n",
        ".github/closer.yml:1:29: unknown variant `owner`, expected one of none, read, triage, write, maintain, admin",
    ),
    (
        "project: { owner: my-org }\n",
        ".github/closer.yml:1:12: missing field `number`",
    ),
    (
        "trigger_label: \"\"\n",
        ".github/closer.yml:1:16: the label name must not be empty",
    ),
    (
        "completion: [\n",
        ".github/closer.yml:1:13: expected a mapping of `key: value` pairs",
    ),
    (
        "- just\n- a list\n",
        ".github/closer.yml:1:1: expected a mapping of `key: value` pairs",
    ),
    (
        "agent: a\nagent: b\n",
        ".github/closer.yml:2:1: duplicate key `agent`",
    ),
    (
        "agent: nobody\ncompletion: { type: custom }\n",
        ".github/closer.yml:1:8: unknown agent `nobody`, expected one of: default, codex\n.github/closer.yml:2:21: completion type `custom` needs `handler`: the path of an executable in the repository",
    ),
];

#[test]
fn malformed_files_get_the_exact_message() {
    assert!(MALFORMED.len() >= 20);
    let mut failures = Vec::new();
    for (input, expected) in MALFORMED {
        let got = err(input);
        if got != *expected {
            failures.push(format!(
                "input {input:?}\n  expected {expected:?}\n  got      {got:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn no_mangled_file_makes_the_parser_panic() {
    let example = std::fs::read_to_string("docs/closer.example.yml").unwrap();
    let pieces = [
        ":", "- ", "{", "}", "[", "]", "\n  ", "&a ", "*a", "!!str ", "\"", "'", "#", "\t", "~",
        "é", "0x", "-1",
    ];
    let mut rng = fastrand::Rng::with_seed(7);
    for _ in 0..2000 {
        let mut text: Vec<char> = example.chars().collect();
        for _ in 0..rng.usize(1..6) {
            let at = rng.usize(0..=text.len());
            if rng.bool() && at < text.len() {
                let end = (at + rng.usize(1..20)).min(text.len());
                text.drain(at..end);
            } else {
                let piece = pieces[rng.usize(0..pieces.len())];
                for (i, c) in piece.chars().enumerate() {
                    text.insert(at + i, c);
                }
            }
        }
        let text: String = text.into_iter().collect();
        if let Err(e) = parse_repo_config(&text, FILE, AGENTS) {
            assert!(!e.errors.is_empty());
            assert!(e.to_string().starts_with(FILE), "{e}");
        }
    }
}
