//! One search is one trace, and no secret leaks — proven on the real binaries.
//!
//! The test runs the real `coordinator` and `crawler-node` processes (the node drives real
//! headless Chromium through the test kit's gateway to the test kit's malls, which run in
//! this process) with the standard `OTEL_*` variables pointing at an OTLP trace receiver
//! that also runs in this process (the `opentelemetry-proto` TraceService server). One
//! Search call carries a caller `traceparent`; after both processes stopped gracefully
//! (SIGTERM, so their exporters flush) it checks that the spans of that search, from both
//! services, form one trace under the caller's span with correct parent links, that the
//! expected steps are there with the job's attributes, and that none of the secrets the
//! processes were given appears in their logs, metrics, errors or exported spans. A second
//! search, whose alpha job fails because the mall blocks every exit IP, must be one trace
//! too, with the failure marked as an error span.
//!
//! What a trace viewer needs, checked on the same run: no span exported while the services
//! run (after a few seconds of background loops) has a parent missing from the export, nor
//! does any span of the whole export; ids, attempts, ports and counts are integer
//! attributes; every error span has a message; the gRPC edges have SERVER/CLIENT kinds
//! (the node's Connect, an `lpsctl search` run as a process) and the assignment
//! PRODUCER/CONSUMER; every resource has `service.version` and its own
//! `service.instance.id`; WebDriver spans name their command; blocks are in the job's
//! trace on both sides with the job and the port.
//!
//! NB: the only test in this binary: it builds `crawler-node` and `lpsctl` with cargo (once) and runs
//! Chromium.

use std::{
    collections::{HashMap, HashSet},
    net::SocketAddr,
    path::{Path, PathBuf},
    process::Stdio,
    sync::{Arc, Mutex},
    time::Duration,
};

use base64::Engine as _;
use lps_proto::pb::{self, search_service_client::SearchServiceClient};
use lps_test_kit::{
    binaries::workspace_binary,
    catalog::Catalog,
    gateway::GatewayConfig,
    stack::{Stack, StackConfig},
};
use opentelemetry_proto::tonic::{
    collector::trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
        trace_service_server::{TraceService, TraceServiceServer},
    },
    common::v1::{AnyValue, KeyValue, any_value::Value},
    trace::v1::{ResourceSpans, Span, span::SpanKind, status::StatusCode},
};
use sqlx::PgPool;
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, transport::Channel};

mod common;

use common::{TempDir, gateway_ports};

/// The caller's W3C context: the trace every span of the search must belong to.
const TRACE_ID: &str = "5ea4c0ffee0ddba11c0ffee0ddba11f7";
const CALLER_SPAN_ID: &str = "ca11e4ca11e4ca11";
/// The second search's, whose alpha job fails.
const FAILING_TRACE_ID: &str = "f00dfa11f00dfa11f00dfa11f00dfa11";
const FAILING_CALLER_SPAN_ID: &str = "0bad0bad0bad0bad";

// Distinctive secrets: none may appear in a log line, a metric or a span.
const CLIENT_TOKEN: &str = "client-secret-Q7vX2mLp9Rk4Tz8W";
const ADMIN_TOKEN: &str = "admin-secret-H3nB6cYf1Js5Ud0E";
const NODE_TOKEN: &str = "node-secret-K8wA4eGq2Vt7Mx5N";
const PROXY_USER: &str = "lps-trace";
const PROXY_PASSWORD: &str = "proxy-secret-P6rD9hLk3Fs1Oj4C";
const LLM_KEY: &str = "sk-llm-secret-Z2yT5uIb8Nc0Wq7R";
const SECRETS: [(&str, &str); 5] = [
    ("LPS_CLIENT_TOKENS", CLIENT_TOKEN),
    ("LPS_ADMIN_TOKENS", ADMIN_TOKEN),
    ("LPS_NODE_TOKEN(S)", NODE_TOKEN),
    ("LPS_PROXY_PASSWORD", PROXY_PASSWORD),
    ("LPS_LLM_API_KEY", LLM_KEY),
];

// ------------------------------------------------------------------ the OTLP receiver

/// An OTLP/gRPC trace collector that keeps everything it is sent.
#[derive(Debug, Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Vec<ResourceSpans>>>,
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        self.got
            .lock()
            .unwrap()
            .extend(request.into_inner().resource_spans);
        Ok(Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

impl Receiver {
    /// Serves on a free loopback port until `stop`.
    async fn start(stop: CancellationToken) -> (Receiver, SocketAddr) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let receiver = Receiver::default();
        let service = TraceServiceServer::new(receiver.clone());
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::TcpListenerStream::new(listener),
                    stop.cancelled_owned(),
                )
                .await
                .unwrap();
        });
        (receiver, addr)
    }

    fn resource_spans(&self) -> Vec<ResourceSpans> {
        self.got.lock().unwrap().clone()
    }
}

