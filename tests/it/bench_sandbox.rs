//! What the sandbox costs per process start: `sh -c true` started 50 times
//! as an agent (network on) and as a goal command (network off), unconfined
//! and under every backend this machine has. A benchmark, not a test: it is
//! `#[ignore]`d and run by bench/sandbox.sh, which prints the table for
//! docs/benchmarks.md.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use closer::agent::confine::{Confinement, Kind, Mode, SandboxConfig, View};
use closer::agent::process::{self, ProcessSpec};

const STARTS: usize = 50;

async fn starts(confinement: &Confinement, kind: Kind, dir: &std::path::Path) -> Vec<Duration> {
    let env = BTreeMap::from([
        ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
        ("HOME".to_owned(), dir.display().to_string()),
    ]);
    let mut spec = ProcessSpec::shell("true", dir, env, Duration::from_secs(30));
    let view = View {
        read_write: vec![dir.to_path_buf()],
        read_only: Vec::new(),
    };
    spec.jail = Some(confinement.jail(kind, view));
    let mut times = Vec::with_capacity(STARTS);
    for _ in 0..STARTS {
        let started = Instant::now();
        let out = process::run(&spec).await.expect("runs");
        assert!(out.success(), "{}", out.tail(5));
        times.push(started.elapsed());
    }
    times.sort();
    times
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::test]
#[ignore = "a benchmark: bench/sandbox.sh runs it"]
async fn bench_sandbox_overhead_per_start() {
    let dir = tempfile::tempdir().unwrap();
    println!("| backend | kind | median | p90 | median overhead |");
    println!("|---|---|---|---|---|");
    for kind in [Kind::Agent, Kind::Goal] {
        let mut baseline = None;
        for mode in [Mode::None, Mode::Bwrap, Mode::Landlock] {
            let config = SandboxConfig {
                mode,
                ..SandboxConfig::default()
            };
            let Ok(c) = Confinement::detect(&config, &std::env::var("PATH").unwrap_or_default())
            else {
                println!("| {mode:?} | {kind:?} | not available | | |");
                continue;
            };
            let times = starts(&c, kind, dir.path()).await;
            let median = times[STARTS / 2];
            let base = *baseline.get_or_insert(median);
            println!(
                "| {} | {kind:?} | {} | {} | {} |",
                c.backend().name(),
                ms(median),
                ms(times[STARTS * 9 / 10]),
                ms(median.saturating_sub(base)),
            );
        }
    }
}
