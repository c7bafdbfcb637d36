//! Helpers for the browser tests: site profiles of the test malls (the built-in TOML
//! files of `lps-profiles`, with the real addresses), jobs, a browser executor per test with
//! its own profile root and the no-leftover check, and an in-test proxy source.
// NB: each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::{
    future::Future,
    panic::AssertUnwindSafe,
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use chrono::Utc;
use futures::FutureExt as _;
use lps_crawler_node::{
    BrowserExecutor, Executor, Job, Outcome, Progress,
    chromium::process,
    config::Secret,
    executor::browser::{BrowserSettings, DriverSource},
    proxy::{Acquired, BlockEvent, EventSink, Grant, ProxySource, SessionEnd},
};
use lps_proto::{
    model::{JobMetrics, Lease, MallId, Offer, ProductSpec, RoundReport},
    pb,
};
use lps_test_kit::MallHandle;
use tokio_util::sync::CancellationToken;

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// Longest a whole test body may take.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(240);
/// Longest one job may take.
pub const JOB_TIMEOUT: Duration = Duration::from_secs(120);

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
static SEQ: AtomicUsize = AtomicUsize::new(0);

/// Browser tests run one at a time.
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    SERIAL.lock().await
}

fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// The built-in profile `file` (`profiles/builtin/`), its fixed demo address replaced by
/// `mall`'s real one (in every URL template of the profile).
pub fn profile_from_toml(file: &str, mall: &MallHandle) -> pb::SiteProfile {
    let text = lps_profiles::format::builtin_text(file).unwrap_or_else(|| panic!("no {file}"));
    profile_at(text, file, mall)
}

/// A profile's text (format 2) pointed at `mall`: `http://127.0.0.1:1808N` → its base URL.
pub fn profile_at(text: &str, file: &str, mall: &MallHandle) -> pb::SiteProfile {
    let fixed = regex::Regex::new(r"http://127\.0\.0\.1:1808\d").unwrap();
    let text = fixed.replace_all(text, mall.base_url().trim_end_matches('/'));
    lps_profiles::format::parse(file, &text)
        .unwrap_or_else(|e| panic!("{e}"))
        .wire
}

pub fn alpha_profile(mall: &MallHandle) -> pb::SiteProfile {
    profile_from_toml("testmall-alpha.toml", mall)
}

pub fn gamma_profile(mall: &MallHandle) -> pb::SiteProfile {
    profile_from_toml("testmall-gamma.toml", mall)
}

pub fn beta_profile(mall: &MallHandle) -> pb::SiteProfile {
    profile_from_toml("testmall-beta.toml", mall)
}

/// The gateway's ports (its exit IPs, in order).
pub fn gateway_ports(stack: &lps_test_kit::StackHandle) -> Vec<u16> {
    stack
        .gateway
        .ports()
        .iter()
        .map(|p| p.addr.port())
        .collect()
}

/// The limits a coordinator would send.
pub fn limits() -> pb::Limits {
    pb::Limits {
        max_ip_burns_per_job: 3,
        ip_request_budget: 3,
        proxy_usd_per_gb: 3.0,
        ip_session_window: None,
    }
}

/// Job `id` (epoch 1) searching `name` with `profile`, due in two minutes.
pub fn job(id: i64, name: &str, profile: pb::SiteProfile) -> Job {
    Job {
        lease: Lease {
            job_id: id,
            epoch: 1,
        },
        product: ProductSpec::new(None, name).unwrap(),
        mall: MallId::new(profile.id.clone()).unwrap(),
        attempt: 1,
        max_attempts: 3,
        deadline: Utc::now() + chrono::Duration::seconds(120),
        traceparent: None,
        tracestate: None,
        profile: Some(Arc::new(profile)),
        lexicon: lps_crawler_node::judge::Lexicon::builtin(),
        judged_with: lps_proto::model::JudgedWith::default(),
        limits: limits(),
    }
}

