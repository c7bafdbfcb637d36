//! Dispatch: the coordinator's side of the node streams.
//!
//! - [`stream`]: one task per node stream owning that node's state (credits, the jobs it
//!   holds, draining); it claims jobs for the node's free slots when woken by NOTIFY (or the
//!   poll fallback), applies reports with fencing and acks them after the commit.
//! - [`Registry`]: a task owning the directory node id → stream command channel, so that
//!   control messages (cancel, drain, shutdown) reach the right stream. Nothing else is
//!   shared between streams.
//! - Control listener: LISTEN on [`crate::control::CONTROL_CHANNEL`] turns cross-replica
//!   messages into stream commands for the nodes connected here.
//! - Grace: a stream that ends without Goodbye leaves its node's jobs leased for
//!   `node_grace` (counted from the database's return when an outage cut into it); unless
//!   the node reconnected (to any replica) by then, they are released as reclaims.

pub mod stream;

use std::{collections::HashMap, sync::Arc, time::Duration};

use lps_proto::pb;
use sqlx::{PgPool, postgres::PgListener};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, debug, info, info_span, warn};
use uuid::Uuid;

use crate::{
    control::{CONTROL_CHANNEL, Control},
    queue::{Queue, Wakeups},
};

/// Settings of the node protocol.
#[derive(Debug, Clone)]
pub struct DispatchConfig {
    /// Names this coordinator replica in `node_session`.
    pub coordinator_id: String,
    /// How often nodes heartbeat (sent in Welcome).
    pub heartbeat_interval: Duration,
    /// A stream with no frame for this long is considered lost.
    pub silence_timeout: Duration,
    /// How long a lost node's jobs stay leased for a reconnect.
    pub node_grace: Duration,
    /// When a node that keeps dropping its jobs is quarantined.
    pub quarantine: crate::node_session::QuarantinePolicy,
    /// Poll fallback for claimers when no NOTIFY arrives.
    pub claim_poll: Duration,
    /// The current site profiles, sent in Welcome and, when they change, in ProfileUpdate
    /// (`crate::profiles::watch`).
    pub profiles: tokio::sync::watch::Receiver<Arc<crate::profiles::watch::ProfileSet>>,
    /// The same-product judge's vocabulary sent in Welcome (the built-in one or
    /// `LPS_VOCABULARY_FILE`, checked with every profile's additions at start-up).
    pub vocabulary: pb::Vocabulary,
    pub limits: pb::Limits,
}

/// What a node stream can be told from outside.
#[derive(Debug)]
pub enum Command {
    /// Stop this job on the node (its lease is already gone).
    Cancel {
        job_id: i64,
        lease_epoch: i64,
        reason: String,
    },
    /// Take no new jobs; tell the node to drain.
    Drain { reason: String },
    /// Another stream of the same node took over: end this one without grace.
    Replaced,
}

/// A connected node stream as the registry knows it.
#[derive(Debug, Clone)]
struct Entry {
    stream_id: Uuid,
    commands: mpsc::Sender<Command>,
    /// The node process the stream comes from (`None`: an older node).
    instance: Option<String>,
    connected: std::time::Instant,
}

/// Another node process holds a live stream with the same node id.
#[derive(Debug, Clone)]
pub struct Clash {
    /// The instance of the live stream.
    pub instance: String,
    /// How long it has been connected.
    pub connected_for: std::time::Duration,
}

enum RegistryMsg {
    Register {
        node_id: String,
        entry: Entry,
        previous: oneshot::Sender<Result<Option<Entry>, Clash>>,
    },
    Unregister {
        node_id: String,
        stream_id: Uuid,
    },
    Send {
        node_id: String,
        command: Command,
    },
    Count {
        reply: oneshot::Sender<usize>,
    },
}

/// Handle to the registry task. Cheap to clone.
#[derive(Clone)]
pub struct Registry {
    tx: mpsc::Sender<RegistryMsg>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Registry")
    }
}

