//! A scripted coordinator for the node's stream tests: a real tonic `NodeService` server on
//! 127.0.0.1:0 that records everything a node sends and sends what the test tells it.
//!
//! By default it behaves like a well-mannered coordinator: it checks the bearer token,
//! answers `Hello` with `Welcome` (re-attaching every held job except those the test marks
//! lost), acks every report `APPLIED` and answers every heartbeat. Tests switch those
//! behaviours off to script the rest by hand.
#![allow(dead_code)]

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use chrono::Utc;
use lps_crawler_node::{Config, Node, NodeError, NodeHandle, ScriptedExecutor, StreamState};
use lps_proto::{
    model::{duration_to_pb, timestamp_to_pb},
    pb::{
        self,
        coordinator_message::Body as In,
        node_message::Body as Out,
        node_service_server::{NodeService, NodeServiceServer},
    },
};
use lps_test_kit::{
    gateway::GatewayConfig,
    stack::{Stack, StackConfig, StackHandle},
};
use tokio::{sync::mpsc, sync::watch, task::JoinHandle};
use tokio_stream::wrappers::{TcpListenerStream, UnboundedReceiverStream};
use tokio_util::sync::CancellationToken;
use tonic::{Code, Request, Response, Status, Streaming};

pub const TOKEN: &str = "test-node-token";
pub const MALL: &str = "testmall-alpha";
/// Longest any test waits for one thing to happen.
pub const WAIT: Duration = Duration::from_secs(10);

/// Something the fake coordinator saw.
#[derive(Debug, Clone)]
pub enum Seen {
    /// A stream was accepted (numbered from 0).
    Opened { stream: usize },
    /// A stream was refused with this code.
    Refused { code: Code },
    /// A message arrived on a stream.
    Message { stream: usize, body: Out },
    /// The node half-closed the stream (its request stream ended cleanly).
    HalfClosed { stream: usize },
    /// The node's side broke (reset, transport error).
    Broken { stream: usize, status: String },
}

/// What the fake does on its own.
#[derive(Debug, Clone)]
pub struct Behaviour {
    pub auto_welcome: bool,
    pub auto_ack: bool,
    pub auto_heartbeat_ack: bool,
    /// Refuse new streams with this status.
    pub refuse: Option<(Code, String)>,
    /// Job ids the next Welcome reports lost.
    pub lost: Vec<i64>,
    pub heartbeat_interval: Duration,
    pub lease_ttl: Duration,
    /// The site profiles of the Welcome (default: a bare profile of [`MALL`]).
    pub profiles: Vec<pb::SiteProfile>,
    /// How `ProxyAcquire` is answered: grants from this plan, or `ProxyUnavailable`.
    pub grants: Option<GrantPlan>,
    /// `Welcome.stopped_reports`: the fake takes `JobStopped` (false: as an older coordinator).
    pub stopped_reports: bool,
}

/// Proxy ports the fake coordinator hands out in turn.
#[derive(Debug, Clone)]
pub struct GrantPlan {
    pub host: String,
    pub ports: Vec<u32>,
    pub username: String,
    pub password: String,
    pub request_budget: u32,
}

impl Default for Behaviour {
    fn default() -> Self {
        Self {
            auto_welcome: true,
            auto_ack: true,
            auto_heartbeat_ack: true,
            refuse: None,
            lost: Vec::new(),
            heartbeat_interval: Duration::from_millis(100),
            lease_ttl: Duration::from_secs(2),
            profiles: vec![pb::SiteProfile {
                id: MALL.into(),
                display_name: "Test mall".into(),
                ..Default::default()
            }],
            grants: None,
            stopped_reports: true,
        }
    }
}

type Tx = mpsc::UnboundedSender<Result<pb::CoordinatorMessage, Status>>;

struct State {
    token: String,
    grants_made: AtomicUsize,
    seen: watch::Sender<Vec<Seen>>,
    streams: Mutex<Vec<Option<Tx>>>,
    behaviour: Mutex<Behaviour>,
}

impl State {
    fn record(&self, seen: Seen) {
        self.seen.send_modify(|log| log.push(seen));
    }

    fn behaviour(&self) -> Behaviour {
        self.behaviour.lock().unwrap().clone()
    }

    fn send(&self, stream: usize, body: In) -> bool {
        let streams = self.streams.lock().unwrap();
        match streams.get(stream).and_then(Option::as_ref) {
            Some(tx) => tx
                .send(Ok(pb::CoordinatorMessage { body: Some(body) }))
                .is_ok(),
            None => false,
        }
    }

