//! Least privilege for installation tokens: each token is minted for the
//! one repository a call is about and the permissions it needs (reads,
//! API writes, the push), and the fake GitHub refuses — as GitHub does — a
//! call its token was not minted for. Each refusal has its control: the
//! token minted for that use gets through.

use std::time::Duration;

use closer::agent::process::BaseEnv;
use closer::agent::sandbox::git::GitRunner;
use closer::clock;
use closer::github::types::{InstallationId, RepoName};
use closer::github::{GitHubApp, GitHubSettings, TokenScope};
use secrecy::{ExposeSecret, SecretString};

use crate::support::fake_github::{FakeGitHub, Ruleset};
use crate::support::git::{Origin, git};

const INSTALLATION: i64 = 31;

struct World {
    fake: FakeGitHub,
    gh: std::sync::Arc<closer::github::InstallationClient>,
    repo: RepoName,
    origin: Origin,
    _app: GitHubApp,
}

async fn world() -> World {
    let fake = FakeGitHub::start().await;
    fake.add_installation(INSTALLATION, "acme");
    let repo = fake.add_repo(INSTALLATION, "acme/widget");
    fake.add_repo(INSTALLATION, "acme/other");
    let origin = Origin::with_files(&[("README.md", "widget\n")]);
    fake.serve_git(&repo, &origin.bare);
    let app = GitHubApp::new(
        GitHubSettings {
            api_url: fake.url(),
            app_id: Some(fake.app_id()),
            private_key: Some(fake.private_key_pem()),
            ..GitHubSettings::default()
        },
        clock::system(),
        None,
    )
    .expect("app");
    let gh = app
        .installation(InstallationId(INSTALLATION))
        .await
        .unwrap();
    World {
        fake,
        gh,
        repo,
        origin,
        _app: app,
    }
}

/// `git push` of a new commit to `branch` with `token`, as closer pushes
/// (the token in `http.extraHeader` of that one git process).
async fn push_with(w: &World, token: &SecretString, branch: &str) -> Result<String, String> {
    push_file(w, token, branch, "change.txt").await
}

/// [`push_with`] of a commit that writes `file`.
async fn push_file(
    w: &World,
    token: &SecretString,
    branch: &str,
    file: &str,
) -> Result<String, String> {
    let work = tempfile::tempdir().unwrap();
    let url = format!("{}/git/{}.git", w.fake.url(), w.repo);
    git(work.path(), &["init", "--quiet", "--initial-branch=main"]);
    git(
        work.path(),
        &["fetch", "--quiet", w.origin.bare.to_str().unwrap(), "main"],
    );
    git(work.path(), &["reset", "--quiet", "--hard", "FETCH_HEAD"]);
    let path = work.path().join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, branch).unwrap();
    git(work.path(), &["add", "-A"]);
    git(work.path(), &["commit", "--quiet", "-m", "change"]);
    let runner = GitRunner::new(BaseEnv::from_process(), Duration::from_secs(60));
    let refspec = format!("HEAD:refs/heads/{branch}");
    runner
        .run_with(work.path(), &["push", &url, &refspec], Some(token))
        .await
        .map_err(|e| e.to_string())
}

fn permissions(w: &World, token: &SecretString) -> serde_json::Value {
    let (_, issued) = w
        .fake
        .issued_tokens()
        .into_iter()
        .find(|(t, _)| t == token.expose_secret())
        .expect("a token the fake minted");
    serde_json::json!({
        "repositories": issued.repositories,
        "permissions": issued.permissions,
    })
}

#[tokio::test]
async fn reads_and_writes_each_use_a_token_for_the_one_repository_and_what_they_need() {
    let w = world().await;
    let n = w.fake.open_issue(&w.repo, "maria", "t", "b");
    w.gh.get_issue(&w.repo, n).await.unwrap();
    w.gh.create_comment(&w.repo, n, "hello").await.unwrap();

    let minted: Vec<serde_json::Value> = w
        .fake
        .issued_tokens()
        .into_iter()
        .map(|(_, t)| serde_json::json!({"repositories": t.repositories, "permissions": t.permissions}))
        .collect();
    assert_eq!(
        minted,
        vec![
            serde_json::json!({"repositories": ["widget"], "permissions": {"contents": "read", "issues": "read", "metadata": "read", "pull_requests": "read"}}),
            serde_json::json!({"repositories": ["widget"], "permissions": {"issues": "write", "metadata": "read", "pull_requests": "write"}}),
        ],
        "one read token, one write token, neither may write contents"
    );
    // Both are reused: another read and another write mint nothing.
    w.gh.get_issue(&w.repo, n).await.unwrap();
    w.gh.create_comment(&w.repo, n, "again").await.unwrap();
    assert_eq!(w.fake.token_exchanges(), 2);
}

#[tokio::test]
async fn the_api_write_token_cannot_push_and_the_push_token_can() {
    let w = world().await;
    let write = w.gh.token_for(&w.repo, TokenScope::Write).await.unwrap();
    let read = w.gh.token_for(&w.repo, TokenScope::Read).await.unwrap();
    let push = w.gh.token_for(&w.repo, TokenScope::Push).await.unwrap();
    assert_eq!(
        permissions(&w, &push),
        serde_json::json!({"repositories": ["widget"], "permissions": {"contents": "write", "metadata": "read"}})
    );

    let refused = push_with(&w, &write, "by-write-token").await.unwrap_err();
    assert!(refused.contains("403"), "{refused}");
    let refused = push_with(&w, &read, "by-read-token").await.unwrap_err();
    assert!(refused.contains("403"), "{refused}");
    assert_eq!(w.origin.branch_head("by-write-token"), None);
    assert_eq!(w.origin.branch_head("by-read-token"), None);

    // The control: the same push with the push token lands.
    push_with(&w, &push, "by-push-token").await.unwrap();
    assert!(w.origin.branch_head("by-push-token").is_some());
}

