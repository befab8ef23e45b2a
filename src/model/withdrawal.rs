//! Why closer lost its access to a run's repository: the App uninstalled
//! or its installation suspended, the repository taken out of the
//! installation or deleted. Such a run is stopped with the reason as its
//! outcome (`store/withdrawn.rs`), and nothing more is done for it: no step
//! works it, and nothing is written to GitHub for it (closer could not).

use super::{Outcome, Run, RunState};

/// Why closer can no longer reach a run's repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Withdrawal {
    /// `installation.deleted`.
    Uninstalled,
    /// `installation.suspend`.
    Suspended,
    /// `installation_repositories.removed`.
    Removed,
    /// `repository.deleted`.
    Deleted,
}

impl Withdrawal {
    pub const ALL: [Withdrawal; 4] = [
        Withdrawal::Uninstalled,
        Withdrawal::Suspended,
        Withdrawal::Removed,
        Withdrawal::Deleted,
    ];

    /// The reason a run it stopped shows (`stopped: <reason>`).
    pub fn reason(self) -> &'static str {
        match self {
            Withdrawal::Uninstalled => "the App was uninstalled",
            Withdrawal::Suspended => "the App's installation was suspended",
            Withdrawal::Removed => "the repository was removed from the App's installation",
            Withdrawal::Deleted => "the repository was deleted",
        }
    }

    /// The outcome of a run it stopped.
    pub fn outcome(self) -> Outcome {
        Outcome::Stopped(self.reason().to_owned())
    }
}

impl Run {
    /// The withdrawal that stopped the run, while it stays stopped by it: a
    /// `/closer retry` (once the App is back) starts it again.
    pub fn withdrawn(&self) -> Option<Withdrawal> {
        if self.state != RunState::Stopped {
            return None;
        }
        let Some(Outcome::Stopped(why)) = &self.outcome else {
            return None;
        };
        Withdrawal::ALL.into_iter().find(|w| w.reason() == why)
    }
}
