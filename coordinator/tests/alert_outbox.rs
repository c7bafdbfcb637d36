//! Alert announcements go through the delivery outbox: a real coordinator, its alert rule
//! `oldest_queued_seconds` firing on a job nobody claims, and a local webhook receiver
//! that refuses the first posts. The announcement is retried with backoff until the
//! receiver takes it, signed with LPS_ALERT_WEBHOOK_SECRET; a receiver that never takes it
//! makes the delivery dead after LPS_DELIVERY_MAX_ATTEMPTS, and `lpsctl deliveries` (the
//! ops service's ListDeliveries) shows it with its rule and error.

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use lps_coordinator::{app::Running, delivery::signature, queue::EnqueueContext};
use lps_proto::{
    model::{MallId, Priority, ProductSpec, SearchRequest},
    pb,
};
use sqlx::PgPool;

mod common;

const MALL: &str = "testmall-alpha";
const ADMIN: &str = "ops-admin-token-00001";
const SECRET: &str = "alert-webhook-secret-0001";

/// One post the receiver got: its body, signature header and the status it answered.
#[derive(Debug, Clone)]
struct Post {
    body: String,
    signature: Option<String>,
    status: u16,
}

/// A webhook receiver answering 500 to its first `refuse` posts, then 200.
async fn receiver(refuse: usize) -> (SocketAddr, Arc<Mutex<Vec<Post>>>) {
    use axum::{Router, extract::State, http::HeaderMap, routing::post};
    type Shared = (Arc<Mutex<Vec<Post>>>, Arc<AtomicUsize>, usize);
    let posts: Arc<Mutex<Vec<Post>>> = Arc::default();
    let state: Shared = (posts.clone(), Arc::default(), refuse);
    let app =
        Router::new()
            .route(
                "/hook",
                post(
                    |State((posts, seen, refuse)): State<Shared>,
                     headers: HeaderMap,
                     body: String| async move {
                        let n = seen.fetch_add(1, Ordering::SeqCst);
                        let status = if n < refuse { 500 } else { 200 };
                        posts.lock().unwrap().push(Post {
                            body,
                            signature: headers
                                .get(signature::SIGNATURE_HEADER)
                                .and_then(|v| v.to_str().ok())
                                .map(str::to_owned),
                            status,
                        });
                        axum::http::StatusCode::from_u16(status).unwrap()
                    },
                ),
            )
            .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, posts)
}

async fn coordinator(pool: &PgPool, hook: SocketAddr, max_attempts: &str) -> Running {
    let hook = format!("http://{hook}/hook");
    let flags = [
        "--alert-interval",
        "200ms",
        "--alert-for",
        "0s",
        "--alert-resolve-after",
        "0s",
        "--alert-oldest-queued",
        "1s",
        "--alert-webhook-url",
        &hook,
        "--alert-webhook-secret",
        SECRET,
        "--delivery-backoff-base",
        "100ms",
        "--delivery-backoff-cap",
        "200ms",
        "--delivery-poll",
        "100ms",
        "--delivery-max-attempts",
        max_attempts,
        "--admin-tokens",
        "ops=ops-admin-token-00001",
        "--malls",
        MALL,
    ];
    common::start_with_mall(pool, MALL, &flags).await
}

/// Queues a job no node claims, so `oldest_queued_seconds` fires after a second.
async fn queue_unclaimed(running: &Running) {
    let req = SearchRequest::new(
        vec![ProductSpec::new(None, "아무도 안 가져가는 상품").unwrap()],
        vec![MallId::new(MALL).unwrap()],
        Priority::BATCH,
        None,
        None,
    )
    .unwrap();
    running
        .queue
        .enqueue(&req, &EnqueueContext::default())
        .await
        .unwrap();
}

