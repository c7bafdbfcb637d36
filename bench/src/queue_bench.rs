//! Queue benchmark against local PostgreSQL: enqueue throughput, claim+complete throughput
//! at several concurrencies and batch sizes (with and without per-mall limits), and a
//! raw-SQL baseline measured in the same run, so the queue's overhead is a ratio.
//!
//! Usage: `cargo run --release -p lps-bench --bin queue-bench -- [--jobs N]`
//! (DATABASE_URL names the server; the benchmark uses a fresh database `lps_bench`).
//! Prints a Markdown table for BENCHMARKS.md.
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use clap::Parser;
use lps_coordinator::{
    db,
    queue::{EnqueueContext, MallLimits, Queue, QueueConfig},
};
use lps_proto::model::{JobResult, MallId, Priority, ProductSpec, SearchRequest};
use sqlx::{Executor as _, PgPool};

#[derive(Debug, Parser)]
struct Args {
    /// Jobs drained per claim+complete run.
    #[arg(long, default_value_t = 10000)]
    jobs: usize,
    /// Jobs enqueued one request at a time.
    #[arg(long, default_value_t = 2000)]
    single_enqueues: usize,
    /// Only 8 concurrent claimers (the targets' figure), for quick repeated runs.
    #[arg(long)]
    only_8: bool,
    /// Jobs per claim to measure (default: 1, 10, 100 and 500).
    #[arg(long, value_delimiter = ',', default_values_t = BATCHES)]
    per_claim: Vec<u32>,
    /// Skip the enqueue measurements.
    #[arg(long)]
    skip_enqueue: bool,
    /// Batches of completions and claims the queue runs at once (QueueConfig's default if
    /// not given).
    #[arg(long)]
    batches_in_flight: Option<usize>,
    /// Disable the price-history triggers on `job` (migration 0013), to measure
    /// what it costs the claim and completion statements.
    #[arg(long)]
    without_history_trigger: bool,
    /// Disable the job-count triggers on `job` (migration 0019), to measure what keeping
    /// the ops snapshot's counts costs the queue.
    #[arg(long)]
    without_tally: bool,
    /// Disable the delivery-event trigger (migration 0018) for this run, to measure what it
    /// costs the queue when no search names a destination.
    #[arg(long)]
    without_delivery_trigger: bool,
    #[arg(long, env = "DATABASE_URL")]
    database_url: String,
}

const MALL: &str = "bench-mall";

