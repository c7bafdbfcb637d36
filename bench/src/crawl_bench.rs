//! Crawling benchmark (issue: real crawling): the real stack in one process — the test
//! kit's two malls and its proxy gateway, the coordinator with its proxy ledger (gRPC on
//! loopback, PostgreSQL), and a crawler node driving headless Chromium through the
//! gateway's ports — measuring:
//!
//! - **searches per node-minute** with 1 and 2 slots: a batch of searches (one search = one
//!   job: one product on one mall, up to three query rounds) from enqueue to the last one
//!   final, after one warm-up search per slot. The batch is enqueued in rounds of every
//!   catalog product on both malls (decoys included), each round waited for;
//! - **bytes per search** with resource blocking on and off (`LPS_BLOCK_RESOURCES`): the
//!   bytes the node's proxy relay metered for the job (`job.bytes`), next to the bytes the
//!   malls served;
//! - **Chromium memory per slot**: PSS summed from `/proc/<pid>/smaps_rollup` over the
//!   process tree of each slot's browser (the processes naming the slot's
//!   `--user-data-dir`, and their descendants), sampled every second during the batch;
//! - **Assign → first page load**, cold vs warm: from the moment the node accepts the
//!   Assign (its `node.job` span opens) to the end of the job's first search-page read
//!   (its first `browser.page_load` span closes: navigation plus waiting for the cards).
//!   Cold = the job launched its slot's browser (a `browser.launch` span inside it): the
//!   warm-up searches and a series of fresh nodes with one search each. Warm = every other
//!   job. The launch and chromedriver start inside cold jobs are shown separately.
//!
//! **Paced** (`--paced SLOTS`): one batch on a node with `SLOTS` slots and the per-IP page
//! gap on (`LPS_IP_PAGE_GAP`, the node's default unless `--gap`), measuring searches per
//! minute, the share of slot time spent waiting (the node's `pacing page loads on this
//! exit IP` and `no proxy port free; waiting` debug events, summed over their `wait`), the
//! closest two search pages from one exit IP as the two malls saw them (their arrival log;
//! an exit IP's pages on both malls together) and how many came closer than the gap, and
//! the ledger's ceiling for the ports, budget, rest and gap.
//!
//! Usage: `cargo run --release -p lps-bench --bin crawl-bench -- [--searches 100]
//! [--cold-runs 5] [--ports 64] [--paced 2 --rest 0s]` (DATABASE_URL names the server; the benchmark uses a fresh database
//! `lps_bench_crawl`; Chromium and chromedriver from `/usr/bin`). The timings come from
//! the node's own tracing spans, read by a layer of this process: no hook in the node.
//! Prints Markdown tables for BENCHMARKS.md.
#![allow(clippy::print_stdout)]