/// Runs one job to its end.
pub async fn run(exec: &BrowserExecutor, job: Job) -> Outcome {
    tokio::time::timeout(
        JOB_TIMEOUT,
        exec.run(job, Progress::new(), CancellationToken::new()),
    )
    .await
    .expect("the job ends in time")
}

/// The parts of a `Found` outcome, or a panic naming `what`.
pub fn expect_found(outcome: Outcome, what: &str) -> (Vec<Offer>, Vec<RoundReport>, JobMetrics) {
    match outcome {
        Outcome::Found {
            offers,
            rounds,
            metrics,
        } => (offers, rounds, metrics),
        other => panic!("{what}: want found, got {other:?}"),
    }
}

/// A browser executor with a profile root of its own; [`Harness::finish`] shuts it down and
/// checks that nothing of it is left.
pub struct Harness {
    pub executor: BrowserExecutor,
    pub root: PathBuf,
}

impl Harness {
    fn settings(name: &str, block_resources: bool) -> (BrowserSettings, PathBuf) {
        init_logs();
        for path in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                std::path::Path::new(path).exists(),
                "{path} is missing: apt-get install -y chromium chromium-driver"
            );
        }
        let root = std::env::temp_dir().join(format!(
            "lps-node-browser-{name}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        let settings = BrowserSettings {
            driver: DriverSource::Managed(CHROMEDRIVER.into()),
            chromium_path: CHROMIUM.into(),
            profile_root: root.clone(),
            slots: 1,
            block_resources,
            chromium_args: Vec::new(),
            mode: lps_crawler_node::chromium::BrowserMode::Headless,
            xvfb_path: "/usr/bin/Xvfb".into(),
            // NB: tests that pace page loads set a gap of their own.
            ip_page_gap: std::time::Duration::ZERO,
            stealth: true,
        };
        (settings, root)
    }

    /// An executor made by `build` from this test's settings.
    pub fn build(name: &str, build: impl FnOnce(BrowserSettings) -> BrowserExecutor) -> Self {
        let (settings, root) = Self::settings(name, true);
        Self {
            executor: build(settings),
            root,
        }
    }

    /// Straight to the malls.
    pub fn direct(name: &str, block_resources: bool) -> Self {
        let (settings, root) = Self::settings(name, block_resources);
        Self {
            executor: BrowserExecutor::new(settings),
            root,
        }
    }

    /// Through `proxies`, reporting blocks to `events`.
    pub fn proxied(
        name: &str,
        block_resources: bool,
        proxies: Arc<TestProxies>,
        events: Arc<TestEvents>,
    ) -> Self {
        let (settings, root) = Self::settings(name, block_resources);
        Self {
            executor: BrowserExecutor::new(settings)
                .with_proxies(proxies)
                .with_events(events),
            root,
        }
    }

    /// Runs `check`, then shuts the executor down whatever happened, then checks that no
    /// process mentions the profile root (the test's unique user-data-dirs).
    pub async fn finish(self, check: impl Future<Output = ()>) {
        let checked =
            tokio::time::timeout(TEST_TIMEOUT, AssertUnwindSafe(check).catch_unwind()).await;
        self.executor.shutdown().await;
        let needle = self.root.display().to_string();
        let left = process::pids_mentioning(&needle);
        if !left.is_empty() {
            process::kill_pids(&left).await;
        }
        let _ = std::fs::remove_dir_all(&self.root);
        match checked {
            Ok(Ok(())) => {}
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Err(_) => panic!("the test body did not finish within {TEST_TIMEOUT:?}"),
        }
        assert!(left.is_empty(), "browser processes left behind: {left:?}");
    }
}

/// Hands out the gateway's ports in turn and records what comes back.
pub struct TestProxies {
    ports: Vec<u16>,
    credentials: Option<(String, String)>,
    budget: u32,
    next: AtomicUsize,
    releases: Mutex<Vec<(u16, SessionEnd)>>,
}

