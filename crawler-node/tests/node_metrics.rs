//! The node's `/metrics` and `/readyz` with real parts: a whole crawler node (`Node` +
//! `BrowserExecutor` + `NodeLink`, one shared `NodeMetrics`) against the scripted
//! coordinator, real Chromium searching the test kit's mall through the fake gateway, and
//! the probe server on loopback.
//!
//! - a found search, then a blocked page and a rotation: job, page-load, byte, block and
//!   IP-session series, read back over HTTP;
//! - a chromedriver killed under the node: `/readyz` is 503 while it cannot be started
//!   again (its binary is a wrapper the test can make fail), 200 once the watch task has
//!   restarted it, and the next search works.

mod common;
mod support;

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use common::{CHROMEDRIVER, Harness, alpha_profile, sample};
use lps_crawler_node::{
    BrowserExecutor, Node, NodeHandle, NodeMetrics, executor::browser::DriverSource, health,
    proxy::NodeLink,
};
use lps_proto::pb::{self, node_message::Body as Out};
use lps_test_kit::stack::{Stack, StackConfig};
use support::{
    Behaviour, FakeCoordinator, assign, browser_node_config, drain, gated_stack, grant_plan,
    http_get, wait_welcomed,
};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(90);
const MALL: &str = "testmall-alpha";

/// Serves the node's HTTP endpoints on a free loopback port.
async fn serve_http(handle: NodeHandle, stop: CancellationToken) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(health::serve(listener, handle, stop));
    addr
}

async fn metrics_text(addr: SocketAddr) -> String {
    let (code, body) = http_get(addr, "/metrics").await;
    assert_eq!(code, 200, "{body}");
    body
}

