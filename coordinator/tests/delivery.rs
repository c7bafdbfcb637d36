//! Delivery through the outbox on real coordinators and a real webhook receiver on
//! loopback: each final search reaches each destination once, signed; a failing receiver
//! gets it on a later try; a dead delivery shows in GetSearch and ops and an operator's
//! retry brings it; a slow receiver times out without holding up the others; an
//! unconfigured destination is INVALID_ARGUMENT; two replicas deliver each event once.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU32, Ordering},
    },
    time::Duration,
};

use axum::{
    Router,
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    routing::post,
};
use common::{CLIENT_TOKEN, with_token};
use lps_coordinator::{
    app::Running,
    delivery::signature::{self, DEFAULT_TOLERANCE, SignatureError},
    queue::{ClaimedJob, MallLimits, Queue},
};
use lps_proto::{
    model::{JobResult, MallId},
    pb::{self, ops_service_client::OpsServiceClient, search_service_client::SearchServiceClient},
};
use sqlx::{PgPool, postgres::PgConnectOptions, postgres::PgPoolOptions};
use tonic::{Code, transport::Channel};

mod common;

const MALL: &str = "testmall-alpha";
const ADMIN: &str = "ops-admin-token-00001";
const SECRET_A: &str = "secret-of-a-0123456789";
const SECRET_B: &str = "secret-of-b-0123456789";
const NODE: &str = "node-delivery-tests";

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    event_id: String,
    signature: String,
    body: String,
}

/// A webhook receiver on 127.0.0.1 (`POST /{path}`) that records every request and can be
/// told to fail: `fail_first` requests answer 503, then all answer 200 (`u32::MAX`: always
/// fail); `/slow` answers only after 30 s.
#[derive(Debug, Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Vec<Received>>>,
    fail_first: Arc<AtomicU32>,
}

impl Receiver {
    async fn start() -> (SocketAddr, Self) {
        let receiver = Self::default();
        let app = Router::new()
            .route("/{path}", post(receive))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (addr, receiver)
    }

    fn got(&self, path: &str) -> Vec<Received> {
        let got = self.got.lock().unwrap();
        got.iter().filter(|r| r.path == path).cloned().collect()
    }

    /// The requests to `path`, once there are at least `n` (panics after `within`).
    async fn wait(&self, path: &str, n: usize, within: Duration) -> Vec<Received> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let got = self.got(path);
            if got.len() >= n {
                return got;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{path}: {} of {n} requests within {within:?}",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn receive(
    State(r): State<Receiver>,
    Path(path): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    r.got.lock().unwrap().push(Received {
        path: path.clone(),
        event_id: header(signature::EVENT_ID_HEADER),
        signature: header(signature::SIGNATURE_HEADER),
        body: String::from_utf8(body.to_vec()).unwrap(),
    });
    // NB: a little latency, as a real receiver has, so replicas' claims overlap.
    let latency = if path == "slow" { 30_000 } else { 2 };
    tokio::time::sleep(Duration::from_millis(latency)).await;
    let failing = r
        .fail_first
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
            0 => None,
            u32::MAX => Some(u32::MAX),
            n => Some(n - 1),
        })
        .is_ok();
    if failing {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    }
}

/// A coordinator whose destinations `a` and `b` are the receiver's `/a` and `/b` (`slow`:
/// its `/slow`), with short delivery settings and `extra` on top.
async fn coordinator(pool: PgPool, receiver: SocketAddr, extra: &[&str]) -> Running {
    let destinations =
        format!("a=http://{receiver}/a,b=http://{receiver}/b,slow=http://{receiver}/slow");
    let secrets = format!("a={SECRET_A},b={SECRET_B},slow={SECRET_A}");
    let mut args = vec![
        "--admin-tokens",
        "ops=ops-admin-token-00001",
        "--destinations",
        &destinations,
        "--destination-secrets",
        &secrets,
        "--delivery-poll",
        "20ms",
        "--delivery-backoff-base",
        "50ms",
        "--delivery-backoff-cap",
        "200ms",
        "--alert-interval",
        "100ms",
    ];
    args.extend_from_slice(extra);
    let running = common::start_on(pool, &args).await;
    running
        .queue
        .upsert_mall(&MallLimits::unlimited(MallId::new(MALL).unwrap()))
        .await
        .unwrap();
    running
}

