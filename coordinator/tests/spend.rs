//! What runs cost, and the hourly spend caps (DESIGN §2 "Spend"), against real PostgreSQL:
//! every attempt's bytes and cost reach `job_attempt` and the hourly cost however the run
//! ended (finished, handed back, stopped after a cancel, reported after its lease was
//! reaped), and a spend cap — deployment-wide or a mall's — stops claims until the rolling
//! hour frees up, visible in the ops snapshot, the metrics, an alert and `lpsctl`.
//!
//! The node is spoken at the protocol level by the test (a raw gRPC stream), so every
//! reported figure is known exactly; counts and sums come from the database.

use std::{net::SocketAddr, time::Duration};

use chrono::{DateTime, TimeDelta, Utc};
use common::{NODE_TOKEN, wait_for_posts, webhook};
use lps_coordinator::{
    db::MIGRATOR,
    queue::{EnqueueContext, MallLimits, Queue, QueueConfig},
    search::Searches,
};
use lps_proto::{
    PROTOCOL_VERSION,
    model::{
        ErrorClass, JobFailure, JobHandBack, JobMetrics, JobResult, MallId, Priority, ProductSpec,
        SearchRequest,
    },
    pb::{
        self, coordinator_message::Body as Out, node_message::Body as In,
        node_service_client::NodeServiceClient,
    },
};
use sqlx::PgPool;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Streaming, transport::Channel};

mod common;

const MALL: &str = "testmall-alpha";

// ---------------------------------------------------------------- a raw node

struct RawNode {
    tx: mpsc::Sender<pb::NodeMessage>,
    rx: Streaming<pb::CoordinatorMessage>,
}

impl RawNode {
    async fn open(addr: SocketAddr, slots: u32) -> (Self, pb::Welcome) {
        let channel = Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let (tx, rx) = mpsc::channel(16);
        let hello = pb::Hello {
            protocol_version: PROTOCOL_VERSION,
            node_id: "n1".into(),
            slots,
            malls: vec![MALL.into()],
            version: "test".into(),
            ..Default::default()
        };
        tx.send(pb::NodeMessage {
            body: Some(In::Hello(hello)),
        })
        .await
        .unwrap();
        let mut request = Request::new(ReceiverStream::new(rx));
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {NODE_TOKEN}").parse().unwrap(),
        );
        let rx = NodeServiceClient::new(channel)
            .connect(request)
            .await
            .unwrap()
            .into_inner();
        let mut node = Self { tx, rx };
        let Out::Welcome(welcome) = node.next().await else {
            panic!("expected welcome")
        };
        (node, welcome)
    }

    /// The next message that is not a heartbeat answer.
    async fn next(&mut self) -> Out {
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(10), self.rx.message())
                .await
                .expect("no message from the coordinator within 10s")
                .expect("stream failed")
                .expect("stream ended");
            match msg.body.expect("empty message") {
                Out::HeartbeatAck(_) => {}
                other => return other,
            }
        }
    }

    async fn send(&self, body: In) {
        self.tx
            .send(pb::NodeMessage { body: Some(body) })
            .await
            .unwrap();
    }

    async fn assigned(&mut self) -> pb::Assign {
        match self.next().await {
            Out::Assign(a) => a,
            other => panic!("expected an assign, got {other:?}"),
        }
    }

    /// Sends `report` and returns the status of its ack.
    async fn report(&mut self, seq: u64, report: In) -> pb::AckStatus {
        self.send(report).await;
        match self.next().await {
            Out::Ack(ack) => {
                assert_eq!(ack.report_seq, seq, "{ack:?}");
                pb::AckStatus::try_from(ack.status).unwrap()
            }
            other => panic!("expected the ack of report {seq}, got {other:?}"),
        }
    }
}

fn spent(bytes: u64, usd: f64) -> Option<pb::JobMetrics> {
    Some(pb::JobMetrics {
        bytes_in: bytes,
        cost_usd: usd,
        ..Default::default()
    })
}

fn search(names: &[&str], mall: &str) -> SearchRequest {
    SearchRequest::new(
        names
            .iter()
            .map(|n| ProductSpec::new(None, n).unwrap())
            .collect(),
        vec![MallId::new(mall).unwrap()],
        Priority::INTERACTIVE,
        None,
        None,
    )
    .unwrap()
}

