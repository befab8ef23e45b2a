//! `[retention]`: how long closer keeps what it no longer needs, and the
//! disk budget of its data directory. Every age has a default an operator
//! can leave alone and bounds that keep a typo from pruning everything
//! (0 days) or nothing (a century). The retention task itself is
//! `crate::retention`.

use std::time::Duration;

use serde::Deserialize;

use super::server::ConfigError;

const DAY: u64 = 86_400;
/// The longest any age may be set to: ten years.
const MAX_DAYS: u64 = 3_650;
/// The shortest `deliveries_days`: GitHub lets a delivery be redelivered
/// for three days, and a delivery whose id closer has forgotten is handled
/// again when it comes back (decision 234).
const MIN_DELIVERIES_DAYS: u64 = 3;

/// `[retention]` in the TOML file; every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileRetention {
    deliveries_days: Option<u64>,
    dead_jobs_days: Option<u64>,
    run_output_days: Option<u64>,
    run_files_days: Option<u64>,
    mirrors_unused_days: Option<u64>,
    dry_run_writes_days: Option<u64>,
    disk_budget_mb: Option<u64>,
}

/// How long each kind of data is kept; see docs/configuration.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionConfig {
    /// Handled deliveries and finished jobs.
    pub deliveries: Duration,
    /// Dead jobs, and deliveries whose job died or never ran.
    pub dead_jobs: Duration,
    /// The prompts and agent output of a finished run's iterations (the
    /// judgments, which a retried run builds on, are kept).
    pub run_output: Duration,
    /// The worktree, prompt files and agent HOME a finished run left.
    pub run_files: Duration,
    /// A repository mirror no run has fetched into or worked in.
    pub mirrors_unused: Duration,
    /// GitHub writes recorded by `--dry-run`.
    pub dry_run_writes: Duration,
    /// The data directory's size budget; `None` reports the size only.
    pub disk_budget_bytes: Option<u64>,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            deliveries: Duration::from_secs(14 * DAY),
            dead_jobs: Duration::from_secs(30 * DAY),
            run_output: Duration::from_secs(30 * DAY),
            run_files: Duration::from_secs(7 * DAY),
            mirrors_unused: Duration::from_secs(30 * DAY),
            dry_run_writes: Duration::from_secs(14 * DAY),
            disk_budget_bytes: None,
        }
    }
}

impl RetentionConfig {
    /// `[retention]` over the defaults. The deliveries' age may also come
    /// from `--retention-days` / `CLOSER_RETENTION_DAYS` (`flag`, stronger
    /// than the file) or the file's older top-level `retention_days`
    /// (`older_key`, weaker than `[retention] deliveries_days`).
    pub(crate) fn resolve(
        file: &FileRetention,
        flag: Option<u64>,
        older_key: Option<u64>,
    ) -> Result<RetentionConfig, ConfigError> {
        let d = RetentionConfig::default();
        let days_from = |min: u64, key: &str, value: Option<u64>, default: Duration| match value {
            None => Ok(default),
            Some(n) if (min..=MAX_DAYS).contains(&n) => Ok(Duration::from_secs(n * DAY)),
            Some(n) => Err(ConfigError::Invalid(format!(
                "retention.{key} must be from {min} to {MAX_DAYS} days, got {n}"
            ))),
        };
        let days =
            |key: &str, value: Option<u64>, default: Duration| days_from(1, key, value, default);
        let budget = match file.disk_budget_mb {
            Some(0) => {
                return Err(ConfigError::Invalid(
                    "retention.disk_budget_mb must be at least 1 (leave it out for no budget)"
                        .to_owned(),
                ));
            }
            mb => mb.map(|mb| mb.saturating_mul(1024 * 1024)),
        };
        Ok(RetentionConfig {
            deliveries: days_from(
                MIN_DELIVERIES_DAYS,
                "deliveries_days",
                flag.or(file.deliveries_days).or(older_key),
                d.deliveries,
            )?,
            dead_jobs: days("dead_jobs_days", file.dead_jobs_days, d.dead_jobs)?,
            run_output: days("run_output_days", file.run_output_days, d.run_output)?,
            run_files: days("run_files_days", file.run_files_days, d.run_files)?,
            mirrors_unused: days(
                "mirrors_unused_days",
                file.mirrors_unused_days,
                d.mirrors_unused,
            )?,
            dry_run_writes: days(
                "dry_run_writes_days",
                file.dry_run_writes_days,
                d.dry_run_writes,
            )?,
            disk_budget_bytes: budget,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> Result<RetentionConfig, String> {
        let file: FileRetention = toml::from_str(toml_text).map_err(|e| e.to_string())?;
        RetentionConfig::resolve(&file, None, None).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_ages_and_bounds() {
        assert_eq!(parse("").unwrap(), RetentionConfig::default());
        let set = parse("run_files_days = 2\ndisk_budget_mb = 10").unwrap();
        assert_eq!(set.run_files, Duration::from_secs(2 * DAY));
        assert_eq!(set.disk_budget_bytes, Some(10 * 1024 * 1024));
        assert_eq!(
            parse("mirrors_unused_days = 0").unwrap_err(),
            "retention.mirrors_unused_days must be from 1 to 3650 days, got 0"
        );
        assert!(parse("dead_jobs_days = 3651").is_err());
        assert_eq!(
            parse("deliveries_days = 2").unwrap_err(),
            "retention.deliveries_days must be from 3 to 3650 days, got 2",
            "a delivery GitHub may still redeliver is not forgotten"
        );
        assert!(parse("deliveries_days = 3").is_ok());
        assert!(parse("disk_budget_mb = 0").is_err());
        assert!(parse("deliveries = 3").is_err(), "unknown keys are refused");
    }

    #[test]
    fn the_flag_beats_the_table_which_beats_the_older_key() {
        let days = |file: &str, flag, older| {
            let file: FileRetention = toml::from_str(file).unwrap();
            RetentionConfig::resolve(&file, flag, older)
                .unwrap()
                .deliveries
                .as_secs()
                / DAY
        };
        assert_eq!(days("", None, Some(4)), 4);
        assert_eq!(days("deliveries_days = 5", None, Some(4)), 5);
        assert_eq!(days("deliveries_days = 5", Some(3), Some(4)), 3);
    }
}
