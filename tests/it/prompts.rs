//! Prompt overrides end to end: the example in `docs/prompts.md` renders, and
//! a repository override is what the Closer sends to the LLM.

use std::sync::Arc;

use closer::engine::closer::{Closer, CloserContext, CloserInput};
use closer::llm::{LlmSettings, Provider, build_client};
use closer::prompts::{EtagCache, InMemorySource, PromptId, PromptOrigin, PromptResolver};
use secrecy::SecretString;
use serde_json::json;

use crate::support::fake_llm::{FakeLlm, Reply};

const PATH: &str = ".agent/closer/prompts/steps/complete/bug/f_default.md";

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
    let prompts = PromptResolver::new(source, "closer", EtagCache::default()).unwrap();

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
    let closer = Closer::new(llm, prompts, 0.8);
    let result = closer
        .check(&CloserInput {
            structured_output: json!({"summary": "fixed"}),
            step_id: "complete.bug".into(),
            c2: "complete".into(),
            c3: "bug".into(),
            context: CloserContext {
                issue_ref: "o/r#3".into(),
                issue_title: "t".into(),
                task_list: vec![closer::engine::tasklist::TaskListItem {
                    text: "no crash".into(),
                    checked: false,
                }],
                goal_results: vec![],
            },
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