use std::{
    collections::{BTreeMap, HashMap},
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use clap::Parser;
use lps_coordinator::{
    app::{self, Running},
    config::Cli,
    db,
    queue::EnqueueContext,
};
use lps_crawler_node::{
    BrowserExecutor, Config as NodeConfig, Node, executor::browser::BrowserSettings,
    proxy::NodeLink,
};
use lps_proto::model::{MallId, Priority, ProductSpec, SearchRequest};
use lps_test_kit::{
    catalog::Catalog,
    gateway::GatewayConfig,
    stack::{Stack, StackConfig, StackHandle},
};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use tracing::{
    Level, Subscriber,
    field::{Field, Visit},
    span,
};
use tracing_subscriber::{
    EnvFilter, Layer,
    filter::Targets,
    layer::{Context, SubscriberExt as _},
    registry::LookupSpan,
    util::SubscriberInitExt as _,
};

#[derive(Debug, Parser)]
struct Args {
    /// Searches (jobs) per measured batch; half as many products, each on both malls.
    #[arg(long, default_value_t = 100)]
    searches: usize,
    /// Fresh nodes started for one cold search each.
    #[arg(long, default_value_t = 5)]
    cold_runs: usize,
    /// Gateway ports (exit IPs) in the ledger.
    #[arg(long, default_value_t = 64)]
    ports: usize,
    #[arg(long, env = "DATABASE_URL")]
    database_url: String,
    /// Instead of the alpha/beta batches: this many rounds of every gamma product read
    /// with the inline-JSON profile and with the DOM-only one, alternating.
    #[arg(long)]
    gamma: Option<usize>,
    /// Instead of the three batches: one batch on a node with this many slots and the
    /// per-IP page gap on, reporting the share of slot time spent waiting, the gap as the
    /// malls saw it and the ledger's ceiling (see "paced" in the module docs).
    #[arg(long)]
    paced: Option<u32>,
    /// The coordinator's port rest after a budget (`LPS_PROXY_REST`).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    rest: Duration,
    /// The node's per-IP page gap (`LPS_IP_PAGE_GAP`); the node's default when not given.
    #[arg(long, value_parser = humantime::parse_duration)]
    gap: Option<Duration>,
}

#[path = "crawl_bench_gamma.rs"]
mod gamma;

const TOKEN: &str = "bench-token-0123456789";
const PROXY_USER: &str = "lps-bench";
const PROXY_PASSWORD: &str = "gateway-password-bench-7";
const MALLS: [&str; 2] = ["testmall-alpha", "testmall-beta"];
/// How long one batch may take before the benchmark gives up.
const BATCH_TIMEOUT: Duration = Duration::from_secs(1800);

// ---------------------------------------------------------------- timings from spans

const NODE_JOB: &str = "node.job";
const PAGE_LOAD: &str = "browser.page_load";
const LAUNCH: &str = "browser.launch";
const CHROMEDRIVER: &str = "browser.chromedriver_start";

/// What the node's spans said about one job.
#[derive(Debug, Clone, Copy)]
struct JobTiming {
    assigned: Instant,
    /// Assign → the end of the first search-page read.
    first_page: Option<Duration>,
    /// Browser launches inside the job (a cold job has one).
    launches: u32,
    launch: Duration,
    chromedriver: Duration,
}

/// A tracing layer that times jobs from the node's spans (see the module docs).
#[derive(Debug, Clone, Default)]
struct Timings(Arc<Mutex<HashMap<i64, JobTiming>>>);

/// Span extension: the job a `node.job` span runs.
struct JobSpan(i64);
/// Span extension: when a timed span opened.
struct Opened(Instant);

struct JobIdField(Option<i64>);

impl Visit for JobIdField {
    fn record_i64(&mut self, field: &Field, value: i64) {
        if field.name() == "job.id" {
            self.0 = Some(value);
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "job.id" {
            self.0 = i64::try_from(value).ok();
        }
    }

    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

impl<S> Layer<S> for Timings
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        match attrs.metadata().name() {
            NODE_JOB => {
                let mut job = JobIdField(None);
                attrs.record(&mut job);
                if let Some(job) = job.0 {
                    let timing = JobTiming {
                        assigned: Instant::now(),
                        first_page: None,
                        launches: 0,
                        launch: Duration::ZERO,
                        chromedriver: Duration::ZERO,
                    };
                    self.0
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .insert(job, timing);
                    span.extensions_mut().insert(JobSpan(job));
                }
            }
            PAGE_LOAD | LAUNCH | CHROMEDRIVER => {
                span.extensions_mut().insert(Opened(Instant::now()));
            }
            _ => {}
        }
    }

    fn on_close(&self, id: span::Id, ctx: Context<'_, S>) {
        let now = Instant::now();
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let name = span.name();
        if !matches!(name, PAGE_LOAD | LAUNCH | CHROMEDRIVER) {
            return;
        }
        let Some(opened) = span.extensions().get::<Opened>().map(|o| o.0) else {
            return;
        };
        let Some(job) = span
            .scope()
            .skip(1)
            .find_map(|s| s.extensions().get::<JobSpan>().map(|j| j.0))
        else {
            return;
        };
        let mut jobs = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(t) = jobs.get_mut(&job) else {
            return;
        };
        match name {
            PAGE_LOAD => {
                t.first_page.get_or_insert(now - t.assigned);
            }
            LAUNCH => {
                t.launches += 1;
                t.launch += now - opened;
            }
            _ => t.chromedriver += now - opened,
        }
    }
}

impl Timings {
    fn of(&self, jobs: &[i64]) -> Vec<JobTiming> {
        let all = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        jobs.iter().filter_map(|j| all.get(j).copied()).collect()
    }
}

// ---------------------------------------------------------------- waits from events

/// The node's debug events that say a slot is about to wait, and for how long.
const WAIT_EVENTS: [&str; 2] = [
    "pacing page loads on this exit IP",
    "no proxy port free; waiting",
];

/// A tracing layer that records the waits the node announces (see [`WAIT_EVENTS`]).
#[derive(Debug, Clone, Default)]
struct Waits(Arc<Mutex<Vec<(Instant, Duration)>>>);

#[derive(Default)]
struct WaitFields {
    message: String,
    wait: Option<Duration>,
}

impl Visit for WaitFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            value.clone_into(&mut self.message);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "wait" => self.wait = parse_debug_duration(&format!("{value:?}")),
            _ => {}
        }
    }
}

