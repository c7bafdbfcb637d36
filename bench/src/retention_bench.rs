//! Retention throughput with the queue under load: a sweep (`retention::sweep`, the real
//! rules for searches and jobs) over old final searches and finished jobs — each job with
//! its attempts and offers, each search with its items — while claimers loop enqueue →
//! claim → complete through the real queue API. Prints, per batch size, the rows the sweep
//! deleted (searches and jobs, and with them the cascaded items, attempts and offers), its
//! time and rows per second, and the claimers' throughput and claim latency before and
//! during the sweep.
//!
//! Usage: `cargo run --release -p lps-bench --bin retention-bench -- [--searches N]
//! [--batches 500,2000,10000] [--claimers 4]` (DATABASE_URL names the server; the
//! benchmark uses a fresh database `lps_bench_retention` per batch size). Every run checks
//! afterwards that no old row is left, that no claim or completion failed and that every
//! claimed job still exists, done.
#![allow(clippy::print_stdout)]

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use clap::Parser;
use lps_coordinator::{
    db,
    queue::{EnqueueContext, MallLimits, Queue, QueueConfig},
    retention::{self, Kind, RetentionConfig, Rule},
};
use lps_proto::model::{JobResult, MallId, Priority, ProductSpec, SearchRequest};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Parser)]
struct Args {
    /// Old searches to seed, each of 2 products on 2 malls (4 jobs).
    #[arg(long, default_value_t = 25_000)]
    searches: i64,
    /// Batch sizes to measure, one fresh database each.
    #[arg(long, value_delimiter = ',', default_value = "500,2000,10000")]
    batches: Vec<u32>,
    /// Concurrent claimer loops (enqueue one product, claim, complete).
    #[arg(long, default_value_t = 4)]
    claimers: usize,
    /// How long the claimers run alone before the sweep starts.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    warmup: Duration,
    #[arg(long, env = "DATABASE_URL")]
    database_url: String,
}

const MALLS: [&str; 2] = ["bench-alpha", "bench-beta"];
const DAY: Duration = Duration::from_secs(86_400);

/// Products the old searches ask for, again and again: each product and mall's newest
/// found result stays (a Search with any `max_age` answers from it).
const PRODUCTS: i64 = 500;

/// Seeds `searches` final searches 40 days old, each with 2 products × 2 malls: 4 done
/// jobs (found), each with 2 attempts and 3 offers, and 4 items. Search `s` asks for
/// products `s % PRODUCTS` (twice, as two product indexes).
async fn seed(pool: &PgPool, searches: i64) -> anyhow::Result<()> {
    let sql = format!(
        "with s as (
             insert into search_request (created_at, priority, client)
             select now() - interval '40 days' + i * interval '1 millisecond', 50, 'bench'
             from generate_series(1, {searches}) i
             returning search_id),
         j as (
             insert into job (dedupe_key, mall, product_name, product_key, state, priority,
                              outcome, finished_at, created_at, lease_epoch)
             select m || '|name:prod' || (s.search_id % {PRODUCTS}) || '-' || p, m,
                    'old' || s.search_id || '-' || p,
                    'name:prod' || (s.search_id % {PRODUCTS}) || '-' || p, 'done', 50, 'found',
                    now() - interval '40 days' + s.search_id * interval '1 millisecond',
                    now() - interval '40 days', 2
             from s, generate_series(0, 1) p, unnest(array['bench-alpha', 'bench-beta']) m
             returning job_id, product_name, mall),
         i as (
             insert into search_item (search_id, item_no, product_index, mall, job_id, disposition)
             select split_part(substr(j.product_name, 4), '-', 1)::bigint,
                    row_number() over (partition by split_part(substr(j.product_name, 4), '-', 1) order by j.job_id) - 1,
                    split_part(j.product_name, '-', 2)::int, j.mall, j.job_id, 'queued'
             from j
             returning job_id),
         a as (
             insert into job_attempt (job_id, lease_epoch, node_id, ended_at, ended)
             select job_id, e, 'bench-node', now() - interval '40 days', case when e = 1 then 'failed' else 'done' end::attempt_end
             from j, generate_series(1, 2) e
             returning job_id)
         insert into offer (job_id, rank, mall, title, price, shipping_fee, url, seller, match_score, shipping_status)
         select job_id, r, mall, 'bench offer ' || r, 10000 + r, 0, 'http://bench/' || job_id, 'seller', 0.9, 'free'
         from j, generate_series(0, 2) r"
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(pool)
        .await?;
    sqlx::raw_sql("analyze").execute(pool).await?;
    Ok(())
}

#[derive(Debug, Default)]
struct Load {
    /// (when the claim returned, how long it took, job id).
    claims: Vec<(Instant, Duration, i64)>,
}

