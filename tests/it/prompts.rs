//! Prompt overrides end to end: the example in `docs/prompts.md` renders, a
//! repository override is what the completion check sends to the LLM, and overrides are
//! read from the fake GitHub through the production client, cached by ETag.
//! An override is rendered in a child copy of closer under limits: one that
//! would take all memory, CPU or output fails by name, and closer stays up.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use closer::engine::completion_check::{CheckContext, CheckInput, CompletionCheck};
use closer::llm::{LlmSettings, Provider, build_client};
use closer::prompts::{
    EtagCache, InMemorySource, PromptId, PromptOrigin, PromptResolver, PromptTemplate, Renderer,
};
use secrecy::SecretString;
use serde_json::json;

use closer::clock::{SharedClock, SystemClock};
use closer::github::types::InstallationId;
use closer::github::{GitHubApp, GitHubSettings, RetrySettings};
use closer::prompts::{GitHubPromptSource, PromptError, PromptSource, SourceFile};

use crate::support::fake_github::FakeGitHub;
use crate::support::fake_llm::{FakeLlm, Reply};

const PATH: &str = ".agent/closer/prompts/steps/complete/bug/f_default.md";

/// Renders overrides with the binary under test.
fn renderer() -> Renderer {
    Renderer::new(env!("CARGO_BIN_EXE_closer"))
}

fn doc_example() -> String {
    let doc = std::fs::read_to_string("docs/prompts.md").unwrap();
    let start = doc.find("~~~markdown\n").unwrap() + "~~~markdown\n".len();
    let end = start + doc[start..].find("\n~~~\n").unwrap();
    doc[start..end].to_owned()
}

#[tokio::test]
async fn the_documented_override_is_used_by_the_closer() {
    let source = Arc::new(InMemorySource::new());
    source.insert(PATH, &doc_example());
    let prompts = PromptResolver::new(source, "closer", EtagCache::default(), renderer()).unwrap();

    let params = json!({"step_id": "complete.bug", "issue_ref": "o/r#3", "issue_title": "t", "task_list": ["no crash"],
                        "structured_output": "{\"summary\": \"fixed\"}", "goal_results": [{"name": "tests", "passed": true, "required": true, "evidence": ""}]});
    let rendered = prompts
        .render(&PromptId::new("complete", "bug", "default"), &params)
        .await
        .unwrap();
    assert_eq!(rendered.origin, PromptOrigin::Repository(PATH.into()));
    assert!(
        rendered.text.contains("- tests: passed"),
        "{}",
        rendered.text
    );
    assert!(
        rendered
            .text
            .contains("Also add the item `task-1`: no crash")
    );

    let fake = FakeLlm::start().await;
    fake.push([Reply::Answer(json!({"checklist": [{"id": "task-1", "description": "no crash", "completed": true, "evidence": "test"}],
        "allComplete": true, "summary": "s", "pendingActions": [], "confidence": 0.9}))]);
    let llm = build_client(LlmSettings::new(
        Provider::Openai,
        &fake.openai_url(),
        SecretString::from("k-123"),
        "m",
    ))
    .unwrap();
    let closer = CompletionCheck::new(llm, prompts, 0.8);
    let result = closer
        .check(&CheckInput {
            structured_output: json!({"summary": "fixed"}),
            step_id: "complete.bug".into(),
            c2: "complete".into(),
            c3: "bug".into(),
            context: CheckContext {
                issue_ref: "o/r#3".into(),
                issue_title: "t".into(),
                task_list: vec![closer::engine::tasklist::TaskListItem {
                    text: "no crash".into(),
                    checked: false,
                }],
                goal_results: vec![],
                tolerated_failures: vec![],
            },
            previous: None,
        })
        .await;
    assert!(result.complete, "{result:?}");
    assert_eq!(
        result.prompt_used.as_deref(),
        Some(".agent/closer/prompts/steps/complete/bug/f_default.md (repository)")
    );
    assert!(
        fake.requests()[0]
            .prompt()
            .contains("A regression test reproduces the bug")
    );
}

/// Records what the wrapped source answered.
struct Recording<S> {
    inner: S,
    answers: Mutex<Vec<&'static str>>,
}

impl<S: PromptSource> PromptSource for Recording<S> {
    async fn read(&self, path: &str, etag: Option<&str>) -> Result<SourceFile, PromptError> {
        let answer = self.inner.read(path, etag).await?;
        let name = match &answer {
            SourceFile::Found { .. } => "found",
            SourceFile::NotModified => "not modified",
            SourceFile::NotFound => "not found",
        };
        self.answers.lock().unwrap().push(name);
        Ok(answer)
    }
}

