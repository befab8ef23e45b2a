//! Tests of the server's configuration: defaults, precedence, bounds
//! and secrets.

use super::*;
use secrecy::ExposeSecret;

fn settings() -> Settings {
    Settings::default()
}

fn parse(toml_text: &str) -> FileConfig {
    toml::from_str(toml_text).expect("valid test TOML")
}

#[test]
fn defaults_apply_without_file_or_flags() {
    let config = resolve(&settings(), FileConfig::default()).unwrap();
    assert_eq!(config.bind.to_string(), DEFAULT_BIND);
    assert_eq!(config.store.url, DEFAULT_DATABASE_URL);
    assert_eq!(config.webhook_path, "/webhooks");
    assert_eq!(config.github.api_url, DEFAULT_API_URL);
    assert!(config.llm.is_none());
    assert!(config.require_webhook_secret().is_err());
    let cwd = std::env::current_dir().unwrap();
    assert_eq!(config.data_dir, cwd.join(DEFAULT_DATA_DIR));
}

#[test]
fn a_relative_data_dir_is_made_absolute_against_the_start_directory() {
    let file = parse(r#"data_dir = "var/closer""#);
    let config = resolve(&settings(), file).unwrap();
    assert!(config.data_dir.is_absolute(), "{:?}", config.data_dir);
    assert!(config.data_dir.ends_with("var/closer"));
    let file = parse(r#"data_dir = "/srv/closer""#);
    let config = resolve(&settings(), file).unwrap();
    assert_eq!(config.data_dir, PathBuf::from("/srv/closer"));
}

#[test]
fn flags_and_environment_override_the_file() {
    let file = parse(
        r#"
        bind = "0.0.0.0:8080"
        database_url = "sqlite://file.db"
        [github]
        webhook_secret = "from-file"
        app_id = 1
        "#,
    );
    let s = Settings {
        database_url: Some("postgres://localhost/x".into()),
        github_webhook_secret: Some("from-env".into()),
        ..settings()
    };
    let config = resolve(&s, file).unwrap();
    assert_eq!(config.bind.to_string(), "0.0.0.0:8080");
    assert_eq!(config.store.url, "postgres://localhost/x");
    assert_eq!(config.github.app_id, Some(1));
    assert_eq!(
        config.require_webhook_secret().unwrap().expose_secret(),
        "from-env"
    );
}

#[test]
fn a_secret_set_but_empty_is_refused_and_a_line_end_dropped() {
    let with = |secret: &str| Settings {
        github_webhook_secret: Some(secret.into()),
        ..settings()
    };
    for empty in ["", "\n", "  \r\n"] {
        // Loaded (a worker or `migrate` never reads it), refused where
        // intake needs it.
        let config = resolve(&with(empty), FileConfig::default()).unwrap();
        let err = config.require_webhook_secret().unwrap_err();
        assert!(
            err.to_string().contains("set but empty"),
            "{empty:?}: {err}"
        );
    }
    let file = parse("[github]\nwebhook_secret = \"\"");
    let config = resolve(&settings(), file).unwrap();
    assert!(config.require_webhook_secret().is_err(), "the file's too");
    let config = resolve(&with("s3cret\n"), FileConfig::default()).unwrap();
    assert_eq!(
        config.require_webhook_secret().unwrap().expose_secret(),
        "s3cret",
        "the line end a file leaves is not part of the secret"
    );
    let config = resolve(&with(" s3cret "), FileConfig::default()).unwrap();
    assert_eq!(
        config.require_webhook_secret().unwrap().expose_secret(),
        " s3cret ",
        "other spaces are the secret's own"
    );

    let key = |pem: &str| Settings {
        github_private_key: Some(pem.into()),
        ..settings()
    };
    assert!(resolve(&key(""), FileConfig::default()).is_err());
    let one_line = "-----BEGIN RSA PRIVATE KEY-----\\nMIIB\\n-----END RSA PRIVATE KEY-----";
    let config = resolve(&key(one_line), FileConfig::default()).unwrap();
    assert_eq!(
        config.github.private_key.unwrap().expose_secret(),
        "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----"
    );

    let llm = Settings {
        llm_provider: Some("openai".into()),
        llm_model: Some("m".into()),
        llm_api_key: Some(String::new()),
        ..settings()
    };
    let config = resolve(&llm, FileConfig::default()).unwrap();
    assert!(
        config.llm.unwrap().api_key.is_none(),
        "an empty key is no key"
    );
}

#[test]
fn the_design_example_file_parses() {
    let file = parse(
        r#"
        bind = "127.0.0.1:3000"
        database_url = "sqlite://closer.db"
        [github]
        app_id = 12345
        webhook_secret = "s"
        api_url = "https://api.github.com"
        [llm]
        provider = "openai"
        base_url = "https://api.openai.com/v1"
        api_key = "k"
        model = "m"
        input_usd_per_mtok = 3.0
        output_usd_per_mtok = 15.0
        [agents.default]
        adapter = "command"
        command = ["/usr/local/bin/my-agent", "--flag"]
        timeout_secs = 1800
        pass_env = ["MY_AGENT_API_KEY"]
        "#,
    );
    let config = resolve(&settings(), file).unwrap();
    assert_eq!(config.agents["default"].command[1], "--flag");
    let llm = config.llm.unwrap();
    assert_eq!(llm.provider, LlmProvider::OpenAi);
    assert_eq!(llm.input_usd_per_mtok, Some(3.0));
    assert_eq!(llm.output_usd_per_mtok, Some(15.0));
}

#[test]
fn unknown_keys_and_bad_values_are_refused() {
    assert!(toml::from_str::<FileConfig>("bnd = \"x\"").is_err());
    let file = parse("[llm]\nprovider = \"gemini\"\nmodel = \"m\"");
    let err = resolve(&settings(), file).unwrap_err().to_string();
    assert!(err.contains("gemini"), "{err}");
    let file = parse("database_url = \"mysql://x\"");
    assert!(resolve(&settings(), file).is_err());
    let file = parse("[agents.a]\nadapter = \"command\"");
    let err = resolve(&settings(), file).unwrap_err().to_string();
    assert!(err.contains("agents.a"), "{err}");
    let file = parse("[llm]\nprovider = \"openai\"\nmodel = \"m\"\ninput_usd_per_mtok = -1.0");
    let err = resolve(&settings(), file).unwrap_err().to_string();
    assert!(err.contains("input_usd_per_mtok"), "{err}");
}

/// A value past each bound, and the error it gets.
const OUT_OF_BOUNDS: &[(&str, &str)] = &[
    (
        "workers = 100000",
        "workers must be between 0 and 256, got 100000",
    ),
    (
        "retention_days = 18446744073709551615",
        "retention.deliveries_days must be from 3 to 3650 days",
    ),
    (
        "retention_days = 0",
        "retention.deliveries_days must be from 3 to 3650 days, got 0",
    ),
    (
        "progress_interval_secs = 999999999",
        "progress_interval_secs must be between 0 and 86400",
    ),
    (
        "[queue]\nlease_secs = 2",
        "queue.lease_secs must be between 5 and 86400, got 2",
    ),
    (
        "[queue]\nlease_secs = 18446744073709551615",
        "queue.lease_secs must be between 5",
    ),
    (
        "[queue]\nmax_attempts = 0",
        "queue.max_attempts must be between 1 and 100, got 0",
    ),
    (
        "[queue]\nmax_attempts = -3",
        "queue.max_attempts must be between 1 and 100, got 0",
    ),
    (
        "[http]\nheader_read_timeout_secs = 0",
        "http.header_read_timeout_secs must be between 1 and 300",
    ),
    (
        "[http]\nrequest_timeout_secs = 100000",
        "http.request_timeout_secs must be between 1 and 600",
    ),
    (
        "[http]\nmax_connections = 1",
        "http.max_connections must be between 16 and 65536, got 1",
    ),
    (
        "[http]\nbody_memory_mb = 1",
        "http.body_memory_mb must be between 25 and 4096, got 1",
    ),
    (
        "[http]\nshutdown_grace_secs = 0",
        "http.shutdown_grace_secs must be between 1 and 3600",
    ),
    (
        "[limits]\nmax_cost_usd_per_run = -1.0",
        "max_cost_usd_per_run must be a non-negative",
    ),
    (
        "[limits]\nmax_tokens_per_run = 0",
        "must be above 0 (leave a key out for no ceiling)",
    ),
    (
        "[limits]\nmax_cost_usd_per_run = 0",
        "must be above 0 (leave a key out for no ceiling)",
    ),
    (
        "[agents.a]\nadapter = \"claude-code\"\ntimeout_secs = 18446744073709551615",
        "[agents.a]: timeout_secs must be between 1 and 604800",
    ),
    (
        "[agents.a]\nadapter = \"codex\"\nmax_output_bytes = 0",
        "[agents.a]: max_output_bytes must be between 1024 and 1073741824, got 0",
    ),
    (
        "[agents.a]\nadapter = \"codex\"\nkeep_home_secs = 18446744073709551615",
        "[agents.a]: keep_home_secs must be between 0 and 31536000",
    ),
];

#[test]
fn every_duration_count_and_size_is_bounded_with_a_clear_error() {
    for (toml_text, expected) in OUT_OF_BOUNDS {
        let err = resolve(&settings(), parse(toml_text))
            .unwrap_err()
            .to_string();
        assert!(err.contains(expected), "{toml_text}: {err}");
    }
    // Control: the bounds themselves are accepted.
    let file = parse(
        "workers = 256\nretention_days = 3650\n[queue]\nlease_secs = 86400\nmax_attempts = 100\n\
         [http]\nmax_connections = 16\nbody_memory_mb = 25\nshutdown_grace_secs = 3600",
    );
    let config = resolve(&settings(), file).unwrap();
    assert_eq!(config.http.body_memory_bytes, 25 * 1024 * 1024);
    assert_eq!(config.http.max_connections, 16);
    assert_eq!(config.queue.max_attempts, 100);
}

#[test]
fn secrets_do_not_show_in_debug_output() {
    let s = Settings {
        github_webhook_secret: Some("hunter2-secret".into()),
        github_private_key: Some("hunter2-key".into()),
        llm_provider: Some("openai".into()),
        llm_model: Some("m".into()),
        llm_api_key: Some("hunter2-llm".into()),
        database_url: Some("postgres://closer:hunter2-db@db/closer".into()),
        ..settings()
    };
    // The settings as given, and the configuration made of them.
    let given = format!("{s:?}");
    assert!(!given.contains("hunter2"), "{given}");
    assert!(
        given.contains("github_webhook_secret: Some(\"[REDACTED]\")"),
        "{given}"
    );
    let config = resolve(&s, FileConfig::default()).unwrap();
    let shown = format!("{config:?}");
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(
        shown.contains("postgres://closer:[REDACTED]@db/closer"),
        "{shown}"
    );
}
