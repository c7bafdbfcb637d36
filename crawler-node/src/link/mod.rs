//! The link: the node's one task, which owns the NodeService stream, the slot table
//! ([`Jobs`]) and the [`Outbox`], and speaks the protocol documented at the top of
//! `proto/lps/v1/node.proto`.
//!
//! # Lifecycle
//! 1. **Connect**: a fresh channel per attempt, `authorization: Bearer <token>` metadata,
//!    `Hello` (protocol version, node id, slots, malls, version, held jobs), then wait for
//!    `Welcome`. Held jobs are the running ones *and* those whose final report is still in
//!    the outbox: a coordinator releases the jobs a reconnecting node does not list, which
//!    would make those reports stale.
//! 2. **Welcomed**: stop the `lost` jobs (a `Stopped` report each; their un-acked reports
//!    stay, to be acked `STALE` with what they spent still recorded), publish the site
//!    profiles, send `Credit{free_slots}`, resend every un-acked report in seq order. Then
//!    one `select!`: shutdown/drain, inbound frames, job events (exits and deadlines), the
//!    heartbeat tick, the drain timers.
//! 3. **Lost**: any stream error (a status, the stream closing without our Goodbye, or no
//!    frame for [`Welcome::silence_limit`]) goes through the exhaustive
//!    [`retry::decide`]: fatal codes end `run` with an error, the rest
//!    reconnect with [`Backoff`] until `LPS_RECONNECT_DEADLINE` has passed since the loss.
//!    Jobs keep running meanwhile; their reports wait in the outbox.
//! 4. **Drain** (shutdown token or `Drain`): `Credit{0}` and no new jobs (an `Assign`
//!    that arrives anyway is handed back); running jobs may finish until the drain deadline
//!    minus a reserve for the acks (`drain::ack_reserve`); then the rest are handed back; once
//!    nothing runs and every report is acked: `Goodbye`, half-close, wait briefly for the
//!    coordinator to end the stream, `Ok`. Before Goodbye, once no job runs, the executor
//!    gets its [`Executor::drain`] (the browser executor ends its IP sessions there, so
//!    their `ProxyRelease` reports are acked before Goodbye). At the drain deadline the
//!    node gives up and returns [`NodeError::DrainIncomplete`].
//!
//! # Proxies
//! The executor asks for proxy ports and reports port events through a
//! [`NodeLink`](crate::proxy::NodeLink), whose requests arrive here on a channel: an
//! acquire becomes a `ProxyAcquire` whose answer (`ProxyGrant` / `ProxyUnavailable`) is
//! routed back by `request_id` (the `proxy` module's desk); releases and block events are
//! reports like any other. `Hello.held_ports` lists the ports granted and not released.
//!
//! # Credits
//! `Credit` is sent after Welcome and whenever a slot frees; heartbeats carry the free
//! slots too. An `Assign` beyond the free slots (a credit that crossed an assignment in
//! flight) is handed back at once, followed by a fresh `Credit` (the coordinator counted
//! it against the old one), so the node never runs more jobs than slots. So is an `Assign`
//! for a mall not in `LPS_MALLS`; an invalid one is failed `PERMANENT`.
//!
//! # Cancellation safety
//! Every branch of the loop waits on something cancel-safe (token, `Streaming::next`, an
//! `Interval`, the `JoinSet`, a boxed connect future kept across iterations, sleeps to
//! absolute instants); all state changes happen in the handlers, after a wait completed.

mod assign;
mod dial;
mod drain;
mod proxy;

use std::{pin::Pin, sync::Arc, time::Duration};

use chrono::Utc;
use futures::StreamExt as _;
use lps_proto::{
    PROTOCOL_VERSION,
    model::{Credit, ErrorClass, Heartbeat, JobFailure, JobHandBack, JobMetrics, Lease, MallId},
    pb::{self, coordinator_message::Body as In, node_message::Body as Out},
};
use tokio::{
    sync::mpsc,
    time::{Instant, Interval, MissedTickBehavior, interval, interval_at, sleep_until},
};
use tokio_util::sync::CancellationToken;
use tonic::{
    Status, Streaming,
    metadata::{Ascii, MetadataValue},
    transport::Endpoint,
};
use tracing::{Instrument as _, Span, debug, info, info_span, warn};