    /// Answers what a polite coordinator answers on its own.
    fn respond(&self, stream: usize, body: &Out) {
        let b = self.behaviour();
        match body {
            Out::Hello(hello) if b.auto_welcome => {
                let reattached = hello
                    .running
                    .iter()
                    .filter(|j| !b.lost.contains(&j.job_id))
                    .cloned()
                    .collect();
                let lost = hello
                    .running
                    .iter()
                    .map(|j| j.job_id)
                    .filter(|id| b.lost.contains(id))
                    .collect();
                self.send(
                    stream,
                    In::Welcome(pb::Welcome {
                        session_id: format!("stream-{stream}"),
                        heartbeat_interval: Some(duration_to_pb(b.heartbeat_interval)),
                        lease_ttl: Some(duration_to_pb(b.lease_ttl)),
                        profiles: b.profiles.clone(),
                        limits: Some(pb::Limits {
                            max_ip_burns_per_job: 3,
                            ip_request_budget: 3,
                            proxy_usd_per_gb: 3.0,
                            ..Default::default()
                        }),
                        reattached,
                        lost,
                        protocol_version: lps_proto::PROTOCOL_VERSION,
                        // As an older coordinator: the node judges with its built-in words.
                        vocabulary: None,
                        stopped_reports: b.stopped_reports,
                        profile_revision: String::new(),
                    }),
                );
            }
            Out::Heartbeat(_) if b.auto_heartbeat_ack => {
                self.send(stream, In::HeartbeatAck(pb::HeartbeatAck::default()));
            }
            Out::ProxyAcquire(a) => match &b.grants {
                Some(plan) => {
                    let n = self.grants_made.fetch_add(1, Ordering::Relaxed);
                    self.send(
                        stream,
                        In::ProxyGrant(pb::ProxyGrant {
                            request_id: a.request_id,
                            host: plan.host.clone(),
                            port: plan.ports[n % plan.ports.len()],
                            username: plan.username.clone(),
                            password: plan.password.clone(),
                            lease_until: None,
                            request_budget: plan.request_budget,
                            lease_id: i64::try_from(n).unwrap_or(i64::MAX) + 1,
                        }),
                    );
                }
                None => {
                    self.send(
                        stream,
                        In::ProxyUnavailable(pb::ProxyUnavailable {
                            request_id: a.request_id,
                            next_free_at: None,
                        }),
                    );
                }
            },
            body if b.auto_ack => {
                if let Some(seq) = report_seq(body) {
                    self.send(stream, ack(seq, pb::AckStatus::Applied));
                }
            }
            _ => {}
        }
    }
}

struct Service(Arc<State>);

#[tonic::async_trait]
impl NodeService for Service {
    type ConnectStream = UnboundedReceiverStream<Result<pb::CoordinatorMessage, Status>>;

    async fn connect(
        &self,
        request: Request<Streaming<pb::NodeMessage>>,
    ) -> Result<Response<Self::ConnectStream>, Status> {
        let state = self.0.clone();
        let presented = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if presented.as_deref() != Some(&format!("Bearer {}", state.token)) {
            state.record(Seen::Refused {
                code: Code::Unauthenticated,
            });
            return Err(Status::unauthenticated("unknown node token"));
        }
        if let Some((code, message)) = state.behaviour().refuse {
            state.record(Seen::Refused { code });
            return Err(Status::new(code, message));
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let stream = {
            let mut streams = state.streams.lock().unwrap();
            streams.push(Some(tx));
            streams.len() - 1
        };
        state.record(Seen::Opened { stream });
        let mut inbound = request.into_inner();
        tokio::spawn(async move {
            loop {
                match inbound.message().await {
                    Ok(Some(pb::NodeMessage { body: Some(body) })) => {
                        state.record(Seen::Message {
                            stream,
                            body: body.clone(),
                        });
                        state.respond(stream, &body);
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        state.record(Seen::HalfClosed { stream });
                        break;
                    }
                    Err(status) => {
                        state.record(Seen::Broken {
                            stream,
                            status: status.to_string(),
                        });
                        break;
                    }
                }
            }
            // The node is done with this stream: end ours too.
            state.streams.lock().unwrap()[stream] = None;
        });
        Ok(Response::new(UnboundedReceiverStream::new(rx)))
    }
}

/// The scripted coordinator.
pub struct FakeCoordinator {
    pub addr: SocketAddr,
    state: Arc<State>,
    server: JoinHandle<()>,
}

impl Drop for FakeCoordinator {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeCoordinator {
    pub async fn start() -> Self {
        Self::start_with(Behaviour::default()).await
    }

