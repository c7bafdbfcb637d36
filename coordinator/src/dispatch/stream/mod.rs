//! One node stream, owned by one task.
//!
//! `NodeStream` is the task's state; [`run`] registers it, welcomes the node (`welcome.rs`)
//! and serves the stream until it ends. Every inbound frame is converted to its model type
//! (`lps_proto::model`, validated once on receive) and handed to one function per kind:
//! `heartbeat.rs` (Credit, Heartbeat), `reports.rs` (Result, Failure, HandBack, Stopped),
//! `proxy.rs` (ProxyAcquire, ProxyRelease, SessionEnd, BlockEvent); `claims.rs` claims and
//! assigns jobs for the node's free slots. An invalid report is acked REJECTED naming the
//! field; an invalid Credit or Heartbeat (no ack to carry it) ends the stream with
//! INVALID_ARGUMENT, as an invalid Hello does.
//!
//! The task owns the node's state — the leases it holds, its credits, whether it drains —
//! and `select!`s on: coordinator shutdown, inbound frames, commands from the registry,
//! claim wake-ups (only while it has credits) and the silence deadline.
//!
//! Invariants:
//! - never more jobs assigned than `min(slots - held, free slots the node announced minus
//!   what was assigned since)`: a stale announcement can only under-assign;
//! - a report is acked only after its transition committed; a report for a lost lease is
//!   acked STALE and changes nothing (the queue's fencing);
//! - the database decides: a cancelled or reclaimed job simply fails to renew, and the
//!   heartbeat answer tells the node to stop it.
//!
//! A database fault (a [`crate::db::Fault`]: a lost connection, a full disk, a read-only
//! database, a statement timeout) is an outage, not the node's fault and not the job's: the
//! stream stays up. A report that could not be written is parked unacked, in arrival order
//! (later reports wait behind it), and written again every [`PARKED_RETRY`] until the
//! database takes it, then acked; should the stream end first, the node resends it after
//! reconnecting as always. A heartbeat whose renewals could not be written is answered
//! without extensions or cancels (the reaper ends no lease while the database cannot write,
//! see `queue::Outages`); a claim that could not be written is tried again at the next
//! wake-up; a proxy acquire is answered "none free".
//!
//! Cancellation safety: the loop only awaits between whole steps; a step that was started
//! (a claim, a completion) runs to its end before the next `select!`.
//!
//! Tracing: one search is one trace. Each claimed job records its `queue.wait` (enqueue to
//! claim) and a `dispatch.assign` span under the Search call's context stored on the job
//! row; the Assign carries the assignment's context to the node. Reports about a held job
//! (`dispatch.result`, `dispatch.failure`, `dispatch.proxy_acquire`,
//! `dispatch.proxy_release`) continue the assignment's context, so the commit is part of
//! the search's trace too; the stream's own span (`dispatch.session`, a name dashboards know) is a trace of its
//! own.

mod claims;
mod heartbeat;
mod proxy;
mod reports;
mod welcome;

use std::{collections::HashMap, time::Duration};

use lps_proto::{
    model::{self, Hello, JobFailure, JobResult, Lease},
    pb::{self, coordinator_message::Body as Out, node_message::Body as In},
};
use tokio::{sync::mpsc, time::Instant};
use tonic::{Status, Streaming};
use tracing::{Span, debug, info, instrument, warn};
use uuid::Uuid;

use super::{Command, Dispatcher, Entry};
use crate::{node_session, queue::ClaimedJob};

/// The sending half of a node stream.
pub type Outbound = mpsc::Sender<Result<pb::CoordinatorMessage, Status>>;

/// How a node stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The node said Goodbye: nothing left to keep.
    Goodbye,
    /// Replaced by a newer stream of the same node.
    Replaced,
    /// This coordinator is shutting down: the node was told to reconnect (to another
    /// replica, or to this one restarted) and re-attaches its jobs through Hello.
    Shutdown,
    /// The stream broke or went silent: keep the node's jobs for the grace period.
    Lost,
}

