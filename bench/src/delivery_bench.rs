//! Webhook deliveries per second from the outbox to a fast receiver on loopback, through
//! the real coordinator (in-process) and PostgreSQL, and the latency from a search becoming
//! final to its event arriving.
//!
//! Throughput: `--events` searches with one destination are made final through the queue's
//! own transitions before the coordinator starts (a backlog of that many events); then the
//! coordinator (or `--replicas` of them on one database) starts; the clock runs from the
//! first request's arrival until the outbox says every event is delivered. Each
//! concurrency of `--concurrency` is a run on a fresh database. The receiver checks every
//! signature as a real receiver would (`signature::verify`) and counts each event id.
//!
//! Latency: with one coordinator running (default poll), `--latency-samples` searches are
//! made final one at a time; each sample is the time from the completion's commit to the
//! event's arrival.
//!
//! Usage: `cargo run --release -p lps-bench --bin delivery-bench -- [--events 2000]
//! [--concurrency 1,4,16,64] [--replicas 1] [--latency-samples 100]` (DATABASE_URL names
//! the server; the benchmark uses fresh databases `lps_bench_delivery_*`).
#![allow(clippy::print_stdout)]

use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use axum::{Router, body::Bytes, extract::State, http::HeaderMap, routing::post};
use clap::Parser;
use lps_coordinator::{
    app::{self, Running},
    config::Cli,
    db,
    delivery::signature::{self, DEFAULT_TOLERANCE},
    queue::{EnqueueContext, MallLimits, Queue, QueueConfig},
};
use lps_proto::model::{JobResult, MallId, Priority, ProductSpec, SearchRequest};
use sqlx::PgPool;

#[derive(Debug, Parser)]
struct Args {
    /// Events in the backlog of each throughput run.
    #[arg(long, default_value_t = 2000)]
    events: usize,
    /// LPS_DELIVERY_CONCURRENCY of each throughput run (a run per value).
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
    concurrency: Vec<u32>,
    /// Coordinator replicas on the database in the throughput runs.
    #[arg(long, default_value_t = 1)]
    replicas: usize,
    /// Searches made final one at a time for the latency figures (0: none).
    #[arg(long, default_value_t = 100)]
    latency_samples: usize,
    #[arg(long, env = "DATABASE_URL")]
    database_url: String,
}

const TOKEN: &str = "bench-token-0123456789";
const SECRET: &str = "bench-destination-secret-0123";
const MALL: &str = "bench-mall";
const NODE: &str = "bench-node";

/// What the receiver saw: event ids, and how many requests failed the signature check.
#[derive(Debug, Default)]
struct Seen {
    /// When the first request arrived (the clock starts there, not at start-up).
    first: Option<Instant>,
    events: HashSet<String>,
    requests: usize,
    bad_signatures: usize,
}

type Shared = Arc<Mutex<Seen>>;

async fn receive(State(seen): State<Shared>, headers: HeaderMap, body: Bytes) -> &'static str {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let ok = signature::verify(
        SECRET.as_bytes(),
        &header(signature::SIGNATURE_HEADER),
        &body,
        chrono::Utc::now().timestamp(),
        DEFAULT_TOLERANCE,
    )
    .is_ok();
    let mut seen = seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    seen.requests += 1;
    seen.first.get_or_insert_with(Instant::now);
    if !ok {
        seen.bad_signatures += 1;
    }
    seen.events.insert(header(signature::EVENT_ID_HEADER));
    "ok"
}

async fn receiver() -> anyhow::Result<(std::net::SocketAddr, Shared)> {
    let seen = Shared::default();
    let app = Router::new()
        .route("/hook", post(receive))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((addr, seen))
}

async fn start(
    url: &str,
    hook: std::net::SocketAddr,
    id: &str,
    concurrency: u32,
) -> anyhow::Result<Running> {
    let destinations = format!("bench=http://{hook}/hook");
    let secrets = format!("bench={SECRET}");
    let concurrency = concurrency.to_string();
    let config = Cli::try_parse_from([
        "coordinator",
        "--database-url",
        url,
        "--grpc-addr",
        "127.0.0.1:0",
        "--http-addr",
        "127.0.0.1:0",
        "--client-tokens",
        TOKEN,
        "--node-tokens",
        TOKEN,
        "--coordinator-id",
        id,
        "--destinations",
        &destinations,
        "--destination-secrets",
        &secrets,
        "--delivery-concurrency",
        &concurrency,
    ])?
    .serve
    .validate()?;
    app::start(config).await
}