async fn own_pool(opts: &PgConnectOptions) -> PgPool {
    PgPoolOptions::new()
        .max_connections(10)
        .connect_with(opts.clone())
        .await
        .unwrap()
}

async fn clients(running: &Running) -> (SearchServiceClient<Channel>, OpsServiceClient<Channel>) {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", running.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    (
        SearchServiceClient::new(channel.clone()),
        OpsServiceClient::new(channel),
    )
}

fn search_req(products: &[&str], destinations: &[&str]) -> pb::SearchRequest {
    pb::SearchRequest {
        products: products
            .iter()
            .map(|name| pb::Product {
                code: String::new(),
                name: (*name).to_owned(),
                ..Default::default()
            })
            .collect(),
        malls: vec![MALL.to_owned()],
        destinations: destinations.iter().map(|d| (*d).to_owned()).collect(),
        ..Default::default()
    }
}

async fn search(client: &mut SearchServiceClient<Channel>, req: pb::SearchRequest) -> i64 {
    client
        .search(with_token(req, CLIENT_TOKEN))
        .await
        .unwrap()
        .into_inner()
        .search_id
}

/// "Not found" for `job`, judged as a node of this build judges with the coordinator's
/// words (so the negative cache may answer with it).
fn not_found(queue: &Queue, job: &ClaimedJob) -> JobResult {
    let judged = queue
        .current_judge()
        .map(|j| j.judged_with(job.mall.as_str()))
        .unwrap_or_default();
    JobResult::not_found(job.lease).judged_with(judged)
}

/// Finishes every queued job through the queue's own transitions: claimed by a node and
/// answered "not found", as a crawler node reports it.
async fn finish_all(queue: &Queue) -> usize {
    let mut n = 0;
    loop {
        let claimed = queue.claim(NODE, None, 50).await.unwrap();
        if claimed.is_empty() {
            return n;
        }
        for job in claimed {
            queue
                .complete_if_leased(NODE, &not_found(queue, &job))
                .await
                .unwrap();
            n += 1;
        }
    }
}

async fn get_search(client: &mut SearchServiceClient<Channel>, search_id: i64) -> pb::SearchStatus {
    client
        .get_search(with_token(pb::GetSearchRequest { search_id }, CLIENT_TOKEN))
        .await
        .unwrap()
        .into_inner()
}

