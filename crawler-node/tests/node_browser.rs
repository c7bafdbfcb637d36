//! A whole crawler node (`Node` + `BrowserExecutor` + `NodeLink`) against the scripted
//! coordinator (`support::FakeCoordinator`), searching the test kit's mall with real
//! Chromium through proxy ports the coordinator grants: the Assign → Result path, the
//! ProxyAcquire → ProxyGrant path, BlockEvent and ProxyRelease reports, and the release of
//! the last IP session before Goodbye.

mod common;
mod support;

use std::{sync::Arc, time::Duration};

use common::{Harness, alpha_profile};
use lps_crawler_node::{BrowserExecutor, Node, StreamState, proxy::NodeLink};
use lps_proto::pb::{self, node_message::Body as Out};
use support::{
    Behaviour, FakeCoordinator, assign, browser_node_config, drain, gated_stack, grant_plan,
    wait_welcomed,
};
use tokio_util::sync::CancellationToken;

const JOB_WAIT: Duration = Duration::from_secs(90);

/// Waits (up to [`JOB_WAIT`]) for a message on any stream that `pick` accepts.
async fn wait_message<T>(
    coord: &FakeCoordinator,
    what: &str,
    mut pick: impl FnMut(&Out) -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + JOB_WAIT;
    loop {
        if let Some(hit) = coord.all_messages().iter().find_map(|(_, m)| pick(m)) {
            return hit;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}: {:#?}",
            coord.all_messages()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn result_of(coord: &FakeCoordinator, job_id: i64) -> pb::JobResult {
    wait_message(coord, &format!("the result of job {job_id}"), |m| match m {
        Out::Result(r) if r.job_id == job_id => Some(r.clone()),
        Out::Failure(f) if f.job_id == job_id => panic!("job {job_id} failed: {f:?}"),
        _ => None,
    })
    .await
}

#[tokio::test]
async fn a_node_searches_a_mall_through_granted_proxies_and_releases_them() {
    let _serial = common::serial().await;
    let stack = gated_stack(2, Some(1)).await;
    let mut grants = grant_plan(&stack);
    let ports = grants.ports.clone();
    // The ledger grants exit-01 to job 2 again (its job released it), then exit-02.
    grants.ports = vec![ports[0], ports[0], ports[1]];
    let coord = FakeCoordinator::start_with(Behaviour {
        profiles: vec![alpha_profile(&stack.alpha)],
        grants: Some(grants),
        lease_ttl: Duration::from_secs(10),
        ..Behaviour::default()
    })
    .await;
    let (link, inbox) = NodeLink::channel();
    let harness = Harness::build("node", |settings| {
        BrowserExecutor::new(settings)
            .with_proxies(Arc::new(link.clone()))
            .with_events(Arc::new(link))
    });
    let node = Node::new(
        browser_node_config(&coord, "node-browser"),
        harness.executor.clone(),
    )
    .with_link(inbox);
    let handle = node.handle();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(node.run(shutdown.clone()));
    let check = async {
        wait_welcomed(&handle).await;

        // Job 1: a grant for exit-01, one search, found.
        coord.send(0, assign(1, "삼다수 2L x 12", Duration::from_secs(120)));
        let first = result_of(&coord, 1).await;
        assert_eq!(first.outcome, pb::Outcome::Found as i32);
        assert_eq!(first.offers[0].price, 12_900);
        assert_eq!(first.offers[0].effective_price, Some(12_900));
        let metrics = first.metrics.unwrap();
        assert!(
            metrics.bytes_in > 0 && metrics.cost_usd > 0.0,
            "{metrics:?}"
        );
        assert_eq!(metrics.ports_used, 1);

        // The job's end released its port, inside the job.
        let release = wait_message(&coord, "job 1's release", |m| match m {
            Out::ProxyRelease(r) if r.port == ports[0] => Some(r.clone()),
            _ => None,
        })
        .await;
        assert_eq!(release.reason, pb::SessionEndReason::Idle as i32);
        assert_eq!(release.session.unwrap().job_id, 1);

        // A reconnect: the new Hello holds no port (no IP session outlives its job).
        coord.kill(0, tonic::Status::unavailable("coordinator restart"));
        let hello = coord.hello(1).await;
        assert!(hello.held_ports.is_empty(), "{:?}", hello.held_ports);

        // Job 2: exit-01 again, now over what the mall tolerates → block, release, a new
        // grant (exit-02), found.
        tokio::time::timeout(
            Duration::from_secs(10),
            handle.wait_for(|s| s.stream == StreamState::Connected && s.connects == 2),
        )
        .await
        .expect("welcomed again");
        coord.send(1, assign(2, "햇반 210g 12개", Duration::from_secs(120)));
        let second = result_of(&coord, 2).await;
        assert_eq!(second.outcome, pb::Outcome::Found as i32);
        assert_eq!(second.offers[0].price, 13_900);
        let block = wait_message(&coord, "a block event", |m| match m {
            Out::BlockEvent(b) => Some(b.clone()),
            _ => None,
        })
        .await;
        assert_eq!(
            (block.port, block.job_id, block.ip_request_no),
            (ports[0], 2, 1)
        );
        assert_eq!(block.mall, "testmall-alpha");
        assert!(block.headless);
        let release = wait_message(&coord, "the blocked port's release", |m| match m {
            Out::ProxyRelease(r)
                if r.port == ports[0] && r.reason == pb::SessionEndReason::Block as i32 =>
            {
                Some(r.clone())
            }
            _ => None,
        })
        .await;
        let session = release.session.unwrap();
        assert_eq!((session.requests, session.ok, session.blocked), (1, 0, 1));
        let acquires = coord
            .all_messages()
            .iter()
            .filter(|(_, m)| matches!(m, Out::ProxyAcquire(a) if a.mall == "testmall-alpha"))
            .count();
        assert_eq!(acquires, 3);

        // Job 2's end released exit-02 before the node said Goodbye; shutdown had none left.
        drain(&shutdown, run).await;
        let messages = coord.messages(1);
        let released = messages
            .iter()
            .position(|m| matches!(m, Out::ProxyRelease(r) if r.port == ports[1] && r.reason == pb::SessionEndReason::Idle as i32))
            .expect("exit-02 released at job 2's end");
        assert!(
            !messages.iter().any(|m| matches!(m, Out::ProxyRelease(r) if r.reason == pb::SessionEndReason::Shutdown as i32)),
            "no IP session was left for shutdown"
        );
        let goodbye = messages
            .iter()
            .position(|m| matches!(m, Out::Goodbye(_)))
            .expect("goodbye");
        assert!(released < goodbye);
        let stats = stack.alpha.stats();
        assert!(
            !stats.requests.contains_key("direct"),
            "nothing bypassed the proxy"
        );
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}
