//! The convergence controller. Per run it keeps the fingerprint history,
//! how many iterations in a row the same failure set (or an unchanged diff)
//! was seen, how long each single failure has persisted, the diff hash per
//! iteration and the stage: stage 1 normal; stage 2 minimal-fix mode once
//! the same set, the same diff or any one failure repeated
//! `stagnation_threshold` iterations; stage 3 — the run stops as FAILED with
//! a diagnosis — when it still repeats in stage 2. `convergence.enabled:
//! false` keeps every run in stage 1 (the iteration limit still holds).
//!
//! Every check yields a [`Verdict`] with a fresh `check_id`, so a stale
//! decision can never be taken for the current one. The state is plain data
//! (serialisable) so it survives restarts; no clock or I/O in here.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::fingerprint::{Failure, set_hash};
use crate::config::repo::ConvergenceConfig;

pub use crate::model::Stage;

/// A decision's identity: fresh per check.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CheckId(pub String);

impl CheckId {
    /// 128 random bits from the injected generator.
    pub fn generate(rng: &mut fastrand::Rng) -> CheckId {
        CheckId(format!("{:016x}{:016x}", rng.u64(..), rng.u64(..)))
    }
}

/// The verdict kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    /// Objective verification passed (the completion check's checklist is judged elsewhere).
    Complete,
    Incomplete,
    /// Stage 3: stop, with a diagnosis.
    Failed,
}

/// Minimal-fix mode for the next prompt (stage 2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MinimalFix {
    pub allowed_paths: Vec<String>,
    pub diff_budget: u32,
    /// The repeating failures, summarised: the only thing to address.
    pub repeating: Vec<String>,
}

impl MinimalFix {
    /// The instruction text the prompt states.
    pub fn instructions(&self) -> String {
        let paths = if self.allowed_paths.is_empty() {
            "the files the failure is about".to_owned()
        } else {
            self.allowed_paths.join(", ")
        };
        format!(
            "Minimal-fix mode: the same failure repeated. Address only: {}. Change only {paths}; \
             keep the whole change under {} changed lines; revert every change outside these paths.",
            self.repeating.join("; "),
            self.diff_budget
        )
    }
}

/// A fingerprint that kept coming back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepeatedFailure {
    pub fingerprint: String,
    /// Iterations it was seen in.
    pub count: u32,
    pub summary: String,
}

/// A stage change and what the stage tried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageChange {
    pub iteration: u32,
    pub from: Stage,
    pub to: Stage,
    pub reason: String,
}

/// Why the run stopped (stage 3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnosis {
    pub repeated: Vec<RepeatedFailure>,
    /// What each stage tried, in order.
    pub stages: Vec<StageChange>,
    pub last_evidence: Vec<String>,
}

/// The structured decision `{decision, check_id, reasons[], fingerprints[]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub decision: VerdictKind,
    pub check_id: CheckId,
    pub reasons: Vec<String>,
    pub fingerprints: Vec<String>,
    pub iteration: u32,
    pub stage: Stage,
    /// Set in stage 2: what the next prompt must say.
    pub minimal_fix: Option<MinimalFix>,
    /// Set in stage 3.
    pub diagnosis: Option<Diagnosis>,
}

/// One iteration as the controller remembers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub iteration: u32,
    pub fingerprints: Vec<String>,
    pub failure_set: String,
    pub diff_hash: String,
    pub stage: Stage,
}

/// What one iteration's verification found.
#[derive(Debug, Clone)]
pub struct Observation {
    pub iteration: u32,
    /// Everything that blocks completion, fingerprinted.
    pub blocking: Vec<Failure>,
    /// Readable reasons; empty when nothing blocks.
    pub reasons: Vec<String>,
    pub diff_hash: String,
    /// Short evidence lines kept for the diagnosis.
    pub evidence: Vec<String>,
}

/// The most fingerprints an iteration's history entry keeps (the failure
/// set's hash covers them all), and the most summaries kept: the state is
/// saved with the run after every iteration, and a test run can print a
/// failure per line of its megabyte of output.
const MAX_KEPT_PER_ITERATION: usize = 1_000;
const MAX_SUMMARIES: usize = 5_000;

/// The controller's state for one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ConvergenceState {
    pub stage: Stage,
    /// Consecutive iterations with the same failure set or an unchanged diff.
    pub repeats: u32,
    /// Repeats since the current stage began.
    pub repeats_in_stage: u32,
    pub history: Vec<HistoryEntry>,
    pub stage_changes: Vec<StageChange>,
    /// Summaries of every fingerprint seen.
    pub summaries: BTreeMap<String, String>,
    /// Per blocking fingerprint, in how many consecutive iterations (up to
    /// the last) it was there: one failure that persists while others
    /// change moves the stage too.
    #[serde(default)]
    pub streaks: BTreeMap<String, u32>,
    /// The same, counted since the current stage began.
    #[serde(default)]
    pub streaks_in_stage: BTreeMap<String, u32>,
}