use self::{
    assign::job_from_assign,
    dial::{Opened, endpoint, open},
    drain::{Drain, ExecutorDrain, executor_drained},
    proxy::ProxyDesk,
};
use crate::{
    config::{Config, ConfigError},
    executor::{Executor, STOP_GRACE},
    host,
    jobs::{Event, Jobs},
    metrics::JobEnd,
    outbox::{Outbox, Report},
    proxy::{LinkInbox, LinkRequest},
    retry::{self, Backoff, Decision},
    state::{NodeError, Shared, StreamState},
    welcome::{self, SiteProfiles, Welcome},
};

/// How often the loop proves it is alive (for `/healthz`).
const ALIVE_TICK: Duration = Duration::from_secs(1);

/// The next request of the executor's link; pending forever without one. Cancel-safe.
async fn recv(inbox: &mut Option<mpsc::UnboundedReceiver<LinkRequest>>) -> Option<LinkRequest> {
    match inbox {
        Some(rx) => match rx.recv().await {
            Some(request) => Some(request),
            None => {
                *inbox = None;
                std::future::pending().await
            }
        },
        None => std::future::pending().await,
    }
}

type OpenFuture = Pin<Box<dyn Future<Output = Result<Box<Opened>, Status>> + Send>>;

/// The stream's state.
enum Stream {
    /// Next attempt at `at`.
    Waiting { at: Instant },
    /// An attempt in flight.
    Opening(OpenFuture),
    /// Welcomed.
    Connected(Box<Connected>),
}

struct Connected {
    inbound: Streaming<pb::CoordinatorMessage>,
    heartbeat: Interval,
    last_inbound: Instant,
    silence_limit: Duration,
}

enum StreamEvent {
    AttemptDue,
    Opened(Result<Box<Opened>, Status>),
    // NB: boxed: a Welcome (profiles and vocabulary) is large.
    Inbound(Option<Result<Box<pb::CoordinatorMessage>, Status>>),
    HeartbeatDue,
}

/// Waits for the next thing the stream does. Cancel-safe.
async fn next_stream_event(stream: &mut Stream) -> StreamEvent {
    match stream {
        Stream::Waiting { at } => {
            sleep_until(*at).await;
            StreamEvent::AttemptDue
        }
        Stream::Opening(attempt) => StreamEvent::Opened(attempt.as_mut().await),
        Stream::Connected(conn) => tokio::select! {
            msg = conn.inbound.next() => StreamEvent::Inbound(msg.map(|m| m.map(Box::new))),
            _ = conn.heartbeat.tick() => StreamEvent::HeartbeatDue,
        },
    }
}

/// The node's task state.
pub(crate) struct Link {
    config: Config,
    endpoint: Endpoint,
    auth: MetadataValue<Ascii>,
    shared: Arc<Shared>,
    jobs: Jobs,
    outbox: Outbox,
    profiles: Arc<SiteProfiles>,
    stream: Stream,
    out: Option<mpsc::UnboundedSender<pb::NodeMessage>>,
    welcome: Option<Welcome>,
    drain: Option<Drain>,
    backoff: Backoff,
    /// When the coordinator was last lost (or the node started); `None` while welcomed.
    lost_since: Option<Instant>,
    attempts: u64,
    connects: u64,
    /// Requests of the executor's `NodeLink` (`None`: no link, or it was dropped).
    inbox: Option<mpsc::UnboundedReceiver<LinkRequest>>,
    desk: ProxyDesk,
    executor: Arc<dyn Executor>,
    /// The executor's drain: `None` before it started, then running, then done.
    executor_drain: ExecutorDrain,
    /// [`Executor::accepts_jobs`] when the coordinator was last told the free slots.
    accepting: bool,
}

enum Exit {
    Continue,
    Done(Result<(), NodeError>),
}