/// A lease the node holds, as this coordinator knows it.
#[derive(Debug, Clone)]
struct Held {
    epoch: i64,
    /// Empty for leases re-attached from a Hello (the mall is only for metrics and spans).
    mall: String,
    /// 0 for leases re-attached from a Hello.
    attempt: u32,
    /// The W3C context (`traceparent`, `tracestate`) of the assignment when it is traced:
    /// reports about the job continue it. `None` for leases re-attached from a Hello.
    trace: Option<(String, String)>,
    /// The node has shown it has the job (listed it in a Hello or a heartbeat). A stream
    /// replaced before that hands the job back: its Assign may never have arrived.
    confirmed: bool,
}

/// The state of one node stream, owned by its task.
struct NodeStream {
    d: Dispatcher,
    node_id: String,
    stream_id: Uuid,
    slots: u32,
    malls: Option<Vec<model::MallId>>,
    /// Leases this node holds, as far as this coordinator knows.
    held: HashMap<i64, Held>,
    /// Free slots the node last announced, minus assignments since.
    announced_free: u32,
    draining: bool,
    /// Why, once draining (repeated in every Drain).
    drain_reason: String,
    /// The last message's handling already claimed for every free slot (a result's
    /// completion claims the freed slot's next job in its transaction).
    claimed: bool,
    out: Outbound,
    /// Proxy ports this node holds (granted here or re-attached from Hello).
    ports: std::collections::BTreeSet<u16>,
    /// What the node_session row last recorded, and when.
    recorded_free: u32,
    recorded_at: Instant,
    /// The site profiles; their revision as last sent to the node (Welcome or
    /// ProfileUpdate): every Assign after it runs with that revision.
    profiles: tokio::sync::watch::Receiver<std::sync::Arc<crate::profiles::watch::ProfileSet>>,
    profile_revision: String,
    /// The node is quarantined until then (it kept dropping its jobs): no new assignments.
    quarantined_until: Option<chrono::DateTime<chrono::Utc>>,
    /// Reports a database fault kept from being written, unacked, in arrival order.
    parked: std::collections::VecDeque<(u64, reports::Report)>,
}

/// How often parked reports are written again while the database cannot take them.
pub const PARKED_RETRY: Duration = Duration::from_millis(500);

/// Past this many parked reports the stream ends (UNAVAILABLE): the node keeps them and
/// resends them after reconnecting, and this replica's memory stays bounded.
const PARKED_MAX: usize = 4096;