/// One exported span with the service that sent it.
#[derive(Debug, Clone)]
struct Got {
    service: String,
    span: Span,
}

impl Got {
    fn name(&self) -> &str {
        &self.span.name
    }

    fn attr(&self, key: &str) -> Option<&Value> {
        attr(&self.span.attributes, key)
    }

    /// An integer attribute (typed: a number exported as a string is not one).
    fn int(&self, key: &str) -> Option<i64> {
        match self.attr(key)? {
            Value::IntValue(i) => Some(*i),
            _ => None,
        }
    }

    fn is_error(&self) -> bool {
        self.span
            .status
            .as_ref()
            .is_some_and(|s| s.code == StatusCode::Error as i32)
    }

    fn kind(&self) -> SpanKind {
        SpanKind::try_from(self.span.kind).unwrap_or(SpanKind::Unspecified)
    }

    fn string(&self, key: &str) -> Option<String> {
        match self.attr(key)? {
            Value::StringValue(s) => Some(s.clone()),
            Value::IntValue(i) => Some(i.to_string()),
            other => Some(format!("{other:?}")),
        }
    }
}

fn attr<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a Value> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v: &AnyValue| v.value.as_ref())
}

fn flatten(resource_spans: &[ResourceSpans]) -> Vec<Got> {
    let mut out = Vec::new();
    for rs in resource_spans {
        let service = rs
            .resource
            .as_ref()
            .and_then(|r| attr(&r.attributes, "service.name"))
            .map(|v| match v {
                Value::StringValue(s) => s.clone(),
                other => format!("{other:?}"),
            })
            .unwrap_or_default();
        for ss in &rs.scope_spans {
            for span in &ss.spans {
                out.push(Got {
                    service: service.clone(),
                    span: span.clone(),
                });
            }
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The spans of `children` whose parent is not in `exported` (nor one of the callers'
/// remote spans), as `service name` lines.
fn orphans(children: &[Got], exported: &[Got]) -> Vec<String> {
    let ids: HashSet<(Vec<u8>, Vec<u8>)> = exported
        .iter()
        .map(|g| (g.span.trace_id.clone(), g.span.span_id.clone()))
        .collect();
    children
        .iter()
        .filter(|g| !g.span.parent_span_id.is_empty())
        .filter(|g| {
            let parent = hex(&g.span.parent_span_id);
            parent != CALLER_SPAN_ID && parent != FAILING_CALLER_SPAN_ID
        })
        .filter(|g| !ids.contains(&(g.span.trace_id.clone(), g.span.parent_span_id.clone())))
        .map(|g| format!("{} {}", g.service, g.name()))
        .collect()
}

// ------------------------------------------------------------------ the processes

/// Environment both services share: OTLP export to the receiver, JSON logs, a key that
/// must never show up anywhere.
fn common_env(command: &mut Command, otlp: SocketAddr, service: &str) {
    command
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{otlp}"))
        .env("OTEL_SERVICE_NAME", service)
        .env("OTEL_TRACES_SAMPLER", "always_on")
        .env("OTEL_BSP_SCHEDULE_DELAY", "200")
        .env("OTEL_BSP_MAX_QUEUE_SIZE", "65536")
        .env("LPS_LOG_FORMAT", "json")
        .env(
            "RUST_LOG",
            "info,lps_coordinator=debug,lps_crawler_node=debug,lps_telemetry=debug",
        )
        .env("LPS_LLM_API_KEY", LLM_KEY)
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_RESOURCE_ATTRIBUTES")
        .kill_on_drop(true);
}

fn log_to(command: &mut Command, dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(format!("{name}.log"));
    let file = std::fs::File::create(&path).unwrap();
    command
        .stdout(Stdio::from(file.try_clone().unwrap()))
        .stderr(Stdio::from(file));
    path
}

/// Sends SIGTERM and waits for the exit (a graceful stop flushes the span exporter).
async fn stop(child: &mut Child, what: &str) {
    let pid = child.id().expect("still running");
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -TERM {what}");
    let status = tokio::time::timeout(Duration::from_secs(120), child.wait())
        .await
        .unwrap_or_else(|_| panic!("{what} did not stop within 120 s of SIGTERM"))
        .unwrap();
    assert!(status.success(), "{what} exited with {status}");
}

/// The JSON log line whose message is `message`, once the process wrote it.
async fn wait_for_log(path: &Path, child: &mut Child, message: &str) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if let Some(line) = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|l| l["message"] == message)
        {
            return line;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the process exited ({status}) before logging {message:?}:\n{text}");
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {message:?} in {}:\n{text}",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `DATABASE_URL` pointed at the test's own database.
fn database_url(pool: &PgPool) -> String {
    let base = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let db = pool
        .connect_options()
        .get_database()
        .expect("the test database has a name")
        .to_owned();
    let (server, _) = base.rsplit_once('/').expect("DATABASE_URL has a database");
    format!("{server}/{db}")
}

fn with_token<T>(message: T) -> Request<T> {
    common::with_token(message, CLIENT_TOKEN)
}

async fn wait_final(client: &mut SearchServiceClient<Channel>, search_id: i64) -> pb::SearchStatus {
    common::wait_final(client, CLIENT_TOKEN, search_id, Duration::from_secs(300)).await
}

/// The spans of trace `trace_id` and a one-line-per-span description of them, after
/// checking that both services took part, no span repeats an attribute, every parent is the
/// caller's span (`caller`) or another span of the trace, and the Search call is the only
/// child of the caller's span.
fn one_trace<'a>(all: &'a [Got], trace_id: &str, caller: &str) -> (Vec<&'a Got>, String) {
    let in_trace: Vec<&Got> = all
        .iter()
        .filter(|g| hex(&g.span.trace_id) == trace_id)
        .collect();
    let summary = |spans: &[&Got]| {
        spans
            .iter()
            .map(|g| {
                format!(
                    "{} {} {} <- {} {:?}",
                    g.service,
                    g.name(),
                    hex(&g.span.span_id),
                    hex(&g.span.parent_span_id),
                    g.span
                        .attributes
                        .iter()
                        .map(|kv| kv.key.as_str())
                        .collect::<Vec<_>>()
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let described = summary(&in_trace);
    // Shown with `--nocapture`: the whole trace, one span a line.
    eprintln!("trace {trace_id}:\n{described}");
    for service in ["trace-test-coordinator", "trace-test-node"] {
        assert!(
            in_trace.iter().any(|g| g.service == service),
            "no span of {service} in the search's trace; received {} spans in all:\n{described}",
            all.len()
        );
    }

    // Each attribute once per span (a field recorded twice would be exported twice).
    for g in &in_trace {
        let mut keys: Vec<&str> = g.span.attributes.iter().map(|kv| kv.key.as_str()).collect();
        keys.sort_unstable();
        let before = keys.len();
        keys.dedup();
        assert_eq!(
            keys.len(),
            before,
            "{} {} repeats an attribute: {:?}",
            g.service,
            g.name(),
            g.span.attributes
        );
    }

    // Every parent is the caller's span or another span of the trace; the only children of
    // the caller's span are the Search call.
    let ids: HashSet<String> = in_trace.iter().map(|g| hex(&g.span.span_id)).collect();
    for g in &in_trace {
        let parent = hex(&g.span.parent_span_id);
        assert!(
            parent == caller || ids.contains(&parent),
            "{} {} has parent {parent}, which is neither the caller nor a span of the trace:\n{described}",
            g.service,
            g.name()
        );
    }
    let roots: Vec<&&Got> = in_trace
        .iter()
        .filter(|g| hex(&g.span.parent_span_id) == caller)
        .collect();
    assert_eq!(roots.len(), 1, "{described}");
    assert_eq!(roots[0].name(), "grpc.search", "{described}");
    assert_eq!(roots[0].service, "trace-test-coordinator");

    (in_trace, described)
}

// ------------------------------------------------------------------ the test

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn one_search_is_one_trace_across_coordinator_and_node_and_no_secret_leaks(pool: PgPool) {
    let node_exe = workspace_binary("lps-crawler-node", "crawler-node");
    let lpsctl_exe = workspace_binary("lps-cli", "lpsctl");
    let dir = TempDir::new("trace-e2e");
    let stop_receiver = CancellationToken::new();
    let (receiver, otlp) = Receiver::start(stop_receiver.clone()).await;

    let mut stack_config = StackConfig::new(4);
    stack_config.gateway = GatewayConfig::new(4).with_credentials(PROXY_USER, PROXY_PASSWORD);
    let stack = Stack::start(stack_config).await.unwrap();
    stack.write_site_profiles(&dir.0).unwrap();
    let ports = gateway_ports(&stack);

    // The coordinator.
    let mut command = Command::new(env!("CARGO_BIN_EXE_coordinator"));
    common_env(&mut command, otlp, "trace-test-coordinator");
    command
        .env("DATABASE_URL", database_url(&pool))
        .env("LPS_GRPC_ADDR", "127.0.0.1:0")
        .env("LPS_HTTP_ADDR", "127.0.0.1:0")
        .env("LPS_CLIENT_TOKENS", CLIENT_TOKEN)
        .env("LPS_ADMIN_TOKENS", ADMIN_TOKEN)
        .env("LPS_NODE_TOKENS", NODE_TOKEN)
        .env("LPS_PROFILES_DIR", &dir.0)
        .env("LPS_MALLS", "testmall-alpha,testmall-beta")
        .env("LPS_PROXY_GATEWAY_HOST", "127.0.0.1")
        .env("LPS_PROXY_PORTS", ports.join(","))
        .env("LPS_PROXY_USERNAME", PROXY_USER)
        .env("LPS_PROXY_PASSWORD", PROXY_PASSWORD)
        .env("LPS_JOB_DEADLINE", "120s")
        // One search per exit IP: each job gives its IP back (a release) inside the job.
        .env("LPS_IP_REQUEST_BUDGET", "1")
        .env("LPS_PROXY_REST", "1s")
        .env("LPS_PROXY_BLOCK_COOLDOWN_BASE", "2s")
        .env("LPS_PROXY_BLOCK_COOLDOWN_CAP", "5s");
    let coordinator_log = log_to(&mut command, &dir.0, "coordinator");
    let mut coordinator = command.spawn().expect("starting the coordinator");
    let started = wait_for_log(&coordinator_log, &mut coordinator, "coordinator started").await;
    let grpc_addr = started["grpc_addr"].as_str().unwrap().to_owned();
    let http_addr = started["http_addr"].as_str().unwrap().to_owned();

    // The node: real Chromium, proxy ports from the coordinator's ledger.
    let mut command = Command::new(&node_exe);
    common_env(&mut command, otlp, "trace-test-node");
    command
        .env("LPS_COORDINATOR_URL", format!("http://{grpc_addr}"))
        .env("LPS_NODE_TOKEN", NODE_TOKEN)
        .env("LPS_NODE_ID", "trace-node")
        .env("LPS_NODE_SLOTS", "2")
        .env("LPS_HTTP_ADDR", "127.0.0.1:0")
        .env("LPS_EXECUTOR", "browser")
        .env("LPS_PROXY_MODE", "coordinator")
        .env("LPS_PROFILE_ROOT", dir.0.join("browser-profiles"))
        .env("LPS_DRAIN_TIMEOUT", "30s");
    let node_log = log_to(&mut command, &dir.0, "node");
    let mut node = command.spawn().expect("starting the crawler node");

    let channel = Channel::from_shared(format!("http://{grpc_addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = SearchServiceClient::new(channel);

    // A refused call: the error names no token (the node's token is no client's).
    let mut refused = Request::new(pb::SearchRequest::default());
    refused.metadata_mut().insert(
        "authorization",
        format!("Bearer {NODE_TOKEN}").parse().unwrap(),
    );
    let err = client.search(refused).await.unwrap_err();
    assert!(
        matches!(
            err.code(),
            tonic::Code::Unauthenticated | tonic::Code::PermissionDenied
        ),
        "{:?}",
        err.code()
    );
    assert!(
        SECRETS.iter().all(|(_, s)| !format!("{err:?}").contains(s)),
        "the refusal carries a secret"
    );

    // One search, continuing the caller's trace.
    let catalog = Catalog::builtin();
    let product = catalog
        .products()
        .iter()
        .find(|p| p.decoy_of.is_none() && p.listings.len() == 2)
        .expect("a product both malls sell");
    let mut request = with_token(pb::SearchRequest {
        products: vec![pb::Product {
            code: String::new(),
            name: product.name.clone(),
            ..Default::default()
        }],
        ..Default::default()
    });
    request.metadata_mut().insert(
        "traceparent",
        format!("00-{TRACE_ID}-{CALLER_SPAN_ID}-01")
            .parse()
            .unwrap(),
    );
    let accepted = client.search(request).await.unwrap().into_inner();
    assert_eq!(accepted.items.len(), 2, "{accepted:#?}");
    let jobs: HashMap<i64, String> = accepted
        .items
        .iter()
        .map(|i| (i.job_id, i.mall.clone()))
        .collect();
    let status = wait_final(&mut client, accepted.search_id).await;
    let lowest = status.products[0]
        .lowest
        .as_ref()
        .unwrap_or_else(|| panic!("no offer: {status:#?}"));
    assert_eq!(
        lowest.effective_price,
        Some(i64::try_from(product.lowest().unwrap().effective_price()).unwrap()),
        "{status:#?}"
    );

    // lpsctl's call is a CLIENT span the coordinator's SERVER span continues (answered
    // from the fresh result: no crawl).
    let mut command = Command::new(&lpsctl_exe);
    common_env(&mut command, otlp, "trace-test-lpsctl");
    let lpsctl = command
        .args(["search", &product.name, "--max-age", "1h"])
        .env("LPS_ADDR", format!("http://{grpc_addr}"))
        .env("LPS_TOKEN", CLIENT_TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .await
        .unwrap();
    assert!(lpsctl.status.success(), "lpsctl search: {lpsctl:?}");
    assert!(
        !String::from_utf8_lossy(&lpsctl.stdout).contains(r#""level""#),
        "lpsctl printed log lines: {lpsctl:?}"
    );

    // Metrics labels must not carry secrets either.
    let metrics = reqwest::get(format!("http://{http_addr}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("lps_"), "{metrics}");

    // A second search, whose alpha job fails: alpha blocks every exit IP, so the job burns
    // IPs until the coordinator fails it as a page problem.
    for port in stack.gateway.ports() {
        stack.alpha.block_exit(&port.label);
    }
    let other = catalog
        .products()
        .iter()
        .find(|p| p.decoy_of.is_none() && p.listings.len() == 2 && p.name != product.name)
        .expect("a second product both malls sell");
    let mut request = with_token(pb::SearchRequest {
        products: vec![pb::Product {
            code: String::new(),
            name: other.name.clone(),
            ..Default::default()
        }],
        ..Default::default()
    });
    request.metadata_mut().insert(
        "traceparent",
        format!("00-{FAILING_TRACE_ID}-{FAILING_CALLER_SPAN_ID}-01")
            .parse()
            .unwrap(),
    );
    let failing = client.search(request).await.unwrap().into_inner();
    let failing_status = wait_final(&mut client, failing.search_id).await;
    let failed_job = failing_status.products[0]
        .malls
        .iter()
        .find(|m| m.mall == "testmall-alpha")
        .unwrap_or_else(|| panic!("no alpha job: {failing_status:#?}"));
    assert_eq!(
        failed_job.state,
        pb::JobState::Dead as i32,
        "{failing_status:#?}"
    );
    let failed_job = failed_job.job_id;

    // A few seconds of background loops (reaper, claims, heartbeats, renewals), then what
    // was exported so far: every span's parent must already be exported, give or take the
    // export delay (a parent exported only at shutdown is one a viewer never sees while the
    // service runs).
    tokio::time::sleep(Duration::from_secs(4)).await;
    let running = flatten(&receiver.resource_spans());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let running_later = flatten(&receiver.resource_spans());
    let orphaned = orphans(&running, &running_later);
    let mut orphan_names: Vec<&String> = orphaned.iter().collect();
    orphan_names.sort_unstable();
    orphan_names.dedup();
    eprintln!(
        "while running: {} spans exported, {} of them with a parent not exported: {orphan_names:?}",
        running.len(),
        orphaned.len()
    );
    // (Checked at the end, so that one run reports every kind of problem.)
    let mut problems = Vec::new();
    if !orphaned.is_empty() {
        problems.push(format!(
            "{} of {} spans exported while the services ran have a parent that was not exported: {orphan_names:?}",
            orphaned.len(),
            running.len()
        ));
    }

    // Stop gracefully: the node drains first, then the coordinator; both flush spans.
    drop(client);
    stop(&mut node, "the crawler node").await;
    stop(&mut coordinator, "the coordinator").await;
    let _ = stack.shutdown().await;
    stop_receiver.cancel();

    let resource_spans = receiver.resource_spans();
    let all = flatten(&resource_spans);
    let logs = format!(
        "{}\n{}",
        std::fs::read_to_string(&coordinator_log).unwrap(),
        std::fs::read_to_string(&node_log).unwrap()
    );

    // ---- secrets: nowhere in the logs, the metrics or anything exported.
    let exported = format!("{resource_spans:?}");
    // The relay sends the proxy credentials as `Proxy-Authorization: Basic …`.
    let basic =
        base64::engine::general_purpose::STANDARD.encode(format!("{PROXY_USER}:{PROXY_PASSWORD}"));
    // NB: the messages name the secret, never print it.
    for (name, secret) in SECRETS
        .iter()
        .copied()
        .chain([("the proxy's Basic credentials", basic.as_str())])
    {
        let lines = |text: &str| text.lines().filter(|l| l.contains(secret)).count();
        assert_eq!(lines(&logs), 0, "log lines with {name}");
        assert_eq!(lines(&metrics), 0, "/metrics lines with {name}");
        assert!(!exported.contains(secret), "{name} is in an exported span");
    }
    assert!(
        logs.lines().any(|l| l.contains("coordinator started")) && logs.contains("trace-node"),
        "the logs were not captured"
    );

    // ---- the whole export: every parent exported, typed attributes, error messages.
    let orphaned = orphans(&all, &all);
    if !orphaned.is_empty() {
        problems.push(format!(
            "spans whose parent was never exported: {orphaned:?}"
        ));
    }
    check_resources(&resource_spans, &mut problems);
    check_typed_attributes(&all, &mut problems);
    let mut silent: Vec<String> = all
        .iter()
        .filter(|g| g.is_error())
        .filter(|g| {
            let message = g.span.status.as_ref().map_or("", |s| s.message.as_str());
            message.trim_matches('"').is_empty()
        })
        .map(|g| format!("{} {}", g.service, g.name()))
        .collect();
    silent.sort_unstable();
    silent.dedup();
    if !silent.is_empty() {
        problems.push(format!("error spans without a message: {silent:?}"));
    }
    let webdriver: HashSet<&str> = all
        .iter()
        .filter(|g| g.name().starts_with("webdriver.") || g.name() == "run_webdriver_cmd")
        .map(Got::name)
        .collect();
    eprintln!("WebDriver spans: {webdriver:?}");
    // thirtyfour's own `run_webdriver_cmd` spans name no command: the node's are named
    // after theirs.
    if webdriver.contains("run_webdriver_cmd")
        || ![
            "webdriver.new_session",
            "webdriver.navigate",
            // The node's scripts run through chromedriver's CDP endpoint (no Runtime.enable
            // on the page: DESIGN §5 "Browser identity").
            "webdriver.post_goog_cdp_execute",
        ]
        .iter()
        .all(|c| webdriver.contains(c))
    {
        problems.push(format!("WebDriver spans: {webdriver:?}"));
    }
    problems.extend(kind_problems(&all));
    for p in &problems {
        eprintln!("PROBLEM: {p}");
    }
    assert!(problems.is_empty(), "{problems:#?}");
    // ---- one trace.
    let (in_trace, described) = one_trace(&all, TRACE_ID, CALLER_SPAN_ID);

    // The steps of the search.
    let by_id: HashMap<String, &Got> = in_trace
        .iter()
        .map(|g| (hex(&g.span.span_id), *g))
        .collect();
    let parent_of = |g: &Got| by_id.get(&hex(&g.span.parent_span_id)).copied();
    let named = |service: &str, name: &str| -> Vec<&Got> {
        in_trace
            .iter()
            .filter(|g| g.service == service && g.name() == name)
            .copied()
            .collect()
    };
    let coordinator_steps = [
        "grpc.search",
        "queue.enqueue",
        "queue.wait",
        "dispatch.assign",
        "dispatch.proxy_acquire",
        "ledger.acquire",
        "dispatch.result",
        "queue.complete",
    ];
    let node_steps = [
        "node.job",
        "browser.job",
        "browser.round",
        "browser.page_load",
        "browser.parse",
        "proxy.acquire",
    ];
    for name in coordinator_steps {
        assert!(
            !named("trace-test-coordinator", name).is_empty(),
            "no {name} span from the coordinator:\n{described}"
        );
    }
    for name in node_steps {
        assert!(
            !named("trace-test-node", name).is_empty(),
            "no {name} span from the node:\n{described}"
        );
    }
    // The enqueue is inside the Search call.
    for g in named("trace-test-coordinator", "queue.enqueue") {
        assert_eq!(parent_of(g).map(Got::name), Some("grpc.search"));
    }

    // Per job: waited in the queue, assigned, run by the node under that assignment,
    // committed; each step names the job, its mall, attempt, lease epoch and node.
    for (&job_id, mall) in &jobs {
        let of_job = |service: &str, name: &str| -> &Got {
            let found: Vec<&Got> = named(service, name)
                .into_iter()
                .filter(|g| g.int("job.id") == Some(job_id))
                .collect();
            assert_eq!(
                found.len(),
                1,
                "job {job_id}: {} {name} spans (the search ran each job once):\n{described}",
                found.len()
            );
            found[0]
        };
        let wait = of_job("trace-test-coordinator", "queue.wait");
        let assign = of_job("trace-test-coordinator", "dispatch.assign");
        let result = of_job("trace-test-coordinator", "dispatch.result");
        let node_job = of_job("trace-test-node", "node.job");
        let browser_job = of_job("trace-test-node", "browser.job");
        for g in [wait, assign, result, node_job] {
            assert_eq!(g.string("mall").as_deref(), Some(mall.as_str()), "{g:#?}");
            assert_eq!(g.int("job.attempt"), Some(1), "{g:#?}");
            assert_eq!(g.int("job.lease_epoch"), Some(1), "{g:#?}");
        }
        for g in [assign, result, node_job] {
            assert_eq!(g.string("node.id").as_deref(), Some("trace-node"), "{g:#?}");
        }
        // The Search call's span (whose context the job row stores) is the parent of the
        // queue wait and the assignment; the node's job hangs under the assignment.
        assert_eq!(parent_of(wait).map(Got::name), Some("grpc.search"));
        assert_eq!(parent_of(assign).map(Got::name), Some("grpc.search"));
        assert_eq!(
            hex(&node_job.span.parent_span_id),
            hex(&assign.span.span_id),
            "job {job_id}: node.job is not a child of its dispatch.assign:\n{described}"
        );
        assert_eq!(
            hex(&browser_job.span.parent_span_id),
            hex(&node_job.span.span_id)
        );
        // The commit hangs under the assignment too, and contains the queue transition.
        assert_eq!(
            hex(&result.span.parent_span_id),
            hex(&assign.span.span_id),
            "job {job_id}: dispatch.result is not a child of its dispatch.assign:\n{described}"
        );
        let descends_from = |g: &Got, ancestor: &Got| {
            let mut cur = parent_of(g);
            while let Some(p) = cur {
                if p.span.span_id == ancestor.span.span_id {
                    return true;
                }
                cur = parent_of(p);
            }
            false
        };
        // (The completion and the freed slot's next claim share one transaction:
        // dispatch.result > queue.complete_and_claim > queue.complete.)
        assert!(
            named("trace-test-coordinator", "queue.complete")
                .iter()
                .any(|g| descends_from(g, result)),
            "job {job_id}: no queue.complete under its dispatch.result:\n{described}"
        );
        // Rounds, page loads and the IP lease happen inside the node's job.
        let rounds: Vec<&Got> = named("trace-test-node", "browser.round")
            .into_iter()
            .filter(|g| g.int("job.id") == Some(job_id))
            .collect();
        assert!(!rounds.is_empty(), "job {job_id}: no rounds:\n{described}");
        assert!(rounds.iter().all(|r| descends_from(r, node_job)));
        assert!(
            named("trace-test-node", "browser.page_load")
                .iter()
                .any(|g| descends_from(g, node_job)),
            "job {job_id}: no page load under its node.job:\n{described}"
        );
        assert!(
            named("trace-test-node", "proxy.acquire")
                .iter()
                .any(|g| g.int("job.id") == Some(job_id) && descends_from(g, node_job)),
            "job {job_id}: no proxy.acquire under its node.job:\n{described}"
        );
        assert!(
            named("trace-test-node", "proxy.release")
                .iter()
                .any(|g| descends_from(g, node_job)),
            "job {job_id}: no proxy.release under its node.job:\n{described}"
        );
        assert!(
            named("trace-test-coordinator", "dispatch.proxy_acquire")
                .iter()
                .any(|g| g.int("job.id") == Some(job_id) && descends_from(g, assign)),
            "job {job_id}: no dispatch.proxy_acquire under its dispatch.assign:\n{described}"
        );
    }

    // The failing search is one trace too, and the end of its alpha job is an error span.
    let (failing_trace, failing_described) =
        one_trace(&all, FAILING_TRACE_ID, FAILING_CALLER_SPAN_ID);
    assert!(
        failing_trace.iter().any(|g| {
            g.service == "trace-test-coordinator"
                && g.int("job.id") == Some(failed_job)
                && matches!(g.name(), "dispatch.proxy_release" | "dispatch.failure")
                && g.span
                    .status
                    .as_ref()
                    .is_some_and(|s| s.code == StatusCode::Error as i32)
        }),
        "job {failed_job} failed but no span of it is marked as an error:\n{failing_described}"
    );
    // The node's run of it ended in failure: an error with the reason.
    assert!(
        failing_trace.iter().any(|g| g.service == "trace-test-node"
            && g.name() == "node.job"
            && g.int("job.id") == Some(failed_job)
            && g.is_error()),
        "the node's failed job is not an error span:\n{failing_described}"
    );
    // The blocks the node met are recorded inside the job's trace on both sides, with the
    // job and the port.
    for (service, name) in [
        ("trace-test-node", "node.block"),
        ("trace-test-coordinator", "ledger.record_block"),
    ] {
        let blocks: Vec<&&Got> = failing_trace
            .iter()
            .filter(|g| g.service == service && g.name() == name)
            .collect();
        assert!(
            !blocks.is_empty(),
            "no {service} {name} span in the failing search's trace:\n{failing_described}"
        );
        for g in blocks {
            assert_eq!(g.int("job.id"), Some(failed_job), "{g:#?}");
            assert!(g.int("port").is_some_and(|p| p > 0), "{g:#?}");
        }
    }

    // The first search succeeded: no step of it is marked as an error.
    let errors: Vec<&&Got> = in_trace.iter().filter(|g| g.is_error()).collect();
    assert!(errors.is_empty(), "spans marked as errors: {errors:#?}");
}

/// Both services say which build and which process sent their spans.
fn check_resources(resource_spans: &[ResourceSpans], problems: &mut Vec<String>) {
    let mut instances: HashMap<String, String> = HashMap::new();
    for rs in resource_spans {
        let attributes = &rs.resource.as_ref().expect("a resource").attributes;
        let string = |key: &str| match attr(attributes, key) {
            Some(Value::StringValue(s)) if !s.is_empty() => Some(s.clone()),
            _ => None,
        };
        let service = string("service.name").unwrap_or_default();
        if string("service.version").as_deref() != Some(env!("CARGO_PKG_VERSION")) {
            problems.push(format!(
                "{service}: resource service.version {:?}",
                string("service.version")
            ));
        }
        let Some(instance) = string("service.instance.id") else {
            problems.push(format!("{service}: no resource service.instance.id"));
            continue;
        };
        let known = instances.entry(service.clone()).or_insert(instance.clone());
        if *known != instance {
            problems.push(format!("{service} changed its instance id"));
        }
    }
    problems.sort_unstable();
    problems.dedup();
    let ids: HashSet<&String> = instances.values().collect();
    if instances.len() != 3 || ids.len() != instances.len() {
        problems.push(format!("instance ids: {instances:?}"));
    }
}

/// The kinds of the spans at the gRPC edges: the node's Connect call is a client span,
/// the coordinator's handling of it a server span under it; a Search call is served by
/// `grpc.search`; an assignment is produced by the coordinator and consumed by the node.
fn kind_problems(all: &[Got]) -> Vec<String> {
    let mut problems = Vec::new();
    let connects: Vec<&Got> = all
        .iter()
        .filter(|g| g.service == "trace-test-node" && g.name() == "node.connect")
        .collect();
    if connects.is_empty() || connects.iter().any(|g| g.kind() != SpanKind::Client) {
        problems.push(format!(
            "node.connect spans and kinds: {:?}",
            connects.iter().map(|g| g.kind()).collect::<Vec<_>>()
        ));
    }
    if !all.iter().any(|g| {
        g.service == "trace-test-coordinator"
            && g.name() == "grpc.connect"
            && g.kind() == SpanKind::Server
            && connects
                .iter()
                .any(|c| c.span.span_id == g.span.parent_span_id)
    }) {
        problems.push("no grpc.connect server span under the node's node.connect".into());
    }
    let clients: Vec<&Got> = all
        .iter()
        .filter(|g| g.service == "trace-test-lpsctl" && g.name() == "lpsctl search")
        .collect();
    if clients.len() != 1 || clients[0].kind() != SpanKind::Client {
        problems.push(format!("lpsctl's client spans: {clients:?}"));
    }
    if !all.iter().any(|g| {
        g.name() == "grpc.search"
            && clients.iter().any(|c| {
                c.span.span_id == g.span.parent_span_id && c.span.trace_id == g.span.trace_id
            })
    }) {
        problems.push("no grpc.search under lpsctl's client span".into());
    }
    for g in all {
        let want = match g.name() {
            "grpc.search" => SpanKind::Server,
            "dispatch.assign" => SpanKind::Producer,
            "node.job" => SpanKind::Consumer,
            _ => continue,
        };
        if g.kind() != want {
            problems.push(format!(
                "{} {} is {:?}, not {want:?}",
                g.service,
                g.name(),
                g.kind()
            ));
        }
    }
    problems.sort_unstable();
    problems.dedup();
    problems
}

/// Ids, counters and numbers are typed attributes, never Debug strings.
fn check_typed_attributes(all: &[Got], problems: &mut Vec<String>) {
    let mut found = HashSet::new();
    const INTS: [&str; 7] = [
        "job.id",
        "job.attempt",
        "job.lease_epoch",
        "search.id",
        "port",
        "ip_request_no",
        "jobs",
    ];
    // Attributes that are strings even when they look like numbers.
    const STRINGS: [&str; 3] = ["query", "product", "exception.message"];
    for g in all {
        for kv in &g.span.attributes {
            let value = kv.value.as_ref().and_then(|v| v.value.as_ref());
            let wrong = match value {
                Some(Value::StringValue(s)) => {
                    INTS.contains(&kv.key.as_str())
                        || s.starts_with("Some(")
                        || s == "None"
                        || (s.parse::<i64>().is_ok() && !STRINGS.contains(&kv.key.as_str()))
                }
                Some(Value::IntValue(_)) | None => false,
                Some(_) => INTS.contains(&kv.key.as_str()),
            };
            if wrong {
                found.insert(format!(
                    "{} {}: {} = {value:?}",
                    g.service,
                    g.name(),
                    kv.key
                ));
            }
        }
    }
    let mut found: Vec<String> = found.into_iter().collect();
    found.sort_unstable();
    if !found.is_empty() {
        problems.push(format!("untyped attributes: {found:#?}"));
    }
}