impl Link {
    /// Builds the endpoint and the auth header. The config is valid.
    pub(crate) fn new(
        config: Config,
        executor: Arc<dyn Executor>,
        shared: Arc<Shared>,
        inbox: Option<LinkInbox>,
    ) -> Result<Self, NodeError> {
        let endpoint = endpoint(&config)?;
        let mut auth: MetadataValue<Ascii> = format!("Bearer {}", config.node_token.expose())
            .parse()
            .map_err(|_| ConfigError {
                setting: "LPS_NODE_TOKEN",
                reason: "not a valid header value".into(),
            })?;
        auth.set_sensitive(true);
        let jobs = Jobs::new(
            config.slots,
            executor.clone(),
            Arc::from(config.node_id.as_str()),
            shared.metrics.clone(),
        );
        Ok(Self {
            endpoint,
            auth,
            jobs,
            outbox: Outbox::new(),
            profiles: Arc::new(SiteProfiles::default()),
            stream: Stream::Waiting { at: Instant::now() },
            out: None,
            welcome: None,
            drain: None,
            backoff: Backoff::default(),
            lost_since: Some(Instant::now()),
            attempts: 0,
            connects: 0,
            inbox: inbox.map(|i| i.0),
            desk: ProxyDesk::default(),
            accepting: executor.accepts_jobs(),
            executor,
            executor_drain: ExecutorDrain::NotStarted,
            config,
            shared,
        })
    }

    /// The node's loop; see the module docs.
    pub(crate) async fn run(mut self, shutdown: CancellationToken) -> Result<(), NodeError> {
        let mut alive = interval(ALIVE_TICK);
        alive.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let result = loop {
            self.publish();
            self.maybe_drain_executor();
            if self.drain_is_complete() {
                if self.out.is_none() {
                    info!("drained while disconnected; nothing is owed to the coordinator");
                }
                self.say_goodbye("drained").await;
                break Ok(());
            }
            let far = Instant::now() + Duration::from_secs(86_400);
            let hand_back_at = self
                .drain
                .as_ref()
                .filter(|d| !d.handed_back)
                .map(|d| d.hand_back_at);
            let drain_deadline = self.drain.as_ref().map(|d| d.deadline);
            let exit = tokio::select! {
                biased;
                () = shutdown.cancelled(), if self.drain.is_none() => {
                    self.start_drain("shutdown".into(), None);
                    Exit::Continue
                }
                // NB: before the busy branches, so a flood of frames cannot starve it.
                _ = alive.tick() => {
                    self.shared.touch();
                    Exit::Continue
                }
                // NB: hand back before giving up, should both be due at once.
                () = sleep_until(hand_back_at.unwrap_or(far)), if hand_back_at.is_some() => {
                    self.hand_back_all();
                    Exit::Continue
                }
                () = sleep_until(drain_deadline.unwrap_or(far)), if drain_deadline.is_some() => {
                    Exit::Done(self.drain_expired().await)
                }
                event = self.jobs.next_event() => {
                    self.on_job_event(event);
                    Exit::Continue
                }
                event = next_stream_event(&mut self.stream) => self.on_stream_event(event),
                Some(request) = recv(&mut self.inbox) => {
                    self.on_link_request(request);
                    Exit::Continue
                }
                () = executor_drained(&mut self.executor_drain) => {
                    // NB: what the drain sent is in the channel already; take it before
                    // judging the drain complete.
                    while let Some(request) = self.inbox.as_mut().and_then(|i| i.try_recv().ok()) {
                        self.on_link_request(request);
                    }
                    Exit::Continue
                }
            };
            if let Exit::Done(result) = exit {
                break result;
            }
        };
        // Anything still running is abandoned (its lease expires or Goodbye released it);
        // give executors their grace to stop, bounded by the drain deadline when draining.
        self.out = None;
        let until = match &self.drain {
            Some(drain) => drain.deadline.max(Instant::now() + Duration::from_secs(1)),
            None => Instant::now() + STOP_GRACE,
        };
        self.jobs.stop_all(until).await;
        self.desk.stream_lost();
        self.publish();
        result
    }

    // ------------------------------------------------------------------ proxies

    fn on_link_request(&mut self, request: LinkRequest) {
        match request {
            LinkRequest::Acquire {
                mall,
                job_id,
                reply,
            } => {
                let connected = self.out.is_some();
                if let Some(msg) = self.desk.acquire(mall, job_id, reply, connected) {
                    self.send(msg);
                }
            }
            LinkRequest::Report(report) => self.report(report),
        }
    }

    // ------------------------------------------------------------------ stream