/// Runs a node stream whose Hello was already validated; returns when the stream is over.
#[instrument(name = "dispatch.session", skip_all, fields(node.id = %hello.node_id, session.id = %stream_id, log_only = true))]
pub async fn run(
    d: Dispatcher,
    hello: Hello,
    stream_id: Uuid,
    mut inbound: Streaming<pb::NodeMessage>,
    out: Outbound,
) {
    let _stream = crate::metrics::Held::new(&d.metrics.node_streams);
    let (commands_tx, mut commands) = mpsc::channel(256);
    let node_id = hello.node_id.clone();
    let registered = d
        .registry
        .register(
            &node_id,
            Entry {
                stream_id,
                commands: commands_tx,
                instance: hello.instance.clone(),
                connected: std::time::Instant::now(),
            },
        )
        .await;
    let previous = match registered {
        Ok(previous) => previous,
        Err(clash) => {
            // NB: nothing of the node's is touched: its jobs belong to the live stream.
            warn!(
                node.instance = hello.instance.as_deref().unwrap_or_default(),
                live.instance = %clash.instance,
                live.connected_for = ?clash.connected_for,
                "a second node process uses this node id; refused"
            );
            let _ = out
                .send(Err(Status::already_exists(format!(
                    "node id {node_id:?} is already connected from another node process (instance {}, connected {:?} ago); every node needs its own LPS_NODE_ID",
                    clash.instance, clash.connected_for
                ))))
                .await;
            return;
        }
    };
    if let Some(previous) = previous {
        let _ = previous.commands.try_send(Command::Replaced);
    }
    let mut s = NodeStream {
        d: d.clone(),
        node_id: node_id.clone(),
        stream_id,
        slots: hello.slots,
        malls: (!hello.malls.is_empty()).then(|| hello.malls.clone()),
        held: HashMap::new(),
        announced_free: 0,
        draining: false,
        drain_reason: String::new(),
        claimed: false,
        out,
        ports: std::collections::BTreeSet::new(),
        recorded_free: hello.slots,
        recorded_at: Instant::now(),
        profiles: d.config.profiles.clone(),
        profile_revision: String::new(),
        parked: std::collections::VecDeque::new(),
        quarantined_until: None,
    };
    let end = match s.welcome(&hello).await {
        Ok(()) => s.serve(&mut inbound, &mut commands).await,
        Err(e) => {
            let _ = s.out.send(Err(e)).await;
            End::Lost
        }
    };
    d.registry.unregister(&node_id, stream_id).await;
    if let Err(e) = node_session::disconnect(d.pool(), &node_id, stream_id).await {
        warn!(error = %e, "could not mark the node disconnected");
    }
    match end {
        End::Goodbye => {
            if let Some(ledger) = &d.ledger
                && let Err(e) = ledger.release_lost_node(&node_id, stream_id).await
            {
                warn!(error = %e, "releasing ports after goodbye failed; leases will expire");
            }
            // The node handed back or finished everything; anything left is released now.
            match d.queue.release_lost_node(&node_id, stream_id).await {
                Ok(r) if !r.is_empty() => info!(jobs = r.len(), "released jobs left after goodbye"),
                Ok(_) => {}
                Err(e) => warn!(error = %e, "release after goodbye failed; leases will expire"),
            }
            info!("node said goodbye");
        }
        End::Replaced => {
            // The newer stream's Hello listed what the node has; an assignment it never
            // confirmed may have been lost with this stream.
            let unconfirmed: Vec<Lease> = s
                .held
                .iter()
                .filter(|(_, h)| !h.confirmed)
                .map(|(&job_id, h)| Lease {
                    job_id,
                    epoch: h.epoch,
                })
                .collect();
            info!(
                unconfirmed = unconfirmed.len(),
                "stream replaced by a newer one"
            );
            if !unconfirmed.is_empty() {
                s.hand_back_unsent(unconfirmed);
            }
        }
        End::Shutdown => info!("coordinator shutting down; the node was told to reconnect"),
        End::Lost => {
            info!(grace = ?d.config.node_grace, "stream lost; keeping the node's jobs for the grace period");
            d.start_grace(node_id, stream_id);
        }
    }
}

