//! The crawler node as a library value: [`Node::new`] + [`Node::run`], and the
//! [`NodeHandle`] through which health checks and tests watch it.
//!
//! `run` owns everything for the node's life (the stream, the slot table, the outbox) in
//! one task, the link (the private `link` module); nothing is global, so several nodes can run in
//! one test process. The handle only reads: a `watch` of [`Status`] updated by the link
//! after every event, the latest site profiles, a liveness tick, the executor's readiness
//! and the node's [`NodeMetrics`].
//!
//! Cancellation: cancelling the `shutdown` token passed to `run` starts a drain (it does
//! not abort anything); dropping the `run` future aborts the node's job tasks without
//! reports (the coordinator reclaims their jobs after its grace period).

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use tokio::{sync::watch, time::Instant};
use tokio_util::sync::CancellationToken;
use tracing::instrument;

use crate::{
    config::{Config, ConfigError},
    executor::Executor,
    link::Link,
    metrics::NodeMetrics,
    proxy::LinkInbox,
    welcome::SiteProfiles,
};

/// `/healthz` fails when the node's loop has not ticked for this long.
pub const ALIVE_WINDOW: Duration = Duration::from_secs(30);

/// Where the node's stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamState {
    /// Not welcomed yet, or the stream was lost and the node is reconnecting.
    Connecting,
    /// Connected and welcomed.
    Connected,
    /// `run` has returned.
    Stopped,
}

/// What the node is doing, as of its last event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub stream: StreamState,
    /// A drain (SIGTERM/shutdown token or the coordinator's Drain) has started.
    pub draining: bool,
    /// The stream id of the current Welcome.
    pub stream_id: Option<String>,
    /// Slots taken by jobs (stopping ones included).
    pub running_jobs: usize,
    /// Free slots as announced to the coordinator (0 while draining).
    pub free_slots: u32,
    /// Reports not acknowledged yet.
    pub unacked_reports: usize,
    /// Welcomed streams so far (1 after the first connect, 2 after one reconnect…).
    pub connects: u64,
}

impl Status {
    fn new(slots: u32) -> Self {
        Self {
            stream: StreamState::Connecting,
            draining: false,
            stream_id: None,
            running_jobs: 0,
            free_slots: slots,
            unacked_reports: 0,
            connects: 0,
        }
    }
}

/// Why [`Node::run`] ended with an error (the process exits non-zero).
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
    /// The coordinator ended the stream with a status that retrying cannot fix.
    #[error("the coordinator refused this node ({code:?}: {message}); not retrying: {hint}")]
    Refused {
        code: tonic::Code,
        message: String,
        hint: &'static str,
    },
    /// The coordinator stayed unreachable for the whole `LPS_RECONNECT_DEADLINE`.
    #[error(
        "the coordinator was unreachable for {waited:?} (LPS_RECONNECT_DEADLINE {deadline:?}); last error: {last_error}"
    )]
    CoordinatorLost {
        waited: Duration,
        deadline: Duration,
        last_error: String,
    },
    /// The drain deadline passed before everything was handed over.
    #[error(
        "the drain deadline passed with {unacked_reports} reports unacknowledged and {running_jobs} jobs running"
    )]
    DrainIncomplete {
        unacked_reports: usize,
        running_jobs: usize,
    },
}

/// This node process (random per start): sent in every Hello, so the coordinator tells a
/// reconnect of this process from another process using the same node id.
pub static INSTANCE: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("{}-{:016x}", std::process::id(), fastrand::u64(..)));

/// State shared by the link (the writer) and every [`NodeHandle`] (readers).
pub(crate) struct Shared {
    pub(crate) node_id: String,
    pub(crate) status: watch::Sender<Status>,
    pub(crate) profiles: watch::Sender<Arc<SiteProfiles>>,
    pub(crate) metrics: Arc<NodeMetrics>,
    /// Read for `/readyz` only.
    executor: Arc<dyn Executor>,
    started: Instant,
    alive_ms: AtomicU64,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("node_id", &self.node_id)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// The node's loop is alive now.
    pub(crate) fn touch(&self) {
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.alive_ms.store(ms, Ordering::Relaxed);
    }
}

/// A read-only view of a node, for health checks and tests. Cheap to clone.
#[derive(Debug, Clone)]
pub struct NodeHandle {
    shared: Arc<Shared>,
}

impl NodeHandle {
    pub fn node_id(&self) -> &str {
        &self.shared.node_id
    }

    /// The status now.
    pub fn status(&self) -> Status {
        self.shared.status.borrow().clone()
    }

    /// A receiver that sees every status change.
    pub fn subscribe(&self) -> watch::Receiver<Status> {
        self.shared.status.subscribe()
    }

