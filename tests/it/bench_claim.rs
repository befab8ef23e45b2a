//! What one claim costs behind a backlog (decision 189): `jobs::claim`, the
//! statement as shipped, with 0, 1,000, 10,000 and 100,000 jobs queued (a
//! third of them a run's steps, the rest deliveries of 5,000 threads)
//! beside twice as many finished ones. The anchor, in the same run on the
//! same database, alternating with it: the claim before decision 189 (one
//! `WHERE` with an `OR` of the two states), which leases a job as well. A
//! benchmark, not a test: it is `#[ignore]`d and run by bench/claim.sh, on
//! SQLite and, with `TEST_DATABASE_URL`, on PostgreSQL.

use std::time::{Duration, Instant};

use closer::store::jobs;
use closer::store::{Backend, Store};

use crate::support::db::TestDb;

const CLAIMS: usize = 21;
const LEASE: Duration = Duration::from_secs(300);

/// The claim statement of decision 187, as it was before decision 189.
macro_rules! claim_before_189 {
    ($lock:literal) => {
        concat!(
            "UPDATE jobs SET state = 'leased', lease_owner = $1, ",
            "lease_expires_at = $2, attempts = attempts + 1, updated_at = $3 ",
            "WHERE id = (SELECT j.id FROM jobs j ",
            "WHERE ((j.state = 'queued' AND j.run_at <= $3) ",
            "OR (j.state = 'leased' AND j.lease_expires_at <= $3 AND j.attempts < j.max_attempts)) ",
            "AND NOT EXISTS (SELECT 1 FROM jobs k ",
            "WHERE k.job_key = j.job_key AND k.state = 'leased' AND k.id <> j.id) ",
            "AND NOT (j.state = 'queued' AND j.kind = 'delivery' AND EXISTS (SELECT 1 FROM jobs k ",
            "WHERE k.job_key = j.job_key AND k.state = 'queued' AND k.id < j.id)) ",
            "ORDER BY j.run_at, j.id LIMIT 1 ",
            $lock,
            ") RETURNING id"
        )
    };
}

/// `queued` jobs queued and twice as many done, all due.
async fn fill(store: &Store, queued: i64, now: i64) {
    let rows = [
        (
            queued,
            "CASE WHEN i % 3 = 0 THEN 'run' ELSE 'delivery' END, \
             CASE WHEN i % 3 = 0 THEN 'run:r' || i ELSE 'thread:o/r#' || (i % 5000) END, \
             '{}', 'queued', NULL",
        ),
        (
            2 * queued,
            "'delivery', 'delivery:d' || i, '{}', 'done', $2",
        ),
    ];
    for (count, columns) in rows {
        if count == 0 {
            continue;
        }
        let sql = format!(
            "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < $1) \
             INSERT INTO jobs (kind, job_key, payload, state, finished_at, attempts, \
             max_attempts, run_at, created_at, updated_at) \
             SELECT {columns}, 0, 5, $2 - 1000000 + i, $2, $2 FROM n"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(count)
            .bind(now)
            .execute(store.pool())
            .await
            .unwrap();
    }
}

fn median_and_max(mut times: Vec<Duration>) -> String {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "{:.2} ms | {:.2} ms",
        ms(times[times.len() / 2]),
        ms(times[times.len() - 1])
    )
}

#[tokio::test]
#[ignore = "a benchmark: bench/claim.sh runs it"]
async fn bench_claim_behind_a_backlog() {
    println!(
        "| backend | queued | claim median | claim max | before 189: median | before 189: max |"
    );
    println!("|---|---|---|---|---|---|");
    for queued in [0, 1_000, 10_000, 100_000] {
        let db = TestDb::new(&format!("bench_claim_{queued}")).await;
        let store = db.store().await;
        let now = store.now_ms();
        fill(&store, queued, now).await;
        let before = match store.backend() {
            Backend::Sqlite => claim_before_189!(""),
            Backend::Postgres => claim_before_189!("FOR UPDATE SKIP LOCKED"),
        };
        let (mut shipped, mut anchor) = (Vec::new(), Vec::new());
        for _ in 0..CLAIMS {
            let started = Instant::now();
            jobs::claim(store.pool(), store.backend(), "bench", now, LEASE)
                .await
                .unwrap();
            shipped.push(started.elapsed());
            let started = Instant::now();
            sqlx::query(before)
                .bind("bench-before")
                .bind(now + LEASE.as_millis() as i64)
                .bind(now)
                .fetch_optional(store.pool())
                .await
                .unwrap();
            anchor.push(started.elapsed());
        }
        println!(
            "| {:?} | {queued} | {} | {} |",
            store.backend(),
            median_and_max(shipped),
            median_and_max(anchor)
        );
    }
}