#[tokio::test]
async fn overrides_come_from_github_at_the_default_branch_cached_by_etag() {
    let clock: SharedClock = Arc::new(SystemClock);
    let fake = FakeGitHub::start_with_clock(clock.clone()).await;
    fake.add_installation(7, "acme");
    let repo = fake.add_repo(7, "acme/widget");
    let settings = GitHubSettings {
        api_url: fake.url(),
        app_id: Some(fake.app_id()),
        private_key: Some(fake.private_key_pem()),
        retry: RetrySettings {
            max_attempts: 2,
            base_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(5),
            max_wait: Duration::from_secs(1),
            secondary_rate_limit_wait: Duration::from_secs(1),
        },
        request_timeout: Duration::from_secs(10),
        jitter_seed: Some(1),
        ..GitHubSettings::default()
    };
    let app = GitHubApp::new(settings, clock, None).unwrap();
    let client = app.installation(InstallationId(7)).await.unwrap();
    let path = ".agent/closer/prompts/steps/classify/task/f_default.md";
    fake.set_file(
        &repo,
        "main",
        path,
        "---\nparams: [issue_title]\n---\nOurs: {{ issue_title }}",
    );

    let source = Arc::new(Recording {
        inner: GitHubPromptSource::new(client, repo.clone(), "main"),
        answers: Mutex::new(Vec::new()),
    });
    let prompts =
        PromptResolver::new(source.clone(), "closer", EtagCache::default(), renderer()).unwrap();
    let id = PromptId::new("classify", "task", "default");
    let params = json!({"issue_title": "T", "issue_body": "B"});
    for _ in 0..2 {
        let p = prompts.render(&id, &params).await.unwrap();
        assert_eq!(p.text, "Ours: T");
        assert_eq!(p.origin, PromptOrigin::Repository(path.into()));
    }
    fake.set_file(&repo, "main", path, "Changed: {{ issue_title }}");
    assert_eq!(
        prompts.render(&id, &params).await.unwrap().text,
        "Changed: T"
    );
    fake.set_file(
        &repo,
        "other",
        ".agent/closer/prompts/steps/complete/bug/f_default.md",
        "not on the default branch",
    );
    let p = prompts
        .render(
            &PromptId::new("complete", "bug", "default"),
            &json!({"step_id": "s", "issue_ref": "r", "issue_title": "t",
        "task_list": [], "structured_output": "{}", "goal_results": [], "tolerated_failures": []}),
        )
        .await
        .unwrap();
    assert!(matches!(p.origin, PromptOrigin::BuiltIn(_)));
    assert_eq!(
        *source.answers.lock().unwrap(),
        vec!["found", "not modified", "found", "not found"]
    );
}

/// `{% set s = s ~ s %}` doubles a string for one unit of fuel: a template
/// `doublings` steps long asks for 64 KiB × 2^doublings bytes.
fn doubling(doublings: usize) -> PromptTemplate {
    let body = format!(
        "{{% set s = \"x\" * 65536 %}}{}{{{{ s|length }}}}",
        "{% set s = s ~ s %}".repeat(doublings)
    );
    PromptTemplate::parse("steps/complete/bug/f_default.md", &body).unwrap()
}

#[tokio::test]
async fn an_override_that_would_take_all_memory_cpu_or_output_fails_by_name() {
    // The control: fuel does not stop a doubling string; in this process,
    // 10 doublings are a 64 MiB string (34 would be 1 TiB, and an
    // allocation that fails aborts the whole process).
    assert_eq!(doubling(10).render(&json!({})).unwrap(), "67108864");
    assert_eq!(
        renderer().render(&doubling(10), &json!({})).await.unwrap(),
        "67108864",
        "the child renders what fits its limits"
    );

    let err = renderer()
        .render(&doubling(34), &json!({}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("over its limits"), "{err}");

    let flood = PromptTemplate::parse(
        "flood.md",
        "{% set s = \"x\" * 1048576 %}{% for i in range(20) %}{{ s }}{% endfor %}",
    )
    .unwrap();
    let err = renderer().render(&flood, &json!({})).await.unwrap_err();
    assert!(err.to_string().contains("larger than 16 MiB"), "{err}");

    let endless = PromptTemplate::parse(
        "endless.md",
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    )
    .unwrap();
    let err = renderer().render(&endless, &json!({})).await.unwrap_err();
    assert!(err.to_string().starts_with("endless.md: "), "{err}");

    let missing = PromptTemplate::parse("p.md", "---\nparams: [who]\n---\n{{ who }}").unwrap();
    assert_eq!(
        renderer()
            .render(&missing, &json!({"who": "you"}))
            .await
            .unwrap(),
        "you"
    );
    assert!(matches!(
        renderer().render(&missing, &json!({})).await,
        Err(PromptError::MissingParam { .. })
    ));
}

/// Renders a template `count` times at once, each through its own clone
/// of `renderer` (as every worker holds one); what each render printed.
async fn render_at_once(renderer: &Renderer, count: usize) -> Vec<String> {
    let template = PromptTemplate::parse("p.md", "unused").unwrap();
    let renders = (0..count).map(|_| {
        let (renderer, template) = (renderer.clone(), template.clone());
        async move { renderer.render(&template, &serde_json::Value::Null).await }
    });
    futures_util::future::join_all(renders)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect()
}

#[tokio::test]
async fn overrides_render_at_most_as_many_at_once_as_the_renderer_allows() {
    // Each render may take 1 GiB, so one per CPU runs at a time. The
    // "renderer" here is a script that counts the renders running beside it.
    let dir = tempfile::tempdir().unwrap();
    let running = dir.path().join("running");
    std::fs::create_dir(&running).unwrap();
    let script = dir.path().join("count.sh");
    crate::support::write_executable(
        &script,
        &format!(
            "#!/bin/sh\n/bin/cat >/dev/null\n/usr/bin/touch {r}/$$\n/bin/sleep 0.4\n\
             /bin/ls {r} | /usr/bin/wc -l\n/bin/rm {r}/$$\n",
            r = running.display()
        ),
    );

    // The control: a renderer allowing three at once sees them overlap.
    let wide = render_at_once(&Renderer::with_concurrency(&script, 3), 3).await;
    assert!(wide.iter().any(|n| n.trim() != "1"), "{wide:?}");

    let narrow = render_at_once(&Renderer::with_concurrency(&script, 1), 3).await;
    assert!(narrow.iter().all(|n| n.trim() == "1"), "{narrow:?}");
}