/// GitHub's rule for Apps without `workflows: write`, as the fake holds
/// it: the rejection reason names the file (closer reads it from there).
#[tokio::test]
async fn a_push_that_changes_a_workflow_is_refused_with_githubs_reason() {
    let w = world().await;
    let push = w.gh.token_for(&w.repo, TokenScope::Push).await.unwrap();
    let refused = push_file(&w, &push, "ci-change", ".github/workflows/ci.yml")
        .await
        .unwrap_err();
    assert!(
        refused.contains(
            "! [remote rejected] HEAD -> ci-change (refusing to allow a GitHub App to create \
             or update workflow `.github/workflows/ci.yml` without `workflows` permission)"
        ),
        "{refused}"
    );
    assert_eq!(w.origin.branch_head("ci-change"), None);
    // The control: the same token pushes a file outside the workflows.
    push_file(&w, &push, "docs-change", "docs/workflows/ci.yml")
        .await
        .unwrap();
    assert!(w.origin.branch_head("docs-change").is_some());
}

/// A ruleset requiring signed commits, as the fake holds it: the push of
/// an unsigned commit is declined with GitHub's reason and the rule listed.
#[tokio::test]
async fn a_push_a_ruleset_forbids_is_declined_with_the_rule_listed() {
    let w = world().await;
    let push = w.gh.token_for(&w.repo, TokenScope::Push).await.unwrap();
    // The control: before the ruleset, the same push lands.
    push_file(&w, &push, "before-rules", "a.txt").await.unwrap();
    w.fake.require(&w.repo, Ruleset::SignedCommits);
    let refused = push_file(&w, &push, "unsigned", "b.txt").await.unwrap_err();
    for said in [
        "remote: error: GH013: Repository rule violations found for refs/heads/unsigned.",
        "remote: - Commits must have verified signatures.",
        "! [remote rejected] HEAD -> unsigned (push declined due to repository rule violations)",
    ] {
        assert!(refused.contains(said), "{said}\n{refused}");
    }
    assert_eq!(w.origin.branch_head("unsigned"), None);
}

#[tokio::test]
async fn the_push_token_cannot_comment_nor_reach_another_repository() {
    let w = world().await;
    let n = w.fake.open_issue(&w.repo, "maria", "t", "b");
    let push = w.gh.token_for(&w.repo, TokenScope::Push).await.unwrap();
    let write = w.gh.token_for(&w.repo, TokenScope::Write).await.unwrap();
    let comment = |token: SecretString, repo: &str| {
        let url = format!("{}/repos/{repo}/issues/{n}/comments", w.fake.url());
        async move {
            crate::support::client()
                .post(url)
                .bearer_auth(token.expose_secret())
                .json(&serde_json::json!({"body": "x"}))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(comment(push.clone(), "acme/widget").await, 403);
    assert_eq!(comment(write.clone(), "acme/other").await, 404);
    // The control: the write token comments on its own repository.
    assert_eq!(comment(write, "acme/widget").await, 201);
}

/// A whole run against a repository served over HTTP, as GitHub serves it:
/// the mirror is fetched and the branch pushed through the fake's token
/// checks, exactly one push token is minted, every token names the one
/// repository, and none can both write contents and touch issues or pull
/// requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_over_http_pushes_with_the_one_push_token_and_no_token_mixes_contents_and_threads() {
    use crate::support::fake_llm::Reply;
    use crate::support::story::{CONFIG, Story};

    let mut s = Story::start("token-scope-run", Some(CONFIG)).await;
    s.origin.url = s.github.serve_git(&s.repo, &s.origin.bare);
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    s.agent_step(
        1,
        "cat > calc.sh <<'T'\nadd() { echo $(( $1 + $2 )); }\nT\necho '{\"summary\": \"Fixed add.\"}'\n",
    );
    let n = s
        .open_issue("add should add", "", &["closer", "type:feature"])
        .await;
    s.idle().await;
    let run = s.run(n).await.expect("a run");
    assert_eq!(
        run.state,
        closer::model::RunState::Done,
        "{}",
        s.journal().await
    );
    assert!(
        s.origin.branch_head("closer/issue-1").is_some(),
        "pushed over HTTP"
    );
    for service in ["git-upload-pack", "git-receive-pack"] {
        let path = format!("/git/octo/calc.git/{service}");
        assert!(!s.github.requests_to("POST", &path).is_empty(), "{service}");
    }

    let minted: Vec<serde_json::Value> = s
        .github
        .issued_tokens()
        .into_iter()
        .map(|(_, t)| serde_json::json!({"repositories": t.repositories, "permissions": t.permissions}))
        .collect();
    let push = serde_json::json!({"repositories": ["calc"], "permissions": {"contents": "write", "metadata": "read"}});
    assert_eq!(
        minted.iter().filter(|t| **t == push).count(),
        1,
        "{minted:#?}"
    );
    for token in &minted {
        assert_eq!(
            token["repositories"],
            serde_json::json!(["calc"]),
            "scoped: {token}"
        );
        let p = &token["permissions"];
        let writes_contents = p["contents"] == "write";
        let touches_threads = !p["issues"].is_null() || !p["pull_requests"].is_null();
        assert!(!(writes_contents && touches_threads), "{token}");
    }
    s.stop().await;
}
