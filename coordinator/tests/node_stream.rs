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
        node_service_client::NodeServiceClient,
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
    let flags = [
        "--heartbeat-interval",
        "200ms",
        "--lease-ttl",
        "2s",
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

async fn open(
    addr: std::net::SocketAddr,
    token: &str,
    hello: pb::Hello,
) -> Result<RawNode, tonic::Status> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = NodeServiceClient::new(channel);
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
    running
        .queue
        .enqueue(&req, &EnqueueContext::default())
        .await
        .unwrap()
        .items[0]
        .job_id
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
