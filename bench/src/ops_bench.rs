//! The ops snapshot's cost as history grows: every replica reads it every
//! `LPS_ALERT_INTERVAL` (15 s), so it must not grow with the finished jobs it keeps.
//!
//! For each history size: a fresh database of the real schema, that many finished jobs
//! (done, some dead and cancelled; each with an attempt, and a block and an IP session
//! for every tenth, all two days old), plus the work in hand (queued and running jobs of
//! the last minutes); then the whole snapshot (`Ops::snapshot`, what `/ops`, `/metrics` and
//! the alert rules read) timed `--runs` times, and, for comparison, the per-state counts as
//! the snapshot took them before migration 0019 (`count(*)` per state over `job`).
//!
//! Usage: `cargo run --release -p lps-bench --bin ops-bench -- [--finished 10000,1000000]
//! [--runs 30]` (DATABASE_URL names the server; the benchmark uses a fresh database
//! `lps_bench_ops`).
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use clap::Parser;
use lps_coordinator::{
    db,
    ops::Ops,
    queue::{Queue, QueueConfig},
};
use sqlx::PgPool;

#[derive(Debug, Parser)]
struct Args {
    /// History sizes to measure (finished jobs), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [10_000u64, 1_000_000])]
    finished: Vec<u64>,
    /// Snapshots timed per size (after one untimed warm-up).
    #[arg(long, default_value_t = 30)]
    runs: usize,
    #[arg(long, env = "DATABASE_URL")]
    database_url: String,
}

/// The per-state counts of the snapshot before migration 0019 (queue/sql/ops.sql then).
const COUNTS_BEFORE_0019: &str = "select
    (select count(*) from job where state = 'queued'),
    (select count(*) from job where state = 'running'),
    (select count(*) from job where state = 'done'),
    (select count(*) from job where state = 'dead'),
    (select count(*) from job where state = 'cancelled')";

/// Jobs in hand beside the history: queued, and running on one node.
const QUEUED: u64 = 200;
const RUNNING: u64 = 40;

async fn seed(pool: &PgPool, finished: u64) -> anyhow::Result<()> {
    let statements: [String; 8] = [
        "insert into mall (mall_id) values ('bench-a'), ('bench-b') on conflict do nothing"
            .to_owned(),
        // History: 90 % done, 7 % dead, 3 % cancelled, two days old.
        format!(
            "insert into job (dedupe_key, mall, product_name, product_key, priority, state,
                              outcome, error_class, finished_at, created_at, run_after,
                              lease_epoch)
             select 'h' || g, case when g % 2 = 0 then 'bench-a' else 'bench-b' end,
                    'product ' || g, 'name:product ' || g, 50,
                    (case when g % 100 < 90 then 'done' when g % 100 < 97 then 'dead'
                          else 'cancelled' end)::job_state,
                    (case when g % 100 < 90 then 'found' end)::job_outcome,
                    (case when g % 100 between 90 and 96 then 'network' end)::error_class,
                    now() - interval '2 days', now() - interval '2 days',
                    now() - interval '2 days', 1
             from generate_series(1, {finished}) g"
        ),
        "insert into job_attempt (job_id, lease_epoch, node_id, started_at, ended_at, ended)
         select job_id, 1, 'bench-node', finished_at - interval '20 seconds', finished_at,
                (case when state = 'done' then 'done' else 'failed' end)::attempt_end
         from job where state <> 'cancelled'"
            .to_owned(),
        "insert into ip_session (host, port, mall, node_id, job_id, requests, ok, blocked,
                                 elapsed_ms, end_reason, ended_at)
         select 'gw', 10000 + job_id % 50, mall, 'bench-node', job_id, 3, 2, 1, 60000,
                (case when job_id % 20 = 0 then 'block' else 'budget' end)::session_end_reason,
                finished_at
         from job where job_id % 10 = 0"
            .to_owned(),
        "insert into bot_detection (mall, ip_request_no, host, port, marker, node_id, job_id,
                                    detected_at)
         select mall, 3, 'gw', 10000 + job_id % 50, 'captcha', 'bench-node', job_id,
                finished_at
         from job where job_id % 10 = 0"
            .to_owned(),
        // In hand: queued a few minutes ago, and running on a node.
        format!(
            "insert into job (dedupe_key, mall, product_name, product_key, priority,
                              created_at, run_after)
             select 'q' || g, 'bench-a', 'queued ' || g, 'name:queued ' || g, 50,
                    now() - interval '3 minutes', now() - interval '3 minutes'
             from generate_series(1, {}) g",
            QUEUED + RUNNING
        ),
        format!(
            "update job set state = 'running', node_id = 'bench-node', lease_epoch = 1,
                            lease_until = now() + interval '1 hour', run_started_at = now(),
                            deadline_at = now() + interval '1 hour'
             where job_id in (select job_id from job where state = 'queued'
                              order by job_id limit {RUNNING})"
        ),
        "vacuum analyze".to_owned(),
    ];
    for sql in statements {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(pool)
            .await?;
    }
    Ok(())
}

fn median_and_p95(mut times: Vec<Duration>) -> (f64, f64) {
    times.sort();
    let at = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e3;
    (at(0.5), at(0.95))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.runs > 0, "--runs must be at least 1");
    println!(
        "| finished jobs | snapshot p50 ms | snapshot p95 ms | counts before 0019 p50 ms | p95 ms |"
    );
    println!("|---:|---:|---:|---:|---:|");
    for &finished in &args.finished {
        let url = lps_bench::fresh_database(&args.database_url, "lps_bench_ops").await?;
        let pool = db::connect(&url, 4).await?;
        db::migrate(&pool).await?;
        seed(&pool, finished).await?;
        let ops = Ops::new(Queue::new(pool.clone(), QueueConfig::default()));

        let snapshot = ops.snapshot().await?;
        anyhow::ensure!(
            snapshot.queue.done + snapshot.queue.dead + snapshot.queue.cancelled == finished as i64
                && snapshot.queue.queued == QUEUED as i64
                && snapshot.queue.running == RUNNING as i64,
            "the snapshot miscounts: {:?}",
            snapshot.queue
        );
        let mut now = Vec::with_capacity(args.runs);
        for _ in 0..args.runs {
            let started = Instant::now();
            ops.snapshot().await?;
            now.push(started.elapsed());
        }
        let mut before = Vec::with_capacity(args.runs);
        sqlx::query(COUNTS_BEFORE_0019).execute(&pool).await?;
        for _ in 0..args.runs {
            let started = Instant::now();
            sqlx::query(COUNTS_BEFORE_0019).execute(&pool).await?;
            before.push(started.elapsed());
        }
        let (now_p50, now_p95) = median_and_p95(now);
        let (before_p50, before_p95) = median_and_p95(before);
        println!(
            "| {finished} | {now_p50:.2} | {now_p95:.2} | {before_p50:.2} | {before_p95:.2} |"
        );
        pool.close().await;
    }
    Ok(())
}
