//! One node stream, owned by one task.
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
//! Cancellation safety: the loop only awaits between whole steps; a step that was started
//! (a claim, a completion) runs to its end before the next `select!`.
//!
//! Tracing: one search is one trace. Each claimed job records its `queue.wait` (enqueue to
//! claim) and a `dispatch.assign` span under the Search call's context stored on the job
//! row; the Assign carries the assignment's context to the node. Reports about a held job
//! (`dispatch.result`, `dispatch.failure`, `dispatch.proxy_acquire`,
//! `dispatch.proxy_release`) continue the assignment's context, so the commit is part of
//! the search's trace too; the session's own span (`dispatch.session`) is a trace of its own.

use std::{collections::HashMap, time::Duration};

use lps_proto::{
    model::{self, Hello, JobFailure, JobResult, Lease},
    pb::{self, coordinator_message::Body as Out, node_message::Body as In},
};
use opentelemetry::KeyValue;
use tokio::{sync::mpsc, time::Instant};
use tonic::{Status, Streaming};
use tracing::{Instrument as _, Span, debug, info, info_span, instrument, warn};
use uuid::Uuid;

use super::{Command, Dispatcher, Entry};
use crate::{
    node_session,
    queue::{self, ClaimedJob},
};

/// The sending half of a node stream.
pub type Outbound = mpsc::Sender<Result<pb::CoordinatorMessage, Status>>;

/// How a session ended.
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

struct Session {
    d: Dispatcher,
    node_id: String,
    session_id: Uuid,
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
}

/// How often a heartbeat refreshes the node_session row when nothing else changed.
const NODE_ROW_REFRESH: Duration = Duration::from_secs(30);