impl Registry {
    /// Starts the registry task; it ends when every handle is dropped.
    pub fn spawn() -> Self {
        let (tx, mut rx) = mpsc::channel::<RegistryMsg>(1024);
        tokio::spawn(
            async move {
                let mut nodes: HashMap<String, Entry> = HashMap::new();
                while let Some(msg) = rx.recv().await {
                    match msg {
                        RegistryMsg::Register {
                            node_id,
                            entry,
                            previous,
                        } => {
                            // A live stream of another process with this id is not
                            // replaced: two processes sharing an id would take each other's
                            // jobs back in a loop. The same process reconnecting replaces
                            // its own stream.
                            let clash = nodes.get(&node_id).and_then(|old| {
                                let (Some(old_instance), Some(new)) =
                                    (&old.instance, &entry.instance)
                                else {
                                    return None;
                                };
                                (old_instance != new && !old.commands.is_closed()).then(|| Clash {
                                    instance: old_instance.clone(),
                                    connected_for: old.connected.elapsed(),
                                })
                            });
                            let answer = match clash {
                                Some(clash) => Err(clash),
                                None => Ok(nodes.insert(node_id, entry)),
                            };
                            let _ = previous.send(answer);
                        }
                        RegistryMsg::Unregister { node_id, stream_id } => {
                            if nodes
                                .get(&node_id)
                                .is_some_and(|e| e.stream_id == stream_id)
                            {
                                nodes.remove(&node_id);
                            }
                        }
                        RegistryMsg::Send { node_id, command } => {
                            if let Some(entry) = nodes.get(&node_id) {
                                // NB: try_send: a stream that is this far behind is stuck,
                                // and the decision is in the database anyway (its next
                                // heartbeat is answered with it).
                                if entry.commands.try_send(command).is_err() {
                                    warn!(node.id = %node_id, "stream command queue full; dropped");
                                }
                            }
                        }
                        RegistryMsg::Count { reply } => {
                            let _ = reply.send(nodes.len());
                        }
                    }
                }
            }
            .instrument(info_span!(parent: None, "dispatch.registry", log_only = true)),
        );
        Self { tx }
    }

    /// Registers a stream; the entry it replaced, or the clash that refused it.
    async fn register(&self, node_id: &str, entry: Entry) -> Result<Option<Entry>, Clash> {
        let (previous, rx) = oneshot::channel();
        let msg = RegistryMsg::Register {
            node_id: node_id.to_owned(),
            entry,
            previous,
        };
        if self.tx.send(msg).await.is_err() {
            return Ok(None);
        }
        rx.await.unwrap_or(Ok(None))
    }

    async fn unregister(&self, node_id: &str, stream_id: Uuid) {
        let _ = self
            .tx
            .send(RegistryMsg::Unregister {
                node_id: node_id.to_owned(),
                stream_id,
            })
            .await;
    }

    /// Delivers `command` to `node_id`'s stream if it is connected to this replica.
    pub async fn send(&self, node_id: &str, command: Command) {
        let _ = self
            .tx
            .send(RegistryMsg::Send {
                node_id: node_id.to_owned(),
                command,
            })
            .await;
    }

    /// Streams connected to this replica.
    pub async fn connected(&self) -> usize {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(RegistryMsg::Count { reply }).await.is_err() {
            return 0;
        }
        rx.await.unwrap_or(0)
    }
}

/// Everything a node stream needs. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Dispatcher {
    pub queue: Queue,
    pub config: Arc<DispatchConfig>,
    pub registry: Registry,
    pub wakeups: Wakeups,
    /// Cancelled when the coordinator shuts down: streams tell their nodes to reconnect.
    pub shutdown: CancellationToken,
    /// Cancelled when the shutdown deadline is reached: streams end at once.
    pub hard_stop: CancellationToken,
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The proxy ledger, when a gateway is configured.
    pub ledger: Option<crate::ledger::Ledger>,
    /// Tracks stream tasks so shutdown can wait for them.
    pub streams: tokio_util::task::TaskTracker,
}

impl Dispatcher {
    pub fn pool(&self) -> &PgPool {
        self.queue.pool()
    }

    /// After a stream closed without Goodbye: wait the grace period, then release the node's
    /// jobs unless it reconnected meanwhile (to any replica).
    pub fn start_grace(&self, node_id: String, stream_id: Uuid) {
        let this = self.clone();
        let grace = self.config.node_grace;
        self.streams.spawn(
            async move {
                // A grace period that a database outage cut into starts over when the
                // database is back: the node could not reconnect while it was away.
                let mut wait = grace;
                loop {
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        // NB: on shutdown the timer is dropped; the leases then expire and the
                        // reaper (of any replica) takes the jobs back.
                        () = this.shutdown.cancelled() => return,
                    }
                    match this.queue.outages().hold(grace) {
                        Some(left) => wait = left.max(Duration::from_millis(100)),
                        None => break,
                    }
                }
                if let Some(ledger) = &this.ledger {
                    match ledger.release_lost_node(&node_id, stream_id).await {
                        Ok(ports) if !ports.is_empty() => {
                            info!(node.id = %node_id, ports = ports.len(), "grace over; released the node's proxy ports");
                        }
                        Ok(_) => {}
                        Err(e) => warn!(node.id = %node_id, error = %e, "releasing a lost node's ports failed; leases will expire"),
                    }
                }
                match this.queue.release_lost_node(&node_id, stream_id).await {
                    Ok(released) if !released.is_empty() => {
                        info!(node.id = %node_id, jobs = released.len(), "grace over; released the node's jobs");
                        this.record_drop(&node_id, released.len()).await;
                    }
                    Ok(_) => debug!(node.id = %node_id, "grace over; nothing to release"),
                    Err(e) => warn!(node.id = %node_id, error = %e, "releasing a lost node's jobs failed; leases will expire"),
                }
            }
            .instrument(info_span!(parent: None, "dispatch.grace", log_only = true)),
        );
    }
}