    pub async fn start_with(behaviour: Behaviour) -> Self {
        init_logs();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State {
            token: TOKEN.into(),
            grants_made: AtomicUsize::new(0),
            seen: watch::channel(Vec::new()).0,
            streams: Mutex::new(Vec::new()),
            behaviour: Mutex::new(behaviour),
        });
        let service = NodeServiceServer::new(Service(state.clone()));
        let server = tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(TcpListenerStream::new(listener))
                .await
                .unwrap();
        });
        Self {
            addr,
            state,
            server,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn change(&self, change: impl FnOnce(&mut Behaviour)) {
        change(&mut self.state.behaviour.lock().unwrap());
    }

    /// Sends `body` on stream `stream`; false when that stream is closed.
    pub fn send(&self, stream: usize, body: In) -> bool {
        self.state.send(stream, body)
    }

    /// Ends stream `stream` with `status` (as a coordinator that fails would).
    pub fn kill(&self, stream: usize, status: Status) {
        let tx = self.state.streams.lock().unwrap()[stream].take();
        if let Some(tx) = tx {
            let _ = tx.send(Err(status));
        }
    }

    /// Everything seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.borrow().clone()
    }

    /// The messages of one stream, in order.
    pub fn messages(&self, stream: usize) -> Vec<Out> {
        messages(&self.seen(), stream)
    }

    /// Every message on every stream, in order, with its stream.
    pub fn all_messages(&self) -> Vec<(usize, Out)> {
        self.seen()
            .into_iter()
            .filter_map(|s| match s {
                Seen::Message { stream, body } => Some((stream, body)),
                _ => None,
            })
            .collect()
    }

    /// Waits (at most [`WAIT`]) until `found` finds something in the log.
    pub async fn wait_for<T>(&self, what: &str, mut found: impl FnMut(&[Seen]) -> Option<T>) -> T {
        let mut rx = self.state.seen.subscribe();
        let mut hit = None;
        let waited = tokio::time::timeout(
            WAIT,
            rx.wait_for(|log| {
                hit = found(log);
                hit.is_some()
            }),
        )
        .await;
        match (waited, hit) {
            (Ok(Ok(_)), Some(hit)) => hit,
            _ => panic!("timed out waiting for {what}; seen: {:#?}", self.seen()),
        }
    }

    /// Waits for the first message on `stream` that `pick` accepts.
    pub async fn wait_message<T>(
        &self,
        stream: usize,
        what: &str,
        mut pick: impl FnMut(&Out) -> Option<T>,
    ) -> T {
        self.wait_for(what, |log| messages(log, stream).iter().find_map(&mut pick))
            .await
    }

    /// Waits for the Hello of `stream`.
    pub async fn hello(&self, stream: usize) -> pb::Hello {
        self.wait_message(stream, &format!("hello on stream {stream}"), |m| match m {
            Out::Hello(h) => Some(h.clone()),
            _ => None,
        })
        .await
    }
}

fn messages(log: &[Seen], stream: usize) -> Vec<Out> {
    log.iter()
        .filter_map(|s| match s {
            Seen::Message { stream: n, body } if *n == stream => Some(body.clone()),
            _ => None,
        })
        .collect()
}

/// The report seq of a report message.
pub fn report_seq(body: &Out) -> Option<u64> {
    match body {
        Out::Result(r) => Some(r.report_seq),
        Out::Failure(f) => Some(f.report_seq),
        Out::HandBack(h) => Some(h.report_seq),
        Out::Stopped(s) => Some(s.report_seq),
        Out::ProxyRelease(r) => Some(r.report_seq),
        Out::SessionEnd(s) => Some(s.report_seq),
        Out::BlockEvent(b) => Some(b.report_seq),
        _ => None,
    }
}

/// The job a report speaks for.
pub fn report_job(body: &Out) -> Option<i64> {
    match body {
        Out::Result(r) => Some(r.job_id),
        Out::Failure(f) => Some(f.job_id),
        Out::HandBack(h) => Some(h.job_id),
        Out::Stopped(s) => Some(s.job_id),
        _ => None,
    }
}

pub fn ack(seq: u64, status: pb::AckStatus) -> In {
    In::Ack(pb::Ack {
        report_seq: seq,
        status: status as i32,
        error: String::new(),
    })
}

