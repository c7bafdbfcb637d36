//! The proxy ledger through the real coordinator: grants on the node stream, a vanished
//! node's ports coming back after the grace period, and `AdviseBudget` over gRPC.

use std::time::Duration;

use lps_coordinator::app::Running;
use lps_proto::{
    PROTOCOL_VERSION,
    pb::{
        self, coordinator_message::Body as Out, node_message::Body as In,
        node_service_client::NodeServiceClient, ops_service_client::OpsServiceClient,
        search_service_client::SearchServiceClient,
    },
};
use sqlx::PgPool;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, transport::Channel};

mod common;

use common::{CLIENT_TOKEN, NODE_TOKEN, with_token};

async fn coordinator(pool: &PgPool, proxies: bool) -> Running {
    let mut flags = vec![
        "--heartbeat-interval",
        "200ms",
        "--lease-ttl",
        "3s",
        "--node-grace",
        "1s",
        "--malls",
        "testmall-alpha",
    ];
    if proxies {
        flags.extend([
            "--proxy-gateway-host",
            "127.0.0.1",
            "--proxy-ports",
            "30000-30003",
            "--proxy-username",
            "u",
            "--proxy-password",
            "proxy-secret-password",
        ]);
    }
    common::start(pool, &flags).await
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_vanished_nodes_ports_come_back_after_the_grace_period(pool: PgPool) {
    let c = coordinator(&pool, true).await;
    let channel = Channel::from_shared(format!("http://{}", c.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel(8);
    let hello = pb::Hello {
        protocol_version: PROTOCOL_VERSION,
        node_id: "n-proxy".into(),
        slots: 1,
        malls: vec!["testmall-alpha".into()],
        ..Default::default()
    };
    tx.send(pb::NodeMessage {
        body: Some(In::Hello(hello)),
    })
    .await
    .unwrap();
    let mut inbound = NodeServiceClient::new(channel)
        .connect(with_token(ReceiverStream::new(rx), NODE_TOKEN))
        .await
        .unwrap()
        .into_inner();
    let Some(Out::Welcome(_)) = inbound.message().await.unwrap().unwrap().body else {
        panic!("expected welcome")
    };
    tx.send(pb::NodeMessage {
        body: Some(In::ProxyAcquire(pb::ProxyAcquire {
            request_id: 7,
            mall: "testmall-alpha".into(),
            job_id: 0,
        })),
    })
    .await
    .unwrap();
    let grant = loop {
        match inbound.message().await.unwrap().unwrap().body {
            Some(Out::ProxyGrant(g)) => break g,
            Some(Out::ProxyUnavailable(u)) => panic!("no port granted: {u:?}"),
            _ => {}
        }
    };
    assert_eq!(
        (
            grant.request_id,
            grant.host.as_str(),
            grant.username.as_str()
        ),
        (7, "127.0.0.1", "u")
    );
    assert_eq!(grant.password, "proxy-secret-password");
    let held = || async {
        sqlx::query_scalar::<_, i64>(
            "select count(*) from proxy_port where holder_node = 'n-proxy'",
        )
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    assert_eq!(held().await, 1);

    // The node vanishes: its port stays leased through the grace period, then comes back.
    drop(tx);
    drop(inbound);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(held().await, 1, "released before the grace period ended");
    for _ in 0..40 {
        if held().await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(held().await, 0, "the vanished node still holds its port");
    c.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn advise_budget_reads_the_recorded_ip_sessions(pool: PgPool) {
    // 40 sessions that used the whole budget of 3, and 10 blocked at their 3rd search.
    sqlx::query(
        "insert into ip_session (host, port, mall, requests, ok, blocked, elapsed_ms, end_reason)
         select '127.0.0.1', 30000, 'testmall-alpha', 3, 3, 0, 1000, 'budget'::session_end_reason from generate_series(1, 40)
         union all
         select '127.0.0.1', 30001, 'testmall-alpha', 3, 2, 1, 1000, 'block'::session_end_reason from generate_series(1, 10)",
    )
    .execute(&pool)
    .await
    .unwrap();
    let c = coordinator(&pool, true).await;
    let channel = Channel::from_shared(format!("http://{}", c.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut ops = OpsServiceClient::new(channel);
    let advice = ops
        .advise_budget(with_token(
            pb::AdviseBudgetRequest {
                mall: "testmall-alpha".into(),
            },
            CLIENT_TOKEN,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((advice.sessions, advice.blocked_sessions), (50, 10));
    let third = advice
        .steps
        .iter()
        .find(|s| s.request_no == 3)
        .expect("a step for request 3");
    assert_eq!((third.reached, third.blocked_at), (50, 10));
    assert_eq!(
        advice.suggested_budget,
        Some(2),
        "blocks start at the 3rd search: {advice:?}"
    );
    let err = ops
        .advise_budget(with_token(
            pb::AdviseBudgetRequest {
                mall: "Bad Mall".into(),
            },
            CLIENT_TOKEN,
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    c.shutdown().await;

    let without = coordinator(&pool, false).await;
    let channel = Channel::from_shared(format!("http://{}", without.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let err = OpsServiceClient::new(channel)
        .advise_budget(with_token(
            pb::AdviseBudgetRequest {
                mall: "testmall-alpha".into(),
            },
            CLIENT_TOKEN,
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    without.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_job_that_burns_too_many_ips_fails_as_page_blocked(pool: PgPool) {
    let c = coordinator(&pool, true).await;
    let req = lps_proto::model::SearchRequest::new(
        vec![lps_proto::model::ProductSpec::new(None, "차단만 당하는 상품").unwrap()],
        vec![lps_proto::model::MallId::new("testmall-alpha").unwrap()],
        lps_proto::model::Priority::INTERACTIVE,
        None,
        None,
    )
    .unwrap();
    let job_id = c
        .queue
        .enqueue(&req, &Default::default())
        .await
        .unwrap()
        .items[0]
        .job_id;
    let channel = Channel::from_shared(format!("http://{}", c.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel(8);
    let hello = pb::Hello {
        protocol_version: PROTOCOL_VERSION,
        node_id: "n-burn".into(),
        slots: 1,
        malls: vec!["testmall-alpha".into()],
        ..Default::default()
    };
    tx.send(pb::NodeMessage {
        body: Some(In::Hello(hello)),
    })
    .await
    .unwrap();
    let mut inbound = NodeServiceClient::new(channel)
        .connect(with_token(ReceiverStream::new(rx), NODE_TOKEN))
        .await
        .unwrap()
        .into_inner();
    let mut next = async || loop {
        match inbound.message().await.unwrap().unwrap().body.unwrap() {
            Out::HeartbeatAck(_) | Out::Welcome(_) => {}
            other => return other,
        }
    };
    let Out::Assign(assign) = next().await else {
        panic!("expected assign")
    };
    assert_eq!(assign.job_id, job_id);
    // Blocked on four IPs in a row; the cap is three burns.
    for round in 1..=4u64 {
        let acquire = pb::ProxyAcquire {
            request_id: round,
            mall: "testmall-alpha".into(),
            job_id,
        };
        tx.send(pb::NodeMessage {
            body: Some(In::ProxyAcquire(acquire)),
        })
        .await
        .unwrap();
        let Out::ProxyGrant(grant) = next().await else {
            panic!("expected a grant in round {round}")
        };
        let session = pb::SessionEnd {
            report_seq: 0,
            port: grant.port,
            mall: "testmall-alpha".into(),
            requests: 1,
            ok: 0,
            blocked: 1,
            elapsed: None,
            end_reason: pb::SessionEndReason::Block as i32,
            job_id,
        };
        let release = pb::ProxyRelease {
            report_seq: round,
            port: grant.port,
            reason: pb::SessionEndReason::Block as i32,
            session: Some(session),
            lease_id: grant.lease_id,
        };
        tx.send(pb::NodeMessage {
            body: Some(In::ProxyRelease(release)),
        })
        .await
        .unwrap();
        if round == 4 {
            let Out::Cancel(cancel) = next().await else {
                panic!("expected the job to be cancelled")
            };
            assert_eq!(cancel.job_id, job_id);
            assert_eq!(cancel.reason, "page_blocked");
        }
        let Out::Ack(ack) = next().await else {
            panic!("expected an ack")
        };
        assert_eq!(
            (ack.report_seq, ack.status),
            (round, pb::AckStatus::Applied as i32)
        );
    }
    let (state, class, burns): (String, String, i16) = sqlx::query_as(
        "select state::text, error_class::text, ip_burns from job where job_id = $1",
    )
    .bind(job_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (state.as_str(), class.as_str(), burns),
        ("dead", "page_blocked", 4)
    );
    c.shutdown().await;
}

/// Waiting for a port costs no attempt: a node with more free slots than the ledger has
/// ports is given only as many jobs as there are ports it could use soon (the rest stay
/// queued), and a job it hands back for want of a port waits until the port it was told of
/// frees.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_port_shortage_keeps_jobs_queued_and_charges_no_attempt(pool: PgPool) {
    let c = coordinator(&pool, true).await;
    // Of the 4 ports, 30003 cools for this mall; 30001 rests for an hour after its budget,
    // and so does 30002, which cools for the mall too (it is not counted out twice);
    // 30000's rest ends within the claim's port wait, so it counts: 1 is usable.
    sqlx::query(
        "insert into proxy_port_cooldown (host, port, mall, cooldown_until)
         values ('127.0.0.1', 30003, 'testmall-alpha', now() + interval '1 hour'),
                ('127.0.0.1', 30002, 'testmall-alpha', now() + interval '1 hour')",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "update proxy_port set rest_until = now() + case port when 30000 then interval '5 seconds'
                                                             else interval '1 hour' end
         where port in (30000, 30001, 30002)",
    )
    .execute(&pool)
    .await
    .unwrap();
    let mut search = SearchServiceClient::new(
        Channel::from_shared(format!("http://{}", c.grpc_addr))
            .unwrap()
            .connect()
            .await
            .unwrap(),
    );
    let products = (0..8)
        .map(|i| pb::Product {
            code: String::new(),
            name: format!("삼다수 2L x {i}"),
            ..Default::default()
        })
        .collect();
    search
        .search(with_token(
            pb::SearchRequest {
                products,
                malls: vec!["testmall-alpha".into()],
                ..Default::default()
            },
            CLIENT_TOKEN,
        ))
        .await
        .unwrap();

    let channel = Channel::from_shared(format!("http://{}", c.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel(16);
    let send = |body| {
        let tx = tx.clone();
        async move { tx.send(pb::NodeMessage { body: Some(body) }).await.unwrap() }
    };
    send(In::Hello(pb::Hello {
        protocol_version: PROTOCOL_VERSION,
        node_id: "n-many".into(),
        slots: 8,
        malls: vec!["testmall-alpha".into()],
        ..Default::default()
    }))
    .await;
    let mut inbound = NodeServiceClient::new(channel)
        .connect(with_token(ReceiverStream::new(rx), NODE_TOKEN))
        .await
        .unwrap()
        .into_inner();
    let Some(Out::Welcome(_)) = inbound.message().await.unwrap().unwrap().body else {
        panic!("expected welcome")
    };
    send(In::Credit(pb::Credit { free_slots: 8 })).await;
    // NB: heartbeats keep the stream alive (200 ms heartbeats: silent for 600 ms is lost).
    let mut assigned = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_millis(1500);
    // NB: timeout_at hands out a message that is ready even past the deadline.
    while tokio::time::Instant::now() < until
        && let Ok(Ok(Some(msg))) = tokio::time::timeout_at(until, inbound.message()).await
    {
        match msg.body {
            Some(Out::Assign(a)) => assigned.push(a),
            Some(Out::HeartbeatAck(_)) | None => {}
            Some(other) => panic!("unexpected {other:?}"),
        }
        let running = assigned
            .iter()
            .map(|a| pb::JobProgress {
                job_id: a.job_id,
                lease_epoch: a.lease_epoch,
                ..Default::default()
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(100)).await;
        send(In::Heartbeat(pb::Heartbeat {
            running,
            free_slots: 8 - u32::try_from(assigned.len()).unwrap(),
            ..Default::default()
        }))
        .await;
    }
    assert_eq!(
        assigned.len(),
        1,
        "one job per port usable soon, not one per free slot"
    );
    let count = |sql: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(sql)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    assert_eq!(
        count("select count(*) from job where state = 'queued'").await,
        7
    );

    // The node found no port for one after all: handed back until the ledger's next free
    // port, no attempt spent.
    let not_before = chrono::Utc::now() + chrono::Duration::seconds(30);
    send(In::HandBack(pb::JobHandBack {
        report_seq: 1,
        job_id: assigned[0].job_id,
        lease_epoch: assigned[0].lease_epoch,
        reason: "no proxy port free within 60s".into(),
        metrics: None,
        not_before: Some(lps_proto::model::timestamp_to_pb(not_before)),
    }))
    .await;
    loop {
        match inbound.message().await.unwrap().unwrap().body {
            Some(Out::Ack(ack)) => {
                assert_eq!(ack.status, pb::AckStatus::Applied as i32, "{ack:?}");
                break;
            }
            Some(_) => {}
            None => panic!("empty message"),
        }
    }
    let (state, attempts, waits): (String, i16, f64) = sqlx::query_as(
        "select state::text, attempts, extract(epoch from run_after - now())::float8
         from job where job_id = $1",
    )
    .bind(assigned[0].job_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((state.as_str(), attempts), ("queued", 0));
    assert!(
        (25.0..=31.0).contains(&waits),
        "runs again when the port frees: {waits}s"
    );
    assert_eq!(
        count("select coalesce(sum(attempts), 0)::bigint from job").await,
        0
    );
    assert_eq!(
        count("select count(*) from job_attempt where ended = 'handed_back'").await,
        1
    );
    c.shutdown().await;
}
