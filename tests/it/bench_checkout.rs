//! What the checks' clean checkout costs per check (decision 146): a
//! repository of 2 000 and of 20 000 files (4 KiB each, in directories of
//! 100) is cloned into a mirror, then checked out and removed 5 times as
//! an iteration's check does. The anchor, in the same run: `cp -r` of the
//! same files, which writes what the checkout writes without git. A
//! benchmark, not a test: it is `#[ignore]`d and run by bench/checkout.sh,
//! which prints the table for docs/benchmarks.md.

use std::time::{Duration, Instant};

use closer::agent::sandbox::purpose::Purpose;

use crate::support::OutputApart as _;
use crate::support::git::{Origin, sandbox};

const CHECKS: usize = 5;

/// `files` files of 4 KiB of text each, 100 to a directory.
fn project(files: usize) -> Vec<(String, String)> {
    let line = "fn work() -> u64 { (0..1000).map(|x| x * 2).sum() } // padding\n";
    let body = line.repeat(4096 / line.len());
    (0..files)
        .map(|i| {
            (
                format!("src/m{}/f{i}.rs", i / 100),
                format!("// {i}\n{body}"),
            )
        })
        .collect()
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::test]
#[ignore = "a benchmark: bench/checkout.sh runs it"]
async fn bench_checkout_per_check() {
    println!(
        "| files | checkout median | checkout max | `cp -r` median (anchor) | removal median |"
    );
    println!("|---|---|---|---|---|");
    for files in [2_000, 20_000] {
        let owned = project(files);
        let refs: Vec<(&str, &str)> = owned
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_str()))
            .collect();
        let origin = Origin::with_files(&refs);
        let data = tempfile::tempdir().unwrap();
        let sandbox = sandbox(data.path());
        let run = sandbox
            .prepare(&origin.source(), 1, "rbench", None)
            .await
            .unwrap();
        let head = sandbox.head(&run).await.unwrap();
        let (mut made, mut removed, mut copied) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..CHECKS {
            let copy = data.path().join("copy");
            let started = Instant::now();
            let status = std::process::Command::new("cp")
                .arg("-r")
                .arg(run.path.join("src"))
                .arg(&copy)
                .status_apart()
                .unwrap();
            assert!(status.success());
            copied.push(started.elapsed());
            std::fs::remove_dir_all(&copy).unwrap();
            let started = Instant::now();
            let checkout = sandbox
                .checkout(&run, "rbench", &head, Purpose::Checks)
                .await
                .unwrap();
            made.push(started.elapsed());
            assert!(checkout.path.join("src/m0/f0.rs").exists());
            let started = Instant::now();
            sandbox.remove(&checkout, "rbench").await.unwrap();
            removed.push(started.elapsed());
        }
        made.sort();
        removed.sort();
        copied.sort();
        println!(
            "| {files} | {} | {} | {} | {} |",
            ms(made[CHECKS / 2]),
            ms(made[CHECKS - 1]),
            ms(copied[CHECKS / 2]),
            ms(removed[CHECKS / 2]),
        );
    }
}
