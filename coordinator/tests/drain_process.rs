//! The drain contract of issue #7 with a real process: the `crawler-node` binary (real
//! Chromium and chromedriver, proxy ports leased from the coordinator's ledger, through
//! the test kit's gateway) gets SIGTERM while its browser waits for a slow mall page.
//!
//! What must hold, read from the database, the process and `/proc`:
//! - the node exits 0 within `LPS_DRAIN_TIMEOUT` (plus a margin for closing browsers);
//! - the search still completes: by the draining node when the page comes within the
//!   drain, or — when the drain is shorter than the page — by a second node after the
//!   first handed the job back (`job_attempt` says which, attempt by attempt);
//! - no `proxy_port` is still leased by the node, every IP session it was granted has its
//!   `ip_session` row (one per grant, the last ended by its job's end or the drain), its
//!   `node_session` is disconnected and its log shows the Goodbye;
//! - no process the node started (chromedriver, Chromium) outlives it.
//!
//! The binary is built at the start of the test (`$CARGO build -p lps-crawler-node`) into
//! the target directory this test runs from, so it is always the current code.

use std::{
    collections::{HashMap, HashSet},
    fs::File,
    net::{SocketAddr, TcpListener},
    path::Path,
    process::{Child, Command, ExitStatus, Stdio},
    time::Duration,
};

use lps_coordinator::app::Running;
use lps_proto::pb::{self, search_service_client::SearchServiceClient};
use lps_test_kit::{
    binaries::workspace_binary,
    catalog::{Catalog, MallStyle},
    gateway::GatewayConfig,
    stack::{Stack, StackConfig, StackHandle},
};
use sqlx::PgPool;
use tokio::time::Instant;
use tonic::transport::Channel;

mod common;

use common::{CLIENT_TOKEN, NODE_TOKEN, with_token};

const MALL: &str = "testmall-alpha";
const PROXY_USER: &str = "lps-drain";
const PROXY_PASSWORD: &str = "gateway-password-drain-41";
/// Time a node may take beyond its drain timeout to exit: closing Chromium and
/// chromedriver (the binary allows 90 s for that; here they are idle and close fast).
const EXIT_MARGIN: Duration = Duration::from_secs(60);
/// A cold node on a loaded machine: chromedriver, Chromium, a proxy port, the page request.
const START_WITHIN: Duration = Duration::from_secs(180);

// ---------------------------------------------------------------- processes in /proc

/// A process as `/proc/<pid>/stat` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Proc {
    pid: u32,
    ppid: u32,
    state: char,
    /// Start time in clock ticks since boot: tells a pid's process from a later reuse.
    start: u64,
}

fn read_proc(pid: u32) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // NB: the command name (field 2) may contain spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Proc {
        pid,
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

fn all_procs() -> Vec<Proc> {
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter_map(read_proc)
                .collect()
        })
        .unwrap_or_default()
}

/// Every live descendant of `root`.
fn descendants(root: u32) -> Vec<Proc> {
    let procs = all_procs();
    let mut children: HashMap<u32, Vec<&Proc>> = HashMap::new();
    for p in &procs {
        children.entry(p.ppid).or_default().push(p);
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        for child in children.get(&pid).into_iter().flatten() {
            out.push((*child).clone());
            todo.push(child.pid);
        }
    }
    out
}

