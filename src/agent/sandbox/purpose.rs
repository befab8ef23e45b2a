//! What a clean checkout of a run's commit is for. Its worktree is
//! `worktrees/<run id>-<purpose>`, its home `<run id>-<purpose>` beside the
//! goals' scratch; the retention task reads the run back from either name.

/// Why a run has a clean checkout besides its own worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// The base commit, for the baseline.
    Baseline,
    /// An iteration's head, for its goals.
    Checks,
    /// The base commit with the head's tests, for the reproduction.
    Reproduction,
}

impl Purpose {
    const ALL: [Purpose; 3] = [Purpose::Baseline, Purpose::Checks, Purpose::Reproduction];

    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Baseline => "baseline",
            Purpose::Checks => "checks",
            Purpose::Reproduction => "reproduction",
        }
    }

    /// The directory name of `run_id`'s checkout for this purpose.
    pub fn dir_name(self, run_id: &str) -> String {
        format!("{run_id}-{}", self.as_str())
    }

    /// The run a directory belongs to: its name without a purpose suffix.
    pub fn run_of(name: &str) -> &str {
        Purpose::ALL
            .iter()
            .find_map(|p| name.strip_suffix(p.as_str())?.strip_suffix('-'))
            .unwrap_or(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkouts_name_gives_back_its_run_and_a_runs_own_name_is_itself() {
        for purpose in Purpose::ALL {
            assert_eq!(Purpose::run_of(&purpose.dir_name("r1f2e3")), "r1f2e3");
        }
        assert_eq!(Purpose::run_of("r1f2e3"), "r1f2e3");
        assert_eq!(Purpose::run_of("rchecks"), "rchecks");
    }
}
