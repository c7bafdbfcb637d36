//! Node-stream benchmarks against the real `coordinator` binary (a child process, so its
//! memory and CPU are its own):
//!
//! - `throughput`: N protocol-level nodes × S slots complete no-op jobs as fast as they are
//!   assigned, through the full gRPC path (Assign → JobResult → Ack after commit).
//! - `idle`: N nodes (each on its own HTTP/2 connection) stay connected and heartbeat every
//!   5 s; the coordinator's RSS and CPU are sampled from /proc.
//!
//! Usage:
//!   cargo build --release -p lps-coordinator -p lps-bench
//!   ./target/release/nodes-bench throughput --nodes 50 --slots 4 --jobs 10000
//!   ./target/release/nodes-bench idle --nodes 1000 --seconds 60
//! (DATABASE_URL names the server; a fresh database `lps_bench_nodes` is used.)
#![allow(clippy::print_stdout)]

use std::{
    path::PathBuf,
    process::Stdio,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use lps_coordinator::{
    db,
    queue::{EnqueueContext, MallLimits, Queue, QueueConfig},
};
use lps_proto::{
    PROTOCOL_VERSION,
    model::{MallId, Priority, ProductSpec, SearchRequest},
    pb::{
        self, coordinator_message::Body as Out, node_message::Body as In,
        node_service_client::NodeServiceClient,
    },
};
use tokio::{process::Command, sync::mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, transport::Channel};

#[derive(Debug, Parser)]
struct Args {
    #[command(subcommand)]
    mode: Mode,
    #[arg(long, env = "DATABASE_URL", global = true)]
    database_url: Option<String>,
    /// The coordinator binary (default: next to this one).
    #[arg(long, global = true)]
    coordinator: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Mode {
    Throughput {
        #[arg(long, default_value_t = 50)]
        nodes: usize,
        #[arg(long, default_value_t = 4)]
        slots: u32,
        #[arg(long, default_value_t = 10000)]
        jobs: usize,
    },
    Idle {
        #[arg(long, default_value_t = 1000)]
        nodes: usize,
        #[arg(long, default_value_t = 60)]
        seconds: u64,
    },
}

const TOKEN: &str = "bench-token-0123456789";
const MALL: &str = "bench-mall";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let base = args.database_url.context("DATABASE_URL is required")?;
    let url = lps_bench::fresh_database(&base, "lps_bench_nodes").await?;
    let pool = db::connect(&url, 8).await?;
    db::migrate(&pool).await?;
    let queue = Queue::new(pool.clone(), QueueConfig::default());
    queue
        .upsert_mall(&MallLimits::unlimited(MallId::new(MALL)?))
        .await?;

    let exe = match args.coordinator {
        Some(p) => p,
        None => std::env::current_exe()?.with_file_name("coordinator"),
    };
    let grpc_port = free_port()?;
    let mut child = Command::new(&exe)
        .env("DATABASE_URL", &url)
        .env("LPS_GRPC_ADDR", format!("127.0.0.1:{grpc_port}"))
        .env("LPS_HTTP_ADDR", format!("127.0.0.1:{}", free_port()?))
        .env("LPS_CLIENT_TOKENS", TOKEN)
        .env("LPS_NODE_TOKENS", TOKEN)
        .env("LPS_DB_MAX_CONNECTIONS", "20")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", exe.display()))?;
    let pid = child.id().context("coordinator pid")?;
    let addr = format!("http://127.0.0.1:{grpc_port}");
    wait_until_listening(&addr).await?;

    match args.mode {
        Mode::Throughput { nodes, slots, jobs } => {
            throughput(&queue, &addr, nodes, slots, jobs).await?
        }
        Mode::Idle { nodes, seconds } => idle(&addr, pid, nodes, seconds).await?,
    }
    child.kill().await?;
    Ok(())
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

async fn wait_until_listening(addr: &str) -> anyhow::Result<()> {
    for _ in 0..100 {
        if Channel::from_shared(addr.to_owned())?
            .connect()
            .await
            .is_ok()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("coordinator did not start listening on {addr}")
}

struct Stream {
    tx: mpsc::Sender<pb::NodeMessage>,
    rx: tonic::Streaming<pb::CoordinatorMessage>,
}

async fn open(addr: &str, node_id: String, slots: u32) -> anyhow::Result<Stream> {
    // A channel per node: separate HTTP/2 connections, as separate node processes have.
    let channel = Channel::from_shared(addr.to_owned())?.connect().await?;
    let (tx, rx) = mpsc::channel(64);
    tx.send(msg(In::Hello(pb::Hello {
        protocol_version: PROTOCOL_VERSION,
        node_id,
        slots,
        malls: vec![MALL.into()],
        version: "bench".into(),
        ..Default::default()
    })))
    .await?;
    let mut request = Request::new(ReceiverStream::new(rx));
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse()?);
    let mut rx = NodeServiceClient::new(channel)
        .connect(request)
        .await?
        .into_inner();
    let first = rx.message().await?.context("no welcome")?;
    anyhow::ensure!(
        matches!(first.body, Some(Out::Welcome(_))),
        "expected welcome"
    );
    Ok(Stream { tx, rx })
}

fn msg(body: In) -> pb::NodeMessage {
    pb::NodeMessage { body: Some(body) }
}

async fn throughput(
    queue: &Queue,
    addr: &str,
    nodes: usize,
    slots: u32,
    jobs: usize,
) -> anyhow::Result<()> {
    for chunk in 0..jobs.div_ceil(200) {
        let n = (jobs - chunk * 200).min(200);
        let products = (0..n)
            .map(|i| ProductSpec::new(None, &format!("bench {}", chunk * 200 + i)))
            .collect::<Result<Vec<_>, _>>()?;
        let req = SearchRequest::new(
            products,
            vec![MallId::new(MALL)?],
            Priority::BATCH,
            None,
            None,
        )?;
        queue.enqueue(&req, &EnqueueContext::default()).await?;
    }
    let done = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(tokio::sync::Notify::new());
    let started = Instant::now();
    let mut tasks = Vec::new();
    for n in 0..nodes {
        let mut s = open(addr, format!("bench-node-{n}"), slots).await?;
        let done = done.clone();
        let finished = finished.clone();
        tasks.push(tokio::spawn(async move {
            let (mut seq, mut in_flight) = (0u64, 0u32);
            loop {
                let Ok(Some(m)) = s.rx.message().await else {
                    break;
                };
                match m.body {
                    Some(Out::Assign(a)) => {
                        seq += 1;
                        in_flight += 1;
                        let result = pb::JobResult {
                            report_seq: seq,
                            job_id: a.job_id,
                            lease_epoch: a.lease_epoch,
                            outcome: pb::Outcome::NotFound as i32,
                            ..Default::default()
                        };
                        s.tx.send(msg(In::Result(result))).await?;
                    }
                    Some(Out::Ack(_)) => {
                        in_flight -= 1;
                        if done.fetch_add(1, Ordering::Relaxed) + 1 == jobs {
                            finished.notify_one();
                        }
                        let credit = pb::Credit {
                            free_slots: slots - in_flight,
                        };
                        s.tx.send(msg(In::Credit(credit))).await?;
                    }
                    _ => {}
                }
            }
            anyhow::Ok(())
        }));
    }
    tokio::time::timeout(Duration::from_secs(600), finished.notified())
        .await
        .context("the jobs did not all finish within 10 minutes")?;
    let elapsed = started.elapsed();
    for t in &tasks {
        t.abort();
    }
    let completed = done.load(Ordering::Relaxed);
    println!("| measurement | jobs | seconds | jobs/s |");
    println!("|---|---:|---:|---:|");
    println!(
        "| full gRPC path, {nodes} nodes × {slots} slots | {completed} | {:.2} | {:.0} |",
        elapsed.as_secs_f64(),
        completed as f64 / elapsed.as_secs_f64()
    );
    let dup: i64 =
        sqlx::query_scalar("select count(*) from job where state = 'done' and lease_epoch <> 1")
            .fetch_one(queue.pool())
            .await?;
    println!("jobs done more than once or reclaimed: {dup}");
    Ok(())
}

fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .context("no VmRSS")?;
    Ok(line
        .split_whitespace()
        .nth(1)
        .context("bad VmRSS")?
        .parse()?)
}

fn cpu_ticks(pid: u32) -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = stat.rsplit_once(')').context("bad stat")?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat; here (after the comm field) 11 and 12.
    Ok(fields[11].parse::<u64>()? + fields[12].parse::<u64>()?)
}