/// Waits up to 15 s for `done` over the posts so far; returns them.
async fn posts_until(posts: &Arc<Mutex<Vec<Post>>>, done: impl Fn(&[Post]) -> bool) -> Vec<Post> {
    for _ in 0..150 {
        let now = posts.lock().unwrap().clone();
        if done(&now) {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    posts.lock().unwrap().clone()
}

async fn alert_deliveries(running: &Running, dead_only: bool) -> Vec<pb::Delivery> {
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", running.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut ops = pb::ops_service_client::OpsServiceClient::new(channel);
    ops.list_deliveries(common::with_token(
        pb::ListDeliveriesRequest {
            dead_only,
            ..Default::default()
        },
        ADMIN,
    ))
    .await
    .unwrap()
    .into_inner()
    .deliveries
    .into_iter()
    .filter(|d| d.kind == pb::DeliveryEventKind::Alert as i32)
    .collect()
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_refused_alert_is_retried_with_backoff_signed_until_delivered(pool: PgPool) {
    let (hook, posts) = receiver(2).await;
    let running = coordinator(&pool, hook, "5").await;
    queue_unclaimed(&running).await;

    let got = posts_until(&posts, |p| p.iter().any(|p| p.status == 200)).await;
    let firing: Vec<&Post> = got
        .iter()
        .filter(|p| p.body.contains("oldest_queued_seconds firing"))
        .collect();
    assert_eq!(
        firing.iter().map(|p| p.status).collect::<Vec<_>>(),
        [500, 500, 200],
        "refused twice, retried, then taken: {got:#?}"
    );
    // Every attempt sends the same bytes, signed with the webhook's secret.
    assert!(firing.iter().all(|p| p.body == firing[0].body), "{got:#?}");
    let text: serde_json::Value = serde_json::from_str(&firing[0].body).unwrap();
    assert!(
        text["text"].as_str().unwrap().contains("deployment"),
        "{text}"
    );
    for p in &firing {
        let header = p.signature.as_deref().expect("a signed post");
        signature::verify(
            SECRET.as_bytes(),
            header,
            p.body.as_bytes(),
            chrono::Utc::now().timestamp(),
            Duration::from_secs(300),
        )
        .unwrap_or_else(|e| panic!("signature {header}: {e:?}"));
    }

    // The outbox shows it delivered after 3 attempts, with its rule. NB: the receiver has
    // the 200 before the worker records it, so the listing is read until it says so.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let listed = loop {
        let listed = alert_deliveries(&running, false).await;
        let settled = listed.iter().any(|d| {
            d.alert_rule == "oldest_queued_seconds"
                && d.state != pb::DeliveryState::Delivering as i32
        });
        if settled || tokio::time::Instant::now() > deadline {
            break listed;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let delivered = listed
        .iter()
        .find(|d| d.alert_rule == "oldest_queued_seconds")
        .unwrap_or_else(|| panic!("{listed:#?}"));
    assert_eq!(
        delivered.state,
        pb::DeliveryState::Delivered as i32,
        "{delivered:#?}"
    );
    assert_eq!(delivered.attempts, 3);
    assert_eq!(delivered.search_id, 0);
    let shown = lps_cli::delivery::text(&listed);
    assert!(shown.contains("alert oldest_queued_seconds"), "{shown}");
    running.shutdown().await;
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn an_alert_the_webhook_never_takes_is_dead_after_its_attempts(pool: PgPool) {
    let (hook, posts) = receiver(usize::MAX).await;
    let running = coordinator(&pool, hook, "2").await;
    queue_unclaimed(&running).await;

    let mut dead = Vec::new();
    for _ in 0..150 {
        dead = alert_deliveries(&running, true).await;
        if dead.iter().any(|d| d.alert_rule == "oldest_queued_seconds") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let d = dead
        .iter()
        .find(|d| d.alert_rule == "oldest_queued_seconds")
        .unwrap_or_else(|| panic!("no dead alert delivery: {dead:#?}"));
    assert_eq!(d.attempts, 2, "{d:#?}");
    assert_eq!(d.last_status, 500, "{d:#?}");
    assert!(d.last_error.contains("500"), "{d:#?}");
    let firing = posts
        .lock()
        .unwrap()
        .iter()
        .filter(|p| p.body.contains("oldest_queued_seconds firing"))
        .count();
    assert_eq!(firing, 2, "two attempts, no more");
    running.shutdown().await;
}
