//! Refusing before decoding (`grpc::admission`), on the real coordinator on 127.0.0.1:0:
//! an unauthenticated call is refused from its headers, whatever its body; an authenticated
//! one is held to its method's budget; a refused Search stores nothing.
//!
//! The bodies are sent as raw bytes (a codec that writes them verbatim), so the test
//! process never builds the millions of messages it sends.

use std::time::{Duration, Instant};

use bytes::{Buf as _, BufMut as _, Bytes};
use lps_coordinator::db::MIGRATOR;
use lps_proto::{
    model::budget::{SEARCH_REQUEST_MAX_BYTES, SMALL_REQUEST_MAX_BYTES},
    pb,
};
use prost::Message as _;
use sqlx::PgPool;
use tonic::{
    Code, Request, Status,
    codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder},
    codegen::http::uri::PathAndQuery,
    transport::Channel,
};

mod common;

const SEARCH: &str = "/lps.v1.SearchService/Search";

/// Sends `Bytes` as the message and ignores the answer's: the status is what counts.
#[derive(Debug, Clone, Copy, Default)]
struct Raw;

impl Codec for Raw {
    type Encode = Bytes;
    type Decode = ();
    type Encoder = Raw;
    type Decoder = Raw;

    fn encoder(&mut self) -> Raw {
        Raw
    }

    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = ();
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<()>, Status> {
        src.advance(src.remaining());
        Ok(Some(()))
    }
}

/// A `SearchRequest` of `n` empty products, encoded (2 bytes each: what the hostile-frames
/// suite sent, 1.9 M of them in 3.8 MB).
fn empty_products(n: usize) -> Bytes {
    let mut out = Vec::with_capacity(n * 2);
    for _ in 0..n {
        out.extend_from_slice(&[0x0a, 0x00]);
    }
    Bytes::from(out)
}

async fn call(channel: &Channel, path: &'static str, body: Bytes, token: Option<&str>) -> Status {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.unwrap();
    let request = match token {
        Some(token) => common::with_token(body, token),
        None => Request::new(body),
    };
    match grpc
        .unary(request, PathAndQuery::from_static(path), Raw)
        .await
    {
        Ok(_) => Status::ok(""),
        Err(status) => status,
    }
}

async fn channel(running: &lps_coordinator::app::Running) -> Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{}", running.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// The process's peak resident memory so far (`VmHWM`), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

