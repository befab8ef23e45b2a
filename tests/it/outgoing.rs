//! Nothing secret leaves: the agent's words, a goal's output and whatever
//! else closer sends out pass one outgoing filter on each channel — GitHub
//! writes and LLM requests — that replaces every secret value closer holds
//! (the webhook secret, installation tokens as they are minted, the values
//! it gives the agent) and every credential the scanner knows by
//! `[redacted]`, and counts the incident.
//!
//! The control is in the same story: the agent's own record of what it said
//! holds every value (the probe is real), and look-alikes that are not
//! secrets reach the issue as they were written (the filter is exact, not a
//! blanket).

use closer::config::agents::{AdapterKind, AgentConfig};
use closer::model::RunState;

use crate::support::fake_github::FakeUser;
use crate::support::story::{CONFIG, MAINTAINER, SECRET, Story};

/// The stories' tests, and a build goal whose output the agent controls.
fn config() -> String {
    format!("{CONFIG}  - {{ type: build_succeeds, command: \"sh leak.sh\" }}\n")
}

/// Whether `text` holds `secret`, or its first 16 characters (a secret a
/// size cap cut short).
fn holds(text: &str, secret: &str) -> bool {
    let start: String = secret.chars().take(16).collect();
    text.contains(secret) || text.contains(&start)
}

/// A value closer passes to the agent in its environment.
const AGENT_VALUE: &str = "agent-env-value-5f1c9e2a";
/// Not secrets, though they look like them: they must arrive untouched.
const LOOK_ALIKES: [&str; 2] = ["story-secret", "ghp_notatoken"];

/// The scripted agent, given `STORY_AGENT_TOKEN` through the operator's `env`.
fn agent_with_env(s: &Story) -> AgentConfig {
    AgentConfig {
        adapter: AdapterKind::Command,
        command: vec!["sh".into(), s.path("agent.sh").display().to_string()],
        timeout_secs: 60,
        pass_env: Vec::new(),
        max_output_bytes: 1 << 20,
        config_files: Default::default(),
        keep_home_secs: 0,
        resume: true,
        env: [("STORY_AGENT_TOKEN".to_owned(), AGENT_VALUE.to_owned())].into(),
    }
}

/// A GitHub personal access token's shape, built at run time so this file
/// holds no literal credential.
fn pat() -> String {
    format!("ghp_{}", "Q7wE9rT2yU4iO6pA8sD0".repeat(2))
}

