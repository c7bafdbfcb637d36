//! What the browser identity and human navigation cost (issue: a browser real malls
//! accept): per search, wall time and bytes the mall served, for plain headless Chromium
//! (`LPS_BROWSER_STEALTH=false`), the node's identity, and the identity with human
//! navigation through the home page; and the memory of one browser slot headless vs
//! headful (under Xvfb). Prints Markdown for BENCHMARKS.md.
//!
//! Each variant runs on a fresh test-kit stack (the fixture malls) with a browser executor
//! of one slot, direct (no proxy: page loads are not paced), resources blocked as in
//! production. The first search of a variant (browser start) is left out of the figures;
//! the next `--searches` alternate over catalog products. Time is the executor's job time
//! (search to judged offers); bytes are the mall's response bodies per search.
//!
//! Usage: `cargo run --release -p lps-bench --bin identity-bench -- [--searches N]`.
#![allow(clippy::print_stdout)]

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use chrono::Utc;
use clap::Parser;
use lps_crawler_node::{
    BrowserExecutor, Executor as _, Job, Outcome, Progress,
    chromium::{BrowserMode, process},
    executor::browser::{BrowserSettings, DriverSource},
    judge::Lexicon,
};
use lps_proto::{
    model::{Lease, MallId, ProductSpec, duration_to_pb},
    pb,
};
use lps_test_kit::{
    MallHandle, MallStats,
    stack::{Stack, StackConfig},
};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Parser)]
#[command(about = "Measures the browser identity's and human navigation's cost per search")]
struct Args {
    /// Searches measured per variant (after one warm-up search).
    #[arg(long, default_value_t = 12)]
    searches: usize,
}

const PRODUCTS: [&str; 4] = [
    "제주 삼다수 2L x 12",
    "햇반 210g 12개",
    "서울우유 1L 2개",
    "신라면 120g 5개입",
];

#[derive(Debug, Clone, Copy)]
struct Variant {
    name: &'static str,
    stealth: bool,
    human: bool,
    mode: BrowserMode,
}

#[derive(Debug, Default)]
struct Figures {
    times: Vec<Duration>,
    bytes: Vec<u64>,
    /// Proportional set size of the slot's processes (and Xvfb), KiB.
    rss_kib: u64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let variants = [
        Variant {
            name: "plain headless (no identity)",
            stealth: false,
            human: false,
            mode: BrowserMode::Headless,
        },
        Variant {
            name: "identity, headless",
            stealth: true,
            human: false,
            mode: BrowserMode::Headless,
        },
        Variant {
            name: "identity + human navigation, headless",
            stealth: true,
            human: true,
            mode: BrowserMode::Headless,
        },
        Variant {
            name: "identity, headful (Xvfb)",
            stealth: true,
            human: false,
            mode: BrowserMode::Headful,
        },
    ];
    let mut rows = Vec::new();
    for variant in variants {
        let figures = measure(variant, args.searches)
            .await
            .with_context(|| variant.name)?;
        rows.push((variant, figures));
    }
    println!(
        "| variant | searches | median time | p90 time | median bytes/search | memory of the slot (PSS) after the searches |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (variant, f) in &rows {
        println!(
            "| {} | {} | {} ms | {} ms | {} | {} MiB |",
            variant.name,
            f.times.len(),
            quantile(&f.times, 0.5).as_millis(),
            quantile(&f.times, 0.9).as_millis(),
            median_u64(&f.bytes),
            f.rss_kib / 1024,
        );
    }
    Ok(())
}