impl ConvergenceState {
    /// Records an iteration and decides.
    pub fn observe(
        &mut self,
        obs: Observation,
        config: &ConvergenceConfig,
        check_id: CheckId,
    ) -> Verdict {
        let fingerprints = self.remember(&obs);
        let mut decision = Verdict {
            decision: VerdictKind::Incomplete,
            check_id,
            reasons: obs.reasons.clone(),
            fingerprints: fingerprints.clone(),
            iteration: obs.iteration,
            stage: self.stage,
            minimal_fix: None,
            diagnosis: None,
        };
        if self.stage == Stage::Stopped {
            decision.decision = VerdictKind::Failed;
            decision.diagnosis = Some(self.diagnosis(&obs.evidence));
            return decision;
        }
        if obs.reasons.is_empty() && fingerprints.is_empty() {
            self.repeats = 0;
            self.repeats_in_stage = 0;
            decision.decision = VerdictKind::Complete;
            return decision;
        }
        if config.enabled {
            self.advance(obs.iteration, config);
        }
        decision.stage = self.stage;
        match self.stage {
            Stage::Normal => {}
            Stage::MinimalFix => {
                decision.minimal_fix = Some(self.minimal_fix(&fingerprints, config))
            }
            Stage::Stopped => {
                decision.decision = VerdictKind::Failed;
                decision.diagnosis = Some(self.diagnosis(&obs.evidence));
            }
        }
        decision
    }

    /// Adds the iteration to the history, the repeat counters and each
    /// fingerprint's streak; returns its blocking fingerprints, sorted.
    fn remember(&mut self, obs: &Observation) -> Vec<String> {
        let mut fingerprints: Vec<String> =
            obs.blocking.iter().map(|f| f.fingerprint.clone()).collect();
        fingerprints.sort();
        fingerprints.dedup();
        for failure in &obs.blocking {
            if self.summaries.len() >= MAX_SUMMARIES {
                break;
            }
            self.summaries
                .entry(failure.fingerprint.clone())
                .or_insert_with(|| failure.summary());
        }
        let failure_set = set_hash(fingerprints.iter().map(String::as_str));
        let previous = self.history.last().cloned();
        self.history.push(HistoryEntry {
            iteration: obs.iteration,
            fingerprints: fingerprints
                .iter()
                .take(MAX_KEPT_PER_ITERATION)
                .cloned()
                .collect(),
            failure_set: failure_set.clone(),
            diff_hash: obs.diff_hash.clone(),
            stage: self.stage,
        });
        let repeated =
            previous.is_some_and(|p| p.failure_set == failure_set || p.diff_hash == obs.diff_hash);
        if repeated {
            self.repeats += 1;
            self.repeats_in_stage += 1;
        } else {
            self.repeats = 1;
            self.repeats_in_stage = 0;
        }
        // `fingerprints` is sorted: a lookup is a binary search, so a test
        // run printing a hundred thousand failures stays cheap.
        let present = |fp: &String| fingerprints.binary_search(fp).is_ok();
        self.streaks.retain(|fp, _| present(fp));
        self.streaks_in_stage.retain(|fp, _| present(fp));
        for fp in &fingerprints {
            *self.streaks.entry(fp.clone()).or_default() += 1;
            *self.streaks_in_stage.entry(fp.clone()).or_default() += 1;
        }
        fingerprints
    }

    /// Moves the stage when the failure set, the diff or any one
    /// fingerprint repeated long enough.
    fn advance(&mut self, iteration: u32, config: &ConvergenceConfig) {
        let threshold = config.stagnation_threshold.max(1);
        let in_stage_threshold = threshold.saturating_sub(1).max(1);
        let why = self.why_repeating();
        match self.stage {
            Stage::Normal if self.repeats >= threshold || self.longest_streak().0 >= threshold => {
                let reason = format!(
                    "{why} in {} consecutive iterations; minimal-fix mode with allowed_paths and a diff budget of {} lines",
                    self.repeats.max(self.longest_streak().0),
                    config.diff_budget
                );
                self.change_stage(iteration, Stage::MinimalFix, reason);
            }
            Stage::MinimalFix
                if self.repeats_in_stage >= in_stage_threshold
                    || self.longest_repeat_in_stage() >= in_stage_threshold =>
            {
                let reason = format!(
                    "{why} still repeats in minimal-fix mode ({} consecutive iterations)",
                    self.repeats.max(self.longest_streak().0)
                );
                self.change_stage(iteration, Stage::Stopped, reason);
            }
            _ => {}
        }
    }