impl TestProxies {
    pub fn new(ports: Vec<u16>, credentials: Option<(&str, &str)>, budget: u32) -> Self {
        Self {
            ports,
            credentials: credentials.map(|(u, p)| (u.to_owned(), p.to_owned())),
            budget,
            next: AtomicUsize::new(0),
            releases: Mutex::new(Vec::new()),
        }
    }

    /// `(port, IP session end)` of every release, in order.
    pub fn releases(&self) -> Vec<(u16, SessionEnd)> {
        self.releases.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl ProxySource for TestProxies {
    async fn acquire(&self, _mall: &MallId, _job_id: i64) -> Acquired {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        let (username, password) = self.credentials.clone().unwrap_or_default();
        Acquired::Granted(Grant {
            host: "127.0.0.1".into(),
            port: self.ports[i % self.ports.len()],
            username,
            password: Secret::new(password),
            lease_until: None,
            request_budget: self.budget,
            lease_id: i64::try_from(i).unwrap_or(i64::MAX) + 1,
        })
    }

    fn release(&self, grant: &Grant, session: SessionEnd) {
        self.releases.lock().unwrap().push((grant.port, session));
    }
}

/// Grants the gateway's ports as the coordinator's ledger does: each port to one holder at
/// a time, the least recently used free one first (used = granted or released); none free:
/// `Unavailable`, retry shortly. Records what comes back.
pub struct LedgerProxies {
    /// `(port, held, last used)`; never used sorts first.
    ports: Mutex<Vec<(u16, bool, Option<tokio::time::Instant>)>>,
    next_lease: AtomicUsize,
    releases: Mutex<Vec<(u16, SessionEnd)>>,
}

impl LedgerProxies {
    pub fn new(ports: Vec<u16>) -> Self {
        Self {
            ports: Mutex::new(ports.into_iter().map(|p| (p, false, None)).collect()),
            next_lease: AtomicUsize::new(1),
            releases: Mutex::new(Vec::new()),
        }
    }

    /// `(port, IP session end)` of every release, in order.
    pub fn releases(&self) -> Vec<(u16, SessionEnd)> {
        self.releases.lock().unwrap().clone()
    }

    /// Ports held now.
    pub fn held(&self) -> usize {
        self.ports.lock().unwrap().iter().filter(|p| p.1).count()
    }
}

#[async_trait::async_trait]
impl ProxySource for LedgerProxies {
    async fn acquire(&self, _mall: &MallId, _job_id: i64) -> Acquired {
        let mut ports = self.ports.lock().unwrap();
        let Some(port) = ports.iter_mut().filter(|p| !p.1).min_by_key(|p| p.2) else {
            return Acquired::Unavailable {
                retry_at: Some(Utc::now() + chrono::Duration::milliseconds(100)),
            };
        };
        port.1 = true;
        port.2 = Some(tokio::time::Instant::now());
        let lease = self.next_lease.fetch_add(1, Ordering::Relaxed);
        Acquired::Granted(Grant {
            host: "127.0.0.1".into(),
            port: port.0,
            username: String::new(),
            password: Secret::new(String::new()),
            lease_until: None,
            request_budget: 0,
            lease_id: i64::try_from(lease).unwrap_or(i64::MAX),
        })
    }

    fn release(&self, grant: &Grant, session: SessionEnd) {
        if let Some(port) = self
            .ports
            .lock()
            .unwrap()
            .iter_mut()
            .find(|p| p.0 == grant.port)
        {
            port.1 = false;
            port.2 = Some(tokio::time::Instant::now());
        }
        self.releases.lock().unwrap().push((grant.port, session));
    }
}

/// Records block events.
#[derive(Default)]
pub struct TestEvents {
    blocks: Mutex<Vec<BlockEvent>>,
}

impl TestEvents {
    pub fn blocks(&self) -> Vec<BlockEvent> {
        self.blocks.lock().unwrap().clone()
    }
}

impl EventSink for TestEvents {
    fn block(&self, event: BlockEvent) {
        self.blocks.lock().unwrap().push(event);
    }
}

/// The value of the sample `series` (name and labels exactly as exposed) in a Prometheus
/// text exposition, if present.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
}
