//! NodeService against the real coordinator (127.0.0.1:0, real PostgreSQL), spoken at the
//! protocol level by the test itself: auth and version checks, Hello → Welcome, NOTIFY-driven
//! assignment, fenced reports and acks, and the grace period of a lost stream.

use std::time::Duration;

use lps_coordinator::{app::Running, queue::EnqueueContext};
use lps_proto::{
    PROTOCOL_VERSION,
    model::{MallId, Priority, ProductSpec, SearchRequest},
    pb::{
        self, coordinator_message::Body as Out, node_message::Body as In,
        node_service_client::NodeServiceClient, search_service_client::SearchServiceClient,
    },
};
use sqlx::PgPool;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Streaming, transport::Channel};

mod common;

use common::{CLIENT_TOKEN, NODE_TOKEN};

const MALL: &str = "testmall-alpha";

async fn coordinator(pool: &PgPool, grace: &str) -> Running {
    // NB: the shortest lease the grace allows (5 heartbeats + grace + a reaper pass), plus
    // a second: a node that went silent has its jobs reclaimed before the lease runs out.
    let ttl = humantime::parse_duration(grace).unwrap() + Duration::from_secs(3);
    let ttl = format!("{}ms", ttl.as_millis());
    let flags = [
        "--heartbeat-interval",
        "200ms",
        "--lease-ttl",
        &ttl,
        "--node-grace",
        grace,
        "--shutdown-timeout",
        "3s",
    ];
    common::start_with_mall(pool, MALL, &flags).await
}

struct RawNode {
    tx: mpsc::Sender<pb::NodeMessage>,
    rx: Streaming<pb::CoordinatorMessage>,
}