    fn on_stream_event(&mut self, event: StreamEvent) -> Exit {
        let lost = match event {
            StreamEvent::AttemptDue => {
                self.attempts += 1;
                let span = info_span!(
                    "node.connect",
                    otel.kind = "client",
                    rpc.system = "grpc",
                    rpc.service = "lps.v1.NodeService",
                    rpc.method = "Connect",
                    node.id = %self.config.node_id,
                    attempt = self.attempts as i64,
                    coordinator = %self.config.coordinator_url,
                );
                let attempt = open(self.endpoint.clone(), self.auth.clone(), self.hello());
                self.stream = Stream::Opening(Box::pin(attempt.instrument(span)));
                return Exit::Continue;
            }
            StreamEvent::Opened(Ok(opened)) => match self.on_welcome(opened) {
                Ok(()) => return Exit::Continue,
                Err(status) => status,
            },
            StreamEvent::Opened(Err(status)) => status,
            StreamEvent::Inbound(Some(Ok(msg))) => {
                if let Stream::Connected(conn) = &mut self.stream {
                    conn.last_inbound = Instant::now();
                }
                self.on_message(*msg);
                return Exit::Continue;
            }
            StreamEvent::Inbound(Some(Err(status))) => status,
            StreamEvent::Inbound(None) => {
                Status::unavailable("the coordinator closed the stream without an error")
            }
            StreamEvent::HeartbeatDue => {
                if let Stream::Connected(conn) = &self.stream
                    && conn.last_inbound.elapsed() > conn.silence_limit
                {
                    Status::unavailable(format!(
                        "no frame from the coordinator for {:?}",
                        conn.last_inbound.elapsed()
                    ))
                } else {
                    // The executor started (or stopped) accepting jobs: say what is free.
                    if self.executor.accepts_jobs() != self.accepting {
                        self.accepting = self.executor.accepts_jobs();
                        self.send_credit();
                    }
                    self.send_heartbeat();
                    return Exit::Continue;
                }
            }
        };
        match self.stream_lost(lost) {
            Ok(()) => Exit::Continue,
            Err(err) => Exit::Done(Err(err)),
        }
    }

    /// The stream (or an attempt) ended with `status`: retry later, or give up.
    fn stream_lost(&mut self, status: Status) -> Result<(), NodeError> {
        let was_connected = matches!(self.stream, Stream::Connected(_));
        self.out = None;
        self.desk.stream_lost();
        self.welcome = None;
        self.stream = Stream::Waiting {
            at: Instant::now() + Duration::from_secs(86_400),
        };
        let code = status.code();
        match retry::decide(code) {
            Decision::Fatal => {
                return Err(NodeError::Refused {
                    code,
                    message: status.message().to_owned(),
                    hint: retry::hint(code),
                });
            }
            Decision::Retry => {}
        }
        let lost_since = *self.lost_since.get_or_insert_with(Instant::now);
        let waited = lost_since.elapsed();
        let deadline = self.config.reconnect_deadline;
        // The last attempt is made at the deadline itself.
        let delay = self
            .backoff
            .next_delay()
            .min(deadline.saturating_sub(waited));
        if waited >= deadline {
            return Err(NodeError::CoordinatorLost {
                waited,
                deadline,
                last_error: format!("{code:?}: {}", describe(&status)),
            });
        }
        warn!(
            code = ?code,
            error = %describe(&status),
            was_connected,
            retry_in = ?delay,
            running_jobs = self.jobs.taken(),
            unacked_reports = self.outbox.len(),
            "coordinator stream lost; reconnecting"
        );
        self.stream = Stream::Waiting {
            at: Instant::now() + delay,
        };
        Ok(())
    }

