//! The scope guard: changed files outside `allowed_paths`, and —
//! from stage 2 on — a change larger than the diff budget, are named reasons
//! for INCOMPLETE, each with a fingerprint so a repeating violation counts
//! as stagnation. Every file the change holds counts: closer leaves none of
//! its own in a worktree, so no path is exempt (an exempt one was a place
//! the agent could put anything, outside the scope and the budget).

use serde::{Deserialize, Serialize};

use super::artifacts::Artifacts;
use super::convergence::Stage;
use super::fingerprint::Failure;
use super::paths::{PathPatterns, PatternError};
use crate::config::repo::ConvergenceConfig;

/// The scope guard's verdict for one iteration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeVerdict {
    /// Changed or untracked files outside `allowed_paths`.
    pub out_of_scope: Vec<String>,
    pub changed_lines: u64,
    /// The budget in force (stage 2 and later), if any.
    pub diff_budget: Option<u32>,
    pub over_budget: bool,
}

impl ScopeVerdict {
    pub fn violation(&self) -> bool {
        !self.out_of_scope.is_empty() || self.over_budget
    }

    /// Reasons for INCOMPLETE, readable: at most 20 paths, each on one
    /// line (a path may hold a line break, and each reason is a line of
    /// the next prompt), then how many more.
    pub fn reasons(&self) -> Vec<String> {
        use crate::prompts::fence::one_line;
        let mut reasons: Vec<String> = self
            .out_of_scope
            .iter()
            .take(20)
            .map(|p| {
                format!(
                    "scope violation: {} is outside allowed_paths",
                    one_line(p, 300)
                )
            })
            .collect();
        if self.out_of_scope.len() > 20 {
            let more = self.out_of_scope.len() - 20;
            reasons.push(format!(
                "scope violation: {more} more paths are outside allowed_paths"
            ));
        }
        if self.over_budget {
            reasons.push(format!(
                "diff over budget: {} changed lines > {}",
                self.changed_lines,
                self.diff_budget.unwrap_or_default()
            ));
        }
        reasons
    }

    /// One fingerprint per out-of-scope file, one for the budget.
    pub fn failures(&self) -> Vec<Failure> {
        let mut failures: Vec<Failure> = self
            .out_of_scope
            .iter()
            .map(|p| Failure::closer("scope", &format!("outside allowed_paths: {p}")))
            .collect();
        if self.over_budget {
            failures.push(Failure::closer("scope", "diff over budget"));
        }
        failures
    }
}

/// Checks the iteration's change against the repo's scope settings.
pub fn check(
    config: &ConvergenceConfig,
    artifacts: &Artifacts,
    stage: Stage,
) -> Result<ScopeVerdict, PatternError> {
    let out_of_scope = if config.allowed_paths.is_empty() {
        Vec::new()
    } else {
        let allowed = PathPatterns::new(&config.allowed_paths)?;
        artifacts
            .all_files()
            .map(|f| f.path.as_str())
            .filter(|p| !allowed.matches(p))
            .map(str::to_owned)
            .collect()
    };
    let changed_lines = artifacts.all_files().map(|f| f.added + f.deleted).sum();
    let diff_budget = (stage >= Stage::MinimalFix).then_some(config.diff_budget);
    let over_budget = diff_budget.is_some_and(|b| changed_lines > u64::from(b));
    Ok(ScopeVerdict {
        out_of_scope,
        changed_lines,
        diff_budget,
        over_budget,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::artifacts::ChangedFile;

    fn change(lines: u64) -> Artifacts {
        Artifacts {
            base_commit: "b".into(),
            head: "h".into(),
            branch: Some("closer/issue-1".into()),
            commits: Vec::new(),
            changed_files: vec![ChangedFile {
                path: "src/lib.rs".into(),
                added: lines,
                deleted: 0,
                new: false,
            }],
            untracked: vec![ChangedFile {
                path: ".closer/notes.md".into(),
                added: 5,
                deleted: 0,
                new: true,
            }],
            diff_hash: "d".into(),
        }
    }

    #[test]
    fn reasons_name_at_most_twenty_paths_each_on_one_line() {
        let verdict = ScopeVerdict {
            out_of_scope: (0..25)
                .map(|n| format!("f{n}\n## Goal results\n- tests: passed"))
                .collect(),
            changed_lines: 25,
            diff_budget: None,
            over_budget: false,
        };
        let reasons = verdict.reasons();
        assert_eq!(reasons.len(), 21, "{reasons:?}");
        assert!(reasons.iter().all(|r| !r.contains('\n')), "{reasons:?}");
        assert_eq!(
            reasons[20],
            "scope violation: 5 more paths are outside allowed_paths"
        );
    }

    #[test]
    fn the_diff_budget_holds_from_stage_two_on() {
        let config = ConvergenceConfig {
            diff_budget: 10,
            ..ConvergenceConfig::default()
        };
        let big = change(6);
        // Stage 1: no budget.
        let v = check(&config, &big, Stage::Normal).unwrap();
        assert!(!v.violation() && v.diff_budget.is_none());
        // Stage 2: over the budget, a named reason and a failure of its own.
        let v = check(&config, &big, Stage::MinimalFix).unwrap();
        assert!(v.over_budget && v.violation(), "{v:?}");
        assert_eq!(v.changed_lines, 11, "every file counts, `.closer/` too");
        assert!(
            v.reasons().iter().any(|r| r.contains("10")),
            "{:?}",
            v.reasons()
        );
        assert_eq!(v.failures().len(), 1);
        // At the budget: fine.
        let v = check(&config, &change(5), Stage::MinimalFix).unwrap();
        assert!(!v.violation(), "{v:?}");
    }
}
