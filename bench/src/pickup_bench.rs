//! Pickup latency: enqueue → `Assign` received at an idle node, through the real
//! coordinator (in-process, gRPC on loopback) and PostgreSQL LISTEN/NOTIFY.
//!
//! Usage: `cargo run --release -p lps-bench --bin pickup-bench -- [--jobs 1000]`
//! (DATABASE_URL names the server; the benchmark uses a fresh database `lps_bench_pickup`).
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use lps_coordinator::{
    app,
    config::Cli,
    queue::{EnqueueContext, MallLimits},
};
use lps_proto::{
    PROTOCOL_VERSION,
    model::{MallId, Priority, ProductSpec, SearchRequest},
    pb::{
        self, coordinator_message::Body as Out, node_message::Body as In,
        node_service_client::NodeServiceClient,
    },
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, transport::Channel};

#[derive(Debug, Parser)]
struct Args {
    #[arg(long, default_value_t = 1000)]
    jobs: usize,
    #[arg(long, env = "DATABASE_URL")]
    database_url: String,
}

const TOKEN: &str = "bench-token-0123456789";
const MALL: &str = "bench-mall";

fn report(label: &str, latencies: &mut [Duration]) {
    latencies.sort();
    let pct = |p: f64| {
        latencies[((latencies.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e3
    };
    println!(
        "| {label} | {} | {:.2} | {:.2} | {:.2} | {:.2} |",
        latencies.len(),
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(1.0)
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let url = lps_bench::fresh_database(&args.database_url, "lps_bench_pickup").await?;
    let config = Cli::try_parse_from([
        "coordinator",
        "--database-url",
        &url,
        "--grpc-addr",
        "127.0.0.1:0",
        "--http-addr",
        "127.0.0.1:0",
        "--client-tokens",
        TOKEN,
        "--node-tokens",
        TOKEN,
    ])?
    .serve
    .validate()?;
    let running = app::start(config).await?;
    running
        .queue
        .upsert_mall(&MallLimits::unlimited(MallId::new(MALL)?))
        .await?;

    let channel = Channel::from_shared(format!("http://{}", running.grpc_addr))?
        .connect()
        .await?;
    let (tx, rx) = mpsc::channel(16);
    tx.send(pb::NodeMessage {
        body: Some(In::Hello(pb::Hello {
            protocol_version: PROTOCOL_VERSION,
            node_id: "bench-node".into(),
            slots: 1,
            malls: vec![MALL.into()],
            ..Default::default()
        })),
    })
    .await?;
    let mut request = Request::new(ReceiverStream::new(rx));
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse()?);
    let mut inbound = NodeServiceClient::new(channel)
        .connect(request)
        .await?
        .into_inner();
    let mut next = async || -> anyhow::Result<Out> {
        loop {
            let msg = inbound.message().await?.context("stream ended")?;
            match msg.body.context("empty message")? {
                Out::HeartbeatAck(_) => {}
                other => return Ok(other),
            }
        }
    };
    anyhow::ensure!(matches!(next().await?, Out::Welcome(_)), "expected welcome");

    println!("| pickup latency | jobs | p50 ms | p90 ms | p99 ms | max ms |");
    println!("|---|---:|---:|---:|---:|---:|");
    let mut latencies = Vec::with_capacity(args.jobs);
    let mut after_commit = Vec::with_capacity(args.jobs);
    for i in 0..args.jobs {
        // Let the node go idle (waiting on NOTIFY) before enqueueing.
        tokio::time::sleep(Duration::from_millis(3)).await;
        let req = SearchRequest::new(
            vec![ProductSpec::new(None, &format!("pickup {i}"))?],
            vec![MallId::new(MALL)?],
            Priority::INTERACTIVE,
            None,
            None,
        )?;
        let started = Instant::now();
        running
            .queue
            .enqueue(&req, &EnqueueContext::default())
            .await?;
        let committed = Instant::now();
        let Out::Assign(assign) = next().await? else {
            anyhow::bail!("expected assign")
        };
        latencies.push(started.elapsed());
        after_commit.push(committed.elapsed());
        tx.send(pb::NodeMessage {
            body: Some(In::Result(pb::JobResult {
                report_seq: i as u64 + 1,
                job_id: assign.job_id,
                lease_epoch: assign.lease_epoch,
                outcome: pb::Outcome::NotFound as i32,
                ..Default::default()
            })),
        })
        .await?;
        anyhow::ensure!(matches!(next().await?, Out::Ack(_)), "expected ack");
        tx.send(pb::NodeMessage {
            body: Some(In::Credit(pb::Credit { free_slots: 1 })),
        })
        .await?;
    }
    report("enqueue call start → Assign at the node", &mut latencies);
    report("enqueue committed → Assign at the node", &mut after_commit);
    running.shutdown().await;
    Ok(())
}