/// Enqueues `name` on [`MALL`] as a search of its own: (search id, job id).
async fn enqueue(queue: &Queue, name: &str) -> (i64, i64) {
    let accepted = queue
        .enqueue(&search(&[name], MALL), &EnqueueContext::default())
        .await
        .unwrap();
    (accepted.search_id, accepted.items[0].job_id)
}

async fn get(addr: SocketAddr, path: &str) -> String {
    reqwest::get(format!("http://{addr}{path}"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// `/metrics` of `addr` once it contains every one of `want` (the gauges are refreshed by
/// the alert loop), or a panic after 10 s.
async fn metrics_with(addr: SocketAddr, want: &[&str]) -> String {
    for _ in 0..100 {
        let text = get(addr, "/metrics").await;
        if want.iter().all(|w| text.contains(w)) {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let text = get(addr, "/metrics").await;
    panic!("missing some of {want:?} in\n{text}");
}

/// Every attempt's (job, epoch, how it ended, bytes, cost), in job and epoch order.
async fn attempts(pool: &PgPool) -> Vec<(i64, i64, String, i64, f64)> {
    sqlx::query_as(
        "select job_id, lease_epoch, ended::text, bytes, cost_usd from job_attempt
         order by job_id, lease_epoch",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// The spend buckets and the attempts agree: every cost recorded on an attempt is in the
/// ring once.
async fn assert_ring_matches_attempts(pool: &PgPool) {
    let (ring, attempts): (f64, f64) = sqlx::query_as(
        "select (select coalesce(sum(cost_usd), 0) from spend_minute),
                (select coalesce(sum(cost_usd), 0) from job_attempt)",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert!(
        (ring - attempts).abs() < 1e-12,
        "spend_minute holds {ring} USD, job_attempt {attempts}"
    );
}

/// The coordinator flags of these tests and `extra`: a quiet raw node is not taken for a
/// silent one (30 s silence timeout) and the metrics are refreshed quickly.
fn flags<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut flags = vec![
        "--heartbeat-interval",
        "10s",
        "--lease-ttl",
        "90s",
        "--alert-interval",
        "200ms",
        "--alert-for",
        "0s",
        "--alert-resolve-after",
        "0s",
        "--shutdown-timeout",
        "3s",
    ];
    flags.extend_from_slice(extra);
    flags
}

// ---------------------------------------------------------------- every attempt is counted

/// A finished run, a handed-back one, one stopped after its search was cancelled and one
/// reported after its lease was reaped: each one's bytes and cost are on its attempt, and the
/// hourly cost (ops snapshot, `/ops`, the metrics gauge) is their sum. Resending any of the
/// reports adds nothing; the stale report changes nothing of its job.
#[sqlx::test(migrator = "MIGRATOR")]
async fn every_attempt_s_bytes_and_cost_are_in_the_hourly_cost(pool: PgPool) {
    let running = common::start_with_mall(&pool, MALL, &flags(&[])).await;
    let queue = &running.queue;
    let (_, done) = enqueue(queue, "finished").await;
    let (back_search, back) = enqueue(queue, "handed back").await;
    let (cancelled_search, stopped) = enqueue(queue, "cancelled").await;
    let (_, reaped) = enqueue(queue, "reaped").await;

    let (mut node, welcome) = RawNode::open(running.grpc_addr, 4).await;
    assert!(welcome.stopped_reports, "this coordinator takes JobStopped");
    let mut epoch = std::collections::HashMap::new();
    for _ in 0..4 {
        let a = node.assigned().await;
        epoch.insert(a.job_id, a.lease_epoch);
    }
    // Exact binary fractions, so that the sums compare exactly.
    let (done_usd, back_usd, stopped_usd, reaped_usd) = (0.125, 0.25, 0.5, 0.0625);

    // Finished.
    let result = In::Result(pb::JobResult {
        report_seq: 1,
        job_id: done,
        lease_epoch: epoch[&done],
        outcome: pb::Outcome::NotFound as i32,
        metrics: spent(1_000, done_usd),
        ..Default::default()
    });
    assert_eq!(node.report(1, result).await, pb::AckStatus::Applied);
    // No more work for this node: the handed-back job stays queued.
    node.send(In::Credit(pb::Credit { free_slots: 0 })).await;

    // Handed back, with what the run spent until then.
    let hand_back = || {
        In::HandBack(pb::JobHandBack {
            report_seq: 2,
            job_id: back,
            lease_epoch: epoch[&back],
            reason: "draining".into(),
            metrics: spent(2_000, back_usd),
            not_before: None,
        })
    };
    assert_eq!(node.report(2, hand_back()).await, pb::AckStatus::Applied);
    // Queued again; cancelled, so that the slot a later report frees stays empty.
    let searches = Searches::new(queue.clone());
    searches.cancel(back_search, None).await.unwrap();

    // Cancelled: the coordinator tells the node to stop, the node reports what it spent.
    searches.cancel(cancelled_search, None).await.unwrap();
    match node.next().await {
        Out::Cancel(c) => assert_eq!((c.job_id, c.lease_epoch), (stopped, epoch[&stopped])),
        other => panic!("expected the cancel, got {other:?}"),
    }
    let stop = || {
        In::Stopped(pb::JobStopped {
            report_seq: 3,
            job_id: stopped,
            lease_epoch: epoch[&stopped],
            reason: "search cancelled".into(),
            metrics: spent(3_000, stopped_usd),
        })
    };
    assert_eq!(node.report(3, stop()).await, pb::AckStatus::Applied);

    // Reaped (its lease ran out, as seen two minutes from now: before its deadline), then
    // its failure arrives: stale, but the money was spent.
    let later = queue.at(Utc::now() + TimeDelta::minutes(2));
    let reaped_now = later.reap().await.unwrap();
    assert_eq!(
        reaped_now.iter().map(|r| r.job_id).collect::<Vec<_>>(),
        [reaped]
    );
    let late_failure = || {
        In::Failure(pb::JobFailure {
            report_seq: 4,
            job_id: reaped,
            lease_epoch: epoch[&reaped],
            class: pb::ErrorClass::Network as i32,
            message: "too late".into(),
            metrics: spent(4_000, reaped_usd),
            evidence: None,
        })
    };
    assert_eq!(node.report(4, late_failure()).await, pb::AckStatus::Stale);

    // Resends (after a lost ack) record nothing twice.
    assert_eq!(node.report(2, hand_back()).await, pb::AckStatus::Stale);
    assert_eq!(node.report(3, stop()).await, pb::AckStatus::Applied);
    assert_eq!(node.report(4, late_failure()).await, pb::AckStatus::Stale);

    let mut want = vec![
        (done, 1, "done".to_owned(), 1_000, done_usd),
        (back, 1, "handed_back".to_owned(), 2_000, back_usd),
        (stopped, 1, "cancelled".to_owned(), 3_000, stopped_usd),
        (reaped, 1, "lease_expired".to_owned(), 4_000, reaped_usd),
    ];
    want.sort_by_key(|a| a.0);
    assert_eq!(attempts(&pool).await, want);
    // The stale report left its job as the reaper left it.
    let (state, attempts_n, job_cost): (String, i16, f64) =
        sqlx::query_as("select state::text, attempts, cost_usd from job where job_id = $1")
            .bind(reaped)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((state.as_str(), attempts_n, job_cost), ("queued", 1, 0.0));

    let total = done_usd + back_usd + stopped_usd + reaped_usd;
    let ops = queue.ops().await.unwrap();
    assert_eq!(ops.cost_usd_last_hour, total, "{ops:?}");
    let alpha = ops.malls.iter().find(|m| m.mall == MALL).unwrap();
    assert_eq!(alpha.spend_usd_last_hour, total);
    assert!(!ops.spend_capped && !alpha.spend_capped);
    assert_ring_matches_attempts(&pool).await;
    let http: serde_json::Value =
        serde_json::from_str(&get(running.http_addr, "/ops").await).unwrap();
    assert_eq!(http["queue"]["cost_usd_last_hour"], total, "{http}");
    metrics_with(
        running.http_addr,
        &[&format!("lps_cost_usd_last_hour {total}")],
    )
    .await;
    running.shutdown().await;
}

/// A real crawler node (the scripted executor, pricing its bytes at the coordinator's
/// `LPS_PROXY_USD_PER_GB` like a browser run): a run killed at its hard deadline and one
/// stopped because its search was cancelled both have what they moved, priced, on their
/// attempts, and in the hourly cost.
#[sqlx::test(migrator = "MIGRATOR")]
async fn a_real_node_reports_what_killed_and_cancelled_runs_spent(pool: PgPool) {
    use lps_crawler_node::{config::Config as NodeConfig, executor::ScriptedExecutor, node::Node};

    let running = common::start_with_mall(&pool, MALL, &flags(&["--job-deadline", "2s"])).await;
    let (_, killed) = enqueue(&running.queue, "progress hang").await;
    let (cancelled_search, cancelled) = enqueue(&running.queue, "progress sleep:60000").await;
    let mut config = NodeConfig::new(format!("http://{}", running.grpc_addr), NODE_TOKEN);
    config.node_id = "real-1".into();
    config.slots = 2;
    let stop = tokio_util::sync::CancellationToken::new();
    let node = tokio::spawn(Node::new(config, ScriptedExecutor::new()).run(stop.clone()));

    // Both run; the second is cancelled once its `progress` step has moved its bytes.
    let running_jobs = || async {
        sqlx::query_scalar::<_, i64>("select count(*) from job where state = 'running'")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    for _ in 0..100 {
        if running_jobs().await == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(running_jobs().await, 2);
    tokio::time::sleep(Duration::from_millis(500)).await;
    Searches::new(running.queue.clone())
        .cancel(cancelled_search, None)
        .await
        .unwrap();

    // 30,000 bytes at the default 8 USD per GB, each.
    let per_run = 30_000.0 * 8.0 / 1e9;
    let priced = |job_id: i64| {
        let pool = pool.clone();
        async move {
            sqlx::query_as::<_, (String, i64, f64)>(
                "select ended::text, bytes, cost_usd from job_attempt
                 where job_id = $1 and lease_epoch = 1",
            )
            .bind(job_id)
            .fetch_optional(&pool)
            .await
            .unwrap()
            .filter(|(_, _, usd)| *usd > 0.0)
        }
    };
    let mut seen = (None, None);
    for _ in 0..100 {
        seen = (priced(killed).await, priced(cancelled).await);
        if seen.0.is_some() && seen.1.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (Some(killed_attempt), Some(cancelled_attempt)) = seen else {
        panic!("not both priced: {seen:?}");
    };
    // Killed at the deadline by the node (a failure) or, first, by the reaper: priced anyway.
    assert!(
        ["failed", "deadline"].contains(&killed_attempt.0.as_str()),
        "{killed_attempt:?}"
    );
    assert_eq!(cancelled_attempt.0, "cancelled");
    for (_, bytes, usd) in [&killed_attempt, &cancelled_attempt] {
        assert_eq!(*bytes, 30_000);
        assert!((usd - per_run).abs() < 1e-12, "{usd}");
    }
    let ops = running.queue.ops().await.unwrap();
    let attempts_total: f64 = sqlx::query_scalar("select sum(cost_usd) from job_attempt")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(ops.cost_usd_last_hour >= 2.0 * per_run - 1e-12, "{ops:?}");
    assert!((ops.cost_usd_last_hour - attempts_total).abs() < 1e-12);
    stop.cancel();
    let _ = node.await;
    running.shutdown().await;
}

// ---------------------------------------------------------------- the caps

/// A queue with the deployment-wide cap `cap` and `mall` registered (with a concurrency cap,
/// so that `claim.sql` claims for it, when `limited`; else `claim_unlimited.sql` does).
async fn capped_queue(
    pool: &PgPool,
    cap: Option<f64>,
    malls: &[(&str, bool, Option<f64>)],
) -> Queue {
    let queue = Queue::new(
        pool.clone(),
        QueueConfig {
            spend_cap_hourly_usd: cap,
            ..QueueConfig::default()
        },
    );
    for &(mall, limited, mall_cap) in malls {
        queue
            .upsert_mall(&MallLimits {
                max_running: limited.then_some(100),
                spend_cap_hourly_usd: mall_cap,
                ..MallLimits::unlimited(MallId::new(mall).unwrap())
            })
            .await
            .unwrap();
    }
    queue
}

async fn enqueue_on(queue: &Queue, mall: &str, names: &[&str]) -> Vec<i64> {
    queue
        .enqueue(&search(names, mall), &EnqueueContext::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|i| i.job_id)
        .collect()
}

/// The search a job was enqueued for (each of these tests' jobs has one).
async fn search_of(pool: &PgPool, job_id: i64) -> i64 {
    sqlx::query_scalar("select search_id from search_item where job_id = $1")
        .bind(job_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// (state, attempts, lease_epoch) of a job, from the database.
async fn job_row(pool: &PgPool, job_id: i64) -> (String, i16, i64) {
    sqlx::query_as("select state::text, attempts, lease_epoch from job where job_id = $1")
        .bind(job_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

fn costing(usd: f64) -> JobMetrics {
    JobMetrics {
        bytes_in: 10_000,
        cost_usd: usd,
        ..JobMetrics::default()
    }
}

/// A fixed moment in the middle of a minute (so that "59 minutes later" is still in the
/// window of its minute's bucket).
fn noon() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2030-05-01T12:00:30Z")
        .unwrap()
        .with_timezone(&Utc)
}

/// With the deployment-wide cap at 1 USD: a hand-back's and a completion's spend reach it,
/// and then nothing is claimed — not by the completion's own claim of the next job, not by a
/// plain claim — until the rolling hour has freed up; the waiting jobs stay queued, never
/// claimed, nothing charged. Through both claim statements.
#[sqlx::test(migrator = "MIGRATOR")]
async fn a_deployment_spend_cap_stops_claims_until_the_hour_frees_up(pool: PgPool) {
    for (round, limited) in [(0, false), (1, true)] {
        let mall = if limited {
            "capped-limited"
        } else {
            "capped-open"
        };
        // Each round three hours after the last, so that its spend is out of the window.
        let t0 = noon() + TimeDelta::hours(3 * round);
        let queue = capped_queue(&pool, Some(1.0), &[(mall, limited, None)]).await;
        let at = |minutes: i64| queue.at(t0 + TimeDelta::minutes(minutes));
        let jobs = enqueue_on(&at(0), mall, &["a", "b", "c"]).await;
        let claimed = at(0).claim("n1", None, 2).await.unwrap();
        assert_eq!(claimed.len(), 2, "round {round}");
        let (first, second) = (claimed[0].lease, claimed[1].lease);

        // A hand-back spends 0.25 (the job goes back to the queue), a completion 0.75: the
        // cap is reached, and the completion's claim of the next two jobs claims none.
        at(0)
            .hand_back_reported("n1", &JobHandBack::new(first, "draining", costing(0.25)))
            .await
            .unwrap();
        let mut result = JobResult::not_found(second);
        result.metrics = costing(0.75);
        let next = at(0)
            .complete_and_claim("n1", &[result], None, 2)
            .await
            .unwrap();
        assert_eq!(next.applied, [(second, true)], "round {round}");
        assert!(
            next.claimed.is_empty(),
            "round {round}: claimed over the cap"
        );
        let ops = at(0).ops().await.unwrap();
        assert_eq!(ops.cost_usd_last_hour, 1.0, "round {round}");
        assert!(ops.spend_capped, "round {round}: {ops:?}");

        // 59 minutes on, the spend is still in the window: nothing.
        assert!(
            at(59).claim("n2", None, 5).await.unwrap().is_empty(),
            "round {round}"
        );
        let untouched = jobs
            .iter()
            .copied()
            .find(|j| *j != first.job_id && *j != second.job_id)
            .unwrap();
        assert_eq!(
            job_row(&pool, untouched).await,
            ("queued".to_owned(), 0, 0),
            "round {round}: a capped job stays queued, never claimed"
        );
        assert_eq!(
            job_row(&pool, first.job_id).await,
            ("queued".to_owned(), 0, 1),
            "round {round}: the handed-back job waits, uncharged"
        );

        // The hour frees up: claims resume, the cap is no longer reached.
        let resumed = at(61).claim("n2", None, 5).await.unwrap();
        let mut ids: Vec<i64> = resumed.iter().map(|j| j.lease.job_id).collect();
        ids.sort_unstable();
        let mut want = vec![first.job_id, untouched];
        want.sort_unstable();
        assert_eq!(ids, want, "round {round}");
        let ops = at(61).ops().await.unwrap();
        assert_eq!(ops.cost_usd_last_hour, 0.0, "round {round}");
        assert!(!ops.spend_capped, "round {round}");
        // Nothing of this round is left running into the next.
        at(62)
            .cancel_search(search_of(&pool, jobs[0]).await, None)
            .await
            .unwrap();
    }
    assert_ring_matches_attempts(&pool).await;
}

/// A mall's own cap stops only that mall's claims; a report that came after its lease was
/// reaped counts towards it (a retry loop's spend is seen). Through both claim statements.
#[sqlx::test(migrator = "MIGRATOR")]
async fn a_mall_spend_cap_stops_only_that_mall_and_counts_stale_reports(pool: PgPool) {
    for (round, limited) in [(0, false), (1, true)] {
        let (capped, open) = if limited {
            ("capped-limited", "open-limited")
        } else {
            ("capped-open", "open-open")
        };
        let t0 = noon() + TimeDelta::hours(3 * round);
        let queue = capped_queue(
            &pool,
            None,
            &[(capped, limited, Some(0.5)), (open, limited, None)],
        )
        .await;
        let at = |minutes: i64| queue.at(t0 + TimeDelta::minutes(minutes));
        let capped_jobs = enqueue_on(&at(0), capped, &["x", "y"]).await;
        let open_jobs = enqueue_on(&at(0), open, &["x", "y"]).await;
        let mall = |m: &str| vec![MallId::new(m).unwrap()];

        let lost = at(0).claim("n1", Some(&mall(capped)), 1).await.unwrap()[0].lease;
        // The lease runs out; the reaper ends it (an attempt, retried after a backoff).
        let reaped = at(10).reap().await.unwrap();
        assert_eq!(
            reaped.iter().map(|r| r.job_id).collect::<Vec<_>>(),
            [lost.job_id],
            "round {round}"
        );
        // The node's failure comes late: stale, changes nothing, but its spend counts.
        let mut late = JobFailure::new(lost, ErrorClass::Network, "late");
        late.metrics = costing(0.5);
        assert!(matches!(
            at(10).fail_if_leased("n1", &late).await,
            Err(lps_coordinator::queue::Error::LeaseLost(_))
        ));

        // The capped mall claims nothing (its jobs wait queued); the other one still claims.
        assert!(
            at(11)
                .claim("n1", Some(&mall(capped)), 2)
                .await
                .unwrap()
                .is_empty(),
            "round {round}"
        );
        let other = at(11).claim("n1", None, 5).await.unwrap();
        assert!(!other.is_empty(), "round {round}");
        assert!(
            other.iter().all(|j| j.mall.as_str() == open),
            "round {round}: {other:?}"
        );
        assert_eq!(other.len(), open_jobs.len(), "round {round}");
        assert_eq!(
            job_row(&pool, capped_jobs[1]).await,
            ("queued".to_owned(), 0, 0),
            "round {round}"
        );
        let ops = at(11).ops().await.unwrap();
        let figures = |name: &str| {
            let m = ops.malls.iter().find(|m| m.mall == name).unwrap();
            (
                m.spend_usd_last_hour,
                m.spend_cap_hourly_usd,
                m.spend_capped,
            )
        };
        assert_eq!(figures(capped), (0.5, Some(0.5), true), "round {round}");
        assert_eq!(figures(open), (0.0, None, false), "round {round}");
        assert!(!ops.spend_capped, "no deployment cap");

        // An hour after the stale report was recorded the mall claims again: both its jobs.
        let resumed = at(71).claim("n1", Some(&mall(capped)), 5).await.unwrap();
        assert_eq!(resumed.len(), 2, "round {round}");
        for job in [capped_jobs[0], open_jobs[0]] {
            at(72)
                .cancel_search(search_of(&pool, job).await, None)
                .await
                .unwrap();
        }
    }
    assert_ring_matches_attempts(&pool).await;
}

// ---------------------------------------------------------------- visible where operators look

/// A mall whose profile caps it at 0.25 USD an hour, under a deployment cap of 1 USD: one
/// result costing 0.25 stops the mall's claims (the node with a free slot gets no second
/// job), and the ops snapshot (gRPC, `lpsctl`), `/metrics` and a `spend_cap_reached` alert
/// all say so.
#[sqlx::test(migrator = "MIGRATOR")]
async fn a_reached_cap_shows_in_ops_metrics_alerts_and_what_lpsctl_prints(pool: PgPool) {
    let profiles = common::TempDir::new("spend-profiles");
    let alpha = lps_profiles::format::builtin_text("testmall-alpha.toml")
        .unwrap()
        .replace(
            "max_running = 8",
            "max_running = 8\nspend_cap_hourly_usd = 0.25",
        );
    assert!(
        alpha.contains("spend_cap_hourly_usd"),
        "the profile has a cap"
    );
    std::fs::write(profiles.0.join("testmall-alpha.toml"), alpha).unwrap();
    let (hook, posts) = webhook().await;
    let hook = format!("http://{hook}/hook");
    let dir = profiles.0.display().to_string();
    let running = common::start(
        &pool,
        &flags(&[
            "--profiles-dir",
            &dir,
            "--malls",
            MALL,
            "--spend-cap-hourly-usd",
            "1",
            "--alert-webhook-url",
            &hook,
        ]),
    )
    .await;
    let cap: Option<f64> =
        sqlx::query_scalar("select spend_cap_hourly_usd from mall where mall_id = $1")
            .bind(MALL)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(cap, Some(0.25), "the profile's cap is the mall's");

    let (_, first) = enqueue(&running.queue, "first").await;
    let (_, second) = enqueue(&running.queue, "second").await;
    let (mut node, _) = RawNode::open(running.grpc_addr, 1).await;
    let a = node.assigned().await;
    assert_eq!(a.job_id, first);
    let result = In::Result(pb::JobResult {
        report_seq: 1,
        job_id: first,
        lease_epoch: a.lease_epoch,
        outcome: pb::Outcome::NotFound as i32,
        metrics: spent(50_000, 0.25),
        ..Default::default()
    });
    assert_eq!(node.report(1, result).await, pb::AckStatus::Applied);
    // The slot is free and announced, a job is queued: still nothing is assigned.
    node.send(In::Credit(pb::Credit { free_slots: 1 })).await;
    let fired = wait_for_posts(&posts, 1, |p| p.contains("spend_cap_reached")).await;
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert!(
        fired[0].contains("spend_cap_reached firing")
            && fired[0].contains("testmall-alpha: 0.25 of 0.25 USD in 1h, claims stopped"),
        "{fired:?}"
    );
    assert_eq!(
        job_row(&pool, second).await,
        ("queued".to_owned(), 0, 0),
        "a capped mall's job stays queued"
    );
    let unasked = tokio::time::timeout(Duration::from_millis(300), node.next()).await;
    assert!(unasked.is_err(), "assigned over the cap: {unasked:?}");

    let metrics = metrics_with(
        running.http_addr,
        &[
            "lps_mall_spend_capped{mall=\"testmall-alpha\"} 1",
            "lps_mall_spend_usd_last_hour{mall=\"testmall-alpha\"} 0.25",
            "lps_mall_spend_cap_hourly_usd{mall=\"testmall-alpha\"} 0.25",
            "lps_spend_cap_hourly_usd 1.0",
            "lps_alert_firing{rule=\"spend_cap_reached\"} 1",
        ],
    )
    .await;
    assert!(metrics.contains("lps_spend_capped 0"), "{metrics}");

    let snapshot = common::ops_snapshot(&running).await;
    let text = lps_cli::text::ops(&snapshot);
    assert!(
        text.contains("cost in 1h:                  0.2500 USD (cap 1.00 USD/h)"),
        "{text}"
    );
    assert!(
        text.contains(
            "spend caps reached:          testmall-alpha (no claims until the hour frees up)"
        ),
        "{text}"
    );
    let json = lps_cli::json::ops(&snapshot);
    let alpha = json["malls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mall"] == MALL)
        .unwrap();
    assert_eq!(alpha["spend_capped"], true, "{json}");
    assert_eq!(alpha["spend_usd_last_hour"], 0.25, "{json}");
    assert_eq!(json["spend_cap_hourly_usd"], 1.0, "{json}");
    assert_eq!(json["spend_capped"], false, "{json}");
    running.shutdown().await;
}

/// The estimated figures of every attempt: (job, epoch, ended, bytes, cost, estimated).
async fn estimates(pool: &PgPool) -> Vec<(i64, i64, String, i64, f64, bool)> {
    sqlx::query_as(
        "select job_id, lease_epoch, ended::text, bytes, cost_usd, estimated from job_attempt
         order by job_id, lease_epoch",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// A node killed mid-run (`kill -9`) reports nothing, yet its runs spent: each is charged
/// the bytes its last heartbeat reported, at LPS_PROXY_USD_PER_GB, marked estimated — on
/// the reclaim after the grace and on the reaper's expired lease alike — and the spend
/// caps see it. A report that arrives after all raises the figures and clears the mark.
#[sqlx::test(migrator = "MIGRATOR")]
async fn a_vanished_nodes_runs_are_charged_their_last_heartbeat_estimated(pool: PgPool) {
    let queue = Queue::new(
        pool.clone(),
        QueueConfig {
            proxy_usd_per_gb: 10.0,
            ..QueueConfig::default()
        },
    );
    queue
        .upsert_mall(&MallLimits::unlimited(MallId::new(MALL).unwrap()))
        .await
        .unwrap();
    let (_, first) = enqueue(&queue, "첫째").await;
    let (_, second) = enqueue(&queue, "둘째").await;
    let running = queue.claim("node-1", None, 2).await.unwrap();
    assert_eq!(running.len(), 2);
    let lease = |job: i64| {
        running
            .iter()
            .find(|c| c.lease.job_id == job)
            .unwrap()
            .lease
    };
    // Two heartbeats; the last one's figures count.
    for (a, b) in [(1_000_000, 100_000), (2_000_000, 500_000)] {
        let renewed = queue
            .renew_reporting(
                "node-1",
                &[(lease(first), Some(a)), (lease(second), Some(b))],
            )
            .await
            .unwrap();
        assert_eq!(renewed.len(), 2);
    }
    // The node is gone past its grace: both runs are reclaimed and charged.
    let released = queue.release_node("node-1", &[]).await.unwrap();
    assert_eq!(released.len(), 2);
    assert_eq!(
        estimates(&pool).await,
        [
            (first, 1, "reclaimed".into(), 2_000_000, 0.02, true),
            (second, 1, "reclaimed".into(), 500_000, 0.005, true),
        ]
    );
    assert_ring_matches_attempts(&pool).await;

    // Another node runs the first job; its lease expires with 1 MB reported: reaped and
    // charged the same way.
    let again = queue.claim("node-2", None, 1).await.unwrap();
    let again = again
        .iter()
        .find(|c| c.lease.job_id == first)
        .unwrap()
        .lease;
    queue
        .renew_reporting("node-2", &[(again, Some(1_000_000))])
        .await
        .unwrap();
    let later = Utc::now() + TimeDelta::minutes(1);
    let reaped = queue.at(later).reap().await.unwrap();
    assert!(reaped.iter().any(|r| r.job_id == first), "{reaped:?}");
    let rows = estimates(&pool).await;
    assert!(
        rows.contains(&(first, 2, "lease_expired".into(), 1_000_000, 0.01, true)),
        "{rows:?}"
    );
    assert_ring_matches_attempts(&pool).await;

    // node-1 comes back and its outbox resends what the first run really spent: the
    // report replaces the estimate.
    let spent = queue
        .record_spend(
            "node-1",
            lease(first),
            &JobMetrics {
                bytes_in: 3_000_000,
                cost_usd: 0.03,
                ..JobMetrics::default()
            },
        )
        .await
        .unwrap();
    assert!(spent.matched);
    let rows = estimates(&pool).await;
    assert_eq!(
        rows[0],
        (first, 1, "reclaimed".into(), 3_000_000, 0.03, false)
    );
    assert_ring_matches_attempts(&pool).await;
}
