//! Proxy-ledger benchmark against local PostgreSQL: acquire+release cycles through the real
//! ledger API (`Ledger::acquire`, `Ledger::release`: the SKIP LOCKED pick and lease, the
//! guarded release and its `ip_session` row) at 1, 8 and 32 concurrent acquirers.
//!
//! Usage: `cargo run --release -p lps-bench --bin ledger-bench -- [--cycles N] [--ports N]`
//! (DATABASE_URL names the server; the benchmark uses a fresh database `lps_bench_ledger`).
//! Prints a Markdown table for BENCHMARKS.md. Every run checks afterwards that the
//! database counted each cycle once (`sum(use_count)`, `ip_session` rows) and that no port
//! is still held. A raw-SQL baseline in the same run does the least any cycle must: two
//! single-row commits (an update by primary key of a port of its own, an `ip_session`
//! insert), so the ledger's figures can be read as a ratio on a shared, noisy machine.
#![allow(clippy::print_stdout)]

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use clap::Parser;
use lps_coordinator::{
    db,
    ledger::{Acquired, Ledger, LedgerConfig, PortSet, Secret},
};
use lps_proto::model::{MallId, SessionEndReason, SessionStats};
use sqlx::{Executor as _, PgPool};

#[derive(Debug, Parser)]
struct Args {
    /// Acquire+release cycles per measurement.
    #[arg(long, default_value_t = 10000)]
    cycles: usize,
    /// Ports of the simulated gateway.
    #[arg(long, default_value_t = 200)]
    ports: u16,
    #[arg(long, env = "DATABASE_URL")]
    database_url: String,
}

const MALL: &str = "bench-mall";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.ports > 0, "--ports must be positive");
    let url = lps_bench::fresh_database(&args.database_url, "lps_bench_ledger").await?;
    let pool = db::connect(&url, 40).await?;
    db::migrate(&pool).await?;
    let config = LedgerConfig::new(
        "gw.bench",
        PortSet::from_ports(10_000..10_000 + args.ports),
        "bench",
        Secret::new("bench-password"),
    );
    let ledger = Ledger::new(pool.clone(), config);
    ledger.reconcile().await?;

    println!(
        "Command: `cargo run --release -p lps-bench --bin ledger-bench -- --cycles {} --ports {}`",
        args.cycles, args.ports
    );
    println!();
    println!("| measurement | cycles | seconds | cycles/s |");
    println!("|---|---:|---:|---:|");
    for acquirers in [1usize, 8, 32] {
        reset(&pool).await?;
        let t = Instant::now();
        baseline(&pool, acquirers, args.cycles, args.ports).await?;
        row(
            &format!("raw SQL baseline (2 single-row commits), {acquirers} clients"),
            args.cycles,
            t.elapsed(),
        );
        reset(&pool).await?;
        let t = Instant::now();
        let waits = run(&ledger, acquirers, args.cycles).await?;
        let elapsed = t.elapsed();
        check(&pool, args.cycles).await?;
        row(
            &format!(
                "acquire+release, {acquirers} acquirers, {} ports{}",
                args.ports,
                if waits > 0 {
                    format!(" ({waits} none-free answers)")
                } else {
                    String::new()
                }
            ),
            args.cycles,
            elapsed,
        );
    }
    Ok(())
}

fn row(label: &str, cycles: usize, elapsed: Duration) {
    println!(
        "| {label} | {cycles} | {:.2} | {:.0} |",
        elapsed.as_secs_f64(),
        cycles as f64 / elapsed.as_secs_f64()
    );
}

/// Every port free and unused, no IP sessions: each measurement starts from the same state.
async fn reset(pool: &PgPool) -> anyhow::Result<()> {
    pool.execute("truncate ip_session, bot_detection, proxy_port_cooldown")
        .await?;
    pool.execute(
        "update proxy_port set holder_node = null, holder_job = null, holder_mall = null,
             leased_at = null, leased_until = null, rest_until = null, cooldown_until = null,
             last_used_at = null, use_count = 0, burn_count = 0, last_reason = null",
    )
    .await?;
    pool.execute("vacuum analyze proxy_port").await?;
    Ok(())
}

/// `cycles` acquire+release cycles shared by `acquirers` tasks; returns how many acquires
/// found no free port (and were retried).
async fn run(ledger: &Ledger, acquirers: usize, cycles: usize) -> anyhow::Result<usize> {
    let reserved = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for c in 0..acquirers {
        let ledger = ledger.clone();
        let reserved = reserved.clone();
        tasks.push(tokio::spawn(async move {
            let node = format!("bench-{c}");
            let mall = MallId::new(MALL)?;
            let session = SessionStats::new(mall.clone(), 1, 1, 0, Duration::ZERO, None)?;
            let mut waits = 0;
            while reserved.fetch_add(1, Ordering::Relaxed) < cycles {
                let (port, lease_id) = loop {
                    match ledger.acquire(&node, &mall, None).await? {
                        Acquired::Grant(g) => break (g.port, g.lease_id),
                        Acquired::NoneFree { .. } => {
                            waits += 1;
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                    }
                };
                let released = ledger
                    .release(
                        &node,
                        port,
                        Some(lease_id),
                        SessionEndReason::Rotate,
                        &session,
                    )
                    .await?;
                anyhow::ensure!(released.held, "port {port} was not held by {node}");
            }
            anyhow::Ok(waits)
        }));
    }
    let mut waits = 0;
    for t in tasks {
        waits += t.await??;
    }
    Ok(waits)
}

/// Two single-row commits per cycle, each client on a port of its own (no lock waits).
async fn baseline(pool: &PgPool, clients: usize, cycles: usize, ports: u16) -> anyhow::Result<()> {
    let reserved = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for c in 0..clients {
        let pool = pool.clone();
        let reserved = reserved.clone();
        tasks.push(tokio::spawn(async move {
            let port = 10_000 + i32::try_from(c % usize::from(ports))?;
            while reserved.fetch_add(1, Ordering::Relaxed) < cycles {
                sqlx::query(
                    "update proxy_port set last_used_at = clock_timestamp()
                     where host = 'gw.bench' and port = $1",
                )
                .bind(port)
                .execute(&pool)
                .await?;
                sqlx::query(
                    "insert into ip_session (host, port, mall, node_id, requests, ok, blocked,
                                             elapsed_ms, end_reason)
                     values ('gw.bench', $1, 'bench-mall', 'raw', 1, 1, 0, 0, 'rotate')",
                )
                .bind(port)
                .execute(&pool)
                .await?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

async fn check(pool: &PgPool, cycles: usize) -> anyhow::Result<()> {
    let (used, sessions, held): (i64, i64, i64) = sqlx::query_as(
        "select (select coalesce(sum(use_count), 0)::bigint from proxy_port),
                (select count(*) from ip_session),
                (select count(*) from proxy_port where holder_node is not null)",
    )
    .fetch_one(pool)
    .await?;
    anyhow::ensure!(
        used == cycles as i64 && sessions == cycles as i64 && held == 0,
        "expected {cycles} uses and IP sessions and nothing held, got {used}, {sessions}, {held}"
    );
    Ok(())
}
