//! The fuzz targets, one file per input closer reads from outside.

use crate::driver::Target;

pub mod agent_stream;
pub mod command;
pub mod diff;
pub mod fingerprint;
pub mod github_answer;
pub mod github_headers;
pub mod json_path;
pub mod llm_answer;
pub mod prompt_template;
pub mod question;
pub mod repo_config;
pub mod secrets;
pub mod webhook;

/// Every target, in the order the reports list them.
pub const ALL: &[Target] = &[
    webhook::TARGET,
    command::TARGET,
    question::TARGET,
    repo_config::TARGET,
    fingerprint::TARGET,
    diff::TARGET,
    secrets::TARGET,
    prompt_template::TARGET,
    llm_answer::TARGET,
    agent_stream::TARGET,
    json_path::TARGET,
    github_answer::TARGET,
    github_headers::TARGET,
];

/// Files under `tests/fixtures/<dir>` ending in `ext`, name and text.
pub fn fixtures(dir: &str, ext: &str) -> Vec<(String, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir);
    let mut files: Vec<(String, String)> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let name = path.file_name()?.to_str()?.to_owned();
            name.ends_with(ext)
                .then(|| Some((name, std::fs::read_to_string(&path).ok()?)))?
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", root.display());
    files
}