async fn searches_stored(pool: &PgPool) -> i64 {
    sqlx::query_scalar::<_, i64>("select count(*) from search_request")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn an_unauthenticated_call_is_refused_before_its_body_is_read(pool: PgPool) {
    let running = common::start_with_mall(&pool, "testmall-alpha", &[]).await;
    let channel = channel(&running).await;

    // Larger than any limit (tonic's own is 4 MiB): refused for its token, not its size,
    // so the body was never read, let alone decoded.
    let huge = empty_products(4 * 1024 * 1024);
    let status = call(&channel, SEARCH, huge.clone(), None).await;
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    let status = call(&channel, SEARCH, huge, Some("not-a-token")).await;
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    assert!(
        status.message().contains("unknown bearer token"),
        "{status:?}"
    );

    // Four at once of what cost +157 MB before: the coordinator's peak stays bounded.
    let body = empty_products(1_900_000);
    let before = peak_rss();
    let calls: Vec<_> = (0..4)
        .map(|_| {
            let (channel, body) = (channel.clone(), body.clone());
            tokio::spawn(async move { call(&channel, SEARCH, body, None).await })
        })
        .collect();
    for c in calls {
        let status = c.await.unwrap();
        assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    }
    let grown = peak_rss().saturating_sub(before);
    // NB: the client's own encoding buffers (4 × 3.8 MB, doubled as they grow) are in
    // this process too; before the layer, decoding alone took well over 100 MB.
    assert!(
        grown < 64 * 1024 * 1024,
        "peak RSS grew {} MB for four refused calls",
        grown / (1024 * 1024)
    );
    assert_eq!(searches_stored(&pool).await, 0);

    // A node stream without a token is refused the same way, whatever its first frame.
    let status = call(
        &channel,
        "/lps.v1.NodeService/Connect",
        empty_products(8 * 1024 * 1024),
        None,
    )
    .await;
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    running.shutdown().await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn an_authenticated_call_is_held_to_its_methods_budget(pool: PgPool) {
    let running = common::start_with_mall(&pool, "testmall-alpha", &[]).await;
    let channel = channel(&running).await;
    let token = Some(common::CLIENT_TOKEN);

    // Over the byte budget: refused while it is read, naming the limit.
    let status = call(
        &channel,
        SEARCH,
        empty_products(SEARCH_REQUEST_MAX_BYTES),
        token,
    )
    .await;
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status
            .message()
            .contains(&format!("limit of {SEARCH_REQUEST_MAX_BYTES} bytes")),
        "{status:?}"
    );

    // Within the bytes, over the elements: INVALID_ARGUMENT naming the field, counted on
    // the wire before decoding.
    let status = call(&channel, SEARCH, empty_products(201), token).await;
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status
            .message()
            .contains("products: at most 200 elements, got 201"),
        "{status:?}"
    );

    // Another method has the small budget.
    let status = call(
        &channel,
        "/lps.v1.SearchService/GetSearch",
        Bytes::from(vec![0u8; SMALL_REQUEST_MAX_BYTES + 1]),
        token,
    )
    .await;
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(searches_stored(&pool).await, 0);

    // A request within its budget still goes through.
    let ok = pb::SearchRequest {
        products: vec![pb::Product {
            name: "제주 삼다수 2L x 12".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let status = call(&channel, SEARCH, Bytes::from(ok.encode_to_vec()), token).await;
    assert_eq!(status.code(), Code::Ok, "{status:?}");
    assert_eq!(searches_stored(&pool).await, 1);
    running.shutdown().await;
}

/// The burst of the hostile-frames suite, measured: the coordinator's resident memory
/// before, at its peak (the kernel's high-water mark), at the end and 30 s after four
/// concurrent unauthenticated 3.8 MB Search calls (BENCHMARKS.md). Run with
/// `cargo test -p lps-coordinator --test admission -- --ignored --nocapture rss_of_a_burst`
/// (the coordinator in this process, the client's buffers counted with it), or against a
/// running coordinator binary with `LPS_BENCH_COORDINATOR=<grpc addr>,<pid>`.
#[sqlx::test(migrator = "MIGRATOR")]
#[ignore = "a measurement (30 s), not a check"]
async fn rss_of_a_burst(pool: PgPool) {
    /// `key` (`VmRSS`, `VmHWM`) of `/proc/<pid>/status`, in MB.
    fn proc_mb(pid: &str, key: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap();
        kb / 1024
    }
    let external = std::env::var("LPS_BENCH_COORDINATOR").ok();
    let (running, channel, pid) = match external.as_deref().and_then(|v| v.split_once(',')) {
        Some((addr, pid)) => {
            let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
                .unwrap()
                .connect()
                .await
                .unwrap();
            (None, channel, pid.to_owned())
        }
        None => {
            let running = common::start_with_mall(&pool, "testmall-alpha", &[]).await;
            let channel = channel(&running).await;
            (Some(running), channel, "self".to_owned())
        }
    };
    let body = empty_products(1_900_000);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = proc_mb(&pid, "VmRSS");
    // NB: the kernel's high-water mark, not a sampler: `#[sqlx::test]` runs on one thread,
    // where a sampling task would only run after the decoding it should catch.
    let peak_before = proc_mb(&pid, "VmHWM");
    let started = Instant::now();
    let calls: Vec<_> = (0..4)
        .map(|_| {
            let (channel, body) = (channel.clone(), body.clone());
            tokio::spawn(async move { call(&channel, SEARCH, body, None).await })
        })
        .collect();
    let mut codes = Vec::new();
    for c in calls {
        codes.push(c.await.unwrap().code());
    }
    let took = started.elapsed();
    let after_burst = proc_mb(&pid, "VmRSS");
    let peak = proc_mb(&pid, "VmHWM");
    tokio::time::sleep(Duration::from_secs(30)).await;
    let after_30s = proc_mb(&pid, "VmRSS");
    eprintln!(
        "burst ({pid}): 4 × {} bytes unauthenticated, codes {codes:?}, {took:?}; RSS MB: before {before}, peak during {peak} (high-water mark before: {peak_before}), at the end {after_burst}, 30 s after {after_30s}",
        body.len(),
    );
    if let Some(running) = running {
        running.shutdown().await;
    }
}

/// A node id seen for the first time whose stream is not welcomed (here re-attaching its
/// jobs fails: a trigger refuses every update of `job`) leaves no `node_session` row.
#[sqlx::test(migrator = "MIGRATOR")]
async fn a_hello_that_is_not_welcomed_records_no_node(pool: PgPool) {
    use lps_proto::pb::{node_message::Body as In, node_service_client::NodeServiceClient};
    let running = common::start_with_mall(&pool, "testmall-alpha", &[]).await;
    sqlx::raw_sql(
        "create function refuse_job_update() returns trigger language plpgsql as
           $$ begin raise exception 'job updates refused by the test'; end $$;
         create trigger refuse_job_update before update on job
           for each statement execute function refuse_job_update();",
    )
    .execute(&pool)
    .await
    .unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(pb::NodeMessage {
        body: Some(In::Hello(pb::Hello {
            protocol_version: lps_proto::PROTOCOL_VERSION,
            node_id: "never-welcomed".into(),
            slots: 1,
            malls: vec!["testmall-alpha".into()],
            version: "test".into(),
            instance: "test-1".into(),
            ..Default::default()
        })),
    })
    .await
    .unwrap();
    let mut client = NodeServiceClient::new(channel(&running).await);
    let answer = async {
        let mut inbound = client
            .connect(common::with_token(
                tokio_stream::wrappers::ReceiverStream::new(rx),
                common::NODE_TOKEN,
            ))
            .await?
            .into_inner();
        inbound.message().await
    }
    .await;
    assert!(
        !matches!(&answer, Ok(Some(m)) if matches!(m.body, Some(pb::coordinator_message::Body::Welcome(_)))),
        "{answer:?}"
    );
    // The stream task ends after its refusal; give it a moment to clean up.
    let deadline = Instant::now() + Duration::from_secs(5);
    let rows = loop {
        let rows: i64 = sqlx::query_scalar(
            "select count(*) from node_session where node_id = 'never-welcomed'",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        if rows == 0 || Instant::now() > deadline {
            break rows;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(rows, 0, "a stream never welcomed left a node_session row");
    drop(tx);
    running.shutdown().await;
}
