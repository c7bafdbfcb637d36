//! Operations surface of a real coordinator: /healthz, /readyz, /metrics, /ops, and alert
//! rules announced once per transition to a local Slack-compatible webhook receiver, with
//! two replicas evaluating the same database.

use std::{net::SocketAddr, time::Duration};

use common::{wait_for_posts, webhook};
use lps_coordinator::{app::Running, queue::EnqueueContext};
use lps_proto::model::{MallId, Priority, ProductSpec, SearchRequest};
use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};

mod common;

const MALL: &str = "testmall-alpha";

async fn coordinator(pool: PgPool, hook: SocketAddr) -> Running {
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
        "--malls",
        MALL,
    ];
    common::start_with_mall(&pool, MALL, &flags).await
}

async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let r = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn health_metrics_ops_and_alerts_once_per_transition(
    _: PgPoolOptions,
    opts: PgConnectOptions,
) {
    let pool = || {
        PgPoolOptions::new()
            .max_connections(8)
            .connect_with(opts.clone())
    };
    let (hook, posts) = webhook().await;
    let a = coordinator(pool().await.unwrap(), hook).await;
    let b = coordinator(pool().await.unwrap(), hook).await;

    assert_eq!(get(a.http_addr, "/healthz").await.0, 200);
    assert_eq!(get(a.http_addr, "/readyz").await.0, 200);

    // A job nobody claims: after 1 s the oldest-queued rule fires.
    let req = SearchRequest::new(
        vec![ProductSpec::new(None, "아무도 안 가져가는 상품").unwrap()],
        vec![MallId::new(MALL).unwrap()],
        Priority::BATCH,
        None,
        None,
    )
    .unwrap();
    let search_id = a
        .queue
        .enqueue(&req, &EnqueueContext::default())
        .await
        .unwrap()
        .search_id;
    let fired = wait_for_posts(&posts, 1, |_| true).await;
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert!(
        fired[0].contains("oldest_queued_seconds firing"),
        "{fired:?}"
    );

    // More evaluations by both replicas: no repeat while it keeps firing.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        posts.lock().unwrap().len(),
        1,
        "announced more than once: {:?}",
        posts.lock().unwrap()
    );

    let (status, metrics) = get(b.http_addr, "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains("lps_jobs{state=\"queued\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("lps_alert_firing{rule=\"oldest_queued_seconds\"} 1"),
        "{metrics}"
    );
    let (status, ops) = get(a.http_addr, "/ops").await;
    assert_eq!(status, 200);
    let ops: serde_json::Value = serde_json::from_str(&ops).unwrap();
    assert_eq!(ops["queue"]["queued"], 1, "{ops}");
    // The firing rule is in the snapshot, on HTTP and on GetOps, from either replica.
    let firing = ops["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["rule"] == "oldest_queued_seconds")
        .cloned();
    assert_eq!(
        firing.map(|a| a["firing"].clone()),
        Some(true.into()),
        "{ops}"
    );
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", b.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = lps_proto::pb::ops_service_client::OpsServiceClient::new(channel);
    let snapshot = grpc
        .get_ops(common::with_token(
            lps_proto::pb::GetOpsRequest {},
            common::ADMIN_TOKEN,
        ))
        .await
        .unwrap()
        .into_inner();
    let rule = snapshot
        .alerts
        .iter()
        .find(|a| a.rule == "oldest_queued_seconds")
        .expect("GetOps lists the rule");
    assert!(rule.firing && rule.value > rule.threshold, "{rule:?}");
    assert!(rule.since.is_some());

    // The job goes away: the rule resolves, announced once.
    a.queue.cancel_search(search_id, None).await.unwrap();
    let all = wait_for_posts(&posts, 2, |_| true).await;
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(all[1].contains("oldest_queued_seconds resolved"), "{all:?}");
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(posts.lock().unwrap().len(), 2);

    a.shutdown().await;
    b.shutdown().await;
}

/// Every exit IP cooling for one mall after blocks: the deployment-wide figure still says
/// every port is free (they serve other malls), but the mall's own figure, the minimum
/// over malls, what `lpsctl ops` prints and the ports alert (fired once) all say 0.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn a_mall_whose_every_port_cools_reads_zero_and_fires_once(pool: PgPool) {
    let (hook, posts) = webhook().await;
    let a = coordinator(pool.clone(), hook).await;
    for sql in [
        "insert into proxy_port (host, port) select 'gw', g from generate_series(10001, 10008) g",
        "insert into proxy_port_cooldown (host, port, mall, cooldown_until)
           select 'gw', g, 'testmall-alpha', now() + interval '10 minutes'
           from generate_series(10001, 10008) g",
    ] {
        sqlx::query(sql).execute(&pool).await.unwrap();
    }
    let fired = wait_for_posts(&posts, 1, |p| p.contains("proxy_ports_available_pct")).await;
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert!(
        fired[0].contains("proxy_ports_available_pct firing: 0.00")
            && fired[0].contains("testmall-alpha: 0 of 8 ports available (8 cooling)"),
        "{fired:?}"
    );
    // It says where and how to look.
    assert!(
        fired[0].contains("deployment lps, replica ") && fired[0].contains("`lpsctl ports`"),
        "{fired:?}"
    );

    let (_, metrics) = get(a.http_addr, "/metrics").await;
    for line in [
        "lps_proxy_ports_available 8",
        "lps_proxy_ports_available_min 0",
        "lps_mall_proxy_ports_available{mall=\"testmall-alpha\"} 0",
        "lps_mall_proxy_ports_cooling{mall=\"testmall-alpha\"} 8",
        // A disabled built-in mall: its ports are all free for it.
        "lps_mall_proxy_ports_available{mall=\"testmall-beta\"} 8",
        "lps_alert_firing{rule=\"proxy_ports_available_pct\"} 1",
    ] {
        assert!(metrics.contains(line), "no {line} in\n{metrics}");
    }
    let snapshot = common::ops_snapshot(&a).await;
    let text = lps_cli::text::ops(&snapshot);
    assert!(text.contains("8/8 (100%)"), "{text}");
    assert!(
        text.contains("lowest for a mall:") && text.contains("0/8 (0%) testmall-alpha"),
        "{text}"
    );
    let json = lps_cli::json::ops(&snapshot);
    assert_eq!(json["proxy_ports_available_min"], 0, "{json}");
    assert_eq!(json["proxy_ports_available_min_mall"], MALL, "{json}");
    let alpha = json["malls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mall"] == MALL)
        .unwrap();
    assert_eq!(
        (
            alpha["ports_available"].clone(),
            alpha["ports_cooling"].clone()
        ),
        (0.into(), 8.into()),
        "{json}"
    );

    // More evaluations: announced once.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let ports: Vec<_> = posts
        .lock()
        .unwrap()
        .iter()
        .filter(|p| p.contains("proxy_ports_available_pct"))
        .cloned()
        .collect();
    assert_eq!(ports.len(), 1, "{ports:?}");
    a.shutdown().await;
}

