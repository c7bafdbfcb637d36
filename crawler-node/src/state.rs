//! What the node's parts share about the node: its [`Status`] and [`StreamState`], the
//! [`NodeError`] a run ends with, this process's [`INSTANCE`], and the state the link
//! writes and every `NodeHandle` reads. Below both the link (the writer) and `node.rs`
//! (which composes the node and hands out handles).

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use tokio::{sync::watch, time::Instant};

use crate::{config::ConfigError, executor::Executor, metrics::NodeMetrics, welcome::SiteProfiles};

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
    pub(crate) fn new(slots: u32) -> Self {
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

/// Why [`Node::run`](crate::Node::run) ended with an error (the process exits non-zero).
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
    pub(crate) executor: Arc<dyn Executor>,
    pub(crate) started: Instant,
    pub(crate) alive_ms: AtomicU64,
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