    fn hello(&self) -> pb::Hello {
        let mut held: Vec<Lease> = self.jobs.held().chain(self.outbox.leases()).collect();
        held.sort_by_key(|l| (l.job_id, l.epoch));
        held.dedup();
        pb::Hello {
            protocol_version: PROTOCOL_VERSION,
            node_id: self.config.node_id.clone(),
            slots: self.config.slots,
            malls: self.config.malls.iter().map(MallId::to_string).collect(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            running: held
                .into_iter()
                .map(|l| pb::HeldJob {
                    job_id: l.job_id,
                    lease_epoch: l.epoch,
                })
                .collect(),
            held_ports: self.desk.held_ports(),
            instance: crate::state::INSTANCE.clone(),
        }
    }

    fn on_welcome(&mut self, opened: Box<Opened>) -> Result<(), Status> {
        let opened = *opened;
        let (welcomed, profiles) = welcome::from_welcome(opened.welcome)?;
        if !welcomed.stopped_reports {
            let dropped = self.outbox.drop_stopped();
            if dropped > 0 {
                info!(
                    dropped,
                    "the coordinator takes no stop reports; dropped the pending ones"
                );
            }
        }
        for &job_id in &welcomed.lost {
            let stopped = self.jobs.cancel(job_id, None, "lost");
            warn!(
                job.id = job_id,
                stopped = stopped.len(),
                "job is no longer this node's; stopped"
            );
            // NB: not sent yet (no stream until below): they go out with the resend.
            if welcomed.stopped_reports {
                for report in stopped {
                    self.report(report);
                }
            }
        }
        Span::current().record("session.id", welcomed.id.as_str());
        info!(
            session.id = %welcomed.id,
            reattached = welcomed.reattached.len(),
            lost = welcomed.lost.len(),
            heartbeat_interval = ?welcomed.heartbeat_interval,
            profiles = profiles.len(),
            resend = self.outbox.len(),
            "welcomed by the coordinator"
        );
        // Every series of the malls this node crawls starts at 0.
        let malls = &self.config.malls;
        self.shared.metrics.init_malls(
            profiles
                .malls()
                .into_iter()
                .filter(|mall| malls.is_empty() || malls.iter().any(|m| m.as_str() == *mall)),
        );
        self.profiles = Arc::new(profiles);
        self.shared.profiles.send_replace(self.profiles.clone());
        self.out = Some(opened.out);
        let hb = welcomed.heartbeat_interval;
        let mut heartbeat = interval_at(Instant::now() + hb, hb);
        heartbeat.set_missed_tick_behavior(MissedTickBehavior::Delay);
        self.stream = Stream::Connected(Box::new(Connected {
            inbound: opened.inbound,
            heartbeat,
            last_inbound: Instant::now(),
            silence_limit: welcomed.silence_limit(),
        }));
        self.welcome = Some(welcomed);
        self.backoff.reset();
        self.lost_since = None;
        self.connects += 1;
        if self.connects > 1 {
            self.shared.metrics.reconnects.inc();
        }
        self.send_credit();
        let resend: Vec<pb::NodeMessage> = self
            .outbox
            .pending()
            .map(|(seq, report)| report.to_message(seq))
            .collect();
        self.shared
            .metrics
            .reports_resent
            .inc_by(u64::try_from(resend.len()).unwrap_or(u64::MAX));
        for msg in resend {
            self.send(msg);
        }
        Ok(())
    }

    fn on_message(&mut self, msg: pb::CoordinatorMessage) {
        let Some(body) = msg.body else {
            debug!("empty message from the coordinator");
            return;
        };
        match body {
            In::Welcome(_) => warn!("second welcome on one stream; ignored"),
            In::Assign(assign) => self.on_assign(assign),
            In::HeartbeatAck(ack) => {
                for job_id in ack.cancel {
                    self.cancel_job(job_id, None, "lease not renewed");
                }
            }
            In::Ack(ack) => {
                self.outbox.ack(&ack);
            }
            In::Cancel(cancel) => {
                let epoch = (cancel.lease_epoch > 0).then_some(cancel.lease_epoch);
                self.cancel_job(cancel.job_id, epoch, &cancel.reason);
            }
            In::ProxyGrant(grant) => {
                if let Some(release) = self.desk.on_grant(grant) {
                    self.report(release);
                }
            }
            In::ProxyUnavailable(none) => self.desk.on_unavailable(none),
            In::ProfileUpdate(update) => self.on_profile_update(update),
            In::Drain(drain) => {
                if self.drain.is_none() {
                    let reason = if drain.reason.is_empty() {
                        "coordinator".to_owned()
                    } else {
                        format!("coordinator: {}", drain.reason)
                    };
                    self.start_drain(reason, drain.deadline);
                }
            }
        }
    }

    /// The coordinator's profiles changed (an edited profile directory): jobs assigned from
    /// now on use the new set; a running job keeps the profile it was assigned with (its
    /// own copy in its `Job`). The limits stay the Welcome's.
    fn on_profile_update(&mut self, update: pb::ProfileUpdate) {
        let profiles =
            SiteProfiles::new(update.profiles, *self.profiles.limits(), update.vocabulary);
        info!(
            profiles.revision = %update.revision,
            profiles = profiles.len(),
            "site profiles updated by the coordinator"
        );
        let malls = &self.config.malls;
        self.shared.metrics.init_malls(
            profiles
                .malls()
                .into_iter()
                .filter(|mall| malls.is_empty() || malls.iter().any(|m| m.as_str() == *mall)),
        );
        self.profiles = Arc::new(profiles);
        self.shared.profiles.send_replace(self.profiles.clone());
    }

    fn on_assign(&mut self, assign: pb::Assign) {
        let lease = Lease {
            job_id: assign.job_id,
            epoch: assign.lease_epoch,
        };
        if lease.job_id <= 0 || lease.epoch <= 0 {
            warn!(
                job.id = lease.job_id,
                job.lease_epoch = lease.epoch,
                "assign with an invalid lease; ignored"
            );
            return;
        }
        if self.jobs.contains(lease) {
            debug!(job.id = lease.job_id, "duplicate assign; ignored");
            return;
        }
        let job = match job_from_assign(assign, &self.profiles) {
            Ok(job) => job,
            Err(err) => {
                warn!(job.id = lease.job_id, error = %err, "invalid assignment; failing it");
                self.report(Report::Failure(JobFailure::new(
                    lease,
                    ErrorClass::Permanent,
                    format!("invalid assignment: {err}"),
                )));
                return;
            }
        };
        let refuse = if self.drain.is_some() {
            Some("the node is draining".to_owned())
        } else if !self.config.malls.is_empty() && !self.config.malls.contains(&job.mall) {
            Some(format!("mall {} is not crawled by this node", job.mall))
        } else {
            // A newer lease of a job this node still runs supersedes the old one.
            let old = self.jobs.cancel(lease.job_id, None, "reassigned");
            for report in &old {
                warn!(
                    job.id = lease.job_id,
                    job.lease_epoch = report.lease().map(|l| l.epoch),
                    "job reassigned with a newer lease; stopping the old run"
                );
            }
            self.report_stopped(old);
            (self.jobs.free_slots() == 0).then(|| "no free slot".to_owned())
        };
        if let Some(reason) = refuse {
            warn!(job.id = lease.job_id, reason = %reason, "handing back an assignment");
            self.shared
                .metrics
                .job_finished(&job.mall, JobEnd::HandedBack);
            // Nothing ran: nothing spent.
            self.report(Report::HandBack(JobHandBack::new(
                lease,
                reason,
                JobMetrics::default(),
            )));
            // The coordinator counted this assignment against our credit: say again what
            // is free.
            self.send_credit();
            return;
        }
        let remaining = (job.deadline - Utc::now()).to_std().unwrap_or_default();
        self.jobs.start(job, Instant::now() + remaining);
    }

    fn cancel_job(&mut self, job_id: i64, epoch: Option<i64>, reason: &str) {
        let stopped = self.jobs.cancel(job_id, epoch, reason);
        if stopped.is_empty() {
            debug!(job.id = job_id, reason, "cancel for a job not running here");
        } else {
            info!(job.id = job_id, reason, "job cancelled by the coordinator");
        }
        self.report_stopped(stopped);
    }

    /// Reports what stopped runs spent, to a coordinator that takes `Stopped` reports (an
    /// older one would end the stream on one).
    fn report_stopped(&mut self, stopped: Vec<Report>) {
        if stopped.is_empty() {
            return;
        }
        if !self.welcome.as_ref().is_some_and(|w| w.stopped_reports) {
            debug!(
                runs = stopped.len(),
                "the coordinator takes no stop reports; the stopped runs' spend goes unreported"
            );
            return;
        }
        for report in stopped {
            self.report(report);
        }
    }

    // ------------------------------------------------------------------ jobs and reports

    fn on_job_event(&mut self, event: Event) {
        match event {
            Event::Exited { lease, report } => {
                debug!(
                    job.id = lease.job_id,
                    free_slots = self.jobs.free_slots(),
                    "slot freed"
                );
                if let Some(report) = report {
                    self.report(report);
                }
                if self.drain.is_none() {
                    self.send_credit();
                }
            }
            Event::Deadline { lease, report } => {
                debug_assert_eq!(Some(lease), report.lease());
                self.report(report);
            }
        }
    }

    /// Keeps `report` until acked and sends it now if connected.
    fn report(&mut self, report: Report) {
        match &report {
            Report::ProxyRelease { port, session, .. } => {
                self.desk.on_release(*port);
                self.shared
                    .metrics
                    .ip_session_ended(&session.stats.mall, session.reason);
            }
            Report::Block(event) => self.shared.metrics.blocked(&event.mall),
            Report::Result(_) | Report::Failure(_) | Report::HandBack(_) | Report::Stopped(_) => {}
        }
        let (job_id, kind) = (report.job_id(), report.kind());
        let seq = self.outbox.push(report);
        debug!(
            report.seq = seq,
            report.kind = kind,
            job.id = job_id,
            connected = self.out.is_some(),
            "report queued"
        );
        if let Some(msg) = self.outbox.get(seq).map(|r| r.to_message(seq)) {
            self.send(msg);
        }
    }

    fn free_slots(&self) -> u32 {
        if self.drain.is_some() || !self.executor.accepts_jobs() {
            0
        } else {
            self.jobs.free_slots()
        }
    }

    fn send_credit(&mut self) {
        let free_slots = self.free_slots();
        self.send(pb::NodeMessage {
            body: Some(Out::Credit(pb::Credit::from(&Credit { free_slots }))),
        });
    }

    fn send_heartbeat(&mut self) {
        let heartbeat = Heartbeat {
            running: self.jobs.progress(),
            free_slots: self.free_slots(),
            load: host::load_per_core(),
            rss_bytes: host::rss_bytes(),
        };
        self.send(pb::NodeMessage {
            body: Some(Out::Heartbeat(pb::Heartbeat::from(&heartbeat))),
        });
    }

    /// Sends on the current stream, if any. A failed send means the stream is gone; the
    /// inbound side reports that, and reports stay in the outbox.
    fn send(&mut self, msg: pb::NodeMessage) {
        if let Some(out) = &self.out
            && out.send(msg).is_err()
        {
            debug!("send on a closed stream");
            self.out = None;
        }
    }

    // ------------------------------------------------------------------ status

    fn publish(&self) {
        let stream = match self.stream {
            Stream::Connected(_) => StreamState::Connected,
            Stream::Waiting { .. } | Stream::Opening(_) => StreamState::Connecting,
        };
        let stream_id = self.welcome.as_ref().map(|w| w.id.clone());
        let running_jobs = self.jobs.taken();
        let free_slots = self.free_slots();
        let unacked_reports = self.outbox.len();
        let draining = self.drain.is_some();
        let connects = self.connects;
        let metrics = &self.shared.metrics;
        metrics
            .jobs_running
            .set(i64::try_from(running_jobs).unwrap_or(i64::MAX));
        metrics.slots_free.set(i64::from(free_slots));
        self.shared.status.send_if_modified(|s| {
            let next = crate::state::Status {
                stream: if s.stream == StreamState::Stopped {
                    StreamState::Stopped
                } else {
                    stream
                },
                draining,
                stream_id,
                running_jobs,
                free_slots,
                unacked_reports,
                connects,
            };
            if *s == next {
                false
            } else {
                *s = next;
                true
            }
        });
    }
}

/// A status's message and the causes tonic keeps behind it, `: `-separated: a broken
/// connection reads "transport error" alone, and the cause (a TLS alert, a refused
/// connection) is what tells an operator what to fix.
fn describe(status: &Status) -> String {
    let mut text = status.message().to_owned();
    let mut last = text.clone();
    let mut cause = std::error::Error::source(status);
    while let Some(err) = cause {
        // NB: tonic's transport error repeats the status message one level down.
        let part = err.to_string();
        if part != last {
            text.push_str(": ");
            text.push_str(&part);
        }
        last = part;
        cause = err.source();
    }
    text
}