/// `promtool check metrics` on `text`: its complaints (empty: it passes), or `None` when
/// promtool is not installed.
fn promtool(text: &str) -> Option<String> {
    lps_test_kit::checks::promtool_check_metrics("/metrics", text)
}

/// `/metrics` in the Prometheus text format passes `promtool check metrics` (HELP and TYPE
/// for every family, counters named `_total`), with the process, build, gRPC and pool
/// families and the per-mall series at 0; OpenMetrics only when asked for.
#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn metrics_pass_promtool_in_the_text_format(pool: PgPool) {
    let (hook, _posts) = webhook().await;
    let a = coordinator(pool.clone(), hook).await;
    sqlx::query("insert into proxy_port (host, port) values ('gw', 10001)")
        .execute(&pool)
        .await
        .unwrap();
    // A gRPC call, answered; one refused.
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", a.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = lps_proto::pb::ops_service_client::OpsServiceClient::new(channel);
    grpc.get_ops(common::with_token(
        lps_proto::pb::GetOpsRequest {},
        common::CLIENT_TOKEN,
    ))
    .await
    .unwrap();
    let refused = grpc
        .get_ops(lps_proto::pb::GetOpsRequest {})
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    // Wait for the alert loop's refresh of the snapshot gauges.
    let mut text = String::new();
    for _ in 0..50 {
        let r = reqwest::Client::new()
            .get(format!("http://{}/metrics", a.http_addr))
            .header("accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1")
            .send()
            .await
            .unwrap();
        assert_eq!(
            r.headers()["content-type"],
            "text/plain; version=0.0.4; charset=utf-8"
        );
        text = r.text().await.unwrap();
        if text.contains("lps_mall_proxy_ports_available{") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for line in [
        "# HELP lps_claims_total ",
        "# TYPE lps_claims_total counter",
        "lps_claims_total 0",
        "lps_node_streams 0",
        "lps_layout_failures_total{mall=\"testmall-alpha\"} 0",
        "lps_job_duration_seconds_count{mall=\"testmall-alpha\",outcome=\"page_blocked\"} 0",
        "lps_grpc_requests_total{method=\"/lps.v1.OpsService/GetOps\",code=\"OK\"} 1",
        "lps_grpc_requests_total{method=\"/lps.v1.OpsService/GetOps\",code=\"UNAUTHENTICATED\"} 1",
        "lps_grpc_request_duration_seconds_count{method=\"/lps.v1.OpsService/GetOps\"} 2",
        "lps_db_pool_max_connections 10",
        "lps_db_pool_connections{state=\"in_use\"}",
        "lps_mall_proxy_ports_cooling{mall=\"testmall-alpha\"} 0",
        "process_cpu_seconds_total ",
        "process_resident_memory_bytes ",
        "process_open_fds ",
        "process_start_time_seconds ",
        "lps_build_info{component=\"coordinator\",version=\"",
    ] {
        assert!(text.contains(line), "no {line:?} in\n{text}");
    }
    assert!(!text.contains("# EOF"), "{text}");
    if let Some(said) = promtool(&text) {
        assert!(
            said.is_empty(),
            "promtool check metrics:\n{said}\non\n{text}"
        );
    }
    let r = reqwest::Client::new()
        .get(format!("http://{}/metrics", a.http_addr))
        .header(
            "accept",
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
        )
        .send()
        .await
        .unwrap();
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    assert!(r.text().await.unwrap().ends_with("# EOF\n"));
    a.shutdown().await;
}