/// Polls GetSearch until every delivery of the search is in `state` (at least `n` of them).
async fn wait_deliveries(
    client: &mut SearchServiceClient<Channel>,
    search_id: i64,
    n: usize,
    state: pb::DeliveryState,
) -> Vec<pb::Delivery> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let deliveries = get_search(client, search_id).await.deliveries;
        if deliveries.len() >= n && deliveries.iter().all(|d| d.state == state as i32) {
            return deliveries;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "search {search_id}: deliveries not all {state:?}: {deliveries:#?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn event(r: &Received) -> pb::DeliveryEvent {
    lps_proto::json::from_json(&r.body, "lps.v1.DeliveryEvent").unwrap()
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn each_final_search_reaches_each_destination_once_signed(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    let (addr, receiver) = Receiver::start().await;
    let running = coordinator(own_pool(&opts).await, addr, &[]).await;
    let (mut client, _) = clients(&running).await;

    let id = search(
        &mut client,
        search_req(&["삼다수 2L", "햇반 210g"], &["a", "b"]),
    )
    .await;
    let quiet = search(&mut client, search_req(&["스팸 200g"], &[])).await;
    assert!(
        get_search(&mut client, id).await.deliveries.is_empty(),
        "not final yet"
    );
    assert_eq!(finish_all(&running.queue).await, 3);

    let a = receiver.wait("a", 1, Duration::from_secs(10)).await;
    let b = receiver.wait("b", 1, Duration::from_secs(10)).await;
    for (got, secret) in [(&a[0], SECRET_A), (&b[0], SECRET_B)] {
        // The receiver's documented check passes on what arrived …
        signature::verify(
            secret.as_bytes(),
            &got.signature,
            got.body.as_bytes(),
            now(),
            DEFAULT_TOLERANCE,
        )
        .unwrap();
        // … and fails on a forged body, the other destination's secret, and a replay
        // after the tolerance window.
        let forged = got.body.replace("\"final\":true", "\"final\":false");
        assert_ne!(forged, got.body);
        assert_eq!(
            signature::verify(
                secret.as_bytes(),
                &got.signature,
                forged.as_bytes(),
                now(),
                DEFAULT_TOLERANCE
            ),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            signature::verify(
                b"another-destination-secret",
                &got.signature,
                got.body.as_bytes(),
                now(),
                DEFAULT_TOLERANCE
            ),
            Err(SignatureError::Mismatch)
        );
        assert!(matches!(
            signature::verify(
                secret.as_bytes(),
                &got.signature,
                got.body.as_bytes(),
                now() + 301,
                DEFAULT_TOLERANCE
            ),
            Err(SignatureError::OutsideTolerance { .. })
        ));
        let e = event(got);
        assert_eq!(
            e.event_id, got.event_id,
            "the header and the body name one event"
        );
        assert_eq!(e.kind, pb::DeliveryEventKind::SearchFinal as i32);
        assert_eq!(e.search_id, id);
        let s = e.search.unwrap();
        assert!(s.r#final && !s.cancelled);
        assert_eq!(s.products.len(), 2);
        assert!(s.deliveries.is_empty());
        assert_eq!(s.client, common::CLIENT_NAME);
    }
    assert_eq!(event(&a[0]).destination, "a");
    assert_eq!(event(&b[0]).destination, "b");
    assert_ne!(a[0].event_id, b[0].event_id, "an event per destination");

    let deliveries = wait_deliveries(&mut client, id, 2, pb::DeliveryState::Delivered).await;
    assert_eq!(deliveries.len(), 2, "{deliveries:#?}");
    for d in &deliveries {
        assert_eq!(d.attempts, 1);
        assert_eq!(d.last_status, 200);
        assert!(d.delivered_at.is_some());
        assert_eq!(d.product_index, None);
    }
    // Exactly once: nothing more arrives, and the search without destinations sent nothing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.got("a").len(), 1);
    assert_eq!(receiver.got("b").len(), 1);
    assert!(get_search(&mut client, quiet).await.deliveries.is_empty());

    // Per product: an event as each product becomes final, then the search's.
    let mut req = search_req(&["신라면 5입", "비비고 왕교자"], &["a"]);
    req.notify_each_product = true;
    let per_product = search(&mut client, req).await;
    let first = running.queue.claim(NODE, None, 1).await.unwrap();
    running
        .queue
        .complete_if_leased(NODE, &not_found(&running.queue, &first[0]))
        .await
        .unwrap();
    let got = receiver.wait("a", 2, Duration::from_secs(10)).await;
    let e = event(&got[1]);
    assert_eq!(e.kind, pb::DeliveryEventKind::ProductFinal as i32);
    let s = e.search.unwrap();
    assert!(!s.r#final, "the search is not final yet");
    assert_eq!(s.products.len(), 1);
    assert!(s.products[0].r#final);
    finish_all(&running.queue).await;
    let got = receiver.wait("a", 4, Duration::from_secs(10)).await;
    let kinds: Vec<(i32, Option<u32>)> = got[1..]
        .iter()
        .map(|r| {
            let e = event(r);
            (e.kind, e.product_index)
        })
        .collect();
    let product = pb::DeliveryEventKind::ProductFinal as i32;
    let search_final = pb::DeliveryEventKind::SearchFinal as i32;
    assert!(kinds.contains(&(product, Some(0))) && kinds.contains(&(product, Some(1))));
    assert!(kinds.contains(&(search_final, None)), "{kinds:?}");
    wait_deliveries(&mut client, per_product, 3, pb::DeliveryState::Delivered).await;

    // A search answered from the caches alone is final as it is stored.
    let cached = search(&mut client, search_req(&["삼다수 2L"], &["b"])).await;
    let got = receiver.wait("b", 2, Duration::from_secs(10)).await;
    let e = event(&got[1]);
    assert_eq!(e.search_id, cached);
    assert_eq!(
        e.search.unwrap().products[0].malls[0].disposition,
        pb::Disposition::CachedNotFound as i32
    );
    running.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_receiver_failing_three_times_gets_it_on_the_fourth_try(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    let (addr, receiver) = Receiver::start().await;
    receiver.fail_first.store(3, Ordering::SeqCst);
    let running = coordinator(
        own_pool(&opts).await,
        addr,
        &["--delivery-max-attempts", "5"],
    )
    .await;
    let (mut client, _) = clients(&running).await;

    // A cancelled search is final: it is delivered with its cancelled status.
    let id = search(&mut client, search_req(&["삼다수 2L"], &["a"])).await;
    client
        .cancel_search(with_token(
            pb::CancelSearchRequest { search_id: id },
            CLIENT_TOKEN,
        ))
        .await
        .unwrap();
    let got = receiver.wait("a", 4, Duration::from_secs(10)).await;
    let d = wait_deliveries(&mut client, id, 1, pb::DeliveryState::Delivered).await;
    assert_eq!(d[0].attempts, 4, "{d:#?}");
    assert_eq!(d[0].last_status, 200);
    assert_eq!(
        d[0].last_error, "HTTP 503 Service Unavailable",
        "the last failure stays visible"
    );
    // Every attempt carried the same event and the same body, each signed anew.
    assert!(
        got.iter()
            .all(|r| r.event_id == got[0].event_id && r.body == got[0].body)
    );
    for r in &got {
        signature::verify(
            SECRET_A.as_bytes(),
            &r.signature,
            r.body.as_bytes(),
            now(),
            DEFAULT_TOLERANCE,
        )
        .unwrap();
    }
    let s = event(&got[3]).search.unwrap();
    assert!(s.r#final && s.cancelled);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.got("a").len(), 4, "nothing after the delivery");
    running.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_dead_delivery_shows_and_an_operator_retry_delivers_it(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    let (addr, receiver) = Receiver::start().await;
    receiver.fail_first.store(u32::MAX, Ordering::SeqCst);
    let running = coordinator(
        own_pool(&opts).await,
        addr,
        &["--delivery-max-attempts", "2", "--alert-for", "0s"],
    )
    .await;
    let (mut client, mut ops) = clients(&running).await;

    let id = search(&mut client, search_req(&["삼다수 2L"], &["a"])).await;
    finish_all(&running.queue).await;
    let dead = wait_deliveries(&mut client, id, 1, pb::DeliveryState::Dead).await;
    assert_eq!(dead[0].attempts, 2);
    assert_eq!(dead[0].last_status, 503);
    assert_eq!(dead[0].last_error, "HTTP 503 Service Unavailable");
    assert_eq!(receiver.got("a").len(), 2);

    // Ops: GetOps, /ops and the metrics see it.
    let snapshot = ops
        .get_ops(with_token(pb::GetOpsRequest {}, ADMIN))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(snapshot.deliveries_dead, 1);
    assert_eq!(snapshot.deliveries_pending, 0);
    let http = |path: &str| {
        let url = format!("http://{}{path}", running.http_addr);
        async move { reqwest::get(url).await.unwrap().text().await.unwrap() }
    };
    let ops_json: serde_json::Value = serde_json::from_str(&http("/ops").await).unwrap();
    assert_eq!(ops_json["deliveries"]["dead"], 1, "{ops_json}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let metrics = http("/metrics").await;
        if metrics.contains("lps_outbox_dead 1") {
            assert!(
                metrics.contains(r#"lps_deliveries_total{outcome="dead"} 1"#),
                "{metrics}"
            );
            assert!(
                metrics.contains(r#"lps_deliveries_total{outcome="retry"} 1"#),
                "{metrics}"
            );
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{metrics}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The built-in alert rule fires (the chart's PrometheusRule has it too).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let alerts = ops
            .get_ops(with_token(pb::GetOpsRequest {}, ADMIN))
            .await
            .unwrap()
            .into_inner()
            .alerts;
        if alerts
            .iter()
            .any(|a| a.rule == "deliveries_dead" && a.firing)
        {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{alerts:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The operator: only an admin may list and retry; a delivery that is not dead is not
    // retried; an unknown one is NOT_FOUND.
    let listed = ops
        .list_deliveries(with_token(
            pb::ListDeliveriesRequest {
                dead_only: true,
                ..Default::default()
            },
            ADMIN,
        ))
        .await
        .unwrap()
        .into_inner()
        .deliveries;
    let shown = lps_cli::delivery::text(&listed);
    assert!(
        shown.contains("dead") && shown.contains("HTTP 503"),
        "{shown}"
    );
    let err = ops
        .list_deliveries(with_token(
            pb::ListDeliveriesRequest::default(),
            CLIENT_TOKEN,
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    let err = ops
        .retry_delivery(with_token(
            pb::RetryDeliveryRequest { delivery_id: 999 },
            ADMIN,
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");

    receiver.fail_first.store(0, Ordering::SeqCst);
    ops.retry_delivery(with_token(
        pb::RetryDeliveryRequest {
            delivery_id: dead[0].delivery_id,
        },
        ADMIN,
    ))
    .await
    .unwrap();
    let got = receiver.wait("a", 3, Duration::from_secs(10)).await;
    assert_eq!(
        got[2].event_id, got[0].event_id,
        "the same event, for the receiver's dedupe"
    );
    let d = wait_deliveries(&mut client, id, 1, pb::DeliveryState::Delivered).await;
    assert_eq!(d[0].attempts, 1, "fresh attempts after the retry");
    let err = ops
        .retry_delivery(with_token(
            pb::RetryDeliveryRequest {
                delivery_id: dead[0].delivery_id,
            },
            ADMIN,
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("delivered"), "{err:?}");
    let after = ops
        .get_ops(with_token(pb::GetOpsRequest {}, ADMIN))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(after.deliveries_dead, 0);
    assert_eq!(after.deliveries_delivered_last_hour, 1);
    running.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_slow_receiver_times_out_and_holds_up_nobody(_: PgPoolOptions, opts: PgConnectOptions) {
    let (addr, receiver) = Receiver::start().await;
    let running = coordinator(
        own_pool(&opts).await,
        addr,
        &["--delivery-timeout", "300ms", "--delivery-concurrency", "2"],
    )
    .await;
    let (mut client, _) = clients(&running).await;
    let slow = search(&mut client, search_req(&["삼다수 2L"], &["slow"])).await;
    finish_all(&running.queue).await;
    receiver.wait("slow", 1, Duration::from_secs(5)).await;
    // While the slow receiver holds its attempts, other searches' events still go out
    // (several, with concurrency 2) and the queue still takes and finishes jobs.
    let started = tokio::time::Instant::now();
    let mut quick = Vec::new();
    for name in ["햇반 210g", "신라면 5입", "비비고 왕교자"] {
        quick.push(search(&mut client, search_req(&[name], &["a"])).await);
    }
    assert_eq!(finish_all(&running.queue).await, 3);
    receiver.wait("a", 3, Duration::from_secs(5)).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    let d = get_search(&mut client, slow).await.deliveries;
    assert_eq!(d.len(), 1);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut d = d;
    while d[0].last_error.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "{d:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        d = get_search(&mut client, slow).await.deliveries;
    }
    assert_eq!(d[0].last_error, "timed out after 300ms");
    assert_eq!(d[0].last_status, 0);
    running.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn an_unconfigured_destination_is_invalid_argument(_: PgPoolOptions, opts: PgConnectOptions) {
    use tonic_types::StatusExt as _;
    let (addr, _receiver) = Receiver::start().await;
    let pool = own_pool(&opts).await;
    let running = coordinator(pool.clone(), addr, &[]).await;
    let (mut client, _) = clients(&running).await;
    for (destinations, field) in [
        (&["a", "orders"][..], "destinations[1]"),
        (&["https://evil.example/hook"][..], "destinations[0]"),
        (&["a", "a"][..], "destinations[1]"),
    ] {
        let err = client
            .search(with_token(
                search_req(&["삼다수 2L"], destinations),
                CLIENT_TOKEN,
            ))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert!(err.message().starts_with(&format!("{field}: ")), "{err:?}");
        let violations = err
            .get_error_details()
            .bad_request()
            .map(|b| b.field_violations.clone())
            .unwrap_or_default();
        assert_eq!(violations.len(), 1, "{err:?}");
        assert_eq!(violations[0].field, field);
    }
    let mut req = search_req(&["삼다수 2L"], &[]);
    req.notify_each_product = true;
    let err = client
        .search(with_token(req, CLIENT_TOKEN))
        .await
        .unwrap_err();
    assert!(
        err.message().starts_with("notify_each_product: "),
        "{err:?}"
    );
    let stored: i64 = sqlx::query_scalar("select count(*) from search_request")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 0, "nothing of a refused request is stored");
    running.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn two_replicas_on_one_database_deliver_each_event_once(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    const SEARCHES: usize = 60;
    let (addr, receiver) = Receiver::start().await;
    let replica = |id: &'static str| ["--coordinator-id", id, "--delivery-concurrency", "4"];
    let one = coordinator(own_pool(&opts).await, addr, &replica("one")).await;
    let two = coordinator(own_pool(&opts).await, addr, &replica("two")).await;
    let (mut client, _) = clients(&one).await;
    let mut ids = Vec::new();
    for i in 0..SEARCHES {
        let name = format!("상품 {i}");
        ids.push(search(&mut client, search_req(&[&name], &["a", "b"])).await);
    }
    // Finished from both replicas' queues at once, so both insert events as the other
    // claims them.
    let (n1, n2) = tokio::join!(finish_all(&one.queue), finish_all(&two.queue));
    assert_eq!(n1 + n2, SEARCHES);
    receiver.wait("a", SEARCHES, Duration::from_secs(30)).await;
    receiver.wait("b", SEARCHES, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = receiver.got.lock().unwrap().clone();
    assert_eq!(got.len(), 2 * SEARCHES, "each event once");
    let mut per_event: HashMap<&str, usize> = HashMap::new();
    for r in &got {
        *per_event.entry(r.event_id.as_str()).or_default() += 1;
    }
    assert_eq!(per_event.len(), 2 * SEARCHES);
    assert!(per_event.values().all(|n| *n == 1));
    let pool = own_pool(&opts).await;
    let states: Vec<(String, i64)> =
        sqlx::query_as("select d.state::text, count(*) from delivery d group by 1 order by 1")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(states, [("delivered".to_owned(), 2 * SEARCHES as i64)]);
    // Each replica counts what it delivered: together every event once, and both took part.
    let mut delivered = Vec::new();
    for running in [&one, &two] {
        let metrics = reqwest::get(format!("http://{}/metrics", running.http_addr))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let line = metrics
            .lines()
            .find(|l| l.starts_with(r#"lps_deliveries_total{outcome="delivered"}"#))
            .unwrap()
            .to_owned();
        delivered.push(line.rsplit(' ').next().unwrap().parse::<usize>().unwrap());
    }
    eprintln!("deliveries per replica: {delivered:?}");
    assert_eq!(delivered.iter().sum::<usize>(), 2 * SEARCHES);
    assert!(delivered.iter().all(|n| *n > 0), "{delivered:?}");
    for id in &ids[..3] {
        let s = event(got.iter().find(|r| event(r).search_id == *id).unwrap());
        assert_eq!(s.search_id, *id);
    }
    one.shutdown().await;
    two.shutdown().await;
}

/// The trigger's lock: two transactions finishing a search's last two jobs at once still
/// make exactly one event per destination (each would otherwise see the other's job
/// running and neither would insert).
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn the_last_two_jobs_finishing_at_once_make_one_event(pool: PgPool) {
    use lps_coordinator::queue::{EnqueueContext, QueueConfig};
    use lps_proto::model::{Priority, ProductSpec, SearchRequest};
    const SEARCHES: usize = 30;
    // Two queues, two batchers: their completions are separate transactions.
    let one = Queue::new(pool.clone(), QueueConfig::default());
    let two = Queue::new(pool.clone(), QueueConfig::default());
    one.upsert_mall(&MallLimits::unlimited(MallId::new(MALL).unwrap()))
        .await
        .unwrap();
    for i in 0..SEARCHES {
        let products = vec![
            ProductSpec::new(None, &format!("첫째 {i}")).unwrap(),
            ProductSpec::new(None, &format!("둘째 {i}")).unwrap(),
        ];
        let req = SearchRequest::new(
            products,
            vec![MallId::new(MALL).unwrap()],
            Priority::INTERACTIVE,
            None,
            None,
        )
        .unwrap()
        .with_destinations(vec!["a".into(), "b".into()], false)
        .unwrap();
        one.enqueue(&req, &EnqueueContext::default()).await.unwrap();
    }
    let leases: HashMap<i64, _> = one
        .claim(NODE, None, 2 * SEARCHES as u32)
        .await
        .unwrap()
        .into_iter()
        .map(|j| (j.lease.job_id, j.lease))
        .collect();
    assert_eq!(leases.len(), 2 * SEARCHES);
    let pairs: Vec<(i64, Vec<i64>)> = sqlx::query_as(
        "select search_id, array_agg(job_id order by job_id) from search_item group by 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    for (_, jobs) in &pairs {
        let first = JobResult::not_found(leases[&jobs[0]]);
        let second = JobResult::not_found(leases[&jobs[1]]);
        let (a, b) = tokio::join!(
            one.complete_if_leased(NODE, &first),
            two.complete_if_leased(NODE, &second),
        );
        a.unwrap();
        b.unwrap();
    }
    let events: Vec<(i64, i64)> = sqlx::query_as(
        "select search_id, count(*) from delivery where product_index is null group by 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(events.len(), SEARCHES, "every search has its events");
    assert!(
        events.iter().all(|(_, n)| *n == 2),
        "one per destination: {events:?}"
    );
}

/// A replica claims only events of destinations it has configured: one without `b` (a
/// rollout adding it) leaves b's events pending, untouched, for a replica that has it.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_replica_leaves_events_of_destinations_it_lacks(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    let (addr, receiver) = Receiver::start().await;
    let only_a = format!("a=http://{addr}/a");
    let secret_a = format!("a={SECRET_A}");
    let narrow = common::start_on(
        own_pool(&opts).await,
        &[
            "--coordinator-id",
            "narrow",
            "--destinations",
            &only_a,
            "--destination-secrets",
            &secret_a,
            "--delivery-poll",
            "20ms",
        ],
    )
    .await;
    narrow
        .queue
        .upsert_mall(&MallLimits::unlimited(MallId::new(MALL).unwrap()))
        .await
        .unwrap();
    // Stored straight through the queue: this replica's SearchService would refuse `b`.
    let req = lps_proto::model::SearchRequest::new(
        vec![lps_proto::model::ProductSpec::new(None, "삼다수 2L").unwrap()],
        vec![MallId::new(MALL).unwrap()],
        lps_proto::model::Priority::INTERACTIVE,
        None,
        None,
    )
    .unwrap()
    .with_destinations(vec!["a".into(), "b".into()], false)
    .unwrap();
    let ctx = lps_coordinator::queue::EnqueueContext {
        client: common::CLIENT_NAME.into(),
        ..Default::default()
    };
    let id = narrow.queue.enqueue(&req, &ctx).await.unwrap().search_id;
    finish_all(&narrow.queue).await;
    receiver.wait("a", 1, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(receiver.got("b").is_empty());
    let (mut client, _) = clients(&narrow).await;
    let d = get_search(&mut client, id).await.deliveries;
    let b = d.iter().find(|d| d.destination == "b").unwrap();
    assert_eq!(b.state, pb::DeliveryState::Pending as i32, "{d:#?}");
    assert_eq!(b.attempts, 0, "no attempt spent on a replica without b");

    let full = coordinator(own_pool(&opts).await, addr, &["--coordinator-id", "full"]).await;
    receiver.wait("b", 1, Duration::from_secs(10)).await;
    wait_deliveries(&mut client, id, 2, pb::DeliveryState::Delivered).await;
    assert_eq!(receiver.got("a").len(), 1);
    full.shutdown().await;
    narrow.shutdown().await;
}