/// One claimer: enqueue one product, claim it, complete it, until `stop`.
async fn claimer(queue: Queue, n: usize, stop: Arc<AtomicBool>) -> anyhow::Result<Load> {
    let mut load = Load::default();
    let mut round = 0_u64;
    while !stop.load(Ordering::Relaxed) {
        let req = SearchRequest::new(
            vec![ProductSpec::new(None, &format!("fresh {n}-{round}"))?],
            vec![MallId::new(MALLS[n % 2])?],
            Priority::INTERACTIVE,
            None,
            None,
        )?;
        queue.enqueue(&req, &EnqueueContext::default()).await?;
        let started = Instant::now();
        let jobs = queue.claim(&format!("node-{n}"), None, 1).await?;
        let took = started.elapsed();
        for job in jobs {
            load.claims.push((Instant::now(), took, job.lease.job_id));
            queue
                .complete_if_leased(&format!("node-{n}"), &JobResult::not_found(job.lease))
                .await?;
        }
        round += 1;
    }
    Ok(load)
}

fn p(latencies: &mut [Duration], q: f64) -> f64 {
    if latencies.is_empty() {
        return 0.0;
    }
    latencies.sort();
    latencies[((latencies.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1e3
}

async fn count(pool: &PgPool, sql: &str) -> anyhow::Result<i64> {
    Ok(
        sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_one(pool)
            .await?,
    )
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    println!(
        "| batch | rows deleted (searches + jobs) | with cascaded items, attempts, offers | sweep s | rows/s | rows/s with cascades | claims/s before | claims/s during | claim p50 / p99 ms before | claim p50 / p99 ms during |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &batch in &args.batches {
        let url = lps_bench::fresh_database(&args.database_url, "lps_bench_retention").await?;
        let pool = db::connect(&url, 20).await?;
        db::migrate(&pool).await?;
        let queue = Queue::new(pool.clone(), QueueConfig::default());
        for m in MALLS {
            queue
                .upsert_mall(&MallLimits::unlimited(MallId::new(m)?))
                .await?;
        }
        seed(&pool, args.searches).await?;
        let cascaded = count(
            &pool,
            "select (select count(*) from search_item) + (select count(*) from job_attempt)
                  + (select count(*) from offer)",
        )
        .await?;

        let stop = Arc::new(AtomicBool::new(false));
        let loops: Vec<_> = (0..args.claimers)
            .map(|n| tokio::spawn(claimer(queue.clone(), n, stop.clone())))
            .collect();
        tokio::time::sleep(args.warmup).await;
        let config = RetentionConfig {
            rules: vec![
                Rule {
                    kind: Kind::Searches,
                    age: 30 * DAY,
                },
                Rule {
                    kind: Kind::Jobs,
                    age: 30 * DAY,
                },
            ],
            interval: Duration::from_secs(600),
            batch,
        };
        let sweep_started = Instant::now();
        let report = retention::sweep(&pool, &config, &CancellationToken::new(), |_, _| {})
            .await?
            .ok_or_else(|| anyhow::anyhow!("another sweep held the lock"))?;
        let sweep_ended = Instant::now();
        stop.store(true, Ordering::Relaxed);
        let mut claims = Vec::new();
        for l in loops {
            claims.extend(l.await??.claims);
        }

        // Every search goes; every job but the newest found one of each product and mall.
        let kept = (args.searches.min(PRODUCTS) * 4) as u64;
        let deleted = report.total();
        let expected = args.searches as u64 * 5 - kept;
        anyhow::ensure!(
            deleted == expected,
            "deleted {deleted} rows, expected {expected}"
        );
        anyhow::ensure!(
            count(
                &pool,
                "select count(*) from job where product_name like 'old%'"
            )
            .await?
                == kept as i64,
            "old jobs left beyond the newest per product and mall"
        );
        let cascaded = cascaded
            - count(
                &pool,
                "select (select count(*) from job_attempt where node_id = 'bench-node')
                      + (select count(*) from offer o join job j using (job_id)
                         where j.product_name like 'old%')",
            )
            .await?;
        let ids: Vec<i64> = claims.iter().map(|c| c.2).collect();
        let present: i64 = sqlx::query_scalar(
            "select count(*) from job where job_id = any($1) and state = 'done'",
        )
        .bind(&ids)
        .fetch_one(&pool)
        .await?;
        anyhow::ensure!(present == ids.len() as i64, "a claimed job is missing");

        let warm_start = sweep_started - args.warmup;
        let mut before: Vec<Duration> = claims
            .iter()
            .filter(|c| c.0 >= warm_start && c.0 < sweep_started)
            .map(|c| c.1)
            .collect();
        let mut during: Vec<Duration> = claims
            .iter()
            .filter(|c| c.0 >= sweep_started && c.0 <= sweep_ended)
            .map(|c| c.1)
            .collect();
        let secs = report.elapsed.as_secs_f64();
        let rate = |n: usize, d: Duration| n as f64 / d.as_secs_f64();
        println!(
            "| {batch} | {deleted} | {} | {secs:.2} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} / {:.2} | {:.2} / {:.2} |",
            deleted as i64 + cascaded,
            deleted as f64 / secs,
            (deleted as i64 + cascaded) as f64 / secs,
            rate(before.len(), args.warmup),
            rate(during.len(), sweep_ended - sweep_started),
            p(&mut before, 0.5),
            p(&mut before, 0.99),
            p(&mut during, 0.5),
            p(&mut during, 0.99),
        );
        pool.close().await;
    }
    Ok(())
}