/// A `Duration`'s `Debug` text (`2.5s`, `850.2ms`, `12µs`, `7ns`) back as a duration.
fn parse_debug_duration(text: &str) -> Option<Duration> {
    let units = [("ns", 1e-9), ("µs", 1e-6), ("ms", 1e-3), ("s", 1.0)];
    units.iter().find_map(|(unit, scale)| {
        let number: f64 = text.strip_suffix(unit)?.parse().ok()?;
        Some(Duration::from_secs_f64(number * scale))
    })
}

impl<S> Layer<S> for Waits
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = WaitFields::default();
        event.record(&mut fields);
        if let (true, Some(wait)) = (WAIT_EVENTS.contains(&fields.message.as_str()), fields.wait) {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push((Instant::now(), wait));
        }
    }
}

impl Waits {
    /// The waits announced between `from` and `to`, summed.
    fn between(&self, from: Instant, to: Instant) -> Duration {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter(|(at, _)| (from..=to).contains(at))
            .map(|(_, wait)| *wait)
            .sum()
    }
}

// ---------------------------------------------------------------- Chromium memory

/// `(pid, ppid)` of every process.
fn processes() -> Vec<(u32, u32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // NB: the command name may contain spaces and parentheses.
            let rest = &stat[stat.rfind(')')? + 1..];
            let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect()
}

fn mentions(pid: u32, needle: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
}

/// PSS of one process in KiB (0 when it is gone).
fn pss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Pss:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Per slot directory under `root`: PSS in KiB and process count of its browser's tree.
fn slot_pss(root: &Path) -> BTreeMap<String, (u64, usize)> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(root) else {
        return out;
    };
    let procs = processes();
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for &(pid, ppid) in &procs {
        children.entry(ppid).or_default().push(pid);
    }
    for entry in entries.filter_map(Result::ok) {
        let dir = entry.path();
        if !dir.is_dir() {
            continue;
        }
        let needle = format!("--user-data-dir={}", dir.display());
        let mut tree: Vec<u32> = procs
            .iter()
            .map(|&(pid, _)| pid)
            .filter(|&pid| mentions(pid, &needle))
            .collect();
        let mut i = 0;
        while i < tree.len() {
            for &child in children.get(&tree[i]).into_iter().flatten() {
                if !tree.contains(&child) {
                    tree.push(child);
                }
            }
            i += 1;
        }
        if tree.is_empty() {
            continue;
        }
        let pss = tree.iter().map(|&pid| pss_kib(pid)).sum();
        let name = entry.file_name().to_string_lossy().into_owned();
        out.insert(name, (pss, tree.len()));
    }
    out
}