    /// What is repeating, in words.
    fn why_repeating(&self) -> String {
        if previous_diff_same(&self.history) {
            return "no change to the diff".to_owned();
        }
        let (streak, fp) = self.longest_streak();
        let set_repeats = self.repeats >= streak;
        match (set_repeats, fp) {
            (false, Some(fp)) => format!(
                "the failure `{}` persisting",
                self.summaries.get(&fp).cloned().unwrap_or(fp)
            ),
            _ => "the same failure set".to_owned(),
        }
    }

    /// The longest current streak of one fingerprint, and which.
    fn longest_streak(&self) -> (u32, Option<String>) {
        self.streaks
            .iter()
            .max_by_key(|(fp, n)| (**n, std::cmp::Reverse((*fp).clone())))
            .map_or((0, None), |(fp, n)| (*n, Some(fp.clone())))
    }

    /// How many iterations since the stage began one failure has been
    /// there *again*: a failure carried into the stage repeats with each
    /// sighting, one new in the stage from its second on (a failure the
    /// stage itself brought, say its diff budget, is not yet repeating).
    fn longest_repeat_in_stage(&self) -> u32 {
        self.streaks_in_stage
            .iter()
            .map(|(fp, in_stage)| {
                let overall = self.streaks.get(fp).copied().unwrap_or(0);
                (*in_stage).min(overall.saturating_sub(1))
            })
            .max()
            .unwrap_or(0)
    }

    fn minimal_fix(&self, fingerprints: &[String], config: &ConvergenceConfig) -> MinimalFix {
        MinimalFix {
            allowed_paths: config.allowed_paths.clone(),
            diff_budget: config.diff_budget,
            repeating: fingerprints
                .iter()
                .filter_map(|f| self.summaries.get(f).cloned())
                .collect(),
        }
    }

    /// A person restarted the run (`/closer retry`, `/closer run`): it
    /// starts again in the normal stage with no repeats counted, so the
    /// next iteration is judged on its own evidence. The history stays for
    /// the diagnosis, and the restart is a stage change of its own.
    pub fn restarted(mut self, iteration: u32, why: &str) -> ConvergenceState {
        if self.stage != Stage::Normal {
            self.change_stage(iteration, Stage::Normal, why.to_owned());
        }
        self.repeats = 0;
        self.streaks.clear();
        self
    }

    fn change_stage(&mut self, iteration: u32, to: Stage, reason: String) {
        self.stage_changes.push(StageChange {
            iteration,
            from: self.stage,
            to,
            reason,
        });
        self.stage = to;
        self.repeats_in_stage = 0;
        self.streaks_in_stage.clear();
    }

    /// Which fingerprints repeated how often, what each stage tried, the last evidence.
    pub fn diagnosis(&self, last_evidence: &[String]) -> Diagnosis {
        let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
        for record in &self.history {
            for fp in &record.fingerprints {
                *counts.entry(fp.as_str()).or_default() += 1;
            }
        }
        let mut repeated: Vec<RepeatedFailure> = counts
            .into_iter()
            .filter(|(_, n)| *n >= 2)
            .map(|(fp, count)| RepeatedFailure {
                fingerprint: fp.to_owned(),
                count,
                summary: self.summaries.get(fp).cloned().unwrap_or_default(),
            })
            .collect();
        repeated.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then_with(|| a.fingerprint.cmp(&b.fingerprint))
        });
        Diagnosis {
            repeated,
            stages: self.stage_changes.clone(),
            last_evidence: last_evidence.to_vec(),
        }
    }
}