fn request(i: usize, tag: &str) -> anyhow::Result<SearchRequest> {
    Ok(SearchRequest::new(
        vec![ProductSpec::new(None, &format!("bench product {tag} {i}"))?],
        vec![MallId::new(MALL)?],
        Priority::INTERACTIVE,
        None,
        None,
    )?
    .with_destinations(vec!["bench".into()], false)?)
}

/// Makes `n` searches final through the queue (enqueued, claimed, answered not found):
/// `n` events in the outbox.
async fn backlog(queue: &Queue, n: usize) -> anyhow::Result<()> {
    for i in 0..n {
        queue
            .enqueue(&request(i, "backlog")?, &EnqueueContext::default())
            .await?;
    }
    loop {
        let claimed = queue.claim(NODE, None, 500).await?;
        if claimed.is_empty() {
            return Ok(());
        }
        let results: Vec<JobResult> = claimed
            .iter()
            .map(|j| JobResult::not_found(j.lease))
            .collect();
        queue.complete_batch(NODE, &results).await?;
    }
}

async fn delivered(pool: &PgPool) -> anyhow::Result<i64> {
    Ok(
        sqlx::query_scalar::<_, i64>("select count(*) from delivery where state = 'delivered'")
            .fetch_one(pool)
            .await?,
    )
}

async fn fresh(server: &str, name: &str) -> anyhow::Result<(String, PgPool, Queue)> {
    let url = lps_bench::fresh_database(server, name).await?;
    let pool = db::connect(&url, 10).await?;
    db::migrate(&pool).await?;
    let queue = Queue::new(pool.clone(), QueueConfig::default());
    queue
        .upsert_mall(&MallLimits::unlimited(MallId::new(MALL)?))
        .await?;
    Ok((url, pool, queue))
}

async fn throughput(args: &Args, concurrency: u32) -> anyhow::Result<()> {
    let (url, pool, queue) = fresh(&args.database_url, "lps_bench_delivery_rate").await?;
    backlog(&queue, args.events).await?;
    let (hook, seen) = receiver().await?;
    let started = Instant::now();
    let mut replicas = Vec::new();
    for r in 0..args.replicas {
        replicas.push(start(&url, hook, &format!("bench-{r}"), concurrency).await?);
    }
    let expected = i64::try_from(args.events)?;
    while delivered(&pool).await? < expected {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(600),
            "not every event was delivered within 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let done = Instant::now();
    for r in replicas {
        r.shutdown().await;
    }
    pool.close().await;
    let seen = seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let elapsed = done - seen.first.context("no request arrived")?;
    anyhow::ensure!(
        seen.bad_signatures == 0,
        "{} bad signatures",
        seen.bad_signatures
    );
    anyhow::ensure!(
        seen.events.len() == args.events,
        "{} distinct events",
        seen.events.len()
    );
    println!(
        "| {} | {concurrency} | {} | {} | {:.2} | {:.0} |",
        args.replicas,
        args.events,
        seen.requests,
        elapsed.as_secs_f64(),
        args.events as f64 / elapsed.as_secs_f64()
    );
    Ok(())
}

async fn latency(args: &Args) -> anyhow::Result<()> {
    let (url, pool, queue) = fresh(&args.database_url, "lps_bench_delivery_latency").await?;
    let (hook, seen) = receiver().await?;
    let running = start(&url, hook, "bench-latency", 16).await?;
    let mut samples = Vec::with_capacity(args.latency_samples);
    for i in 0..args.latency_samples {
        queue
            .enqueue(&request(i, "latency")?, &EnqueueContext::default())
            .await?;
        let job = queue.claim(NODE, None, 1).await?;
        let job = job.first().context("no job claimed")?;
        let before = seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .events
            .len();
        queue
            .complete_if_leased(NODE, &JobResult::not_found(job.lease))
            .await?;
        let committed = Instant::now();
        loop {
            let now = seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .events
                .len();
            if now > before {
                break;
            }
            anyhow::ensure!(
                committed.elapsed() < Duration::from_secs(30),
                "event not delivered"
            );
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        samples.push(committed.elapsed());
    }
    running.shutdown().await;
    pool.close().await;
    samples.sort();
    let pct =
        |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e3;
    println!();
    println!("| final → arrived, ms | samples | p50 | p90 | p99 | max |");
    println!("|---|---:|---:|---:|---:|---:|");
    println!(
        "| woken by NOTIFY lps_delivery (LPS_DELIVERY_POLL 1s) | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
        samples.len(),
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(1.0)
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    println!("| replicas | concurrency | events | requests | seconds | deliveries/s |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for c in &args.concurrency {
        throughput(&args, *c).await?;
    }
    if args.latency_samples > 0 {
        latency(&args).await?;
    }
    Ok(())
}