/// Jobs per claim. 500 matches the local queue size of the batched reference mode.
const BATCHES: [u32; 4] = [1, 10, 100, 500];

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let url = lps_bench::fresh_database(&args.database_url, "lps_bench").await?;
    let pool = db::connect(&url, 40).await?;
    db::migrate(&pool).await?;
    if args.without_tally {
        pool.execute(
            "alter table job disable trigger job_finished_tally, disable trigger job_mark_moved,
                             disable trigger job_tally_inserted, disable trigger job_tally_deleted",
        )
        .await?;
    }
    if args.without_history_trigger {
        pool.execute(
            "alter table job disable trigger job_price_history, disable trigger job_mark_finished",
        )
        .await?;
    }
    if args.without_delivery_trigger {
        pool.execute("alter table job disable trigger job_delivery_events")
            .await?;
    }
    let defaults = QueueConfig::default();
    let queue = Queue::new(
        pool.clone(),
        QueueConfig {
            max_batches_in_flight: args
                .batches_in_flight
                .unwrap_or(defaults.max_batches_in_flight),
            ..defaults
        },
    );
    let mall = MallId::new(MALL)?;
    queue
        .upsert_mall(&MallLimits::unlimited(mall.clone()))
        .await?;

    println!("| measurement | jobs | seconds | jobs/s |");
    println!("|---|---:|---:|---:|");

    if !args.skip_enqueue {
        enqueue_rates(&queue, &pool, &args).await?;
    }

    let mut rates = Vec::new();
    for limits in [false, true] {
        let limit = if limits {
            Some(MallLimits {
                max_running: Some(1000),
                ..MallLimits::unlimited(mall.clone())
            })
        } else {
            None
        };
        queue
            .upsert_mall(
                limit
                    .as_ref()
                    .unwrap_or(&MallLimits::unlimited(mall.clone())),
            )
            .await?;
        for claimers in claimer_counts(&args) {
            for &batch in &args.per_claim {
                fill(&queue, &pool, args.jobs).await?;
                let t = Instant::now();
                drain_queue(&queue, claimers, batch).await?;
                let elapsed = t.elapsed();
                check_all_done(&pool, args.jobs).await?;
                let label = format!(
                    "queue claim+complete, {claimers} claimers, {batch} per claim{}",
                    if limits { ", per-mall cap on" } else { "" }
                );
                rates.push((limits, claimers, batch, rate(args.jobs, elapsed)));
                row(&label, args.jobs, elapsed);
            }
        }
    }
    queue
        .upsert_mall(&MallLimits::unlimited(mall.clone()))
        .await?;
    let mut node_path = Vec::new();
    for claimers in claimer_counts(&args) {
        for &batch in &args.per_claim {
            fill(&queue, &pool, args.jobs).await?;
            let before = queue.batch_counts();
            let t = Instant::now();
            drain_node_path(&queue, claimers, batch).await?;
            let elapsed = t.elapsed();
            let after = queue.batch_counts();
            eprintln!(
                "node path, {claimers} claimers, {batch} per claim: {} batches, {:.1} requests per batch",
                after.batches - before.batches,
                (after.requests - before.requests) as f64
                    / (after.batches - before.batches).max(1) as f64
            );
            check_all_done(&pool, args.jobs).await?;
            node_path.push((claimers, batch, rate(args.jobs, elapsed)));
            row(
                &format!(
                    "queue complete-and-claim-next (node path), {claimers} claimers, {batch} per claim"
                ),
                args.jobs,
                elapsed,
            );
        }
    }
    let mut baseline = Vec::new();
    let mut baseline_tx = Vec::new();
    for claimers in claimer_counts(&args) {
        for one_tx in [false, true] {
            fill(&queue, &pool, args.jobs).await?;
            let t = Instant::now();
            drain_raw(&pool, claimers, one_tx).await?;
            let elapsed = t.elapsed();
            check_all_done(&pool, args.jobs).await?;
            let (target, label) = if one_tx {
                (
                    &mut baseline_tx,
                    "raw SQL complete-and-claim-next in one transaction",
                )
            } else {
                (&mut baseline, "raw SQL baseline")
            };
            target.push((claimers, rate(args.jobs, elapsed)));
            row(
                &format!("{label}, {claimers} claimers, 1 per claim"),
                args.jobs,
                elapsed,
            );
        }
    }

    let find = |c: usize, b: u32| {
        rates
            .iter()
            .find(|r| !r.0 && r.1 == c && r.2 == b)
            .map_or(0.0, |r| r.3)
    };
    let at8 = |v: &[(usize, f64)]| v.iter().find(|b| b.0 == 8).map_or(0.0, |b| b.1);
    let node_at8 = |b: u32| {
        node_path
            .iter()
            .find(|r| r.0 == 8 && r.1 == b)
            .map_or(0.0, |r| r.2)
    };
    let (base8, base8_tx, node8) = (at8(&baseline), at8(&baseline_tx), node_at8(1));
    println!();
    println!(
        "single-row claim+complete at 8 claimers: {:.0} jobs/s = {:.0} % of the raw-SQL baseline ({:.0} jobs/s)",
        find(8, 1),
        100.0 * find(8, 1) / base8,
        base8
    );
    println!(
        "node path (complete-and-claim-next) at 8 claimers: {node8:.0} jobs/s = {:.0} % of the raw-SQL baseline, {:.0} % of raw SQL in the same one-transaction shape ({base8_tx:.0} jobs/s)",
        100.0 * node8 / base8,
        100.0 * node8 / base8_tx,
    );
    println!(
        "10 per claim with batched completion at 8 claimers: {:.0} jobs/s = {:.1}x the single-row rate",
        find(8, 10),
        find(8, 10) / find(8, 1)
    );
    println!(
        "100 and 500 per claim with batched completion at 8 claimers: {:.0} and {:.0} jobs/s; node path: {:.0} jobs/s at 10 per claim, {:.0} at 100, {:.0} at 500",
        find(8, 100),
        find(8, 500),
        node_at8(10),
        node_at8(100),
        node_at8(500)
    );
    Ok(())
}

/// Enqueue, one product per request and 200 per request.
async fn enqueue_rates(queue: &Queue, pool: &PgPool, args: &Args) -> anyhow::Result<()> {
    reset(pool).await?;
    let t = Instant::now();
    for i in 0..args.single_enqueues {
        queue
            .enqueue(&request(i, 1)?, &EnqueueContext::default())
            .await?;
    }
    row(
        "enqueue, 1 product per request",
        args.single_enqueues,
        t.elapsed(),
    );

    // Enqueue, 200 products per request.
    reset(pool).await?;
    let t = Instant::now();
    for chunk in 0..args.jobs / 200 {
        queue
            .enqueue(&request(chunk * 200, 200)?, &EnqueueContext::default())
            .await?;
    }
    row(
        "enqueue, 200 products per request",
        args.jobs / 200 * 200,
        t.elapsed(),
    );
    Ok(())
}

fn claimer_counts(args: &Args) -> Vec<usize> {
    if args.only_8 { vec![8] } else { vec![1, 8, 32] }
}