/// Pids (other than this process) whose command line contains `needle`.
fn pids_mentioning(needle: &str) -> Vec<u32> {
    let own = std::process::id();
    all_procs()
        .into_iter()
        .filter(|p| p.pid != own && p.state != 'Z')
        .filter(|p| {
            std::fs::read(format!("/proc/{}/cmdline", p.pid))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
        .map(|p| p.pid)
        .collect()
}

fn command_line(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .unwrap_or_default()
}

fn kill(signal: &str, pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let _ = Command::new("kill")
        .arg(signal)
        .args(pids.iter().map(u32::to_string))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

// ---------------------------------------------------------------- one node process

/// A `crawler-node` child process with its own profile root and log file. Dropping it
/// kills whatever of it is left (a failing test must not leave Chromium behind).
struct NodeProcess {
    id: String,
    child: Child,
    dir: common::TempDir,
    /// Every process the node started, as seen while it ran.
    started: Vec<Proc>,
}

impl NodeProcess {
    fn spawn(binary: &Path, coordinator: SocketAddr, id: &str, drain_timeout: &str) -> Self {
        let dir = common::TempDir::new(&format!("drain-{id}"));
        let log = File::create(dir.0.join("node.log")).unwrap();
        let http = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let mut cmd = Command::new(binary);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("LPS_") {
                cmd.env_remove(key);
            }
        }
        cmd.env("LPS_COORDINATOR_URL", format!("http://{coordinator}"))
            .env("LPS_NODE_TOKEN", NODE_TOKEN)
            .env("LPS_NODE_ID", id)
            .env("LPS_NODE_SLOTS", "1")
            .env("LPS_MALLS", MALL)
            .env("LPS_EXECUTOR", "browser")
            .env("LPS_PROXY_MODE", "coordinator")
            .env("LPS_DRAIN_TIMEOUT", drain_timeout)
            .env("LPS_HTTP_ADDR", http.to_string())
            .env("LPS_PROFILE_ROOT", dir.0.join("profiles"))
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let child = cmd.spawn().expect("cannot start crawler-node");
        NodeProcess {
            id: id.to_owned(),
            child,
            dir,
            started: Vec::new(),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("node.log")).unwrap_or_default()
    }

    fn profile_root(&self) -> String {
        self.dir.0.join("profiles").display().to_string()
    }

    /// Panics with the log when the process has exited already.
    fn assert_alive(&mut self, while_: &str) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!(
                "{} exited ({status}) {while_}; its log:\n{}",
                self.id,
                self.log()
            );
        }
    }

    /// Records the processes the node started so far (chromedriver, Chromium).
    fn remember_processes(&mut self) {
        for p in descendants(self.pid()) {
            if !self.started.contains(&p) {
                self.started.push(p);
            }
        }
    }

    fn sigterm(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -TERM {} failed", self.pid());
    }

    /// Waits for the process to exit; panics with the log when it takes longer than `within`.
    async fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            // The node keeps starting processes until it stops; remember them all.
            self.remember_processes();
            assert!(
                Instant::now() < deadline,
                "{} did not exit within {within:?} of SIGTERM; its log:\n{}",
                self.id,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Processes the node started that are still alive, and any process still using its
    /// browser profiles; each as "pid command line".
    fn leftovers(&self) -> Vec<String> {
        let mut left: HashSet<u32> = self
            .started
            .iter()
            .filter(|p| {
                read_proc(p.pid).is_some_and(|now| now.start == p.start && now.state != 'Z')
            })
            .map(|p| p.pid)
            .collect();
        left.extend(pids_mentioning(&self.profile_root()));
        left.into_iter()
            .map(|pid| format!("{pid} {}", command_line(pid)))
            .collect()
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let mut pids: Vec<u32> = self
            .started
            .iter()
            .filter(|p| read_proc(p.pid).is_some_and(|now| now.start == p.start))
            .map(|p| p.pid)
            .collect();
        pids.extend(pids_mentioning(&self.profile_root()));
        kill("-KILL", &pids);
    }
}

// ---------------------------------------------------------------- the rest of the system

/// The test kit's malls and gateway and a coordinator with the proxy ledger on its ports.
struct Rig {
    stack: StackHandle,
    coordinator: Option<Running>,
    pool: PgPool,
    _profiles: common::TempDir,
}

impl Rig {
    async fn start(pool: &PgPool) -> Rig {
        let mut stack_config = StackConfig::new(2);
        stack_config.gateway = GatewayConfig::new(2).with_credentials(PROXY_USER, PROXY_PASSWORD);
        let stack = Stack::start(stack_config).await.unwrap();
        let profiles = common::TempDir::new("drain-site-profiles");
        stack.write_site_profiles(&profiles.0).unwrap();
        let ports = common::gateway_ports(&stack).join(",");
        let flags = [
            "--profiles-dir",
            profiles.0.to_str().unwrap(),
            "--malls",
            MALL,
            "--proxy-gateway-host",
            "127.0.0.1",
            "--proxy-ports",
            &ports,
            "--proxy-username",
            PROXY_USER,
            "--proxy-password",
            PROXY_PASSWORD,
            "--job-deadline",
            "240s",
            // NB: long, so a node that vanished without Goodbye keeps its jobs and ports
            // for the whole test: only a real drain frees them in time.
            "--node-grace",
            "600s",
            "--lease-ttl",
            "630s",
            "--claim-poll",
            "1s",
        ];
        let coordinator = common::start(pool, &flags).await;
        Rig {
            stack,
            coordinator: Some(coordinator),
            pool: pool.clone(),
            _profiles: profiles,
        }
    }

    fn grpc_addr(&self) -> SocketAddr {
        self.coordinator.as_ref().expect("running").grpc_addr
    }

    /// Makes the alpha mall's search page take `delay` (its JSON API stays fast, so a page
    /// that finally came renders its cards at once).
    async fn slow_search_page(&self, delay: Duration) {
        let url = format!(
            "{}/_control/slow?page_ms={}&api_ms=0",
            self.stack.alpha.base_url(),
            delay.as_millis()
        );
        let answer = reqwest::Client::new().post(url).send().await.unwrap();
        assert!(answer.status().is_success(), "{answer:?}");
        let stats = self.stack.alpha.stats();
        assert_eq!(
            stats.slow_page_ms,
            u64::try_from(delay.as_millis()).unwrap()
        );
        assert_eq!(stats.slow_api_ms, 0);
    }

    async fn client(&self) -> SearchServiceClient<Channel> {
        let channel = Channel::from_shared(format!("http://{}", self.grpc_addr()))
            .unwrap()
            .connect()
            .await
            .unwrap();
        SearchServiceClient::new(channel)
    }

    /// Searches one product; returns the search id and its one job.
    async fn search(&self, name: &str) -> (i64, i64) {
        let request = pb::SearchRequest {
            products: vec![pb::Product {
                code: String::new(),
                name: name.into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let accepted = self
            .client()
            .await
            .search(with_token(request, CLIENT_TOKEN))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            accepted.items.len(),
            1,
            "one product, one mall: {accepted:#?}"
        );
        (accepted.search_id, accepted.items[0].job_id)
    }

    async fn wait_final(&self, search_id: i64, within: Duration) -> pb::SearchStatus {
        common::wait_final(&mut self.client().await, CLIENT_TOKEN, search_id, within).await
    }

    /// Waits until `job` runs on `node`, the node holds a proxy port and the mall is
    /// serving (slowly) a search page through the gateway: the node is mid-search.
    async fn wait_mid_search(&self, node: &mut NodeProcess, job: i64) {
        let deadline = Instant::now() + START_WITHIN;
        loop {
            node.assert_alive("before its search reached the mall");
            let running: i64 = sqlx::query_scalar(
                "select count(*) from job where job_id = $1 and state = 'running' and node_id = $2",
            )
            .bind(job)
            .bind(&node.id)
            .fetch_one(&self.pool)
            .await
            .unwrap();
            let ports = held_ports(&self.pool, &node.id).await;
            let through_gateway: u64 = self
                .stack
                .alpha
                .stats()
                .searches
                .iter()
                .filter(|(exit, _)| exit.as_str() != lps_test_kit::DIRECT_EXIT)
                .map(|(_, n)| n)
                .sum();
            if running == 1 && ports >= 1 && through_gateway >= 1 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} not mid-search within {START_WITHIN:?} (running {running}, ports {ports}, \
                 pages {through_gateway}); its log:\n{}",
                node.id,
                node.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Proxy leases granted so far (every acquire counts one use).
    async fn grants(&self) -> i64 {
        sqlx::query_scalar("select coalesce(sum(use_count), 0)::bigint from proxy_port")
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }

    /// After `node` exited: it holds no port, each of its `grants` IP sessions has its row
    /// (the last ended by its job's end or `shutdown`), its stream is disconnected and it
    /// said Goodbye.
    async fn assert_released(&self, node: &NodeProcess, grants: i64) {
        let log = node.log();
        assert_eq!(
            held_ports(&self.pool, &node.id).await,
            0,
            "{} still leases proxy ports after it exited; its log:\n{log}",
            node.id
        );
        let sessions: Vec<(String, i64)> = sqlx::query_as(
            "select end_reason::text, requests::bigint from ip_session where node_id = $1 order by id",
        )
        .bind(&node.id)
        .fetch_all(&self.pool)
        .await
        .unwrap();
        assert!(grants >= 1, "{} was never granted a proxy port", node.id);
        assert_eq!(
            i64::try_from(sessions.len()).unwrap(),
            grants,
            "{} was granted {grants} IP sessions but ended {sessions:?}; its log:\n{log}",
            node.id
        );
        // NB: an IP session ends with its job (DESIGN §4): the last one was released by the
        // end of the job the drain waited for (`idle`), or by the drain itself.
        assert!(
            matches!(
                sessions.last().map(|(reason, _)| reason.as_str()),
                Some("idle" | "shutdown")
            ),
            "the node's last IP session did not end with its job or the drain: {sessions:?}"
        );
        let disconnected: bool = sqlx::query_scalar(
            "select disconnected_at is not null from node_session where node_id = $1",
        )
        .bind(&node.id)
        .fetch_one(&self.pool)
        .await
        .unwrap();
        assert!(
            disconnected,
            "{}'s node_session is still connected",
            node.id
        );
        for line in ["goodbye sent", "crawler node drained; exiting"] {
            assert!(
                log.contains(line),
                "no {line:?} in the log of {}:\n{log}",
                node.id
            );
        }
    }

    async fn stop(mut self) {
        if let Some(coordinator) = self.coordinator.take() {
            coordinator.shutdown().await;
        }
        self.stack.shutdown().await.unwrap();
    }
}

async fn held_ports(pool: &PgPool, node: &str) -> i64 {
    sqlx::query_scalar("select count(*) from proxy_port where holder_node = $1")
        .bind(node)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// How each run of `job` ended: `(lease_epoch, node, ended)` in epoch order.
async fn attempts(pool: &PgPool, job: i64) -> Vec<(i64, String, String)> {
    sqlx::query_as(
        "select lease_epoch, coalesce(node_id, ''), ended::text from job_attempt
         where job_id = $1 order by lease_epoch",
    )
    .bind(job)
    .fetch_all(pool)
    .await
    .unwrap()
}

/// A product both malls sell, and the alpha mall's effective price for it (from the
/// catalog, never from LPS).
fn product(nth: usize) -> (String, i64) {
    let catalog = Catalog::builtin();
    let product = catalog
        .products()
        .iter()
        .filter(|p| p.decoy_of.is_none() && p.listings.len() == 2)
        .nth(nth)
        .expect("enough products in the catalog");
    let price = product
        .listing(MallStyle::Alpha)
        .expect("an alpha listing")
        .effective_price();
    (product.name.clone(), i64::try_from(price).unwrap())
}

fn assert_found(status: &pb::SearchStatus, name: &str, price: i64) {
    let product = &status.products[0];
    let mall = &product.malls[0];
    assert_eq!(mall.state, pb::JobState::Done as i32, "{product:#?}");
    assert_eq!(mall.outcome, pb::Outcome::Found as i32, "{product:#?}");
    assert!(!mall.offers.is_empty(), "{product:#?}");
    let lowest = product
        .lowest
        .as_ref()
        .unwrap_or_else(|| panic!("no offer for {name}: {product:#?}"));
    assert_eq!(lowest.effective_price, Some(price), "{name}: {product:#?}");
}

async fn assert_no_leftovers(node: &NodeProcess) {
    assert!(
        !node.started.is_empty(),
        "{} was never seen running chromedriver or Chromium",
        node.id
    );
    // NB: the watchdogs (a shell polling once a second) see their group gone within a
    // second or two; what matters is that nothing is left after 5 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut left = node.leftovers();
    while !left.is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        left = node.leftovers();
    }
    assert!(
        left.is_empty(),
        "{} left processes behind:\n{}",
        node.id,
        left.join("\n")
    );
}

// ---------------------------------------------------------------- the tests

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn sigterm_mid_search_finishes_the_search_then_exits_0_having_released_everything(
    pool: PgPool,
) {
    let binary =
        tokio::task::spawn_blocking(|| workspace_binary("lps-crawler-node", "crawler-node"))
            .await
            .unwrap();
    let rig = Rig::start(&pool).await;
    // The page comes well within the drain (60 s), but surely after the SIGTERM.
    rig.slow_search_page(Duration::from_secs(15)).await;
    let (name, price) = product(0);
    let (search, job) = rig.search(&name).await;
    let mut node = NodeProcess::spawn(&binary, rig.grpc_addr(), "drain-a", "60s");
    rig.wait_mid_search(&mut node, job).await;
    node.remember_processes();

    node.sigterm();
    let status = node.wait_exit(Duration::from_secs(60) + EXIT_MARGIN).await;
    assert!(
        status.success(),
        "{} exited {status}; its log:\n{}",
        node.id,
        node.log()
    );

    // The draining node finished the search itself: one attempt, done, and the result
    // was committed before the node was let go.
    assert_eq!(
        attempts(&pool, job).await,
        vec![(1, "drain-a".to_owned(), "done".to_owned())]
    );
    let final_status = rig.wait_final(search, Duration::from_secs(10)).await;
    assert_found(&final_status, &name, price);
    let grants = rig.grants().await;
    rig.assert_released(&node, grants).await;
    assert_no_leftovers(&node).await;
    rig.stop().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_drain_shorter_than_the_page_hands_the_job_back_and_another_node_finishes_it(
    pool: PgPool,
) {
    let binary =
        tokio::task::spawn_blocking(|| workspace_binary("lps-crawler-node", "crawler-node"))
            .await
            .unwrap();
    let rig = Rig::start(&pool).await;
    // The drain (16 s) hands back 12 s after SIGTERM (a quarter is kept for the acks);
    // the page would come after 28 s (within Chromium's 30 s page-load timeout).
    rig.slow_search_page(Duration::from_secs(28)).await;
    let (name, price) = product(1);
    let (search, job) = rig.search(&name).await;
    let mut first = NodeProcess::spawn(&binary, rig.grpc_addr(), "drain-b1", "16s");
    rig.wait_mid_search(&mut first, job).await;
    first.remember_processes();

    first.sigterm();
    let status = first.wait_exit(Duration::from_secs(16) + EXIT_MARGIN).await;
    assert!(
        status.success(),
        "{} exited {status}; its log:\n{}",
        first.id,
        first.log()
    );
    assert!(
        first.log().contains("handing back jobs"),
        "no hand-back in the log:\n{}",
        first.log()
    );

    // Handed back: queued again at once, no attempt counted against it, nothing lost.
    assert_eq!(
        attempts(&pool, job).await,
        vec![(1, "drain-b1".to_owned(), "handed_back".to_owned())]
    );
    let (state, failed, reclaims): (String, i32, i32) = sqlx::query_as(
        "select state::text, attempts::int, reclaims::int from job where job_id = $1",
    )
    .bind(job)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((state.as_str(), failed, reclaims), ("queued", 0, 0));
    let first_grants = rig.grants().await;
    rig.assert_released(&first, first_grants).await;
    assert_no_leftovers(&first).await;

    // A second node finishes it, on a mall that is fast again.
    rig.slow_search_page(Duration::ZERO).await;
    let mut second = NodeProcess::spawn(&binary, rig.grpc_addr(), "drain-b2", "60s");
    let final_status = rig.wait_final(search, START_WITHIN).await;
    assert_found(&final_status, &name, price);
    assert_eq!(
        attempts(&pool, job).await,
        vec![
            (1, "drain-b1".to_owned(), "handed_back".to_owned()),
            (2, "drain-b2".to_owned(), "done".to_owned()),
        ]
    );
    second.remember_processes();
    second.sigterm();
    let status = second
        .wait_exit(Duration::from_secs(60) + EXIT_MARGIN)
        .await;
    assert!(
        status.success(),
        "{} exited {status}; its log:\n{}",
        second.id,
        second.log()
    );
    let second_grants = rig.grants().await - first_grants;
    rig.assert_released(&second, second_grants).await;
    assert_no_leftovers(&second).await;
    rig.stop().await;
}