/// An Assign of job `job_id` (epoch 1) for the scripted product `name`, due in `deadline`.
pub fn assign(job_id: i64, name: &str, deadline: Duration) -> In {
    In::Assign(pb::Assign {
        job_id,
        lease_epoch: 1,
        deadline: Some(timestamp_to_pb(
            Utc::now() + chrono::Duration::from_std(deadline).unwrap(),
        )),
        lease_until: None,
        payload: Some(pb::JobPayload {
            product: Some(pb::Product {
                code: format!("SKU-{job_id}"),
                name: name.into(),
                ..Default::default()
            }),
            mall: MALL.into(),
            attempt: 1,
            max_attempts: 3,
        }),
        traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
        tracestate: String::new(),
    })
}

/// The user name and the password of [`gated_stack`]'s gateway.
pub const PROXY_USER: &str = "lps-node";
pub const PROXY_PASSWORD: &str = "gw-pass-77";

/// The test kit's malls behind a gateway of `ports` exit IPs that wants [`PROXY_USER`] and
/// [`PROXY_PASSWORD`]; with `block_after`, the malls block an exit IP after that many
/// searches.
pub async fn gated_stack(ports: usize, block_after: Option<u32>) -> StackHandle {
    let mut stack_config = StackConfig::new(ports);
    stack_config.gateway = GatewayConfig::new(ports).with_credentials(PROXY_USER, PROXY_PASSWORD);
    stack_config.block_after = block_after;
    Stack::start(stack_config).await.unwrap()
}

/// Grants of every port of `stack`'s gateway, with its credentials, 5 requests an exit IP.
pub fn grant_plan(stack: &StackHandle) -> GrantPlan {
    GrantPlan {
        host: "127.0.0.1".into(),
        ports: stack
            .gateway
            .ports()
            .iter()
            .map(|p| u32::from(p.addr.port()))
            .collect(),
        username: PROXY_USER.into(),
        password: PROXY_PASSWORD.into(),
        request_budget: 5,
    }
}

/// Settings of a browser node `node_id` against `coordinator`: one slot, 30 s to drain.
pub fn browser_node_config(coordinator: &FakeCoordinator, node_id: &str) -> Config {
    let mut config = Config::new(coordinator.url(), TOKEN);
    config.node_id = node_id.into();
    config.slots = 1;
    config.drain_timeout = Duration::from_secs(30);
    config
}

/// Waits (at most [`WAIT`]) until the node of `handle` is connected and welcomed.
pub async fn wait_welcomed(handle: &NodeHandle) {
    tokio::time::timeout(
        WAIT,
        handle.wait_for(|s| s.stream == StreamState::Connected),
    )
    .await
    .expect("welcomed");
}

/// Cancels `shutdown` and waits (30 s at most) for `run` to end with a clean drain.
pub async fn drain(shutdown: &CancellationToken, run: JoinHandle<Result<(), NodeError>>) {
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the node stops")
        .unwrap()
        .expect("a clean drain");
}

/// A node under test, running in this process.
pub struct TestNode {
    pub handle: NodeHandle,
    pub shutdown: CancellationToken,
    pub executor: ScriptedExecutor,
    pub run: JoinHandle<Result<(), NodeError>>,
}

impl TestNode {
    /// Starts a node against `coordinator` with 2 slots and short timeouts; `adjust` changes
    /// the settings first.
    pub fn start(coordinator: &FakeCoordinator, adjust: impl FnOnce(&mut Config)) -> Self {
        let mut config = Config::new(coordinator.url(), TOKEN);
        config.node_id = "node-test".into();
        config.slots = 2;
        config.drain_timeout = Duration::from_secs(2);
        config.reconnect_deadline = Duration::from_secs(10);
        adjust(&mut config);
        let executor = ScriptedExecutor::new();
        let node = Node::new(config, executor.clone());
        let handle = node.handle();
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(node.run(shutdown.clone()));
        Self {
            handle,
            shutdown,
            executor,
            run,
        }
    }

    /// Waits (at most [`WAIT`]) for `run` to return.
    pub async fn finished(self) -> Result<(), NodeError> {
        tokio::time::timeout(WAIT, self.run)
            .await
            .expect("the node stops in time")
            .expect("the node task does not panic")
    }

    /// Waits until the node's status satisfies `ready`.
    pub async fn wait_status(
        &self,
        what: &str,
        ready: impl FnMut(&lps_crawler_node::Status) -> bool,
    ) -> lps_crawler_node::Status {
        match tokio::time::timeout(WAIT, self.handle.wait_for(ready)).await {
            Ok(status) => status,
            Err(_) => panic!(
                "timed out waiting for {what}; status: {:?}",
                self.handle.status()
            ),
        }
    }
}

fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// `GET path` over plain HTTP/1.1 (the node's probe server); the status code and the body.
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut response = String::new();
    conn.read_to_string(&mut response).await.unwrap();
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"));
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (code, body)
}