fn previous_diff_same(history: &[HistoryEntry]) -> bool {
    match history {
        [.., a, b] => a.diff_hash == b.diff_hash,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(iteration: u32, failures: &[&str], diff: &str) -> Observation {
        let blocking: Vec<Failure> = failures
            .iter()
            .map(|f| Failure::closer("test", f))
            .collect();
        Observation {
            iteration,
            reasons: failures.iter().map(|f| format!("failing: {f}")).collect(),
            blocking,
            diff_hash: diff.into(),
            evidence: vec![format!("evidence {iteration}")],
        }
    }

    fn id(n: u64) -> CheckId {
        CheckId(format!("check-{n}"))
    }

    #[test]
    fn a_hundred_thousand_failures_keep_the_state_small_and_still_repeat() {
        let config = ConvergenceConfig::default();
        let mut state = ConvergenceState::default();
        let names: Vec<String> = (0..100_000).map(|i| format!("t{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        state.observe(obs(1, &names, "d1"), &config, id(1));
        let d2 = state.observe(obs(2, &names, "d2"), &config, id(2));
        assert_eq!(
            d2.stage,
            Stage::MinimalFix,
            "the same set, all of it, repeated"
        );
        assert!(
            state
                .history
                .iter()
                .all(|h| h.fingerprints.len() == MAX_KEPT_PER_ITERATION)
        );
        assert_eq!(state.summaries.len(), MAX_SUMMARIES);
        assert_eq!(state.streaks.len(), 100_000, "streaks follow every failure");
    }

    /// A failure new in stage 2 (here the other one was fixed) has not
    /// repeated yet: the stage goes on. Seen again, it has. Before, any
    /// failure in stage 2's first iteration stopped the run, the diff
    /// budget's own included.
    #[test]
    fn a_failure_new_in_stage_two_is_not_yet_a_repeat() {
        let config = ConvergenceConfig::default();
        let mut state = ConvergenceState::default();
        state.observe(obs(1, &["a"], "d1"), &config, id(1));
        let d2 = state.observe(obs(2, &["a"], "d2"), &config, id(2));
        assert_eq!(d2.stage, Stage::MinimalFix);
        let d3 = state.observe(obs(3, &["b"], "d3"), &config, id(3));
        assert_eq!(
            (d3.decision, d3.stage),
            (VerdictKind::Incomplete, Stage::MinimalFix)
        );
        let d4 = state.observe(obs(4, &["b", "c"], "d4"), &config, id(4));
        assert_eq!(
            (d4.decision, d4.stage),
            (VerdictKind::Failed, Stage::Stopped),
            "b repeats"
        );
    }

    #[test]
    fn same_failure_set_moves_to_stage_two_then_stops() {
        let config = ConvergenceConfig::default();
        let mut state = ConvergenceState::default();
        let d1 = state.observe(obs(1, &["a"], "d1"), &config, id(1));
        assert_eq!(
            (d1.decision, d1.stage),
            (VerdictKind::Incomplete, Stage::Normal)
        );
        let d2 = state.observe(obs(2, &["a"], "d2"), &config, id(2));
        assert_eq!(
            (d2.decision, d2.stage),
            (VerdictKind::Incomplete, Stage::MinimalFix)
        );
        let fix = d2.minimal_fix.expect("stage 2 states minimal-fix mode");
        assert!(
            fix.instructions().contains("400 changed lines"),
            "{}",
            fix.instructions()
        );
        let d3 = state.observe(obs(3, &["a"], "d3"), &config, id(3));
        assert_eq!(
            (d3.decision, d3.stage),
            (VerdictKind::Failed, Stage::Stopped)
        );
        let diagnosis = d3.diagnosis.expect("stage 3 has a diagnosis");
        assert_eq!(diagnosis.repeated.len(), 1);
        assert_eq!(diagnosis.repeated[0].count, 3);
        assert_eq!(diagnosis.stages.len(), 2);
        assert_eq!(diagnosis.last_evidence, ["evidence 3"]);
        assert_eq!(d3.check_id, id(3));
    }

    #[test]
    fn one_failure_that_persists_while_others_change_escalates_then_stops() {
        let config = ConvergenceConfig::default();
        let mut state = ConvergenceState::default();
        let d1 = state.observe(obs(1, &["persist", "a"], "d1"), &config, id(1));
        assert_eq!(d1.stage, Stage::Normal);
        // The set and the diff change, but `persist` is there again.
        let d2 = state.observe(obs(2, &["persist", "b"], "d2"), &config, id(2));
        assert_eq!(
            (d2.decision, d2.stage),
            (VerdictKind::Incomplete, Stage::MinimalFix)
        );
        assert!(
            state.stage_changes[0].reason.contains("persisting"),
            "{:?}",
            state.stage_changes
        );
        let d3 = state.observe(obs(3, &["persist", "c"], "d3"), &config, id(3));
        assert_eq!(
            (d3.decision, d3.stage),
            (VerdictKind::Failed, Stage::Stopped)
        );
        let diagnosis = d3.diagnosis.expect("a diagnosis");
        assert_eq!(diagnosis.repeated[0].count, 3, "{diagnosis:?}");
        assert!(diagnosis.repeated[0].summary.contains("persist"));

        // The control: failures that all change never escalate.
        let mut state = ConvergenceState::default();
        for (n, f) in ["a", "b", "c", "d"].iter().enumerate() {
            let d = state.observe(
                obs(n as u32 + 1, &[f], &format!("d{n}")),
                &config,
                id(n as u64),
            );
            assert_eq!(d.stage, Stage::Normal);
        }
    }

    #[test]
    fn a_disabled_controller_never_moves_the_stage() {
        let config = ConvergenceConfig {
            enabled: false,
            ..ConvergenceConfig::default()
        };
        let mut state = ConvergenceState::default();
        for n in 1..=6 {
            let d = state.observe(obs(n, &["same"], "same-diff"), &config, id(u64::from(n)));
            assert_eq!(
                (d.decision, d.stage),
                (VerdictKind::Incomplete, Stage::Normal)
            );
            assert!(d.minimal_fix.is_none() && d.diagnosis.is_none());
        }
        let done = state.observe(obs(7, &[], "d7"), &config, id(7));
        assert_eq!(done.decision, VerdictKind::Complete);
    }

    #[test]
    fn a_restart_after_the_stop_judges_the_next_iteration_afresh() {
        let config = ConvergenceConfig::default();
        let mut state = ConvergenceState::default();
        let mut n = 0;
        while state.stage != Stage::Stopped {
            n += 1;
            assert!(n < 20, "the same failure stops the run");
            state.observe(obs(n, &["same"], "same-diff"), &config, id(u64::from(n)));
        }
        // The control: stopped, even a clean iteration fails.
        let mut stopped = state.clone();
        let d = stopped.observe(obs(n + 1, &[], "fixed"), &config, id(99));
        assert_eq!(d.decision, VerdictKind::Failed);

        let mut state = state.restarted(n, "restarted by a maintainer");
        assert_eq!(state.stage, Stage::Normal);
        assert_eq!(state.stage_changes.last().unwrap().from, Stage::Stopped);
        let d = state.observe(obs(n + 1, &["same"], "same-diff"), &config, id(100));
        assert_eq!(
            (d.decision, d.stage),
            (VerdictKind::Incomplete, Stage::Normal)
        );
        let d = state.observe(obs(n + 2, &[], "fixed"), &config, id(101));
        assert_eq!(d.decision, VerdictKind::Complete);
    }

    #[test]
    fn progress_resets_the_count() {
        let config = ConvergenceConfig::default();
        let mut state = ConvergenceState::default();
        state.observe(obs(1, &["a"], "d1"), &config, id(1));
        let d = state.observe(obs(2, &["b"], "d2"), &config, id(2));
        assert_eq!(d.stage, Stage::Normal);
        assert_eq!(state.repeats, 1);
        let d = state.observe(obs(3, &[], "d3"), &config, id(3));
        assert_eq!(d.decision, VerdictKind::Complete);
        assert!(d.fingerprints.is_empty() && d.reasons.is_empty());
    }

    #[test]
    fn an_unchanged_diff_counts_as_a_repeat() {
        let config = ConvergenceConfig::default();
        let mut state = ConvergenceState::default();
        state.observe(obs(1, &["a"], "same"), &config, id(1));
        let d = state.observe(obs(2, &["b"], "same"), &config, id(2));
        assert_eq!(d.stage, Stage::MinimalFix);
        assert!(
            state.stage_changes[0]
                .reason
                .contains("no change to the diff")
        );
    }

    #[test]
    fn a_higher_threshold_waits_longer() {
        let config = ConvergenceConfig {
            stagnation_threshold: 3,
            ..ConvergenceConfig::default()
        };
        let mut state = ConvergenceState::default();
        let stages: Vec<Stage> = (1..=5)
            .map(|i| {
                state
                    .observe(obs(i, &["a"], &format!("d{i}")), &config, id(i.into()))
                    .stage
            })
            .collect();
        assert_eq!(
            stages,
            [
                Stage::Normal,
                Stage::Normal,
                Stage::MinimalFix,
                Stage::MinimalFix,
                Stage::Stopped
            ]
        );
    }

    #[test]
    fn check_ids_are_fresh() {
        let mut rng = fastrand::Rng::with_seed(7);
        let a = CheckId::generate(&mut rng);
        let b = CheckId::generate(&mut rng);
        assert_ne!(a, b);
        assert_eq!(a.0.len(), 32);
    }

    #[test]
    fn the_decision_serialises_with_the_contract_fields() {
        let config = ConvergenceConfig::default();
        let mut state = ConvergenceState::default();
        let d = state.observe(obs(1, &["a"], "d"), &config, id(9));
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["decision"], "incomplete");
        assert_eq!(json["check_id"], "check-9");
        assert_eq!(json["reasons"][0], "failing: a");
        assert_eq!(json["fingerprints"].as_array().map(Vec::len), Some(1));
    }
}