async fn idle(addr: &str, pid: u32, nodes: usize, seconds: u64) -> anyhow::Result<()> {
    let rss_before = rss_kib(pid)?;
    let mut tasks = Vec::new();
    for n in 0..nodes {
        let mut s = open(addr, format!("idle-node-{n}"), 2).await?;
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(5));
            loop {
                tokio::select! {
                    _ = tick.tick() => {
                        let hb = pb::Heartbeat { free_slots: 2, ..Default::default() };
                        if s.tx.send(msg(In::Heartbeat(hb))).await.is_err() { return; }
                    }
                    m = s.rx.message() => if !matches!(m, Ok(Some(_))) { return; },
                }
            }
        }));
    }
    // Warm up one heartbeat round, then measure.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let ticks_per_sec = 100.0; // USER_HZ on Linux
    let (t0, c0) = (Instant::now(), cpu_ticks(pid)?);
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let (elapsed, c1) = (t0.elapsed(), cpu_ticks(pid)?);
    let rss = rss_kib(pid)?;
    let alive = tasks.iter().filter(|t| !t.is_finished()).count();
    let cpu = (c1 - c0) as f64 / ticks_per_sec / elapsed.as_secs_f64() * 100.0;
    println!("| measurement | value |");
    println!("|---|---:|");
    println!("| connected nodes (separate HTTP/2 connections), heartbeat every 5 s | {alive} |");
    println!(
        "| coordinator RSS before nodes | {:.1} MB |",
        rss_before as f64 / 1024.0
    );
    println!(
        "| coordinator RSS with the nodes | {:.1} MB |",
        rss as f64 / 1024.0
    );
    println!("| coordinator CPU over {seconds} s | {cpu:.1} % of one core |");
    for t in tasks {
        t.abort();
    }
    Ok(())
}