/// An agent step that says `text` (with `$STORY_AGENT_TOKEN` expanded by
/// its shell) as its report — as a question when `ask` — keeps a copy of
/// what it said next to the script, and writes `leak.sh`, the build goal's
/// command, which prints it and fails as not runnable (the goal's evidence
/// then quotes that output).
fn leaking_step(text: &str, ask: bool, n: u32) -> String {
    let report = match ask {
        true => r#"{\"summary\": \"One thing first.\", \"questions\": [\"$text\"]}"#,
        false => r#"{\"summary\": \"$text\"}"#,
    };
    format!(
        "text=\"{text} env $STORY_AGENT_TOKEN\"\n\
         printf '%s\\n' \"$text\" > \"$(dirname \"$0\")/said-{n}.txt\"\n\
         printf 'echo \"%s\"\\nexit 127\\n' \"$text\" > leak.sh\n\
         echo \"{report}\"\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn secrets_in_the_agents_words_and_a_goals_output_never_leave_closer() {
    let metrics = closer::server::metrics::handle();
    let mut s = Story::start("outgoing", Some(&config())).await;
    s.kill_workers();
    s.agent = Some(agent_with_env(&s));
    s.spawn_workers();
    s.agent_step(
        1,
        r#"echo '{"summary": "A question first.", "questions": ["Which way?"]}'"#,
    );
    let n = s
        .open_issue(
            "add subtracts",
            "`add 2 3` prints -1.",
            &["closer", "type:bug"],
        )
        .await;
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::AwaitingResponse);

    // By now closer has minted its tokens; the agent "finds" them all.
    let tokens: Vec<String> = s
        .github
        .issued_tokens()
        .into_iter()
        .map(|(t, _)| t)
        .collect();
    assert!(!tokens.is_empty());
    let secrets: Vec<String> = [SECRET.to_owned(), AGENT_VALUE.to_owned(), pat()]
        .into_iter()
        .chain(tokens.iter().cloned())
        .collect();
    let text = format!(
        "webhook {SECRET}; tokens {}; pat {}; look-alikes {}",
        tokens.join(" "),
        pat(),
        LOOK_ALIKES.join(" ")
    );
    s.agent_step(2, &leaking_step(&text, false, 2));
    s.agent_step(3, &leaking_step(&text, true, 3));
    s.llm.push([crate::support::fake_llm::Reply::closer(
        false,
        0.5,
        &["Fix the leak test"],
    )]);
    s.comment_as(n, FakeUser::user(MAINTAINER), "This way.")
        .await;
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::AwaitingResponse);

    // The probe was real: the agent said every secret.
    for step in [2, 3] {
        let said = std::fs::read_to_string(s.path(&format!("said-{step}.txt"))).unwrap();
        for secret in &secrets {
            assert!(
                said.contains(secret.as_str()),
                "the agent did not say {secret:?}"
            );
        }
    }

    // Nothing GitHub received holds one: no request body, no comment.
    let requests = s.github.requests();
    for r in &requests {
        for secret in &secrets {
            assert!(
                !holds(&r.body, secret),
                "{} {} leaked {secret:?}",
                r.method,
                r.path
            );
        }
    }
    let comments = s.comments(n);
    for c in &comments {
        for secret in &secrets {
            assert!(
                !holds(&c.body, secret),
                "a comment leaked {secret:?}:\n{}",
                c.body
            );
        }
    }
    // The question reached the author, redacted, the look-alikes intact.
    let question = comments
        .iter()
        .find(|c| c.body.contains("look-alikes"))
        .expect("the question comment");
    assert!(
        question.body.contains("webhook [redacted]"),
        "{}",
        question.body
    );
    assert!(
        question.body.contains("pat [redacted]"),
        "{}",
        question.body
    );
    assert!(
        question.body.contains("env [redacted]"),
        "{}",
        question.body
    );
    for look_alike in LOOK_ALIKES {
        assert!(question.body.contains(look_alike), "{}", question.body);
    }

    // The goal's output is quoted in the status comment, redacted.
    let status = s.status_comment(n);
    assert!(
        status
            .body
            .contains("command not runnable (exit 127): webhook [redacted]"),
        "{}",
        status.body
    );

    // Nothing the LLM received holds one either; the report it judged did
    // reach it, redacted.
    let asked = s.llm.requests();
    assert!(!asked.is_empty());
    for r in &asked {
        let body = r.body.to_string();
        for secret in &secrets {
            assert!(!holds(&body, secret), "the LLM got {secret:?}");
        }
    }
    let prompts: String = asked
        .iter()
        .flat_map(|r| r.body["messages"].as_array().cloned().unwrap_or_default())
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect();
    assert!(
        prompts.contains("\"summary\": \"webhook [redacted]"),
        "{prompts}"
    );
    assert!(
        prompts.contains("(exit 127): webhook [redacted]"),
        "{prompts}"
    );

    // The commits closer made of the agent's work, which it pushes once
    // verified, are subjected by its words: redacted too.
    let worktrees = s.data_dir().join("sandbox/worktrees");
    let worktree = std::fs::read_dir(&worktrees)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let subjects = crate::support::git::git(&worktree, &["log", "--format=%s"]);
    assert!(subjects.contains("webhook [redacted]"), "{subjects}");
    for secret in &secrets {
        assert!(
            !holds(&subjects, secret),
            "a commit subject holds {secret:?}:\n{subjects}"
        );
    }

    // Each incident was counted, by channel and kind, never by value.
    let rendered = metrics.render();
    for (channel, kind) in [
        ("github", "webhook_secret"),
        ("github", "installation_token"),
        ("github", "agent_env"),
        ("github", "github_token"),
        ("llm", "webhook_secret"),
        ("llm", "agent_env"),
        ("git", "webhook_secret"),
    ] {
        let series =
            format!("closer_secret_redactions_total{{channel=\"{channel}\",kind=\"{kind}\"}}");
        assert!(rendered.contains(&series), "{series} missing:\n{rendered}");
    }
    for secret in &secrets {
        assert!(!rendered.contains(secret.as_str()));
    }
    s.stop().await;
}
