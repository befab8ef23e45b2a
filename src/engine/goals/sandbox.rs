//! The sandbox a goal or setup command (or a goal's server) runs in: the
//! checkout read-write, the run's git metadata read-only, and a HOME and
//! TMPDIR that are either the check's own (made empty for one check, shared
//! by its setup and goals, so what `cargo fetch` put there serves `cargo
//! test`) or made for this one command and removed after it — never the
//! agent's home, where the agent could have planted a `usercustomize.py` or
//! a shell profile that changes what the tests do.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use super::GoalContext;
use crate::agent::confine::{Jail, Kind, View};

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A goal command's jail and environment; dropping it removes the home it
/// made for itself.
#[derive(Debug)]
pub(super) struct GoalJail {
    pub jail: Jail,
    pub env: BTreeMap<String, String>,
    /// A home made for this command alone.
    own_home: Option<PathBuf>,
}

impl GoalJail {
    pub async fn new(ctx: GoalContext<'_>, kind: Kind) -> std::io::Result<GoalJail> {
        let (home, own_home) = match ctx.home {
            Some(shared) => (shared.to_path_buf(), None),
            None => {
                let n = NEXT.fetch_add(1, Ordering::Relaxed);
                let home = ctx
                    .settings
                    .scratch
                    .join(format!("goal-home-{}-{n}", std::process::id()));
                (home.clone(), Some(home))
            }
        };
        let tmp = home.join("tmp");
        tokio::fs::create_dir_all(&tmp).await?;
        let mut env = ctx.settings.base_env.vars();
        env.insert("HOME".into(), home.display().to_string());
        env.insert("TMPDIR".into(), tmp.display().to_string());
        let view = View {
            read_write: vec![ctx.worktree.to_path_buf(), home.clone()],
            read_only: ctx
                .mirror
                .map(|m| vec![m.to_path_buf()])
                .unwrap_or_default(),
        };
        Ok(GoalJail {
            jail: ctx.settings.confinement.jail(kind, view),
            env,
            own_home,
        })
    }
}

impl Drop for GoalJail {
    fn drop(&mut self) {
        if let Some(home) = &self.own_home {
            let _ = crate::agent::sandbox::remove::remove_tree_blocking(home);
        }
    }
}
