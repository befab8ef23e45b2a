//! The built-in prompts, compiled into the binary from `prompts/` at the
//! repository root: one for every step the engine uses, so a repository that
//! overrides nothing still gets a complete set. Never read at run time from
//! disk: the binary is the source of truth for defaults.

/// (C3L path under `steps/`, markdown with front matter).
const BUILTIN: &[(&str, &str)] = &[
    (
        "steps/classify/task/f_default.md",
        include_str!("../../prompts/steps/classify/task/f_default.md"),
    ),
    (
        "steps/complete/bug/f_default.md",
        include_str!("../../prompts/steps/complete/bug/f_default.md"),
    ),
    (
        "steps/complete/bug/f_default_retry.md",
        include_str!("../../prompts/steps/complete/bug/f_default_retry.md"),
    ),
    (
        "steps/complete/docs/f_default.md",
        include_str!("../../prompts/steps/complete/docs/f_default.md"),
    ),
    (
        "steps/complete/docs/f_default_retry.md",
        include_str!("../../prompts/steps/complete/docs/f_default_retry.md"),
    ),
    (
        "steps/complete/feature/f_default.md",
        include_str!("../../prompts/steps/complete/feature/f_default.md"),
    ),
    (
        "steps/complete/feature/f_default_retry.md",
        include_str!("../../prompts/steps/complete/feature/f_default_retry.md"),
    ),
    (
        "steps/complete/read_info/f_default.md",
        include_str!("../../prompts/steps/complete/read_info/f_default.md"),
    ),
    (
        "steps/complete/read_info/f_default_retry.md",
        include_str!("../../prompts/steps/complete/read_info/f_default_retry.md"),
    ),
    (
        "steps/complete/refactor/f_default.md",
        include_str!("../../prompts/steps/complete/refactor/f_default.md"),
    ),
    (
        "steps/complete/refactor/f_default_retry.md",
        include_str!("../../prompts/steps/complete/refactor/f_default_retry.md"),
    ),
    (
        "steps/complete/report/f_default.md",
        include_str!("../../prompts/steps/complete/report/f_default.md"),
    ),
    (
        "steps/complete/report/f_default_retry.md",
        include_str!("../../prompts/steps/complete/report/f_default_retry.md"),
    ),
    (
        "steps/complete/test/f_default.md",
        include_str!("../../prompts/steps/complete/test/f_default.md"),
    ),
    (
        "steps/complete/test/f_default_retry.md",
        include_str!("../../prompts/steps/complete/test/f_default_retry.md"),
    ),
    (
        "steps/continuation/custom/f_default.md",
        include_str!("../../prompts/steps/continuation/custom/f_default.md"),
    ),
    (
        "steps/continuation/issue/f_default.md",
        include_str!("../../prompts/steps/continuation/issue/f_default.md"),
    ),
    (
        "steps/continuation/iterate/f_default.md",
        include_str!("../../prompts/steps/continuation/iterate/f_default.md"),
    ),
    (
        "steps/continuation/manual/f_default.md",
        include_str!("../../prompts/steps/continuation/manual/f_default.md"),
    ),
    (
        "steps/continuation/project/f_default.md",
        include_str!("../../prompts/steps/continuation/project/f_default.md"),
    ),
    (
        "steps/initial/custom/f_default.md",
        include_str!("../../prompts/steps/initial/custom/f_default.md"),
    ),
    (
        "steps/initial/issue/f_default.md",
        include_str!("../../prompts/steps/initial/issue/f_default.md"),
    ),
    (
        "steps/initial/iterate/f_default.md",
        include_str!("../../prompts/steps/initial/iterate/f_default.md"),
    ),
    (
        "steps/initial/manual/f_default.md",
        include_str!("../../prompts/steps/initial/manual/f_default.md"),
    ),
    (
        "steps/initial/project/f_default.md",
        include_str!("../../prompts/steps/initial/project/f_default.md"),
    ),
];

/// The built-in prompt at `path` (e.g. `steps/complete/bug/f_default.md`).
pub fn builtin(path: &str) -> Option<&'static str> {
    BUILTIN
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, text)| *text)
}

/// Every built-in path, for tests and `docs/prompts.md`.
pub fn builtin_paths() -> impl Iterator<Item = &'static str> {
    BUILTIN.iter().map(|(p, _)| *p)
}