impl NodeStream {
    async fn serve(
        &mut self,
        inbound: &mut Streaming<pb::NodeMessage>,
        commands: &mut mpsc::Receiver<Command>,
    ) -> End {
        let silence = self.d.config.silence_timeout;
        let mut silent_until = Instant::now() + silence;
        let mut wakeups = self.d.wakeups.clone();
        // NB: a clone keeps the version the Welcome saw: an edit since is sent below.
        let mut profiles = self.profiles.clone();
        // Claim once right away: work may be waiting.
        let mut claim_now = true;
        let mut parked_retry = Instant::now() + PARKED_RETRY;
        loop {
            if claim_now && self.credits() > 0 {
                wakeups.mark_seen();
                match self.claim().await {
                    Ok(()) => {}
                    Err(e) if crate::error::is_outage(&e) => {
                        debug!(
                            message = e.message(),
                            "claim not written; retrying at the next wake-up"
                        );
                    }
                    Err(e) => {
                        let _ = self.out.send(Err(e)).await;
                        return End::Lost;
                    }
                }
            }
            claim_now = false;
            let can_claim = self.credits() > 0;
            tokio::select! {
                // A hard stop (shutdown deadline, or a crash in tests) wins over a drain
                // that was asked for at the same moment: nothing more goes to the node.
                biased;
                () = self.d.hard_stop.cancelled() => return End::Lost,
                // A coordinator that stops does not stop its nodes (a rolling update would
                // restart the fleet cold): they reconnect and keep their running jobs. Only
                // an operator's drain stops a node.
                () = self.d.shutdown.cancelled() => {
                    let _ = self.out.send(Err(crate::error::unavailable(
                        "coordinator shutting down; reconnect to another replica",
                        Duration::from_millis(200),
                    ))).await;
                    return End::Shutdown;
                }
                frame = inbound.message() => {
                    silent_until = Instant::now() + silence;
                    match frame {
                        Ok(Some(msg)) => match self.handle(msg).await {
                            Ok(Some(end)) => return end,
                            Ok(None) => claim_now = !std::mem::take(&mut self.claimed),
                            Err(status) => {
                                warn!(code = ?status.code(), message = status.message(), "ending the stream");
                                let _ = self.out.send(Err(status)).await;
                                return End::Lost;
                            }
                        },
                        Ok(None) => return End::Lost,
                        Err(status) => {
                            debug!(code = ?status.code(), "inbound stream failed");
                            return End::Lost;
                        }
                    }
                }
                Some(command) = commands.recv() => match command {
                    Command::Cancel { job_id, lease_epoch, reason } => {
                        if self.held.get(&job_id).is_some_and(|h| h.epoch == lease_epoch) {
                            self.held.remove(&job_id);
                            let cancel = pb::Cancel { job_id, lease_epoch, reason };
                            if self.send(Out::Cancel(cancel)).await.is_err() {
                                return End::Lost;
                            }
                            claim_now = true;
                        }
                    }
                    Command::Drain { reason } => self.start_drain(&reason).await,
                    Command::Replaced => return End::Replaced,
                },
                // Before any later Assign on this stream: the node runs the jobs assigned
                // after the update with the new profiles.
                Ok(()) = profiles.changed() => {
                    let set = profiles.borrow_and_update().clone();
                    if self.send_profiles(&set).await.is_err() {
                        return End::Lost;
                    }
                }
                woken = wakeups.wait(self.d.config.claim_poll), if can_claim => {
                    let _ = woken;
                    claim_now = true;
                }
                () = tokio::time::sleep_until(parked_retry), if !self.parked.is_empty() => {
                    parked_retry = Instant::now() + PARKED_RETRY;
                    match self.write_parked().await {
                        Ok(()) => claim_now = !std::mem::take(&mut self.claimed),
                        Err(status) => {
                            warn!(code = ?status.code(), message = status.message(), "ending the stream");
                            let _ = self.out.send(Err(status)).await;
                            return End::Lost;
                        }
                    }
                }
                () = tokio::time::sleep_until(silent_until) => {
                    warn!(?silence, "node went silent");
                    let _ = self.out.send(Err(Status::deadline_exceeded("no frame from the node within the silence timeout"))).await;
                    return End::Lost;
                }
            }
        }
    }

    fn credits(&self) -> u32 {
        if self.draining || self.quarantined().is_some() {
            return 0;
        }
        let by_slots = self
            .slots
            .saturating_sub(u32::try_from(self.held.len()).unwrap_or(u32::MAX));
        by_slots.min(self.announced_free)
    }

    /// When the node's quarantine ends, while it lasts.
    fn quarantined(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        self.quarantined_until
            .filter(|until| *until > chrono::Utc::now())
    }

    /// `span` continues the trace of the assignment of `job_id` when this stream holds
    /// it: what a node reports about a job is part of its search's trace.
    fn job_span(&self, span: Span, job_id: i64) -> Span {
        if let Some((parent, state)) = self.held.get(&job_id).and_then(|h| h.trace.as_ref()) {
            lps_telemetry::set_parent(&span, parent, state);
        }
        span
    }

