//! Helpers shared by the coordinator's service tests: a real coordinator on 127.0.0.1:0
//! with test tokens, on a pool of its own (its shutdown closes that pool; the test's
//! `#[sqlx::test]` pool stays usable for assertions).
// NB: each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use clap::Parser as _;
use lps_coordinator::{
    app::{self, Running},
    config::Cli,
    queue::MallLimits,
};
use lps_proto::{
    model::MallId,
    pb::{self, search_service_client::SearchServiceClient},
};
use lps_test_kit::stack::StackHandle;
use sqlx::{PgPool, postgres::PgPoolOptions};
use tonic::{Request, transport::Channel};

pub mod pki;

pub const NODE_TOKEN: &str = "node-token-for-tests-0001";
pub const CLIENT_TOKEN: &str = "client-token-for-tests-01";
/// The name of [`CLIENT_TOKEN`]'s client: searches enqueued straight through the queue
/// under it are the test client's to read.
pub const CLIENT_NAME: &str = "tests";
/// The admin token every coordinator [`start`] makes accepts (unless the test names its
/// own `--admin-tokens`): what an operator's `lpsctl ops` runs with.
pub const ADMIN_TOKEN: &str = "admin-token-for-tests-001";

/// Starts a coordinator on the test database with `extra` flags on top of the defaults
/// (loopback addresses, the test tokens). `--grpc-addr` in `extra` replaces the default.
pub async fn start(pool: &PgPool, extra: &[&str]) -> Running {
    let own = PgPoolOptions::new()
        .max_connections(10)
        .connect_with(pool.connect_options().as_ref().clone())
        .await
        .unwrap();
    start_on(own, extra).await
}

/// [`start`] on `own`, a pool of its own (closed by its shutdown), e.g. one that reaches
/// the database through a forwarder the test controls.
pub async fn start_on(own: PgPool, extra: &[&str]) -> Running {
    let mut args = vec![
        "coordinator",
        "--database-url",
        "postgres://unused",
        "--http-addr",
        "127.0.0.1:0",
        "--client-tokens",
        "tests=client-token-for-tests-01",
        "--node-tokens",
        NODE_TOKEN,
    ];
    if !extra.contains(&"--grpc-addr") {
        args.extend(["--grpc-addr", "127.0.0.1:0"]);
    }
    if !extra.contains(&"--admin-tokens") {
        args.extend(["--admin-tokens", ADMIN_TOKEN]);
    }
    args.extend_from_slice(extra);
    let config = Cli::try_parse_from(args).unwrap().serve.validate().unwrap();
    app::start_with_pool(config, own).await.unwrap()
}

/// [`start`], then `mall` registered without limits.
pub async fn start_with_mall(pool: &PgPool, mall: &str, extra: &[&str]) -> Running {
    let running = start(pool, extra).await;
    running
        .queue
        .upsert_mall(&MallLimits::unlimited(MallId::new(mall).unwrap()))
        .await
        .unwrap();
    running
}

/// `message` with `authorization: Bearer <token>`.
pub fn with_token<T>(message: T, token: &str) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    request
}

/// The ops snapshot of `running` as [`ADMIN_TOKEN`] reads it (what an operator's `lpsctl
/// ops` prints).
pub async fn ops_snapshot(running: &Running) -> pb::OpsSnapshot {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", running.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    pb::ops_service_client::OpsServiceClient::new(channel)
        .get_ops(with_token(pb::GetOpsRequest {}, ADMIN_TOKEN))
        .await
        .unwrap()
        .into_inner()
}

/// Polls GetSearch (as `token`) until search `search_id` is final; panics when it is not
/// within `within`.
pub async fn wait_final(
    client: &mut SearchServiceClient<Channel>,
    token: &str,
    search_id: i64,
    within: Duration,
) -> pb::SearchStatus {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let status = client
            .get_search(with_token(pb::GetSearchRequest { search_id }, token))
            .await
            .unwrap()
            .into_inner();
        if status.r#final {
            return status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "search {search_id} not final within {within:?}: {status:#?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A temporary directory `lps-<tag>-<pid>-<random>`, removed on drop.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "lps-{tag}-{}-{}",
            std::process::id(),
            fastrand::u32(..)
        ));
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The ports of the stack's gateway, as strings for a `--proxy-ports` list.
pub fn gateway_ports(stack: &StackHandle) -> Vec<String> {
    stack
        .gateway
        .ports()
        .iter()
        .map(|p| p.addr.port().to_string())
        .collect()
}

/// The texts posted to a [`webhook`] receiver, in order.
pub type Posts = Arc<Mutex<Vec<String>>>;

/// A Slack-compatible incoming-webhook receiver on 127.0.0.1: `POST /hook` with
/// `{"text": …}`. Returns its address and what it received.
pub async fn webhook() -> (SocketAddr, Posts) {
    use axum::{Json, Router, extract::State, routing::post};
    let posts: Posts = Arc::default();
    let app = Router::new()
        .route(
            "/hook",
            post(
                |State(posts): State<Posts>, Json(body): Json<serde_json::Value>| async move {
                    posts
                        .lock()
                        .unwrap()
                        .push(body["text"].as_str().unwrap_or_default().to_owned());
                    "ok"
                },
            ),
        )
        .with_state(posts.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, posts)
}

/// The posts of `posts` that `keep` selects, once there are at least `n` of them (or after
/// 10 s, whatever there is).
pub async fn wait_for_posts(posts: &Posts, n: usize, keep: impl Fn(&str) -> bool) -> Vec<String> {
    let kept = || -> Vec<String> {
        posts
            .lock()
            .unwrap()
            .iter()
            .filter(|p| keep(p))
            .cloned()
            .collect()
    };
    for _ in 0..100 {
        if kept().len() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    kept()
}