impl Dispatcher {
    /// Node `node_id` dropped `jobs` of its jobs (they were reclaimed, no attempt charged):
    /// counted, and a node that keeps doing it is quarantined (no new assignments for a
    /// back-off; DESIGN §2 "Poison means the job, not the node").
    /// Returns the node's quarantine, if any.
    pub async fn record_drop(
        &self,
        node_id: &str,
        jobs: usize,
    ) -> Option<chrono::DateTime<chrono::Utc>> {
        match crate::node_session::dropped(
            self.pool(),
            node_id,
            jobs,
            &self.config.quarantine,
            None,
        )
        .await
        {
            Ok(Some(until)) if until > chrono::Utc::now() => {
                warn!(node.id = %node_id, %until, "node keeps dropping its jobs; quarantined: no new assignments until then");
                Some(until)
            }
            Ok(_) => None,
            Err(e) => {
                warn!(node.id = %node_id, error = %e, "could not count the node's dropped jobs");
                None
            }
        }
    }

    /// Hands back leases claimed for `node_id` whose stream went away before they were
    /// delivered: queued again at once, no attempt charged. A hand-back the database
    /// refuses for now is retried until it applies or the lease is gone (an outage must not
    /// leave them leased to expire and be charged later).
    pub fn hand_back_unsent(&self, node_id: String, leases: Vec<lps_proto::model::Lease>) {
        if leases.is_empty() {
            return;
        }
        let this = self.clone();
        let span = info_span!(parent: None, "dispatch.hand_back_unsent", node.id = %node_id, log_only = true);
        self.streams.spawn(
            async move {
                for lease in leases {
                    loop {
                        match this.queue.hand_back_if_leased(&node_id, lease).await {
                            Ok(()) => {
                                info!(job.id = lease.job_id, "handed back a job its stream never received");
                                break;
                            }
                            Err(crate::error::Error::LeaseLost(_)) => break,
                            Err(e) if e.is_transient() => {
                                debug!(job.id = lease.job_id, error = %e, "hand-back failed; retrying");
                                tokio::select! {
                                    () = tokio::time::sleep(Duration::from_millis(500)) => {}
                                    () = this.hard_stop.cancelled() => return,
                                }
                            }
                            Err(e) => {
                                warn!(job.id = lease.job_id, error = %e, "hand-back failed; the lease will expire");
                                break;
                            }
                        }
                    }
                }
            }
            .instrument(span),
        );
    }
}

/// LISTENs for control messages and routes them to streams connected here. Returns when
/// `cancel` fires; a failed listener is retried every second.
pub async fn run_control_listener(
    pool: PgPool,
    registry: Registry,
    cancel: CancellationToken,
) -> Result<(), crate::error::Error> {
    let mut listener = PgListener::connect_with(&pool).await?;
    listener.listen(CONTROL_CHANNEL).await?;
    loop {
        let received = tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            r = listener.try_recv() => r,
        };
        match received {
            Ok(Some(n)) => match serde_json::from_str::<Control>(n.payload()) {
                Ok(Control::Cancel(jobs)) => {
                    for job in jobs {
                        let command = Command::Cancel {
                            job_id: job.job_id,
                            lease_epoch: job.lease_epoch,
                            reason: job.reason,
                        };
                        registry.send(&job.node_id, command).await;
                    }
                }
                Ok(Control::Drain { node_id }) => {
                    registry
                        .send(
                            &node_id,
                            Command::Drain {
                                reason: "operator request".into(),
                            },
                        )
                        .await;
                }
                Err(e) => warn!(error = %e, "ignoring a malformed control message"),
            },
            Ok(None) => warn!("control listener connection lost; reconnecting"),
            Err(e) => {
                warn!(error = %e, "control listener failed; retrying in 1s");
                tokio::select! {
                    () = cancel.cancelled() => return Ok(()),
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    }
}