    /// The mall of a held job, when known (a span field).
    fn held_mall(&self, job_id: i64) -> Option<&str> {
        self.held
            .get(&job_id)
            .map(|h| h.mall.as_str())
            .filter(|m| !m.is_empty())
    }

    /// The attempt of a held job, when known (a span field).
    fn held_attempt(&self, job_id: i64) -> Option<i64> {
        self.held
            .get(&job_id)
            .map(|h| i64::from(h.attempt))
            .filter(|a| *a > 0)
    }

    /// Applies one frame: its model type, then the function for its kind. `Ok(Some(end))`
    /// ends the stream.
    async fn handle(&mut self, msg: pb::NodeMessage) -> Result<Option<End>, Status> {
        let Some(body) = msg.body else {
            return Err(crate::error::invalid(model::FieldError::new(
                "body",
                "empty node message",
            )));
        };
        // A report is acked REJECTED when it is invalid, else applied (or parked, see
        // `NodeStream::report`).
        macro_rules! report {
            ($wire:expr, $model:ty, $kind:path) => {{
                let wire = $wire;
                let seq = wire.report_seq;
                match <$model>::try_from(wire) {
                    Ok(report) => self.report(seq, $kind(report)).await?,
                    Err(e) => self.ack(seq, rejected(&e)).await?,
                }
            }};
        }
        use reports::Report;
        match body {
            In::Hello(_) => return Err(Status::failed_precondition("hello sent twice")),
            In::Credit(c) => self.credit(model::Credit::try_from(c).map_err(invalid("credit"))?),
            In::Heartbeat(hb) => {
                let hb = model::Heartbeat::try_from(hb).map_err(invalid("heartbeat"))?;
                self.heartbeat(hb).await?;
            }
            In::Result(r) => report!(r, JobResult, Report::Result),
            In::Failure(f) => report!(f, JobFailure, Report::Failure),
            In::HandBack(h) => report!(h, model::JobHandBack, Report::HandBack),
            In::Stopped(s) => report!(s, model::JobStopped, Report::Stopped),
            In::ProxyAcquire(a) => {
                let request_id = a.request_id;
                self.proxy_acquire(request_id, model::ProxyAcquire::try_from(a))
                    .await?;
            }
            In::ProxyRelease(r) => report!(r, model::ProxyRelease, Report::ProxyRelease),
            In::SessionEnd(r) => report!(r, model::SessionEnd, Report::SessionEnd),
            In::BlockEvent(r) => report!(r, model::BlockEvent, Report::BlockEvent),
            In::Goodbye(g) => {
                info!(reason = %g.reason, "goodbye");
                return Ok(Some(End::Goodbye));
            }
        }
        Ok(None)
    }

    fn ledger_applied(
        &self,
        r: Result<(), crate::ledger::Error>,
    ) -> Result<(pb::AckStatus, String), Status> {
        match r {
            Ok(()) => Ok((pb::AckStatus::Applied, String::new())),
            Err(crate::ledger::Error::InvalidArgument(e)) => Ok(rejected(&e)),
            Err(e) => Err(crate::error::status(e)),
        }
    }

    /// A report ends one of the node's jobs: its slot is free again. Counting it now (the
    /// node's own Credit follows) lets the next job go out with the ack instead of a round
    /// trip later; `slots - held` still bounds what is assigned.
    fn slot_freed(&mut self) {
        self.announced_free = (self.announced_free + 1).min(self.slots);
    }