    /// Waits until `ready` holds for the status and returns that status.
    pub async fn wait_for(&self, mut ready: impl FnMut(&Status) -> bool) -> Status {
        let mut rx = self.subscribe();
        // NB: the sender lives in `self.shared`, so the channel cannot close here.
        let status = rx.wait_for(|s| ready(s)).await.map(|s| s.clone());
        status.unwrap_or_else(|_| self.status())
    }

    /// Connected and welcomed, and the executor can run jobs (`/readyz`).
    pub fn is_ready(&self) -> bool {
        self.is_connected() && self.executor_ready()
    }

    /// Connected and welcomed.
    pub fn is_connected(&self) -> bool {
        self.shared.status.borrow().stream == StreamState::Connected
    }

    /// The executor can run jobs now ([`Executor::is_ready`]: e.g. chromedriver is up).
    pub fn executor_ready(&self) -> bool {
        self.shared.executor.is_ready()
    }

    /// The node's metrics (`/metrics`).
    pub fn metrics(&self) -> &Arc<NodeMetrics> {
        &self.shared.metrics
    }

    /// `run` has not returned and its loop ticked within [`ALIVE_WINDOW`] (`/healthz`).
    pub fn is_alive(&self) -> bool {
        if self.shared.status.borrow().stream == StreamState::Stopped {
            return false;
        }
        let last = Duration::from_millis(self.shared.alive_ms.load(Ordering::Relaxed));
        self.shared.started.elapsed().saturating_sub(last) < ALIVE_WINDOW
    }

    /// The site profiles of the latest Welcome (empty before the first).
    pub fn profiles(&self) -> watch::Receiver<Arc<SiteProfiles>> {
        self.shared.profiles.subscribe()
    }
}

/// A crawler node: connects to the coordinator and runs the jobs it is assigned.
pub struct Node {
    config: Config,
    executor: Arc<dyn Executor>,
    shared: Arc<Shared>,
    inbox: Option<LinkInbox>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Node {
    /// A node with these settings (checked when it runs) and this executor.
    pub fn new(config: Config, executor: impl Executor) -> Self {
        let (status, _) = watch::channel(Status::new(config.slots));
        let (profiles, _) = watch::channel(Arc::new(SiteProfiles::default()));
        let executor: Arc<dyn Executor> = Arc::new(executor);
        let shared = Arc::new(Shared {
            node_id: config.node_id.clone(),
            status,
            profiles,
            metrics: Arc::new(NodeMetrics::new()),
            executor: executor.clone(),
            started: Instant::now(),
            alive_ms: AtomicU64::new(0),
        });
        Self {
            config,
            executor,
            shared,
            inbox: None,
        }
    }

    /// Records into `metrics` (share it with the executor, e.g.
    /// [`BrowserExecutor::with_metrics`](crate::BrowserExecutor::with_metrics), so one
    /// `/metrics` shows both). Without it the node has metrics of its own.
    ///
    /// # Panics
    /// When called after [`Node::handle`] (a handle would keep showing the old metrics).
    #[must_use]
    pub fn with_metrics(mut self, metrics: Arc<NodeMetrics>) -> Self {
        let Some(shared) = Arc::get_mut(&mut self.shared) else {
            panic!("Node::with_metrics must be called before Node::handle");
        };
        shared.metrics = metrics;
        self
    }

    /// Serves `inbox`: the proxy requests and port reports of the executor's
    /// [`NodeLink`](crate::proxy::NodeLink) (made with [`NodeLink::channel`](crate::proxy::NodeLink::channel)).
    #[must_use]
    pub fn with_link(mut self, inbox: LinkInbox) -> Self {
        self.inbox = Some(inbox);
        self
    }

    pub fn node_id(&self) -> &str {
        &self.config.node_id
    }

    /// A view of this node that outlives `run`.
    pub fn handle(&self) -> NodeHandle {
        NodeHandle {
            shared: self.shared.clone(),
        }
    }

    /// Runs the node until it has drained (after `shutdown` is cancelled or the
    /// coordinator sent Drain): `Ok` once every job is finished or handed back, every report
    /// is acked and Goodbye is sent. Errors: bad settings, a coordinator that refuses the
    /// node, one that stays unreachable past `LPS_RECONNECT_DEADLINE`, or a drain that
    /// could not hand everything over in time.
    #[instrument(
        name = "node.run",
        skip_all,
        fields(node.id = %self.config.node_id, session.id = tracing::field::Empty, log_only = true),
        err
    )]
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), NodeError> {
        let shared = self.shared.clone();
        let result = match self.config.validate() {
            Ok(()) => match Link::new(self.config, self.executor, self.shared, self.inbox) {
                Ok(link) => link.run(shutdown).await,
                Err(err) => Err(err),
            },
            Err(err) => Err(err.into()),
        };
        shared
            .status
            .send_modify(|s| s.stream = StreamState::Stopped);
        result
    }
}