/// Waits (up to [`WAIT`]) until `/readyz` answers `code`.
async fn wait_readyz(addr: SocketAddr, code: u16) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (now, body) = http_get(addr, "/readyz").await;
        if now == code {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "/readyz stayed {now} ({body:?}), want {code}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Asserts the chromedriver series in `text`: `lps_node_chromedriver_up` and
/// `lps_node_chromedriver_restarts_total`.
fn assert_chromedriver(text: &str, up: f64, restarts: f64) {
    assert_eq!(sample(text, "lps_node_chromedriver_up"), Some(up), "{text}");
    assert_eq!(
        sample(text, "lps_node_chromedriver_restarts_total"),
        Some(restarts),
        "{text}"
    );
}

/// Waits for the outcome of job `job_id`; panics on a failure.
async fn wait_found(coord: &FakeCoordinator, job_id: i64) -> pb::JobResult {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        for (_, m) in coord.all_messages() {
            match m {
                Out::Result(r) if r.job_id == job_id => return r,
                Out::Failure(f) if f.job_id == job_id => panic!("job {job_id} failed: {f:?}"),
                _ => {}
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no result for job {job_id}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn searches_blocks_and_bytes_show_up_in_metrics() {
    let _serial = common::serial().await;
    // A second search on one exit IP is blocked.
    let stack = gated_stack(2, Some(1)).await;
    // Job 2 is granted the first IP again (job 1 released it at its end), then the second.
    let mut grants = grant_plan(&stack);
    grants.ports = vec![grants.ports[0], grants.ports[0], grants.ports[1]];
    let coord = FakeCoordinator::start_with(Behaviour {
        profiles: vec![alpha_profile(&stack.alpha)],
        grants: Some(grants),
        lease_ttl: Duration::from_secs(10),
        ..Behaviour::default()
    })
    .await;
    let metrics = Arc::new(NodeMetrics::new());
    let (link, inbox) = NodeLink::channel();
    let harness = Harness::build("metrics", |settings| {
        BrowserExecutor::new(settings)
            .with_proxies(Arc::new(link.clone()))
            .with_events(Arc::new(link))
            .with_metrics(metrics.clone())
    });
    let node = Node::new(
        browser_node_config(&coord, "node-metrics"),
        harness.executor.clone(),
    )
    .with_link(inbox)
    .with_metrics(metrics.clone());
    let handle = node.handle();
    let stop_http = CancellationToken::new();
    let addr = serve_http(handle.clone(), stop_http.clone()).await;
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(node.run(shutdown.clone()));
    let check = async {
        wait_welcomed(&handle).await;
        wait_readyz(addr, 200).await;
        let idle = metrics_text(addr).await;
        assert_eq!(sample(&idle, "lps_node_slots_free"), Some(1.0), "{idle}");

        // Job 1: found on the first IP.
        coord.send(0, assign(1, "삼다수 2L x 12", Duration::from_secs(120)));
        let first = wait_found(&coord, 1).await;
        assert_eq!(first.outcome, pb::Outcome::Found as i32);
        let reported = first.metrics.unwrap();
        handle.wait_for(|s| s.running_jobs == 0).await;
        let text = metrics_text(addr).await;
        let found = format!("lps_node_jobs_finished_total{{mall=\"{MALL}\",outcome=\"found\"}}");
        assert_eq!(sample(&text, &found), Some(1.0), "{text}");
        let loads = sample(
            &text,
            &format!("lps_node_page_load_seconds_count{{mall=\"{MALL}\",verdict=\"results\"}}"),
        );
        assert!(loads.is_some_and(|n| n >= 1.0), "{text}");
        let bytes_in = sample(
            &text,
            &format!("lps_node_proxy_bytes_total{{mall=\"{MALL}\",direction=\"in\"}}"),
        );
        // The series is exactly what the job reported to the coordinator.
        let want = reported.bytes_in as f64;
        assert!(want > 0.0, "{reported:?}");
        assert_eq!(bytes_in, Some(want), "{text}");
        assert_eq!(sample(&text, "lps_node_browser_launches_total"), Some(1.0));
        assert_eq!(sample(&text, "lps_node_jobs_running"), Some(0.0));
        assert_eq!(sample(&text, "lps_node_chromedriver_up"), Some(1.0));

        // Job 2: the first IP again, now over what the mall tolerates → blocked,
        // released, a new IP.
        coord.send(0, assign(2, "햇반 210g 12개", Duration::from_secs(120)));
        let second = wait_found(&coord, 2).await;
        assert_eq!(second.outcome, pb::Outcome::Found as i32);
        handle.wait_for(|s| s.running_jobs == 0).await;
        let text = metrics_text(addr).await;
        assert_eq!(sample(&text, &found), Some(2.0), "{text}");
        let blocked = format!("lps_node_blocks_total{{mall=\"{MALL}\"}}");
        assert_eq!(sample(&text, &blocked), Some(1.0), "{text}");
        let burned =
            format!("lps_node_ip_sessions_ended_total{{mall=\"{MALL}\",reason=\"block\"}}");
        assert_eq!(sample(&text, &burned), Some(1.0), "{text}");
        let block_loads = sample(
            &text,
            &format!("lps_node_page_load_seconds_count{{mall=\"{MALL}\",verdict=\"blocked\"}}"),
        );
        assert_eq!(block_loads, Some(1.0), "{text}");

        // Each job's end released its last IP session; shutdown found none left.
        let at_job_end =
            format!("lps_node_ip_sessions_ended_total{{mall=\"{MALL}\",reason=\"idle\"}}");
        assert_eq!(sample(&text, &at_job_end), Some(2.0), "{text}");
        drain(&shutdown, run).await;
        let text = metrics.encode();
        let at_shutdown =
            format!("lps_node_ip_sessions_ended_total{{mall=\"{MALL}\",reason=\"shutdown\"}}");
        assert_eq!(sample(&text, &at_shutdown).unwrap_or(0.0), 0.0, "{text}");
    };
    harness.finish(check).await;
    stop_http.cancel();
    stack.shutdown().await.unwrap();
}

/// A chromedriver "binary" that runs the real one unless `<script>.broken` exists.
struct FlakyDriver {
    dir: PathBuf,
    script: PathBuf,
}

impl FlakyDriver {
    fn new() -> Self {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("lps-flaky-driver-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("chromedriver");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\nif [ -e \"$0.broken\" ]; then exit 1; fi\nexec {CHROMEDRIVER} \"$@\"\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self { dir, script }
    }

    fn set_broken(&self, broken: bool) {
        let flag = self.script.with_extension("broken");
        if broken {
            std::fs::write(flag, b"").unwrap();
        } else {
            std::fs::remove_file(flag).unwrap();
        }
    }
}

impl Drop for FlakyDriver {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test]
async fn a_killed_chromedriver_turns_readiness_off_until_it_is_restarted() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(1)).await.unwrap();
    let coord = FakeCoordinator::start_with(Behaviour {
        profiles: vec![alpha_profile(&stack.alpha)],
        lease_ttl: Duration::from_secs(10),
        ..Behaviour::default()
    })
    .await;
    let driver = FlakyDriver::new();
    let metrics = Arc::new(NodeMetrics::new());
    let harness = Harness::build("driver-kill", |mut settings| {
        settings.driver = DriverSource::Managed(driver.script.clone());
        BrowserExecutor::new(settings).with_metrics(metrics.clone())
    });
    let exec = harness.executor.clone();
    let node = Node::new(browser_node_config(&coord, "node-driver"), exec.clone())
        .with_metrics(metrics.clone());
    let handle = node.handle();
    let stop_http = CancellationToken::new();
    let addr = serve_http(handle.clone(), stop_http.clone()).await;
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(node.run(shutdown.clone()));
    let check = async {
        wait_welcomed(&handle).await;
        coord.send(0, assign(1, "삼다수 2L x 12", Duration::from_secs(120)));
        wait_found(&coord, 1).await;
        wait_readyz(addr, 200).await;
        let first = exec.chromedriver_pid().expect("a managed chromedriver");

        // Killed, and it cannot start again: not ready, and the metrics say why.
        driver.set_broken(true);
        lps_crawler_node::chromium::process::kill_pids(&[first]).await;
        wait_readyz(addr, 503).await;
        let (_, why) = http_get(addr, "/readyz").await;
        assert!(why.contains("chromedriver"), "{why}");
        let text = metrics_text(addr).await;
        assert_chromedriver(&text, 0.0, 0.0);
        assert!(handle.is_connected(), "only the executor is down");

        // It can start again: the watch task restarts it without waiting for a job.
        driver.set_broken(false);
        wait_readyz(addr, 200).await;
        let text = metrics_text(addr).await;
        assert_chromedriver(&text, 1.0, 1.0);
        let second = exec.chromedriver_pid().expect("a new chromedriver");
        assert_ne!(first, second);

        // The browser died with its chromedriver: the next job replaces it and searches.
        coord.send(0, assign(2, "삼다수 2L x 12", Duration::from_secs(120)));
        wait_found(&coord, 2).await;
        handle.wait_for(|s| s.running_jobs == 0).await;
        let text = metrics_text(addr).await;
        let found = format!("lps_node_jobs_finished_total{{mall=\"{MALL}\",outcome=\"found\"}}");
        assert_eq!(sample(&text, &found), Some(2.0), "{text}");
        assert_eq!(
            sample(&text, "lps_node_browser_restarts_total{reason=\"failed\"}"),
            Some(1.0),
            "{text}"
        );
        assert_eq!(sample(&text, "lps_node_browser_launches_total"), Some(2.0));

        drain(&shutdown, run).await;
    };
    harness.finish(check).await;
    stop_http.cancel();
    stack.shutdown().await.unwrap();
}
