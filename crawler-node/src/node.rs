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

pub use crate::state::{INSTANCE, NodeError, Status, StreamState};
use crate::{
    config::Config, executor::Executor, link::Link, metrics::NodeMetrics, proxy::LinkInbox,
    state::Shared, welcome::SiteProfiles,
};

/// `/healthz` fails when the node's loop has not ticked for this long.
pub const ALIVE_WINDOW: Duration = Duration::from_secs(30);

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