    /// Maps a transition's outcome to an ack; a database fault is an outage status (the
    /// report is parked, see [`NodeStream::report`]); another database failure ends the
    /// stream (the node resends after reconnecting).
    fn applied(
        &self,
        r: Result<(), crate::error::Error>,
    ) -> Result<(pb::AckStatus, String), Status> {
        match r {
            Ok(()) => Ok((pb::AckStatus::Applied, String::new())),
            Err(crate::error::Error::LeaseLost(lease)) => {
                info!(
                    job.id = lease.job_id,
                    job.lease_epoch = lease.epoch,
                    "stale report"
                );
                Ok((pb::AckStatus::Stale, "lease is no longer current".into()))
            }
            Err(crate::error::Error::InvalidArgument(e)) => Ok(rejected(&e)),
            Err(e) => Err(crate::error::status(e)),
        }
    }

    /// Takes no new jobs for the node and tells it to drain (an operator's request: the node
    /// finishes within its own LPS_DRAIN_TIMEOUT, says Goodbye and exits). Every heartbeat
    /// answer repeats the Drain, so one that was lost on the way is not lost for good.
    async fn start_drain(&mut self, reason: &str) {
        if self.draining {
            return;
        }
        self.draining = true;
        info!(reason, "draining node");
        self.drain_reason = reason.to_owned();
        let _ = self.send(Out::Drain(self.drain_message())).await;
    }

    fn drain_message(&self) -> pb::Drain {
        pb::Drain {
            reason: self.drain_reason.clone(),
            deadline: None,
        }
    }

    async fn ack(
        &self,
        report_seq: u64,
        (status, error): (pb::AckStatus, String),
    ) -> Result<(), Status> {
        let labels = crate::metrics::ReportLabels {
            kind: "report".into(),
            status: status.as_str_name().to_ascii_lowercase(),
        };
        self.d.metrics.reports.get_or_create(&labels).inc();
        self.send(Out::Ack(pb::Ack {
            report_seq,
            status: status as i32,
            error,
        }))
        .await
    }

    /// Sends the node a new profile set (`crate::profiles::watch`).
    async fn send_profiles(
        &mut self,
        set: &crate::profiles::watch::ProfileSet,
    ) -> Result<(), Status> {
        info!(profiles.revision = %set.revision, previous = %self.profile_revision, "sending the node new site profiles");
        self.send(Out::ProfileUpdate(pb::ProfileUpdate {
            profiles: set.profiles.clone(),
            vocabulary: Some(self.d.config.vocabulary.clone()),
            revision: set.revision.clone(),
        }))
        .await?;
        self.profile_revision.clone_from(&set.revision);
        Ok(())
    }

    async fn send(&self, body: Out) -> Result<(), Status> {
        self.out
            .send(Ok(pb::CoordinatorMessage { body: Some(body) }))
            .await
            .map_err(|_| Status::cancelled("node stream closed"))
    }
}

fn rejected(e: &model::FieldError) -> (pb::AckStatus, String) {
    warn!(error = %e, "rejected an invalid report");
    (pb::AckStatus::Rejected, e.to_string())
}

/// A Credit or Heartbeat that does not validate ends the stream (there is no ack to carry
/// the error), naming the field under the message.
fn invalid(message: &'static str) -> impl Fn(model::FieldError) -> Status {
    move |e| crate::error::invalid(e.under(message))
}

/// The Assign message for a claimed job.
pub fn assign(job: &ClaimedJob) -> pb::Assign {
    pb::Assign {
        job_id: job.lease.job_id,
        lease_epoch: job.lease.epoch,
        deadline: Some(model::timestamp_to_pb(job.deadline_at)),
        lease_until: Some(model::timestamp_to_pb(job.lease_until)),
        payload: Some(pb::JobPayload {
            product: Some(job.hints.to_pb(
                job.product_code.as_deref().unwrap_or_default(),
                &job.product_name,
            )),
            mall: job.mall.to_string(),
            attempt: job.attempt,
            max_attempts: job.max_attempts,
        }),
        traceparent: job.traceparent.clone().unwrap_or_default(),
        tracestate: job.tracestate.clone().unwrap_or_default(),
    }
}

/// Silence timeout for a heartbeat interval: three missed heartbeats.
pub fn silence_for(heartbeat: Duration) -> Duration {
    heartbeat * 3
}