fn request(first: usize, n: usize) -> anyhow::Result<SearchRequest> {
    let products = (first..first + n)
        .map(|i| ProductSpec::new(None, &format!("bench product {i}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(SearchRequest::new(
        products,
        vec![MallId::new(MALL)?],
        Priority::BATCH,
        None,
        None,
    )?)
}

fn rate(jobs: usize, elapsed: Duration) -> f64 {
    jobs as f64 / elapsed.as_secs_f64()
}

fn row(label: &str, jobs: usize, elapsed: Duration) {
    println!(
        "| {label} | {jobs} | {:.2} | {:.0} |",
        elapsed.as_secs_f64(),
        rate(jobs, elapsed)
    );
}

async fn reset(pool: &PgPool) -> anyhow::Result<()> {
    pool.execute(
        "truncate job, search_request, search_item, offer, negative_cache, job_attempt, stale_report, price_history cascade",
    )
    .await?;
    pool.execute("update mall_slot set job_id = null").await?;
    pool.execute("vacuum analyze job").await?;
    Ok(())
}

async fn fill(queue: &Queue, pool: &PgPool, jobs: usize) -> anyhow::Result<()> {
    reset(pool).await?;
    for chunk in 0..jobs.div_ceil(200) {
        let n = (jobs - chunk * 200).min(200);
        queue
            .enqueue(&request(chunk * 200, n)?, &EnqueueContext::default())
            .await?;
    }
    pool.execute("analyze job").await?;
    Ok(())
}

async fn check_all_done(pool: &PgPool, jobs: usize) -> anyhow::Result<()> {
    let done: i64 =
        sqlx::query_scalar("select count(*) from job where state = 'done' and lease_epoch = 1")
            .fetch_one(pool)
            .await?;
    anyhow::ensure!(
        done == jobs as i64,
        "only {done} of {jobs} jobs done exactly once"
    );
    Ok(())
}

async fn drain_queue(queue: &Queue, claimers: usize, batch: u32) -> anyhow::Result<()> {
    let mut tasks = Vec::new();
    for c in 0..claimers {
        let queue = queue.clone();
        tasks.push(tokio::spawn(async move {
            let node = format!("bench-{c}");
            loop {
                let jobs = queue.claim(&node, None, batch).await?;
                if jobs.is_empty() {
                    return anyhow::Ok(());
                }
                let results: Vec<JobResult> =
                    jobs.iter().map(|j| JobResult::not_found(j.lease)).collect();
                queue.complete_batch(&node, &results).await?;
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// What a crawler node's stream does: each finished job is completed and the freed slot's
/// next job claimed in one transaction (`Queue::complete_and_claim`).
async fn drain_node_path(queue: &Queue, claimers: usize, batch: u32) -> anyhow::Result<()> {
    let mut tasks = Vec::new();
    for c in 0..claimers {
        let queue = queue.clone();
        tasks.push(tokio::spawn(async move {
            let node = format!("node-{c}");
            let mut jobs = queue.claim(&node, None, batch).await?;
            while !jobs.is_empty() {
                let results: Vec<JobResult> =
                    jobs.iter().map(|j| JobResult::not_found(j.lease)).collect();
                let done = queue
                    .complete_and_claim(&node, &results, None, batch)
                    .await?;
                anyhow::ensure!(
                    done.applied.iter().all(|(_, ok)| *ok),
                    "a completion lost its lease"
                );
                jobs = done.claimed;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

const RAW_CLAIM: &str =
    "update job set state = 'running', lease_epoch = lease_epoch + 1, node_id = $1,
        run_started_at = now(), deadline_at = now() + interval '300 s',
        lease_until = now() + interval '30 s'
    where job_id = (select job_id from job
                    where state = 'queued' and mall = $2 and run_after <= now()
                    order by priority, run_after, job_id
                    limit 1 for update skip locked)
    returning job_id, lease_epoch";

async fn raw_claim(db: impl sqlx::PgExecutor<'_>, node: &str) -> sqlx::Result<Option<(i64, i64)>> {
    sqlx::query_as(RAW_CLAIM)
        .bind(node)
        .bind(MALL)
        .fetch_optional(db)
        .await
}

/// The textbook single-statement claim and guarded completion, on the same table; with
/// `one_tx`, each completion and the next claim share one transaction (the node path's
/// shape, so its ratio compares like with like).
async fn drain_raw(pool: &PgPool, claimers: usize, one_tx: bool) -> anyhow::Result<()> {
    // `(state = 'running') is true` as in LPS's statements: with the plain test, the generic
    // plan this pool's connections use scans the partial index of running jobs for one row
    // (2–7 ms a completion), which would flatter every ratio against this baseline.
    const COMPLETE: &str =
        "update job set state = 'done', outcome = 'not_found', finished_at = now(),
            node_id = null, lease_until = null
        where job_id = $1 and (state = 'running') is true and lease_epoch = $2";
    let mut tasks = Vec::new();
    for c in 0..claimers {
        let pool = pool.clone();
        tasks.push(tokio::spawn(async move {
            let node = format!("raw-{c}");
            let mut next = raw_claim(&pool, &node).await?;
            while let Some((job_id, epoch)) = next {
                let complete = sqlx::query(COMPLETE).bind(job_id).bind(epoch);
                let done = if one_tx {
                    let mut tx = pool.begin().await?;
                    let done = complete.execute(&mut *tx).await?;
                    next = raw_claim(&mut *tx, &node).await?;
                    tx.commit().await?;
                    done
                } else {
                    let done = complete.execute(&pool).await?;
                    next = raw_claim(&pool, &node).await?;
                    done
                };
                anyhow::ensure!(done.rows_affected() == 1, "raw completion lost its lease");
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}