async fn channel(addr: std::net::SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

async fn open(
    addr: std::net::SocketAddr,
    token: &str,
    hello: pb::Hello,
) -> Result<RawNode, tonic::Status> {
    let mut client = NodeServiceClient::new(channel(addr).await);
    let (tx, rx) = mpsc::channel(16);
    tx.send(pb::NodeMessage {
        body: Some(In::Hello(hello)),
    })
    .await
    .unwrap();
    let mut request = Request::new(ReceiverStream::new(rx));
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let rx = client.connect(request).await?.into_inner();
    Ok(RawNode { tx, rx })
}

fn hello(node_id: &str, running: Vec<pb::HeldJob>) -> pb::Hello {
    pb::Hello {
        protocol_version: PROTOCOL_VERSION,
        node_id: node_id.into(),
        slots: 1,
        malls: vec![MALL.into()],
        version: "test".into(),
        running,
        held_ports: vec![],
        instance: String::new(),
    }
}

impl RawNode {
    async fn next(&mut self) -> Out {
        let msg = tokio::time::timeout(Duration::from_secs(10), self.rx.message())
            .await
            .expect("no message from the coordinator within 10s")
            .expect("stream failed")
            .expect("stream ended");
        msg.body.expect("empty message")
    }

    /// The next message that is not a heartbeat answer.
    async fn next_event(&mut self) -> Out {
        loop {
            match self.next().await {
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
}

async fn enqueue(running: &Running, name: &str) -> i64 {
    let req = SearchRequest::new(
        vec![ProductSpec::new(None, name).unwrap()],
        vec![MallId::new(MALL).unwrap()],
        Priority::INTERACTIVE,
        None,
        None,
    )
    .unwrap();
    let ctx = EnqueueContext {
        client: common::CLIENT_NAME.into(),
        ..EnqueueContext::default()
    };
    running.queue.enqueue(&req, &ctx).await.unwrap().items[0].job_id
}

fn not_found(seq: u64, job_id: i64, lease_epoch: i64) -> In {
    In::Result(pb::JobResult {
        report_seq: seq,
        job_id,
        lease_epoch,
        outcome: pb::Outcome::NotFound as i32,
        ..Default::default()
    })
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn bad_token_and_wrong_protocol_version_are_rejected(pool: PgPool) {
    let running = coordinator(&pool, "15s").await;
    let err = open(
        running.grpc_addr,
        "wrong-token-000000000000",
        hello("n1", vec![]),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(err.code(), Code::Unauthenticated, "{err}");
    let err = open(running.grpc_addr, CLIENT_TOKEN, hello("n1", vec![]))
        .await
        .err()
        .unwrap();
    assert_eq!(
        err.code(),
        Code::Unauthenticated,
        "a client token must not open a node stream"
    );
    let mut old = hello("n1", vec![]);
    old.protocol_version = 7;
    let err = open(running.grpc_addr, NODE_TOKEN, old)
        .await
        .err()
        .unwrap();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.message().contains("protocol_version 7"),
        "{}",
        err.message()
    );
    let mut bad = hello("n1", vec![]);
    bad.slots = 0;
    let err = open(running.grpc_addr, NODE_TOKEN, bad)
        .await
        .err()
        .unwrap();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("hello.slots"), "{}", err.message());
    running.shutdown().await;
}

/// Every frame goes through its model type: an invalid report is acked REJECTED naming
/// the field and the stream goes on; an invalid Credit or Heartbeat (no ack to carry the
/// error) ends the stream with INVALID_ARGUMENT naming the field, like an invalid Hello.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn invalid_frames_are_refused_naming_the_field(pool: PgPool) {
    let running = coordinator(&pool, "15s").await;
    let cases = [
        (
            In::Credit(pb::Credit { free_slots: 65 }),
            "credit.free_slots",
        ),
        (
            In::Heartbeat(pb::Heartbeat {
                running: vec![pb::JobProgress {
                    job_id: 0,
                    lease_epoch: 1,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            "heartbeat.running[0].job_id",
        ),
    ];
    for (frame, field) in cases {
        let mut node = open(running.grpc_addr, NODE_TOKEN, hello("n1", vec![]))
            .await
            .unwrap();
        let Out::Welcome(_) = node.next().await else {
            panic!("expected welcome")
        };
        // A report that does not validate is rejected in-band; the stream stays.
        node.send(not_found(7, 0, 1)).await;
        let Out::Ack(ack) = node.next().await else {
            panic!("expected an ack")
        };
        assert_eq!(
            (ack.report_seq, ack.status),
            (7, pb::AckStatus::Rejected as i32)
        );
        assert!(ack.error.contains("job_id"), "{}", ack.error);
        node.send(frame).await;
        let err = tokio::time::timeout(Duration::from_secs(10), node.rx.message())
            .await
            .expect("no answer within 10s")
            .expect_err("the stream must end");
        assert_eq!(err.code(), Code::InvalidArgument, "{err}");
        assert!(err.message().contains(field), "{}", err.message());
    }
    running.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn idle_node_gets_new_job_and_result_is_acked_after_commit(pool: PgPool) {
    let running = coordinator(&pool, "15s").await;
    let mut node = open(running.grpc_addr, NODE_TOKEN, hello("n1", vec![]))
        .await
        .unwrap();
    let Out::Welcome(welcome) = node.next().await else {
        panic!("expected welcome")
    };
    assert_eq!(welcome.protocol_version, PROTOCOL_VERSION);
    node.send(In::Credit(pb::Credit { free_slots: 1 })).await;
    tokio::time::sleep(Duration::from_millis(100)).await;

    // Enqueued after the node went idle: NOTIFY must bring it without waiting for the poll.
    let started = std::time::Instant::now();
    let job_id = enqueue(&running, "삼다수 2L x 12").await;
    let Out::Assign(assign) = node.next_event().await else {
        panic!("expected assign")
    };
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "pickup took {:?}",
        started.elapsed()
    );
    assert_eq!((assign.job_id, assign.lease_epoch), (job_id, 1));
    assert_eq!(
        assign.payload.unwrap().product.unwrap().name,
        "삼다수 2L x 12"
    );

    // One slot: a second job is not assigned while the first runs.
    let second = enqueue(&running, "second").await;
    node.send(In::Heartbeat(pb::Heartbeat {
        running: vec![pb::JobProgress {
            job_id,
            lease_epoch: 1,
            ..Default::default()
        }],
        free_slots: 0,
        ..Default::default()
    }))
    .await;
    let Out::HeartbeatAck(ack) = node.next().await else {
        panic!("expected heartbeat ack")
    };
    assert_eq!(ack.extended.len(), 1);
    assert!(ack.cancel.is_empty());

    node.send(not_found(1, job_id, 1)).await;
    let Out::Ack(ack) = node.next_event().await else {
        panic!("expected ack")
    };
    assert_eq!(
        (ack.report_seq, ack.status),
        (1, pb::AckStatus::Applied as i32)
    );
    let state: String = sqlx::query_scalar("select state::text from job where job_id = $1")
        .bind(job_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(state, "done", "acked before the commit was visible");
    // The slot is free again: the second job follows.
    node.send(In::Credit(pb::Credit { free_slots: 1 })).await;
    let Out::Assign(next) = node.next_event().await else {
        panic!("expected the second assign")
    };
    assert_eq!(next.job_id, second);
    // A resend of the first report is acked stale and changes nothing.
    node.send(not_found(1, job_id, 1)).await;
    let Out::Ack(ack) = node.next_event().await else {
        panic!("expected ack")
    };
    assert_eq!(ack.status, pb::AckStatus::Stale as i32);
    running.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn lost_stream_keeps_jobs_for_the_grace_period_then_releases_them(pool: PgPool) {
    let running = coordinator(&pool, "1s").await;
    let job_id = enqueue(&running, "grace").await;
    let mut node = open(running.grpc_addr, NODE_TOKEN, hello("n1", vec![]))
        .await
        .unwrap();
    let Out::Welcome(_) = node.next().await else {
        panic!("expected welcome")
    };
    node.send(In::Credit(pb::Credit { free_slots: 1 })).await;
    let Out::Assign(assign) = node.next_event().await else {
        panic!("expected assign")
    };
    assert_eq!(assign.job_id, job_id);
    drop(node); // the stream breaks without Goodbye

    // Reconnecting within the grace period re-attaches the job.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let held = vec![pb::HeldJob {
        job_id,
        lease_epoch: 1,
    }];
    let mut node = open(running.grpc_addr, NODE_TOKEN, hello("n1", held))
        .await
        .unwrap();
    let Out::Welcome(welcome) = node.next().await else {
        panic!("expected welcome")
    };
    assert_eq!(welcome.reattached.len(), 1, "{welcome:?}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let state: String = sqlx::query_scalar("select state::text from job where job_id = $1")
        .bind(job_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        state, "running",
        "a re-attached job was released by the old stream's grace timer"
    );
    drop(node);

    // This time nobody comes back: after the grace period the job is queued again as a
    // reclaim, and a node that lists it later is told it lost it.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let (state, reclaims, attempts): (String, i16, i16) =
        sqlx::query_as("select state::text, reclaims, attempts from job where job_id = $1")
            .bind(job_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((state.as_str(), reclaims, attempts), ("queued", 1, 0));
    let mut late = hello(
        "n1",
        vec![pb::HeldJob {
            job_id,
            lease_epoch: 1,
        }],
    );
    late.malls = vec!["another-mall".into()]; // so it is not simply assigned the job again
    let mut node = open(running.grpc_addr, NODE_TOKEN, late).await.unwrap();
    let Out::Welcome(welcome) = node.next().await else {
        panic!("expected welcome")
    };
    assert_eq!(welcome.lost, vec![job_id]);
    node.send(not_found(9, job_id, 1)).await;
    let Out::Ack(ack) = node.next_event().await else {
        panic!("expected ack")
    };
    assert_eq!(
        ack.status,
        pb::AckStatus::Stale as i32,
        "the dropped node's late result must be stale"
    );
    running.shutdown().await;
}

fn wire_offer(price: i64, fee: i64, shipping: pb::ShippingStatus) -> pb::Offer {
    pb::Offer {
        mall: MALL.into(),
        title: format!("삼다수 {price}"),
        price,
        shipping_fee: fee,
        effective_price: Some(price + fee),
        url: format!("http://127.0.0.1/p/{price}"),
        seller: "s".into(),
        match_score: 0.9,
        shipping: shipping as i32,
        list_price: 0,
        flags: vec![],
        currency: "KRW".into(),
    }
}

fn found(seq: u64, job_id: i64, offers: Vec<pb::Offer>) -> In {
    In::Result(pb::JobResult {
        report_seq: seq,
        job_id,
        lease_epoch: 1,
        outcome: pb::Outcome::Found as i32,
        offers,
        ..Default::default()
    })
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn offers_are_read_as_documented_and_a_fee_on_unknown_shipping_is_refused(pool: PgPool) {
    let running = coordinator(&pool, "15s").await;
    let mut node = open(running.grpc_addr, NODE_TOKEN, hello("n1", vec![]))
        .await
        .unwrap();
    let Out::Welcome(_) = node.next().await else {
        panic!("expected welcome")
    };
    node.send(In::Credit(pb::Credit { free_slots: 1 })).await;
    let job_id = enqueue(&running, "삼다수 2L x 12").await;
    let Out::Assign(assign) = node.next_event().await else {
        panic!("expected assign")
    };
    assert_eq!(assign.job_id, job_id);

    // Unknown shipping with a fee: the report is rejected in-band and changes nothing.
    let bad = wire_offer(9_000, 500, pb::ShippingStatus::Unknown);
    node.send(found(1, job_id, vec![bad])).await;
    let Out::Ack(ack) = node.next_event().await else {
        panic!("expected ack")
    };
    assert_eq!(ack.status, pb::AckStatus::Rejected as i32, "{ack:?}");
    assert!(ack.error.starts_with("offers[0].shipping_fee"), "{ack:?}");
    let state: String = sqlx::query_scalar("select state::text from job where job_id = $1")
        .bind(job_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(state, "running");

    // Shipping left unset (SHIPPING_STATUS_UNSPECIFIED, as from a node that does not read
    // it): a fee reads as paid, no fee as unknown, never as free.
    let offers = vec![
        wire_offer(10_000, 3_000, pb::ShippingStatus::Unspecified),
        wire_offer(9_000, 0, pb::ShippingStatus::Unspecified),
    ];
    node.send(found(2, job_id, offers)).await;
    let Out::Ack(ack) = node.next_event().await else {
        panic!("expected ack")
    };
    assert_eq!(ack.status, pb::AckStatus::Applied as i32, "{ack:?}");
    let stored: Vec<(i64, i64, String)> = sqlx::query_as(
        "select price, shipping_fee, shipping_status from offer where job_id = $1 order by rank",
    )
    .bind(job_id)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        stored,
        [
            (9_000, 0, "unknown".to_owned()),
            (10_000, 3_000, "paid".to_owned())
        ]
    );

    // What a caller sees: the paid offer is the answer, the unknown one beside it.
    let mut search = SearchServiceClient::new(channel(running.grpc_addr).await);
    let search_id: i64 = sqlx::query_scalar("select search_id from search_item where job_id = $1")
        .bind(job_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    let status =
        common::wait_final(&mut search, CLIENT_TOKEN, search_id, Duration::from_secs(5)).await;
    let p = &status.products[0];
    let lowest = p.lowest.as_ref().unwrap();
    assert_eq!(
        (lowest.effective_price, lowest.shipping),
        (Some(13_000), pb::ShippingStatus::Paid as i32)
    );
    let maybe = p.possibly_lower.as_ref().unwrap();
    assert_eq!(
        (maybe.price, maybe.shipping),
        (9_000, pb::ShippingStatus::Unknown as i32)
    );
    running.shutdown().await;
}

/// One attempt of a new job `name` on a one-slot node: assigned, then reported as a layout
/// failure or as found (report `seq`), acked as applied; the slot is free again after it.
async fn attempt(node: &mut RawNode, running: &Running, seq: u64, name: &str, layout: bool) -> i64 {
    let job_id = enqueue(running, name).await;
    let Out::Assign(assign) = node.next_event().await else {
        panic!("expected assign")
    };
    assert_eq!((assign.job_id, assign.lease_epoch), (job_id, 1));
    let body = if layout {
        In::Failure(pb::JobFailure {
            report_seq: seq,
            job_id,
            lease_epoch: 1,
            class: pb::ErrorClass::Layout as i32,
            message: "no card source found a card on a healthy page".into(),
            ..Default::default()
        })
    } else {
        found(
            seq,
            job_id,
            vec![wire_offer(1_000, 0, pb::ShippingStatus::Free)],
        )
    };
    node.send(body).await;
    let Out::Ack(ack) = node.next_event().await else {
        panic!("expected ack")
    };
    assert_eq!(ack.status, pb::AckStatus::Applied as i32, "{ack:?}");
    node.send(In::Credit(pb::Credit { free_slots: 1 })).await;
    job_id
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn layout_failures_go_dead_at_once_are_counted_and_page_once(pool: PgPool) {
    let (hook, posts) = common::webhook().await;
    let hook = format!("http://{hook}/hook");
    let flags = [
        "--heartbeat-interval",
        "2s",
        "--lease-ttl",
        "30s",
        "--alert-interval",
        "200ms",
        "--alert-for",
        "0s",
        "--alert-resolve-after",
        "0s",
        "--alert-webhook-url",
        &hook,
        "--malls",
        MALL,
    ];
    let running = common::start_with_mall(&pool, MALL, &flags).await;
    let mut node = open(running.grpc_addr, NODE_TOKEN, hello("n1", vec![]))
        .await
        .unwrap();
    let Out::Welcome(_) = node.next().await else {
        panic!("expected welcome")
    };
    // The test waits for alerts for seconds: keep the stream from going silent.
    let beat = node.tx.clone();
    let heartbeats = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let hb = In::Heartbeat(pb::Heartbeat {
                free_slots: 1,
                ..Default::default()
            });
            if beat.send(pb::NodeMessage { body: Some(hb) }).await.is_err() {
                return;
            }
        }
    });
    node.send(In::Credit(pb::Credit { free_slots: 1 })).await;
    let layout_posts = |p: &str| p.contains("layout_changed");

    // One attempt found the product, then two pages no card source could read.
    attempt(&mut node, &running, 1, "상품 1", false).await;
    let first_layout = attempt(&mut node, &running, 2, "상품 2", true).await;
    // Two finished attempts are fewer than the alert's minimum (3): nothing pages yet.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        common::wait_for_posts(&posts, 0, layout_posts)
            .await
            .is_empty()
    );
    attempt(&mut node, &running, 3, "상품 3", true).await;

    let fired = common::wait_for_posts(&posts, 1, layout_posts).await;
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert!(
        fired[0].contains("layout_changed firing: 0.67 (threshold 0.50)"),
        "{fired:?}"
    );
    assert!(
        fired[0].contains("testmall-alpha: 2 of 3 attempts in 15m failed as layout"),
        "{fired:?}"
    );

    // Dead after its one attempt: no retry queued, nothing left to claim.
    let (state, attempts, class): (String, i16, Option<String>) = sqlx::query_as(
        "select state::text, attempts, error_class::text from job where job_id = $1",
    )
    .bind(first_layout)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (state.as_str(), attempts, class.as_deref()),
        ("dead", 1, Some("layout"))
    );
    let queued: i64 = sqlx::query_scalar("select count(*) from job where state = 'queued'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(queued, 0);

    // This replica's counter, the deployment-wide share, the ops snapshot and lpsctl.
    let metrics = reqwest::get(format!("http://{}/metrics", running.http_addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "lps_layout_failures_total{mall=\"testmall-alpha\"} 2",
        "lps_mall_layout_share_15m{mall=\"testmall-alpha\"} 0.666",
        "lps_alert_firing{rule=\"layout_changed\"} 1",
        "lps_job_duration_seconds_count{mall=\"testmall-alpha\",outcome=\"layout\"} 2",
    ] {
        assert!(metrics.contains(line), "no {line} in\n{metrics}");
    }
    let mut ops = pb::ops_service_client::OpsServiceClient::new(channel(running.grpc_addr).await);
    let mut request = Request::new(pb::GetOpsRequest {});
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {}", common::ADMIN_TOKEN).parse().unwrap(),
    );
    let snapshot = ops.get_ops(request).await.unwrap().into_inner();
    let alpha = snapshot.malls.iter().find(|m| m.mall == MALL).unwrap();
    assert_eq!(
        (alpha.layout_failures_15m, alpha.finished_attempts_15m),
        (2, 3)
    );
    assert!((alpha.layout_share_15m - 2.0 / 3.0).abs() < 1e-9);
    let text = lps_cli::text::ops(&snapshot);
    assert!(
        text.contains("layout failures in 15m:      testmall-alpha 2/3 (67%)"),
        "{text}"
    );

    // Still firing on later evaluations: announced once.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        common::wait_for_posts(&posts, 0, layout_posts).await.len(),
        1
    );

    // Healthy pages again: 2 of 6 is below the threshold, the rule resolves once.
    for (seq, name) in [(4, "상품 4"), (5, "상품 5"), (6, "상품 6")] {
        attempt(&mut node, &running, seq, name, false).await;
    }
    let all = common::wait_for_posts(&posts, 2, layout_posts).await;
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(all[1].contains("layout_changed resolved"), "{all:?}");
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        common::wait_for_posts(&posts, 0, layout_posts).await.len(),
        2
    );

    heartbeats.abort();
    running.shutdown().await;
}

/// A lease belongs to the node that holds it: another node with a valid node token cannot
/// complete, fail or hand back its job (epochs are small integers anyone can guess).
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn another_nodes_forged_reports_are_stale_and_the_real_result_kept(pool: PgPool) {
    let running = coordinator(&pool, "15s").await;
    let mut owner = open(running.grpc_addr, NODE_TOKEN, hello("owner", vec![]))
        .await
        .unwrap();
    let Out::Welcome(_) = owner.next().await else {
        panic!("expected welcome")
    };
    owner.send(In::Credit(pb::Credit { free_slots: 1 })).await;
    let job_id = enqueue(&running, "제주 삼다수 2L x 12").await;
    let Out::Assign(assign) = owner.next_event().await else {
        panic!("expected assign")
    };
    assert_eq!(assign.job_id, job_id);

    let mut forger = open(running.grpc_addr, NODE_TOKEN, hello("zombie", vec![]))
        .await
        .unwrap();
    let Out::Welcome(_) = forger.next().await else {
        panic!("expected welcome")
    };
    // A forged "found" at price 1, a forged failure and a forged hand-back: all stale.
    forger
        .send(found(
            1,
            job_id,
            vec![wire_offer(1, 0, pb::ShippingStatus::Free)],
        ))
        .await;
    forger
        .send(In::Failure(pb::JobFailure {
            report_seq: 2,
            job_id,
            lease_epoch: assign.lease_epoch,
            class: pb::ErrorClass::Permanent as i32,
            message: "forged".into(),
            ..Default::default()
        }))
        .await;
    forger
        .send(In::HandBack(pb::JobHandBack {
            report_seq: 3,
            job_id,
            lease_epoch: assign.lease_epoch,
            reason: "forged".into(),
            metrics: None,
            not_before: None,
        }))
        .await;
    for seq in 1..=3 {
        let Out::Ack(ack) = forger.next_event().await else {
            panic!("expected ack")
        };
        assert_eq!(
            (ack.report_seq, ack.status),
            (seq, pb::AckStatus::Stale as i32),
            "forged report {seq}"
        );
    }
    let (state, attempts): (String, i32) =
        sqlx::query_as("select state::text, attempts::int from job where job_id = $1")
            .bind(job_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        (state.as_str(), attempts),
        ("running", 0),
        "the forgery changed the job"
    );

    // The real node's result is applied and kept.
    owner
        .send(found(
            1,
            job_id,
            vec![wire_offer(12_900, 0, pb::ShippingStatus::Free)],
        ))
        .await;
    let Out::Ack(ack) = owner.next_event().await else {
        panic!("expected ack")
    };
    assert_eq!(ack.status, pb::AckStatus::Applied as i32);
    let prices: Vec<i64> = sqlx::query_scalar("select price from offer where job_id = $1")
        .bind(job_id)
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(prices, [12_900]);
    let stale: i64 = sqlx::query_scalar(
        "select count(*) from stale_report where job_id = $1 and node_id = 'zombie'",
    )
    .bind(job_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(stale, 3);
    running.shutdown().await;
}

fn hello_of(node_id: &str, instance: &str) -> pb::Hello {
    pb::Hello {
        instance: instance.into(),
        ..hello(node_id, vec![])
    }
}

/// Two live node processes with one node id: the second is refused with a status naming
/// the id and the clash, and nothing of the first's is reclaimed; the same process
/// reconnecting replaces its own stream.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_second_process_with_the_same_node_id_is_refused_and_nothing_reclaimed(pool: PgPool) {
    let running = coordinator(&pool, "15s").await;
    let mut first = open(running.grpc_addr, NODE_TOKEN, hello_of("host-a", "111-aaa"))
        .await
        .unwrap();
    let Out::Welcome(_) = first.next().await else {
        panic!("expected welcome")
    };
    first.send(In::Credit(pb::Credit { free_slots: 1 })).await;
    let job_id = enqueue(&running, "제주 삼다수 2L x 12").await;
    let Out::Assign(assign) = first.next_event().await else {
        panic!("expected assign")
    };

    // Another process, same id: refused, with the id and the clash in the status.
    let mut second = open(running.grpc_addr, NODE_TOKEN, hello_of("host-a", "222-bbb"))
        .await
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), second.rx.message())
        .await
        .expect("an answer")
        .expect_err("refused");
    assert_eq!(status.code(), tonic::Code::AlreadyExists, "{status:?}");
    assert!(
        status.message().contains("\"host-a\"") && status.message().contains("111-aaa"),
        "{status:?}"
    );
    // The first stream still owns its job: renewed, not reclaimed, no attempt charged.
    first
        .send(In::Heartbeat(pb::Heartbeat {
            running: vec![pb::JobProgress {
                job_id,
                lease_epoch: assign.lease_epoch,
                ..Default::default()
            }],
            ..Default::default()
        }))
        .await;
    let Out::HeartbeatAck(ack) = first.next().await else {
        panic!("expected heartbeat ack")
    };
    assert_eq!(ack.extended.len(), 1, "{ack:?}");
    let (state, attempts, reclaims): (String, i32, i64) = sqlx::query_as(
        "select j.state::text, j.attempts::int, (select count(*) from job_attempt a where a.job_id = j.job_id)
         from job j where j.job_id = $1",
    )
    .bind(job_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((state.as_str(), attempts, reclaims), ("running", 0, 0));

    // The same process reconnecting (a new stream, its job in Hello) replaces its own.
    let mut again = open(
        running.grpc_addr,
        NODE_TOKEN,
        pb::Hello {
            instance: "111-aaa".into(),
            ..hello(
                "host-a",
                vec![pb::HeldJob {
                    job_id,
                    lease_epoch: assign.lease_epoch,
                }],
            )
        },
    )
    .await
    .unwrap();
    let Out::Welcome(welcome) = again.next().await else {
        panic!("expected welcome")
    };
    assert_eq!(welcome.reattached.len(), 1, "{welcome:?}");
    running.shutdown().await;
}

/// A node token limited to node ids (`LPS_NODE_TOKEN_NODES`) cannot open a stream under
/// another id.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_node_token_limited_to_node_ids_cannot_use_another(pool: PgPool) {
    let flags = ["--node-token-nodes", "1=allowed-*"];
    let running = common::start_with_mall(&pool, MALL, &flags).await;
    let mut ok = open(running.grpc_addr, NODE_TOKEN, hello("allowed-1", vec![]))
        .await
        .unwrap();
    let Out::Welcome(_) = ok.next().await else {
        panic!("expected welcome")
    };
    let refused = open(running.grpc_addr, NODE_TOKEN, hello("intruder", vec![])).await;
    let status = match refused {
        Err(status) => status,
        Ok(mut node) => tokio::time::timeout(Duration::from_secs(10), node.rx.message())
            .await
            .expect("an answer")
            .expect_err("refused"),
    };
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    assert!(status.message().contains("\"intruder\""), "{status:?}");
    running.shutdown().await;
}

/// An operator's drain is not lost on the way: every heartbeat answer repeats it, a node
/// that was between streams when it was asked gets it when the same process reconnects,
/// and a new process under the id starts undrained.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_drain_is_repeated_until_the_node_has_it_and_survives_a_reconnect(pool: PgPool) {
    let running = coordinator(&pool, "15s").await;
    let mut node = open(running.grpc_addr, NODE_TOKEN, hello_of("edge-1", "inst-1"))
        .await
        .unwrap();
    let Out::Welcome(_) = node.next().await else {
        panic!("expected welcome")
    };
    assert!(
        lps_coordinator::control::request_drain(&pool, "edge-1")
            .await
            .unwrap()
    );
    let Out::Drain(drain) = node.next_event().await else {
        panic!("expected the drain")
    };
    assert_eq!(drain.reason, "operator request");
    assert!(
        drain.deadline.is_none(),
        "the node's own drain timeout applies"
    );
    // Say the Drain was lost: the next heartbeat's answer carries it again.
    node.send(In::Heartbeat(pb::Heartbeat::default())).await;
    let Out::HeartbeatAck(_) = node.next().await else {
        panic!("expected heartbeat ack")
    };
    let Out::Drain(_) = node.next().await else {
        panic!("the heartbeat answer did not repeat the drain")
    };

    // The stream breaks before the node saw anything: the same process reconnecting is
    // drained as soon as it is welcomed.
    drop(node);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut node = open(running.grpc_addr, NODE_TOKEN, hello_of("edge-1", "inst-1"))
        .await
        .unwrap();
    let Out::Welcome(_) = node.next().await else {
        panic!("expected welcome")
    };
    let Out::Drain(_) = node.next_event().await else {
        panic!("a reconnect of the drained process was not drained")
    };
    drop(node);

    // A new process under the id is another node: not drained.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut fresh = open(running.grpc_addr, NODE_TOKEN, hello_of("edge-1", "inst-2"))
        .await
        .unwrap();
    let Out::Welcome(_) = fresh.next().await else {
        panic!("expected welcome")
    };
    fresh.send(In::Heartbeat(pb::Heartbeat::default())).await;
    let Out::HeartbeatAck(_) = fresh.next().await else {
        panic!("expected heartbeat ack")
    };
    let draining: bool =
        sqlx::query_scalar("select draining from node_session where node_id = 'edge-1'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(!draining, "a new process inherited the old one's drain");
    fresh.send(In::Heartbeat(pb::Heartbeat::default())).await;
    match fresh.next().await {
        Out::HeartbeatAck(_) => {}
        other => panic!("a new process was told {other:?}"),
    }
}

/// The same clash through two replicas: the second replica's registry does not know the
/// first's stream, the node_session row does. Refused, and nothing of the live process's
/// is touched.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_second_process_with_the_node_id_on_another_replica_is_refused(
    _: sqlx::postgres::PgPoolOptions,
    opts: sqlx::postgres::PgConnectOptions,
) {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(10)
        .connect_with(opts.clone())
        .await
        .unwrap();
    let pool_b = sqlx::postgres::PgPoolOptions::new()
        .max_connections(10)
        .connect_with(opts)
        .await
        .unwrap();
    // NB: replicas in one test process would share the default id (host-pid).
    let replica = |pool: PgPool, id: &'static str| async move {
        let flags = [
            "--heartbeat-interval",
            "200ms",
            "--lease-ttl",
            "18s",
            "--coordinator-id",
            id,
        ];
        common::start_with_mall(&pool, MALL, &flags).await
    };
    let a = replica(pool.clone(), "coord-a").await;
    let b = replica(pool_b.clone(), "coord-b").await;
    let mut first = open(a.grpc_addr, NODE_TOKEN, hello_of("host-a", "111-aaa"))
        .await
        .unwrap();
    let Out::Welcome(_) = first.next().await else {
        panic!("expected welcome")
    };
    first.send(In::Credit(pb::Credit { free_slots: 1 })).await;
    let job_id = enqueue(&a, "제주 삼다수 2L x 12").await;
    let Out::Assign(_) = first.next_event().await else {
        panic!("expected assign")
    };

    let mut second = open(b.grpc_addr, NODE_TOKEN, hello_of("host-a", "222-bbb"))
        .await
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), second.rx.message())
        .await
        .expect("an answer")
        .expect_err("refused");
    assert_eq!(status.code(), tonic::Code::AlreadyExists, "{status:?}");
    assert!(
        status.message().contains("\"host-a\"") && status.message().contains("111-aaa"),
        "{status:?}"
    );
    let (state, attempts, reclaims, ended): (String, i32, i32, i64) = sqlx::query_as(
        "select j.state::text, j.attempts::int, j.reclaims::int,
                (select count(*) from job_attempt a where a.job_id = j.job_id)
         from job j where j.job_id = $1",
    )
    .bind(job_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (state.as_str(), attempts, reclaims, ended),
        ("running", 0, 0, 0)
    );
    let owner: String =
        sqlx::query_scalar("select instance from node_session where node_id = 'host-a'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(owner, "111-aaa", "the refused process took the row over");
}

/// A node whose streams keep dropping the jobs they are given (DESIGN §2 "Poison means the
/// job, not the node"): each drop requeues its job without a charged attempt, and the
/// second drop within the window quarantines the node — welcomed, but given no job while
/// others wait, listed with its quarantine in ListNodes (`lpsctl nodes`) and counted in
/// the ops snapshot (`nodes_quarantined`, an alert) — while another node gets the jobs.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_node_that_keeps_dropping_its_jobs_is_quarantined_and_charged_nothing(pool: PgPool) {
    let flags = [
        "--heartbeat-interval",
        "200ms",
        "--lease-ttl",
        "3300ms",
        "--node-grace",
        "300ms",
        "--shutdown-timeout",
        "3s",
        "--node-quarantine-drops",
        "2",
        "--node-quarantine",
        "1m",
    ];
    let running = common::start_with_mall(&pool, MALL, &flags).await;
    for i in 0..4 {
        enqueue(&running, &format!("dropped {i}")).await;
    }
    for round in 0..2 {
        let mut node = open(running.grpc_addr, NODE_TOKEN, hello("flaky", vec![]))
            .await
            .unwrap();
        let Out::Welcome(_) = node.next().await else {
            panic!("expected welcome")
        };
        node.send(In::Credit(pb::Credit { free_slots: 1 })).await;
        let Out::Assign(assign) = node.next_event().await else {
            panic!("round {round}: expected an assign")
        };
        drop(node); // it vanishes with the job
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let state: String = sqlx::query_scalar("select state::text from job where job_id = $1")
                .bind(assign.job_id)
                .fetch_one(&pool)
                .await
                .unwrap();
            if state == "queued" {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "round {round}: job {} not released ({state})",
                assign.job_id
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let (quarantined, reason): (bool, Option<String>) = sqlx::query_as(
        "select quarantined_until > now() + interval '50 seconds', quarantine_reason
         from node_session where node_id = 'flaky'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(
        quarantined,
        "two drops did not quarantine the node for a minute"
    );
    assert_eq!(
        reason.as_deref(),
        Some("dropped its jobs 2 times within 600 s (last: 1 jobs)")
    );

    // Back again: welcomed, heartbeats answered, but no job while it is quarantined.
    let mut node = open(running.grpc_addr, NODE_TOKEN, hello("flaky", vec![]))
        .await
        .unwrap();
    let Out::Welcome(_) = node.next().await else {
        panic!("expected welcome")
    };
    node.send(In::Credit(pb::Credit { free_slots: 1 })).await;
    for _ in 0..8 {
        node.send(In::Heartbeat(pb::Heartbeat {
            free_slots: 1,
            ..Default::default()
        }))
        .await;
        match tokio::time::timeout(Duration::from_millis(200), node.rx.message()).await {
            Err(_) => {}
            Ok(Ok(Some(pb::CoordinatorMessage {
                body: Some(Out::HeartbeatAck(_)),
            }))) => {}
            Ok(other) => panic!("a quarantined node was sent {other:?}"),
        }
    }
    // Another node takes the waiting jobs.
    let mut steady = open(running.grpc_addr, NODE_TOKEN, hello("steady", vec![]))
        .await
        .unwrap();
    let Out::Welcome(_) = steady.next().await else {
        panic!("expected welcome")
    };
    steady.send(In::Credit(pb::Credit { free_slots: 1 })).await;
    let Out::Assign(_) = steady.next_event().await else {
        panic!("the healthy node got no job")
    };

    let mut ops_client =
        pb::ops_service_client::OpsServiceClient::new(channel(running.grpc_addr).await);
    let nodes = ops_client
        .list_nodes(common::with_token(
            pb::ListNodesRequest::default(),
            common::ADMIN_TOKEN,
        ))
        .await
        .unwrap()
        .into_inner()
        .nodes;
    let flaky = nodes
        .iter()
        .find(|n| n.node_id == "flaky")
        .expect("flaky listed");
    assert!(flaky.quarantined_until.is_some(), "{flaky:?}");
    assert!(
        flaky.quarantine_reason.contains("dropped its jobs 2 times"),
        "{flaky:?}"
    );
    let steady_info = nodes.iter().find(|n| n.node_id == "steady").unwrap();
    assert!(steady_info.quarantined_until.is_none(), "{steady_info:?}");
    let ops = common::ops_snapshot(&running).await;
    assert_eq!(ops.nodes_quarantined, 1);

    // Every drop was a reclaim: no attempt charged, nothing dead.
    let (attempts, reclaims, dead): (i64, i64, i64) = sqlx::query_as(
        "select coalesce(sum(attempts), 0)::bigint, coalesce(sum(reclaims), 0)::bigint,
                count(*) filter (where state = 'dead')
         from job",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((attempts, reclaims, dead), (0, 2, 0));
    drop(node);

    // An operator lifts the quarantine: the node is given jobs again at its next Hello.
    let lift = |token: &'static str| {
        common::with_token(
            pb::LiftQuarantineRequest {
                node_id: "flaky".into(),
            },
            token,
        )
    };
    let refused = ops_client
        .lift_quarantine(lift(CLIENT_TOKEN))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let lifted = ops_client
        .lift_quarantine(lift(common::ADMIN_TOKEN))
        .await
        .unwrap()
        .into_inner();
    assert!(lifted.lifted);
    let again = ops_client
        .lift_quarantine(lift(common::ADMIN_TOKEN))
        .await
        .unwrap()
        .into_inner();
    assert!(!again.lifted, "lifted twice");
    let mut node = open(running.grpc_addr, NODE_TOKEN, hello("flaky", vec![]))
        .await
        .unwrap();
    let Out::Welcome(_) = node.next().await else {
        panic!("expected welcome")
    };
    node.send(In::Credit(pb::Credit { free_slots: 1 })).await;
    let Out::Assign(_) = node.next_event().await else {
        panic!("a node whose quarantine was lifted got no job")
    };
    assert_eq!(common::ops_snapshot(&running).await.nodes_quarantined, 0);
    drop(node);
    drop(steady);
    running.shutdown().await;
}