/// Samples [`slot_pss`] every second until `stop`; returns the samples per slot.
async fn sample_memory(
    root: PathBuf,
    stop: CancellationToken,
) -> BTreeMap<String, Vec<(u64, usize)>> {
    let mut samples: BTreeMap<String, Vec<(u64, usize)>> = BTreeMap::new();
    loop {
        let root = root.clone();
        if let Ok(now) = tokio::task::spawn_blocking(move || slot_pss(&root)).await {
            for (slot, sample) in now {
                samples.entry(slot).or_default().push(sample);
            }
        }
        tokio::select! {
            () = stop.cancelled() => return samples,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

// ---------------------------------------------------------------- the stack

struct Bench {
    stack: StackHandle,
    running: Running,
    pool: PgPool,
    timings: Timings,
    products: Vec<String>,
    dir: PathBuf,
    /// The node's per-IP page gap, when not its default.
    gap: Option<Duration>,
}

/// A crawler node in this process.
struct BenchNode {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), lps_crawler_node::NodeError>>,
    browsers: BrowserExecutor,
}

impl Bench {
    fn node(&self, id: &str, slots: u32, block_resources: bool, profiles: &Path) -> BenchNode {
        let mut config = NodeConfig::new(format!("http://{}", self.running.grpc_addr), TOKEN);
        config.node_id = id.into();
        config.slots = slots;
        config.block_resources = block_resources;
        config.drain_timeout = Duration::from_secs(60);
        config.profile_root = profiles.to_path_buf();
        if let Some(gap) = self.gap {
            config.ip_page_gap = gap;
        }
        let (link, inbox) = NodeLink::channel();
        let browsers = BrowserExecutor::new(BrowserSettings::from_config(&config))
            .with_events(Arc::new(link.clone()))
            .with_proxies(Arc::new(link));
        let node = Node::new(config, browsers.clone()).with_link(inbox);
        let stop = CancellationToken::new();
        let task = tokio::spawn(node.run(stop.clone()));
        BenchNode {
            stop,
            task,
            browsers,
        }
    }

    /// Enqueues `products` on `malls` (all when empty); returns the job ids. Forgets the
    /// remembered "not found" answers first, so every search crawls.
    async fn enqueue(&self, products: &[String], malls: &[&str]) -> anyhow::Result<Vec<i64>> {
        sqlx::query("delete from negative_cache")
            .execute(&self.pool)
            .await?;
        let malls = if malls.is_empty() { &MALLS[..] } else { malls };
        let req = SearchRequest::new(
            products
                .iter()
                .map(|p| ProductSpec::new(None, p))
                .collect::<Result<_, _>>()?,
            malls
                .iter()
                .map(|m| MallId::new(*m))
                .collect::<Result<_, _>>()?,
            Priority::INTERACTIVE,
            None,
            None,
        )?;
        let accepted = self
            .running
            .queue
            .enqueue(&req, &EnqueueContext::default())
            .await?;
        let mut jobs: Vec<i64> = accepted.items.iter().map(|i| i.job_id).collect();
        jobs.sort_unstable();
        jobs.dedup();
        Ok(jobs)
    }

    /// Waits until every job is final.
    async fn wait_final(&self, jobs: &[i64]) -> anyhow::Result<()> {
        let deadline = Instant::now() + BATCH_TIMEOUT;
        loop {
            let open: i64 = sqlx::query_scalar(
                "select count(*) from job where job_id = any($1) and state in ('queued', 'running')",
            )
            .bind(jobs)
            .fetch_one(&self.pool)
            .await?;
            if open == 0 {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "{open} searches not final after {BATCH_TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `(outcome or state, bytes)` of each job.
    async fn results(&self, jobs: &[i64]) -> anyhow::Result<Vec<(String, i64)>> {
        Ok(sqlx::query_as(
            "select coalesce(outcome::text, state::text), bytes from job where job_id = any($1)",
        )
        .bind(jobs)
        .fetch_all(&self.pool)
        .await?)
    }

    fn mall_bytes(&self) -> u64 {
        self.stack.alpha.stats().bytes_served + self.stack.beta.stats().bytes_served
    }

    /// `n` products, cycling through the catalog from `from`.
    fn products(&self, from: usize, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| self.products[(from + i) % self.products.len()].clone())
            .collect()
    }
}

impl BenchNode {
    async fn stop(mut self) -> anyhow::Result<()> {
        self.stop.cancel();
        let drained = tokio::time::timeout(Duration::from_secs(120), &mut self.task).await;
        self.browsers.shutdown().await;
        drained
            .context("the node did not drain in time")?
            .context("the node task failed")?
            .context("the node drained with an error")
    }
}

impl Drop for BenchNode {
    /// A benchmark that fails half-way must not leave Chromium behind.
    fn drop(&mut self) {
        self.browsers.kill_now();
    }
}

/// What one measured batch gave.
struct Batch {
    slots: u32,
    blocking: bool,
    jobs: Vec<i64>,
    warmup: Vec<i64>,
    started: Instant,
    elapsed: Duration,
    results: Vec<(String, i64)>,
    mall_bytes: u64,
    memory: BTreeMap<String, Vec<(u64, usize)>>,
}

/// One node with `slots`: a warm-up search per slot, then `searches` searches timed from
/// enqueue to the last one final, with the slots' Chromium memory sampled meanwhile.
async fn batch(
    bench: &Bench,
    slots: u32,
    blocking: bool,
    searches: usize,
) -> anyhow::Result<Batch> {
    let tag = format!("{slots}slot-{}", if blocking { "blocking" } else { "open" });
    let profiles = bench.dir.join(format!("profiles-{tag}"));
    let node = bench.node(&format!("bench-{tag}"), slots, blocking, &profiles);
    // The first searches launch the browsers: one product on both malls per two slots.
    let warmup = bench
        .enqueue(&bench.products(0, slots.div_ceil(2) as usize), &[])
        .await?;
    bench.wait_final(&warmup).await?;

    let stop_sampling = CancellationToken::new();
    let sampler = tokio::spawn(sample_memory(profiles.clone(), stop_sampling.clone()));
    let bytes_before = bench.mall_bytes();
    let started = Instant::now();
    // NB: in rounds of at most every product once: a product searched again while its
    // job is active would join that job instead of crawling.
    let mut jobs = Vec::new();
    let (mut left, mut from) = (searches.div_ceil(2), 1);
    while left > 0 {
        let n = left.min(bench.products.len());
        let round = bench.enqueue(&bench.products(from, n), &[]).await?;
        bench.wait_final(&round).await?;
        jobs.extend(round);
        (left, from) = (left - n, from + n);
    }
    let elapsed = started.elapsed();
    let mall_bytes = bench.mall_bytes() - bytes_before;
    stop_sampling.cancel();
    let memory = sampler.await?;
    node.stop().await?;
    let results = bench.results(&jobs).await?;
    Ok(Batch {
        slots,
        blocking,
        warmup,
        jobs,
        started,
        elapsed,
        results,
        mall_bytes,
        memory,
    })
}

/// Fresh nodes (one slot each, on the same profile directory) running one search each.
async fn cold_runs(bench: &Bench, runs: usize) -> anyhow::Result<Vec<i64>> {
    let profiles = bench.dir.join("profiles-cold");
    let mut jobs = Vec::new();
    for run in 0..runs {
        let node = bench.node("bench-cold", 1, true, &profiles);
        let job = bench
            .enqueue(&bench.products(run, 1), &[MALLS[run % 2]])
            .await?;
        bench.wait_final(&job).await?;
        node.stop().await?;
        jobs.extend(job);
    }
    Ok(jobs)
}

// ---------------------------------------------------------------- figures

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

fn outcome_counts(results: &[(String, i64)]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for (outcome, _) in results {
        *counts.entry(outcome.as_str()).or_default() += 1;
    }
    counts
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The paced batch (see the module docs): one node with `slots` slots, the gap on.
async fn paced(bench: &Bench, args: &Args, slots: u32, waits: &Waits) -> anyhow::Result<()> {
    let load_before = loadavg();
    let gap = bench
        .gap
        .unwrap_or_else(|| NodeConfig::new("http://-", TOKEN).ip_page_gap);
    eprintln!(
        "crawl-bench: paced, {slots} slots, gap {gap:?}, rest {:?}…",
        args.rest
    );
    let b = batch(bench, slots, true, args.searches).await?;
    let end = b.started + b.elapsed;
    let mut arrivals = bench.stack.alpha.search_arrivals();
    arrivals.extend(bench.stack.beta.search_arrivals());
    let pages = arrivals
        .iter()
        .filter(|(_, at)| (b.started..=end).contains(at))
        .count();
    let closest = lps_test_kit::mall::closest_arrivals(&arrivals);
    let closest_min = closest.values().min().copied().unwrap_or_default();
    let violations = lps_test_kit::mall::arrivals_closer_than(&arrivals, gap);
    let waited = waits.between(b.started, end);
    let slot_time = b.elapsed.as_secs_f64() * f64::from(slots);
    let minutes = b.elapsed.as_secs_f64() / 60.0;
    let budget = f64::from(lps_coordinator::ledger::DEFAULT_IP_REQUEST_BUDGET);
    // The ledger's ceiling: each port serves `budget` pages a session, one per gap (its
    // mean: the gap plus half of its up-to-half jitter), then rests (the gap still holds
    // when the rest is shorter).
    let mean_gap = gap.as_secs_f64() * 1.25;
    let cycle = (budget - 1.0) * mean_gap + args.rest.as_secs_f64().max(mean_gap);
    let pages_ceiling = args.ports as f64 * budget / cycle * 60.0;
    let pages_per_search = pages as f64 / b.jobs.len() as f64;
    println!(
        "Command: `cargo run --release -p lps-bench --bin crawl-bench -- --paced {slots} --searches {} --ports {} --rest {}{}`",
        args.searches,
        args.ports,
        humantime::format_duration(args.rest),
        bench
            .gap
            .map(|g| format!(" --gap {}", humantime::format_duration(g)))
            .unwrap_or_default()
    );
    println!(
        "Load average (1, 5, 15 min): {load_before} before, {} after.",
        loadavg()
    );
    println!();
    println!(
        "| slots | ports | gap | rest | searches | outcomes | seconds | searches/min | search pages | slot time waiting | closest two pages of one IP | pages closer than the gap | ledger ceiling, pages/min | ceiling, searches/min at {pages_per_search:.2} pages each |"
    );
    println!("|---:|---:|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {slots} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {pages} | {:.0} % | {:.2} s | {violations} | {pages_ceiling:.0} | {:.0} |",
        args.ports,
        humantime::format_duration(gap),
        humantime::format_duration(args.rest),
        b.jobs.len(),
        outcome_counts(&b.results),
        b.elapsed.as_secs_f64(),
        b.jobs.len() as f64 / minutes,
        waited.as_secs_f64() / slot_time * 100.0,
        closest_min.as_secs_f64(),
        pages_ceiling / pages_per_search,
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.searches >= 2, "--searches must be at least 2");
    let timings = Timings::default();
    let waits = Waits::default();
    tracing_subscriber::registry()
        .with(waits.clone().with_filter(
            Targets::new().with_target("lps_crawler_node::executor::browser", Level::DEBUG),
        ))
        .with(
            timings
                .clone()
                .with_filter(Targets::new().with_target("lps_crawler_node", Level::INFO)),
        )
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .with_filter(
                    EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
                ),
        )
        .init();
    let load_before = loadavg();

    let url = lps_bench::fresh_database(&args.database_url, "lps_bench_crawl").await?;

    let dir = std::env::temp_dir().join(format!("lps-crawl-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut stack_config = StackConfig::new(args.ports);
    stack_config.gateway =
        GatewayConfig::new(args.ports).with_credentials(PROXY_USER, PROXY_PASSWORD);
    let stack = Stack::start(stack_config).await?;
    let site_profiles = dir.join("site-profiles");
    std::fs::create_dir_all(&site_profiles)?;
    stack
        .write_site_profiles(&site_profiles)
        .context("writing the site profiles")?;
    gamma::write_dom_profile(&site_profiles).context("writing the DOM-only gamma profile")?;
    let ports: Vec<String> = stack
        .gateway
        .ports()
        .iter()
        .map(|p| p.addr.port().to_string())
        .collect();
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
        "--profiles-dir",
        site_profiles.to_str().context("temp dir not UTF-8")?,
        "--malls",
        &format!(
            "{},{},{}",
            MALLS.join(","),
            gamma::JSON_MALL,
            gamma::DOM_MALL
        ),
        "--proxy-gateway-host",
        "127.0.0.1",
        "--proxy-ports",
        &ports.join(","),
        "--proxy-username",
        PROXY_USER,
        "--proxy-password",
        PROXY_PASSWORD,
        "--proxy-rest",
        &format!("{}ms", args.rest.as_millis()),
        "--job-deadline",
        "180s",
    ])?
    .serve
    .validate()?;
    let running = app::start(config).await?;
    let pool = db::connect(&url, 4).await?;
    let catalog = Catalog::builtin();
    // NB: decoys too: they are products of their own, and a batch needs distinct products
    // (a repeated one would join the active job instead of crawling again).
    let products = catalog.products().iter().map(|p| p.name.clone()).collect();
    let bench = Bench {
        stack,
        running,
        pool,
        timings,
        products,
        dir: dir.clone(),
        gap: args.gap,
    };

    if let Some(rounds) = args.gamma {
        eprintln!("crawl-bench: gamma, {rounds} rounds…");
        println!(
            "Command: `cargo run --release -p lps-bench --bin crawl-bench -- --gamma {rounds} --ports {}`",
            args.ports
        );
        println!("Load average (1, 5, 15 min): {load_before} before.");
        gamma::run(&bench, rounds).await?;
        println!("Load average after: {}.", loadavg());
        bench.running.shutdown().await;
        bench.stack.shutdown().await?;
        let _ = std::fs::remove_dir_all(&dir);
        return Ok(());
    }
    if let Some(slots) = args.paced {
        paced(&bench, &args, slots, &waits).await?;
        bench.running.shutdown().await;
        bench.stack.shutdown().await?;
        let _ = std::fs::remove_dir_all(&dir);
        return Ok(());
    }
    let mut batches = Vec::new();
    for (slots, blocking) in [(1, true), (2, true), (1, false)] {
        eprintln!("crawl-bench: {slots} slot(s), blocking {blocking}…");
        batches.push(batch(&bench, slots, blocking, args.searches).await?);
    }
    eprintln!("crawl-bench: {} cold runs…", args.cold_runs);
    let cold_jobs = cold_runs(&bench, args.cold_runs).await?;
    let load_after = loadavg();

    println!(
        "Command: `cargo run --release -p lps-bench --bin crawl-bench -- --searches {} --cold-runs {} --ports {}`",
        args.searches, args.cold_runs, args.ports
    );
    println!("Load average (1, 5, 15 min): {load_before} before, {load_after} after.");
    println!();
    println!(
        "| node | resource blocking | searches | outcomes | seconds | searches per node-minute |"
    );
    println!("|---|---|---:|---|---:|---:|");
    for b in &batches {
        println!(
            "| {} slot{} | {} | {} | {} | {:.1} | {:.1} |",
            b.slots,
            if b.slots == 1 { "" } else { "s" },
            if b.blocking { "on" } else { "off" },
            b.jobs.len(),
            outcome_counts(&b.results),
            b.elapsed.as_secs_f64(),
            b.jobs.len() as f64 / (b.elapsed.as_secs_f64() / 60.0)
        );
    }

    println!();
    println!(
        "| resource blocking | searches | relay bytes per search, mean | p50 | max | mall bytes served per search |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for b in batches.iter().filter(|b| b.slots == 1) {
        let mut bytes: Vec<f64> = b.results.iter().map(|(_, n)| *n as f64).collect();
        bytes.sort_by(f64::total_cmp);
        println!(
            "| {} | {} | {:.0} | {:.0} | {:.0} | {:.0} |",
            if b.blocking { "on" } else { "off" },
            bytes.len(),
            mean(&bytes),
            percentile(&bytes, 0.5),
            percentile(&bytes, 1.0),
            b.mall_bytes as f64 / b.jobs.len() as f64
        );
    }

    println!();
    println!(
        "| node | resource blocking | slot | samples | processes | PSS mean MiB | PSS max MiB |"
    );
    println!("|---|---|---|---:|---:|---:|---:|");
    for b in &batches {
        for (slot, samples) in &b.memory {
            let pss: Vec<f64> = samples.iter().map(|(k, _)| *k as f64 / 1024.0).collect();
            let procs = samples.iter().map(|(_, n)| *n).max().unwrap_or(0);
            println!(
                "| {} slot{} | {} | {slot} | {} | {procs} | {:.0} | {:.0} |",
                b.slots,
                if b.slots == 1 { "" } else { "s" },
                if b.blocking { "on" } else { "off" },
                pss.len(),
                mean(&pss),
                pss.iter().copied().fold(0.0, f64::max)
            );
        }
    }

    let mut all_jobs: Vec<i64> = cold_jobs;
    for b in &batches {
        all_jobs.extend(&b.warmup);
        all_jobs.extend(&b.jobs);
    }
    let timed = bench.timings.of(&all_jobs);
    let (cold, warm): (Vec<JobTiming>, Vec<JobTiming>) =
        timed.into_iter().partition(|t| t.launches > 0);
    println!();
    println!(
        "| Assign → first page load | jobs | p50 ms | mean ms | max ms | of which browser launch, mean ms | of which chromedriver start, mean ms |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (label, set) in [("cold browser", &cold), ("warm browser", &warm)] {
        let mut ms: Vec<f64> = set
            .iter()
            .filter_map(|t| t.first_page)
            .map(|d| d.as_secs_f64() * 1e3)
            .collect();
        ms.sort_by(f64::total_cmp);
        let launch: Vec<f64> = set.iter().map(|t| t.launch.as_secs_f64() * 1e3).collect();
        let driver: Vec<f64> = set
            .iter()
            .map(|t| t.chromedriver.as_secs_f64() * 1e3)
            .collect();
        println!(
            "| {label} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
            ms.len(),
            percentile(&ms, 0.5),
            mean(&ms),
            percentile(&ms, 1.0),
            mean(&launch),
            mean(&driver)
        );
    }

    bench.running.shutdown().await;
    bench.stack.shutdown().await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