async fn measure(variant: Variant, searches: usize) -> anyhow::Result<Figures> {
    let stack = Stack::start(StackConfig::new(1)).await?;
    let root = std::env::temp_dir().join(format!(
        "lps-identity-bench-{}-{}",
        std::process::id(),
        variant.name.replace([' ', '(', ')', ',', '+'], "")
    ));
    let _ = std::fs::remove_dir_all(&root);
    let settings = BrowserSettings {
        driver: DriverSource::Managed("/usr/bin/chromedriver".into()),
        chromium_path: "/usr/bin/chromium".into(),
        profile_root: root.clone(),
        slots: 1,
        block_resources: true,
        chromium_args: Vec::new(),
        mode: variant.mode,
        xvfb_path: "/usr/bin/Xvfb".into(),
        ip_page_gap: Duration::ZERO,
        stealth: variant.stealth,
    };
    let exec = BrowserExecutor::new(settings);
    let mut profile = profile(&stack.alpha)?;
    if variant.human {
        let ms = |n| Some(duration_to_pb(Duration::from_millis(n)));
        // Production-like human pacing (the profile format's defaults).
        profile.navigation = Some(pb::Navigation {
            human: true,
            home_url: format!("{}/", stack.alpha.base_url()),
            search_input_selector: "form input[name=q]".into(),
            key_delay_min: ms(70),
            key_delay_max: ms(220),
            dwell_min: ms(800),
            dwell_max: ms(2500),
        });
    }
    let mut figures = Figures::default();
    for i in 0..=searches {
        let name = PRODUCTS[i % PRODUCTS.len()];
        let before = stack.alpha.stats();
        let started = Instant::now();
        let outcome = exec
            .run(
                job(i64::try_from(i).unwrap_or(0) + 1, name, &profile),
                Progress::new(),
                CancellationToken::new(),
            )
            .await;
        let took = started.elapsed();
        anyhow::ensure!(
            matches!(outcome, Outcome::Found { .. }),
            "{name}: {outcome:?}"
        );
        if i == 0 {
            continue;
        }
        figures.times.push(took);
        figures
            .bytes
            .push(served(&stack.alpha.stats()) - served(&before));
    }
    figures.rss_kib = slot_rss_kib(&root, variant.mode);
    exec.shutdown().await;
    let _ = std::fs::remove_dir_all(&root);
    stack.shutdown().await?;
    Ok(figures)
}

fn served(stats: &MallStats) -> u64 {
    stats.bytes_served
}

fn profile(mall: &MallHandle) -> anyhow::Result<pb::SiteProfile> {
    let text = lps_profiles::format::builtin_text("testmall-alpha.toml")
        .context("the built-in alpha profile")?;
    let fixed = regex::Regex::new(r"http://127\.0\.0\.1:1808\d")?;
    let text = fixed.replace_all(text, mall.base_url().trim_end_matches('/'));
    Ok(lps_profiles::format::parse("testmall-alpha.toml", &text)?.wire)
}

fn job(id: i64, name: &str, profile: &pb::SiteProfile) -> Job {
    Job {
        lease: Lease {
            job_id: id,
            epoch: 1,
        },
        product: ProductSpec::new(None, name).unwrap_or_else(|e| panic!("{e}")),
        mall: MallId::new(profile.id.clone()).unwrap_or_else(|e| panic!("{e}")),
        attempt: 1,
        max_attempts: 3,
        deadline: Utc::now() + chrono::Duration::seconds(120),
        traceparent: None,
        tracestate: None,
        profile: Some(Arc::new(profile.clone())),
        lexicon: Lexicon::builtin(),
        judged_with: lps_proto::model::JudgedWith::default(),
        limits: pb::Limits::default(),
    }
}

/// Memory of the slot's browser processes, and of the Xvfb in headful mode (PSS).
fn slot_rss_kib(root: &Path, mode: BrowserMode) -> u64 {
    let mut pids: Vec<u32> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|entry| process::browser_pids(&entry.path()))
        .collect();
    if mode == BrowserMode::Headful {
        pids.extend(process::pids_mentioning("Xvfb :"));
    }
    pids.sort_unstable();
    pids.dedup();
    pids.iter().map(|&pid| rss_kib(pid)).sum()
}

fn rss_kib(pid: u32) -> u64 {
    let status =
        std::fs::read_to_string(PathBuf::from(format!("/proc/{pid}/status"))).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn quantile(values: &[Duration], q: f64) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "an index into a short list"
    )]
    let at = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

fn median_u64(values: &[u64]) -> u64 {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len() / 2).copied().unwrap_or(0)
}