/// Runs a session whose Hello was already validated; returns when the stream is over.
#[instrument(name = "dispatch.session", skip_all, fields(node.id = %hello.node_id, session.id = %session_id, log_only = true))]
pub async fn run(
    d: Dispatcher,
    hello: Hello,
    session_id: Uuid,
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
                session_id,
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
    let mut s = Session {
        d: d.clone(),
        node_id: node_id.clone(),
        session_id,
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
    };
    let end = match s.welcome(&hello).await {
        Ok(()) => s.serve(&mut inbound, &mut commands).await,
        Err(e) => {
            let _ = s.out.send(Err(e)).await;
            End::Lost
        }
    };
    d.registry.unregister(&node_id, session_id).await;
    if let Err(e) = node_session::disconnect(d.pool(), &node_id, session_id).await {
        warn!(error = %e, "could not mark the node disconnected");
    }
    match end {
        End::Goodbye => {
            if let Some(ledger) = &d.ledger
                && let Err(e) = ledger.release_lost_node(&node_id, session_id).await
            {
                warn!(error = %e, "releasing ports after goodbye failed; leases will expire");
            }
            // The node handed back or finished everything; anything left is released now.
            match d.queue.release_lost_node(&node_id, session_id).await {
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
            d.start_grace(node_id, session_id);
        }
    }
}

impl Session {
    /// Records the session, re-attaches the jobs the node still runs (releasing the ones it
    /// forgot) and sends Welcome.
    async fn welcome(&mut self, hello: &Hello) -> Result<(), Status> {
        let d = &self.d;
        let malls: Vec<String> = hello.malls.iter().map(|m| m.to_string()).collect();
        // NB: an operator's drain survives a reconnect of the same node process.
        let stream = node_session::Stream {
            node_id: &self.node_id,
            session_id: self.session_id,
            coordinator_id: &d.config.coordinator_id,
            version: &hello.version,
            slots: hello.slots,
            malls: &malls,
            instance: hello.instance.as_deref(),
        };
        let registered = node_session::register(d.pool(), &stream)
            .await
            .map_err(|e| crate::grpc::status(e.into()))?;
        let Some(drain_requested) = registered else {
            let live = node_session::holder(d.pool(), &self.node_id)
                .await
                .map_err(|e| crate::grpc::status(e.into()))?;
            let (coordinator, instance) = (live.coordinator_id, live.instance);
            warn!(live.coordinator = %coordinator, live.instance = %instance, "a second node process uses this node id (connected to another replica); refused");
            return Err(Status::already_exists(format!(
                "node id {:?} is already connected from another node process (instance {instance}, through coordinator {coordinator}); every node needs its own LPS_NODE_ID",
                self.node_id
            )));
        };

        let reattached = d
            .queue
            .reattach(&self.node_id, &hello.running)
            .await
            .map_err(crate::grpc::status)?;
        // Jobs leased to this node that it did not list are lost with its previous process.
        let released = d
            .queue
            .release_node(&self.node_id, &reattached)
            .await
            .map_err(crate::grpc::status)?;
        if !released.is_empty() {
            info!(
                jobs = released.len(),
                "released jobs the node no longer runs"
            );
        }
        let lost: Vec<i64> = hello
            .running
            .iter()
            .filter(|l| !reattached.contains(l))
            .map(|l| l.job_id)
            .collect();
        if let Some(ledger) = &d.ledger
            && !hello.held_ports.is_empty()
        {
            let renewed = ledger
                .reattach(&self.node_id, &hello.held_ports)
                .await
                .map_err(crate::grpc::ledger_status)?;
            self.ports.extend(renewed.iter().map(|r| r.port));
        }
        for lease in &reattached {
            self.held.insert(
                lease.job_id,
                Held {
                    epoch: lease.epoch,
                    mall: String::new(),
                    attempt: 0,
                    trace: None,
                    confirmed: true,
                },
            );
        }
        self.announced_free = self
            .slots
            .saturating_sub(u32::try_from(self.held.len()).unwrap_or(u32::MAX));
        let welcome = pb::Welcome {
            session_id: self.session_id.to_string(),
            heartbeat_interval: Some(model::duration_to_pb(d.config.heartbeat_interval)),
            lease_ttl: Some(model::duration_to_pb(d.queue.config().lease_ttl)),
            profiles: d.config.profiles.clone(),
            limits: Some(d.config.limits),
            reattached: reattached
                .iter()
                .map(|l| pb::HeldJob {
                    job_id: l.job_id,
                    lease_epoch: l.epoch,
                })
                .collect(),
            lost,
            protocol_version: lps_proto::PROTOCOL_VERSION,
            vocabulary: Some(d.config.vocabulary.clone()),
            stopped_reports: true,
        };
        info!(
            slots = self.slots,
            reattached = reattached.len(),
            "node welcomed"
        );
        self.send(Out::Welcome(welcome)).await?;
        if drain_requested {
            self.start_drain("operator request").await;
        }
        Ok(())
    }

    async fn serve(
        &mut self,
        inbound: &mut Streaming<pb::NodeMessage>,
        commands: &mut mpsc::Receiver<Command>,
    ) -> End {
        let silence = self.d.config.silence_timeout;
        let mut silent_until = Instant::now() + silence;
        let mut wakeups = self.d.wakeups.clone();
        // Claim once right away: work may be waiting.
        let mut claim_now = true;
        loop {
            if claim_now && self.credits() > 0 {
                wakeups.mark_seen();
                if let Err(e) = self.claim().await {
                    let _ = self.out.send(Err(e)).await;
                    return End::Lost;
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
                    let _ = self.out.send(Err(crate::grpc::unavailable(
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
                woken = wakeups.wait(self.d.config.claim_poll), if can_claim => {
                    let _ = woken;
                    claim_now = true;
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
        if self.draining {
            return 0;
        }
        let by_slots = self
            .slots
            .saturating_sub(u32::try_from(self.held.len()).unwrap_or(u32::MAX));
        by_slots.min(self.announced_free)
    }

    async fn claim(&mut self) -> Result<(), Status> {
        let n = self.credits();
        let jobs = self
            .d
            .queue
            .claim(&self.node_id, self.malls.as_deref(), n)
            .await
            .map_err(crate::grpc::status)?;
        self.assign_all(jobs).await
    }

    /// Records freshly claimed jobs as held and sends their `Assign`s.
    async fn assign_all(&mut self, jobs: Vec<queue::ClaimedJob>) -> Result<(), Status> {
        let mut jobs = jobs.into_iter();
        while let Some(job) = jobs.next() {
            self.d.metrics.claims.inc();
            if job.attempt == 1 && job.reclaims == 0 {
                let pickup = (job.run_started_at - job.created_at)
                    .to_std()
                    .unwrap_or_default();
                self.d.metrics.pickup_latency.observe(pickup.as_secs_f64());
            }
            self.announced_free = self.announced_free.saturating_sub(1);
            let waited = (job.run_started_at - job.created_at).num_milliseconds();
            let parent = job.traceparent.as_deref().unwrap_or("");
            let state = job.tracestate.as_deref().unwrap_or("");
            self.record_queue_wait(&job);
            let span = info_span!(
                "dispatch.assign",
                otel.kind = "producer",
                job.id = job.lease.job_id,
                job.lease_epoch = job.lease.epoch,
                job.attempt = i64::from(job.attempt),
                mall = %job.mall,
                node.id = %self.node_id,
                queue.wait_ms = waited,
            );
            lps_telemetry::set_parent(&span, parent, state);
            let mut message = assign(&job);
            // The node's spans and this job's reports hang under this assignment when it
            // is being traced.
            let trace = span.in_scope(lps_telemetry::current_traceparent);
            if let Some((parent, state)) = &trace {
                message.traceparent.clone_from(parent);
                message.tracestate.clone_from(state);
            }
            self.held.insert(
                job.lease.job_id,
                Held {
                    epoch: job.lease.epoch,
                    mall: job.mall.to_string(),
                    attempt: job.attempt,
                    trace,
                    confirmed: false,
                },
            );
            span.in_scope(|| debug!("assigning job"));
            if let Err(gone) = self.send(Out::Assign(message)).instrument(span).await {
                // The stream is gone: this job and the rest were claimed for nothing.
                let unsent = std::iter::once(job.lease).chain(jobs.map(|j| j.lease));
                self.hand_back_unsent(unsent.collect());
                return Err(gone);
            }
        }
        Ok(())
    }

    /// Hands back leases this session claimed but could not deliver, at once and without
    /// charge (a claim whose stream is gone must not sit leased until it expires).
    fn hand_back_unsent(&mut self, leases: Vec<Lease>) {
        for lease in &leases {
            self.held.remove(&lease.job_id);
        }
        self.d.hand_back_unsent(self.node_id.clone(), leases);
    }

    /// Exports the time `job` waited in the queue, from its creation to this claim, as a
    /// `queue.wait` span of its search's trace (known only now, so it is recorded after the
    /// fact with its real start).
    fn record_queue_wait(&self, job: &ClaimedJob) {
        let Some(parent) = job.traceparent.as_deref() else {
            return;
        };
        lps_telemetry::record_span(
            "queue.wait",
            parent,
            job.tracestate.as_deref().unwrap_or(""),
            job.created_at.into(),
            job.run_started_at.into(),
            vec![
                KeyValue::new("job.id", job.lease.job_id),
                KeyValue::new("job.lease_epoch", job.lease.epoch),
                KeyValue::new("job.attempt", i64::from(job.attempt)),
                KeyValue::new("mall", job.mall.to_string()),
                KeyValue::new("node.id", self.node_id.clone()),
                KeyValue::new("job.reclaims", i64::from(job.reclaims)),
            ],
        );
    }

    /// `span` continues the trace of the assignment of `job_id` when this session holds
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

    /// Applies one frame. `Ok(Some(end))` ends the session.
    async fn handle(&mut self, msg: pb::NodeMessage) -> Result<Option<End>, Status> {
        let Some(body) = msg.body else {
            return Err(crate::grpc::invalid(model::FieldError::new(
                "body",
                "empty node message",
            )));
        };
        match body {
            In::Hello(_) => return Err(Status::failed_precondition("hello sent twice")),
            In::Credit(c) => self.announced_free = c.free_slots.min(self.slots),
            In::Heartbeat(hb) => self.heartbeat(hb).await?,
            In::Result(r) => {
                let seq = r.report_seq;
                match JobResult::try_from(r) {
                    Ok(result) => {
                        let span = self.job_span(
                            info_span!(
                                "dispatch.result",
                                job.id = result.lease.job_id,
                                job.lease_epoch = result.lease.epoch,
                                job.attempt = self.held_attempt(result.lease.job_id),
                                mall = self.held_mall(result.lease.job_id),
                                node.id = %self.node_id,
                                outcome = outcome_label(result.outcome),
                            ),
                            result.lease.job_id,
                        );
                        let claimed = self.complete(seq, &result).instrument(span).await?;
                        self.assign_all(claimed).await?;
                    }
                    Err(e) => self.ack(seq, rejected(&e)).await?,
                }
            }
            In::Failure(f) => {
                let seq = f.report_seq;
                match JobFailure::try_from(f) {
                    Ok(failure) => {
                        let span = self.job_span(
                            info_span!(
                                "dispatch.failure",
                                job.id = failure.lease.job_id,
                                job.lease_epoch = failure.lease.epoch,
                                job.attempt = self.held_attempt(failure.lease.job_id),
                                mall = self.held_mall(failure.lease.job_id),
                                node.id = %self.node_id,
                                class = failure.class.as_str(),
                            ),
                            failure.lease.job_id,
                        );
                        lps_telemetry::fail(&span, failure.message.as_str());
                        self.fail(seq, &failure).instrument(span).await?;
                    }
                    Err(e) => self.ack(seq, rejected(&e)).await?,
                }
            }
            In::HandBack(h) => {
                let seq = h.report_seq;
                let ack = match model::JobHandBack::try_from(h) {
                    Ok(h) => {
                        self.held.remove(&h.lease.job_id);
                        self.observe_spend(&h.metrics);
                        let r = self.d.queue.hand_back_reported(&self.node_id, &h).await;
                        self.applied(r)?
                    }
                    Err(e) => rejected(&e),
                };
                self.ack(seq, ack).await?;
            }
            In::Stopped(s) => {
                // A run the node stopped on our word: only its spend is recorded.
                let seq = s.report_seq;
                let ack = match model::JobStopped::try_from(s) {
                    Ok(s) => {
                        if self
                            .held
                            .get(&s.lease.job_id)
                            .is_some_and(|h| h.epoch == s.lease.epoch)
                        {
                            self.held.remove(&s.lease.job_id);
                        }
                        self.observe_spend(&s.metrics);
                        let r = self.d.queue.record_stopped(&self.node_id, &s).await;
                        self.applied(r)?
                    }
                    Err(e) => rejected(&e),
                };
                self.ack(seq, ack).await?;
            }
            In::ProxyAcquire(a) => {
                let span = self.job_span(
                    info_span!(
                        "dispatch.proxy_acquire",
                        job.id = a.job_id,
                        job.attempt = self.held_attempt(a.job_id),
                        mall = %a.mall,
                        node.id = %self.node_id,
                    ),
                    a.job_id,
                );
                self.proxy_acquire(a).instrument(span).await?;
            }
            In::ProxyRelease(r) => {
                let seq = r.report_seq;
                let ack = match model::ProxyRelease::try_from(r) {
                    Ok(release) => {
                        let job_id = release.session.job_id.unwrap_or_default();
                        let span = self.job_span(
                            info_span!(
                                "dispatch.proxy_release",
                                job.id = job_id,
                                job.attempt = self.held_attempt(job_id),
                                mall = self.held_mall(job_id),
                                node.id = %self.node_id,
                                port = i64::from(release.port),
                                reason = release.reason.as_str(),
                            ),
                            job_id,
                        );
                        self.proxy_release(release).instrument(span).await?
                    }
                    Err(e) => rejected(&e),
                };
                self.ack(seq, ack).await?;
            }
            In::SessionEnd(r) => {
                let seq = r.report_seq;
                let ack = match model::SessionEnd::try_from(r) {
                    Ok(end) => match &self.d.ledger {
                        Some(ledger) => {
                            let r = ledger
                                .record_session(&self.node_id, end.port, &end.stats, end.reason)
                                .await;
                            self.ledger_applied(r)?
                        }
                        None => (pb::AckStatus::Applied, String::new()),
                    },
                    Err(e) => rejected(&e),
                };
                self.ack(seq, ack).await?;
            }
            In::BlockEvent(r) => {
                let seq = r.report_seq;
                let ack = match model::BlockEvent::try_from(r) {
                    Ok(block) => {
                        self.d.metrics.blocks.inc();
                        // A block is part of its job's trace (when this session holds it).
                        let job_id = block.job_id.unwrap_or_default();
                        let span = self.job_span(
                            info_span!(
                                "dispatch.block",
                                job.id = block.job_id,
                                job.attempt = self.held_attempt(job_id),
                                mall = %block.mall,
                                node.id = %self.node_id,
                                port = block.port.map(i64::from),
                                ip_request_no = i64::from(block.ip_request_no),
                                marker = %block.marker,
                            ),
                            job_id,
                        );
                        span.in_scope(|| info!("bot block reported"));
                        match &self.d.ledger {
                            Some(ledger) => {
                                let r = ledger
                                    .record_block(&self.node_id, &block)
                                    .instrument(span)
                                    .await;
                                self.ledger_applied(r)?
                            }
                            None => (pb::AckStatus::Applied, String::new()),
                        }
                    }
                    Err(e) => rejected(&e),
                };
                self.ack(seq, ack).await?;
            }
            In::Goodbye(g) => {
                info!(reason = %g.reason, "goodbye");
                return Ok(Some(End::Goodbye));
            }
        }
        Ok(None)
    }

    /// Commits a job's result, then acks the report.
    ///
    /// The freed slot's next jobs are claimed in the completion's transaction (one commit
    /// per finished job on this path) and returned, to be assigned after the ack.
    async fn complete(
        &mut self,
        seq: u64,
        result: &JobResult,
    ) -> Result<Vec<queue::ClaimedJob>, Status> {
        self.observe_spend(&result.metrics);
        if let Some(held) = self.held.remove(&result.lease.job_id) {
            self.slot_freed();
            self.observe_finished(&held, outcome_label(result.outcome), &result.metrics);
        }
        let credits = self.credits();
        let r = self
            .d
            .queue
            .complete_and_claim(
                &self.node_id,
                std::slice::from_ref(result),
                self.malls.as_deref(),
                credits,
            )
            .await;
        self.claimed = credits > 0 && r.is_ok();
        let (outcome, claimed) = match r {
            Ok(queue::CompletedAndClaimed { applied, claimed }) => {
                let current = applied.first().is_some_and(|(_, ok)| *ok);
                let outcome = if current {
                    Ok(())
                } else {
                    Err(queue::Error::LeaseLost(result.lease))
                };
                (outcome, claimed)
            }
            Err(e) => (Err(e), Vec::new()),
        };
        let ack = match self.applied(outcome) {
            Ok(ack) => ack,
            Err(status) => {
                self.hand_back_unsent(claimed.iter().map(|j| j.lease).collect());
                return Err(status);
            }
        };
        if let Err(gone) = self.ack(seq, ack).await {
            self.hand_back_unsent(claimed.iter().map(|j| j.lease).collect());
            return Err(gone);
        }
        Ok(claimed)
    }

    /// Records a failed attempt (retry or dead-letter), then acks the report.
    async fn fail(&mut self, seq: u64, failure: &JobFailure) -> Result<(), Status> {
        self.observe_spend(&failure.metrics);
        if let Some(held) = self.held.remove(&failure.lease.job_id) {
            self.slot_freed();
            self.observe_finished(&held, failure.class.as_str(), &failure.metrics);
        }
        let r = self.d.queue.fail_if_leased(&self.node_id, failure).await;
        // A layout failure is counted once, when it applied (a stale resend changes nothing);
        // the job is dead already (the class is not retryable).
        if let Ok(failed) = &r
            && failure.class == model::ErrorClass::Layout
        {
            warn!(mall = %failed.mall, error = %failure.message, "no card source read the page: the mall's markup may have changed");
            let labels = crate::metrics::MallLabels {
                mall: failed.mall.to_string(),
            };
            self.d.metrics.layout_failures.get_or_create(&labels).inc();
        }
        let ack = self.applied(r.map(|_| ()))?;
        self.ack(seq, ack).await
    }

    /// What a report says its run spent, into this replica's counters: every report that
    /// ends a run, whether this session still held its lease or not (the money was spent).
    fn observe_spend(&self, metrics: &model::JobMetrics) {
        self.d.metrics.bytes.inc_by(metrics.bytes());
        self.d.metrics.cost_usd.inc_by(metrics.cost_usd);
    }

    fn observe_finished(&self, held: &Held, outcome: &str, metrics: &model::JobMetrics) {
        let m = &self.d.metrics;
        let labels = crate::metrics::MallOutcomeLabels {
            mall: held.mall.clone(),
            outcome: outcome.to_owned(),
        };
        m.job_duration
            .get_or_create(&labels)
            .observe(metrics.elapsed.as_secs_f64());
    }

    /// Leases a proxy port for the node, or says none is free (in-band).
    async fn proxy_acquire(&mut self, a: pb::ProxyAcquire) -> Result<(), Status> {
        let request_id = a.request_id;
        let unavailable = |next_free_at| {
            Out::ProxyUnavailable(pb::ProxyUnavailable {
                request_id,
                next_free_at,
            })
        };
        let Some(ledger) = self.d.ledger.clone() else {
            return self.send(unavailable(None)).await;
        };
        let acquire = match model::ProxyAcquire::try_from(a) {
            Ok(acquire) => acquire,
            Err(e) => {
                warn!(error = %e, "invalid proxy acquire");
                return self.send(unavailable(None)).await;
            }
        };
        match ledger
            .acquire(&self.node_id, &acquire.mall, acquire.job_id)
            .await
            .map_err(crate::grpc::ledger_status)?
        {
            crate::ledger::Acquired::Grant(g) => {
                self.ports.insert(g.port);
                debug!(port = g.port, mall = %acquire.mall, "proxy port granted");
                let grant = pb::ProxyGrant {
                    request_id,
                    host: g.host,
                    port: u32::from(g.port),
                    username: g.username,
                    password: g.password.expose().to_owned(),
                    lease_until: Some(model::timestamp_to_pb(g.lease_until)),
                    request_budget: g.request_budget,
                    lease_id: g.lease_id,
                };
                self.send(Out::ProxyGrant(grant)).await
            }
            crate::ledger::Acquired::NoneFree { next_free_at } => {
                self.send(unavailable(next_free_at.map(model::timestamp_to_pb)))
                    .await
            }
        }
    }

    /// Returns a port to the ledger; a job over its IP-burn cap fails as `page_blocked`
    /// and the node is told to stop it.
    async fn proxy_release(
        &mut self,
        release: model::ProxyRelease,
    ) -> Result<(pb::AckStatus, String), Status> {
        self.ports.remove(&release.port);
        let Some(ledger) = self.d.ledger.clone() else {
            return Ok((pb::AckStatus::Applied, String::new()));
        };
        let released = match ledger
            .release(
                &self.node_id,
                release.port,
                release.lease_id,
                release.reason,
                &release.session,
            )
            .await
        {
            Ok(r) => r,
            Err(e) => return self.ledger_applied(Err(e)),
        };
        if released.over_burn_cap
            && let Some(job_id) = release.session.job_id
            && let Some(held) = self.held.get(&job_id).cloned()
        {
            let lease = Lease {
                job_id,
                epoch: held.epoch,
            };
            let failure = JobFailure::new(
                lease,
                model::ErrorClass::PageBlocked,
                format!(
                    "blocked on {} proxy IPs: a page problem, not an IP problem",
                    released.job_ip_burns.unwrap_or_default()
                ),
            );
            warn!(job.id = job_id, burns = ?released.job_ip_burns, "job over its IP-burn cap; failing it as page_blocked");
            // The job's attempt ends here: an error of its trace (`dispatch.proxy_release`).
            lps_telemetry::fail(&Span::current(), failure.message.as_str());
            match self.d.queue.fail_if_leased(&self.node_id, &failure).await {
                Ok(_) | Err(queue::Error::LeaseLost(_)) => {
                    self.held.remove(&job_id);
                    let cancel = pb::Cancel {
                        job_id,
                        lease_epoch: held.epoch,
                        reason: "page_blocked".into(),
                    };
                    self.send(Out::Cancel(cancel)).await?;
                }
                Err(e) => return Err(crate::grpc::status(e)),
            }
        }
        Ok((pb::AckStatus::Applied, String::new()))
    }

    fn ledger_applied(
        &self,
        r: Result<(), crate::ledger::Error>,
    ) -> Result<(pb::AckStatus, String), Status> {
        match r {
            Ok(()) => Ok((pb::AckStatus::Applied, String::new())),
            Err(crate::ledger::Error::InvalidArgument(e)) => Ok(rejected(&e)),
            Err(e) => Err(crate::grpc::ledger_status(e)),
        }
    }

    /// A report ends one of the node's jobs: its slot is free again. Counting it now (the
    /// node's own Credit follows) lets the next job go out with the ack instead of a round
    /// trip later; `slots - held` still bounds what is assigned.
    fn slot_freed(&mut self) {
        self.announced_free = (self.announced_free + 1).min(self.slots);
    }

    /// Maps a transition's outcome to an ack; a database failure ends the stream (the node
    /// resends after reconnecting).
    fn applied(&self, r: Result<(), queue::Error>) -> Result<(pb::AckStatus, String), Status> {
        match r {
            Ok(()) => Ok((pb::AckStatus::Applied, String::new())),
            Err(queue::Error::LeaseLost(lease)) => {
                info!(
                    job.id = lease.job_id,
                    job.lease_epoch = lease.epoch,
                    "stale report"
                );
                Ok((pb::AckStatus::Stale, "lease is no longer current".into()))
            }
            Err(queue::Error::InvalidArgument(e)) => Ok(rejected(&e)),
            Err(e) => Err(crate::grpc::status(e)),
        }
    }

    async fn heartbeat(&mut self, hb: pb::Heartbeat) -> Result<(), Status> {
        self.announced_free = hb.free_slots.min(self.slots);
        let leases: Vec<Lease> = hb
            .running
            .iter()
            .map(|p| Lease {
                job_id: p.job_id,
                epoch: p.lease_epoch,
            })
            .collect();
        let renewed = self
            .d
            .queue
            .renew_if_leased(&self.node_id, &leases)
            .await
            .map_err(crate::grpc::status)?;
        let cancel: Vec<i64> = leases
            .iter()
            .filter(|l| !renewed.iter().any(|r| r.job_id == l.job_id))
            .map(|l| l.job_id)
            .collect();
        for job_id in &cancel {
            self.held.remove(job_id);
        }
        for lease in &leases {
            if let Some(held) = self.held.get_mut(&lease.job_id)
                && held.epoch == lease.epoch
            {
                held.confirmed = true;
            }
        }
        if let Some(ledger) = &self.d.ledger
            && !self.ports.is_empty()
        {
            let ports: Vec<u16> = self.ports.iter().copied().collect();
            let renewed = ledger
                .renew(&self.node_id, &ports)
                .await
                .map_err(crate::grpc::ledger_status)?;
            // A port whose lease ran out is no longer the node's; the node's next release of
            // it is recorded but changes nothing.
            self.ports.retain(|p| renewed.iter().any(|r| r.port == *p));
        }
        let ack = pb::HeartbeatAck {
            extended: renewed
                .iter()
                .map(|r| pb::LeaseExtension {
                    job_id: r.job_id,
                    lease_until: Some(model::timestamp_to_pb(r.lease_until)),
                })
                .collect(),
            cancel,
        };

        // NB: liveness is the stream itself; the row is for ListNodes and the ops figures,
        // so it is written when the free slots change or every 30 s, not on every heartbeat.
        // The write also reads whether an operator asked for a drain: one whose control
        // message reached no session here still arrives within that refresh.
        let mut drain_requested = false;
        if hb.free_slots != self.recorded_free || self.recorded_at.elapsed() >= NODE_ROW_REFRESH {
            self.recorded_free = hb.free_slots;
            self.recorded_at = Instant::now();
            drain_requested =
                node_session::refresh(self.d.pool(), &self.node_id, self.session_id, hb.free_slots)
                    .await
                    .map_err(|e| crate::grpc::status(e.into()))?;
        }
        self.send(Out::HeartbeatAck(ack)).await?;
        if self.draining {
            self.send(Out::Drain(self.drain_message())).await
        } else {
            if drain_requested {
                self.start_drain("operator request").await;
            }
            Ok(())
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

    async fn send(&self, body: Out) -> Result<(), Status> {
        self.out
            .send(Ok(pb::CoordinatorMessage { body: Some(body) }))
            .await
            .map_err(|_| Status::cancelled("node stream closed"))
    }
}

fn outcome_label(outcome: model::Outcome) -> &'static str {
    match outcome {
        model::Outcome::Found => "found",
        model::Outcome::NotFound => "not_found",
    }
}

fn rejected(e: &model::FieldError) -> (pb::AckStatus, String) {
    warn!(error = %e, "rejected an invalid report");
    (pb::AckStatus::Rejected, e.to_string())
}

/// The Assign message for a claimed job.
pub fn assign(job: &ClaimedJob) -> pb::Assign {
    pb::Assign {
        job_id: job.lease.job_id,
        lease_epoch: job.lease.epoch,
        deadline: Some(model::timestamp_to_pb(job.deadline_at)),
        lease_until: Some(model::timestamp_to_pb(job.lease_until)),
        payload: Some(pb::JobPayload {
            product: Some(pb::Product {
                code: job.product_code.clone().unwrap_or_default(),
                name: job.product_name.clone(),
            }),
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
