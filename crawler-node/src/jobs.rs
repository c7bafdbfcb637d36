//! The slot table: the jobs this node runs, one task each, and what each one's end means.
//!
//! Owned by the link task (no locks). Invariants:
//! - A job takes a slot from [`Jobs::start`] until its task has ended, including the time
//!   an executor needs to stop after a cancel, so the node never runs more executors than
//!   slots. Callers check [`Jobs::free_slots`] before starting.
//! - Each job is in one [`Phase`]; only a `Running` job reports its own outcome. A job that
//!   leaves `Running` early is reported right then, with what it spent so far (its
//!   [`Progress`], priced like a finished run): a cancelled one (its lease is gone) by a
//!   `Stopped` report, a handed-back one by its hand-back, one past its deadline by its
//!   `DEADLINE` failure. Its task's own outcome is then ignored.
//! - The hard deadline is enforced here, on the node's clock: [`Jobs::next_event`] fires at
//!   the earliest deadline of a running job, cancels it and yields its `DEADLINE` failure.
//!
//! Cancellation safety: [`Jobs::next_event`] is cancel-safe (it only waits on the
//! `JoinSet` and a timer; state changes happen after a wait completes), so it can sit in a
//! `select!` loop. Dropping [`Jobs`] aborts every task still running.

use std::{collections::HashMap, sync::Arc, time::Duration};

use lps_proto::model::{
    ErrorClass, JobFailure, JobHandBack, JobMetrics, JobProgress, JobResult, JobStopped,
    JudgedWith, Lease, MAX_OFFERS_PER_RESULT, MallId,
};
use tokio::{
    task::{JoinError, JoinSet},
    time::{Instant, sleep_until},
};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, info, info_span, warn};

use crate::{
    executor::{Executor, Job, Outcome, Progress, STOP_GRACE},
    metrics::{JobEnd, NodeMetrics},
    outbox::Report,
};

/// At most this many query rounds are reported per job.
const MAX_ROUNDS: usize = 8;

/// Where a job is in its life on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Running; it reports its own outcome when its executor returns.
    Running,
    /// Its lease is gone (Cancel, HeartbeatAck.cancel, Welcome.lost, a newer Assign): its
    /// `Stopped` report was made then.
    Cancelled,
    /// Handed back (drain); the hand-back is the report.
    HandedBack,
    /// Past its hard deadline; the `DEADLINE` failure is the report.
    DeadlinePassed,
}

/// Something that happened to a job.
#[derive(Debug)]
pub enum Event {
    /// The job's task ended and its slot is free; `report` is owed if present.
    Exited {
        lease: Lease,
        report: Option<Report>,
    },
    /// The job reached its hard deadline and is being stopped (it keeps its slot until it
    /// exits); `report` is its `DEADLINE` failure.
    Deadline { lease: Lease, report: Report },
}

struct Entry {
    mall: MallId,
    progress: Progress,
    cancel: CancellationToken,
    deadline: Instant,
    started: Instant,
    phase: Phase,
    /// The job's proxy price (`Limits.proxy_usd_per_gb` of its Welcome).
    usd_per_gb: f64,
    /// What judges its cards, reported with its result.
    judged_with: JudgedWith,
}

impl Entry {
    /// What the run has spent so far.
    fn spent(&self) -> JobMetrics {
        self.progress
            .snapshot()
            .spent(self.usd_per_gb, self.started.elapsed())
    }
}

/// The running jobs of one node.
pub struct Jobs {
    slots: u32,
    executor: Arc<dyn Executor>,
    node_id: Arc<str>,
    tasks: JoinSet<Option<Outcome>>,
    table: HashMap<Lease, Entry>,
    by_task: HashMap<tokio::task::Id, Lease>,
    metrics: Arc<NodeMetrics>,
}

impl std::fmt::Debug for Jobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jobs")
            .field("slots", &self.slots)
            .field("taken", &self.table.len())
            .finish_non_exhaustive()
    }
}

impl Jobs {
    pub fn new(
        slots: u32,
        executor: Arc<dyn Executor>,
        node_id: Arc<str>,
        metrics: Arc<NodeMetrics>,
    ) -> Self {
        Self {
            slots,
            executor,
            node_id,
            tasks: JoinSet::new(),
            table: HashMap::new(),
            by_task: HashMap::new(),
            metrics,
        }
    }

    /// Slots not taken by any job (stopping jobs still take theirs).
    pub fn free_slots(&self) -> u32 {
        let taken = u32::try_from(self.table.len()).unwrap_or(u32::MAX);
        self.slots.saturating_sub(taken)
    }

    /// Slots taken, whatever the phase.
    pub fn taken(&self) -> usize {
        self.table.len()
    }

    /// Jobs in `Running`.
    pub fn running(&self) -> usize {
        self.table
            .values()
            .filter(|e| e.phase == Phase::Running)
            .count()
    }

    /// Whether this exact lease has a slot.
    pub fn contains(&self, lease: Lease) -> bool {
        self.table.contains_key(&lease)
    }

    /// The leases of `Running` jobs (for Hello and heartbeats).
    pub fn held(&self) -> impl Iterator<Item = Lease> + '_ {
        self.table
            .iter()
            .filter(|(_, e)| e.phase == Phase::Running)
            .map(|(lease, _)| *lease)
    }

    /// Heartbeat progress of every `Running` job, by job id.
    pub fn progress(&self) -> Vec<JobProgress> {
        let mut out: Vec<JobProgress> = self
            .table
            .iter()
            .filter(|(_, e)| e.phase == Phase::Running)
            .map(|(lease, e)| {
                let p = e.progress.snapshot();
                JobProgress {
                    lease: *lease,
                    round: p.round,
                    pages_loaded: p.pages_loaded,
                    bytes: p.bytes,
                }
            })
            .collect();
        out.sort_by_key(|p| p.lease.job_id);
        out
    }

    /// Starts `job` in a task of its own; it must be stopped by `deadline`.
    ///
    /// The caller has checked that a slot is free and that the lease is not running.
    pub fn start(&mut self, job: Job, deadline: Instant) {
        let lease = job.lease;
        let progress = Progress::new();
        let cancel = CancellationToken::new();
        let span = info_span!(
            "node.job",
            otel.kind = "consumer",
            job.id = lease.job_id,
            job.lease_epoch = lease.epoch,
            job.attempt = i64::from(job.attempt),
            mall = %job.mall,
            node.id = %self.node_id,
            outcome = tracing::field::Empty,
        );
        // One search is one trace: the job continues the Search call's context.
        if let Some(parent) = job.traceparent.as_deref() {
            lps_telemetry::set_parent(&span, parent, job.tracestate.as_deref().unwrap_or_default());
        }
        let entry = Entry {
            mall: job.mall.clone(),
            progress: progress.clone(),
            cancel: cancel.clone(),
            deadline,
            started: Instant::now(),
            phase: Phase::Running,
            usd_per_gb: job.limits.proxy_usd_per_gb,
            judged_with: job.judged_with.clone(),
        };
        let executor = self.executor.clone();
        let task = async move {
            info!(
                product = job.product.name(),
                deadline = %job.deadline,
                "job started"
            );
            let run = executor.run(job, progress, cancel.clone());
            tokio::pin!(run);
            tokio::select! {
                biased;
                outcome = &mut run => {
                    // A failed attempt is an error of the job's span (and of its trace).
                    let span = tracing::Span::current();
                    span.record("outcome", outcome_name(&outcome));
                    if let Outcome::Failed { class, message, .. } = &outcome {
                        lps_telemetry::fail(&span, format!("{}: {message}", class.as_str()));
                    }
                    return Some(outcome);
                }
                () = cancel.cancelled() => {
                    tracing::Span::current().record("outcome", "cancelled");
                }
            }
            if tokio::time::timeout(STOP_GRACE, run).await.is_err() {
                warn!(
                    grace = ?STOP_GRACE,
                    "executor did not stop after the cancel; its run is dropped"
                );
            }
            None
        }
        .instrument(span);
        let handle = self.tasks.spawn(task);
        self.by_task.insert(handle.id(), lease);
        self.table.insert(lease, entry);
    }

    /// Stops the `Running` jobs with this id (and this epoch, when given): their lease is
    /// gone. Returns a `Stopped` report for each, with what its run spent (the caller sends
    /// them where the coordinator takes them).
    pub fn cancel(&mut self, job_id: i64, epoch: Option<i64>, reason: &str) -> Vec<Report> {
        let mut stopped = Vec::new();
        for (lease, entry) in &mut self.table {
            let matches = lease.job_id == job_id && epoch.is_none_or(|e| e == lease.epoch);
            if matches && entry.phase == Phase::Running {
                entry.phase = Phase::Cancelled;
                entry.cancel.cancel();
                stopped.push(Report::Stopped(JobStopped::new(
                    *lease,
                    reason,
                    entry.spent(),
                )));
            }
        }
        stopped.sort_by_key(|r| r.lease().map(|l| l.epoch));
        stopped
    }

    /// Stops every `Running` job and returns a hand-back report for each.
    pub fn hand_back_all(&mut self, reason: &str) -> Vec<Report> {
        let mut reports: Vec<Report> = self
            .table
            .iter_mut()
            .filter(|(_, e)| e.phase == Phase::Running)
            .map(|(lease, entry)| {
                entry.phase = Phase::HandedBack;
                entry.cancel.cancel();
                Report::HandBack(JobHandBack::new(*lease, reason, entry.spent()))
            })
            .collect();
        reports.sort_by_key(Report::job_id);
        reports
    }

    /// The next job event. Waits forever while no job has a slot. Cancel-safe.
    pub async fn next_event(&mut self) -> Event {
        loop {
            let next_deadline = self
                .table
                .iter()
                .filter(|(_, e)| e.phase == Phase::Running)
                .map(|(lease, e)| (e.deadline, *lease))
                .min_by_key(|(deadline, _)| *deadline);
            let far = Instant::now() + Duration::from_secs(86_400);
            tokio::select! {
                Some(joined) = self.tasks.join_next_with_id() => {
                    if let Some(event) = self.on_joined(joined) {
                        return event;
                    }
                }
                () = sleep_until(next_deadline.map_or(far, |(d, _)| d)), if next_deadline.is_some() => {
                    if let Some((_, lease)) = next_deadline {
                        return self.on_deadline(lease);
                    }
                }
                else => std::future::pending::<()>().await,
            }
        }
    }

    fn on_deadline(&mut self, lease: Lease) -> Event {
        let (class, message) = (
            ErrorClass::Deadline,
            "the job ran past its hard deadline".to_owned(),
        );
        let mut failure = JobFailure::new(lease, class, message);
        if let Some(entry) = self.table.get_mut(&lease) {
            entry.phase = Phase::DeadlinePassed;
            entry.cancel.cancel();
            // Priced like a finished run: the bytes moved so far cost what they cost.
            failure.metrics = entry.spent();
            warn!(
                job.id = lease.job_id,
                job.lease_epoch = lease.epoch,
                mall = %entry.mall,
                elapsed = ?entry.started.elapsed(),
                "job reached its deadline; stopping it"
            );
        }
        Event::Deadline {
            lease,
            report: Report::Failure(failure),
        }
    }

    fn on_joined(
        &mut self,
        joined: Result<(tokio::task::Id, Option<Outcome>), JoinError>,
    ) -> Option<Event> {
        let (id, ended) = match joined {
            Ok((id, outcome)) => (id, Ok(outcome)),
            Err(err) => (err.id(), Err(err)),
        };
        let lease = self.by_task.remove(&id)?;
        let entry = self.table.remove(&lease)?;
        let elapsed = entry.started.elapsed();
        let report = match (entry.phase, ended) {
            (Phase::Running, Ok(Some(outcome))) => Some(report_outcome(
                lease,
                outcome,
                elapsed,
                entry.judged_with.clone(),
            )),
            (Phase::Running, Ok(None)) => None,
            (Phase::Running, Err(err)) => {
                let why = if err.is_panic() {
                    "the executor panicked"
                } else {
                    "the job task was aborted"
                };
                warn!(job.id = lease.job_id, error = %err, "{why}");
                let mut failure = JobFailure::new(lease, ErrorClass::Internal, why);
                failure.metrics.elapsed = elapsed;
                Some(Report::Failure(failure))
            }
            (Phase::Cancelled | Phase::HandedBack | Phase::DeadlinePassed, _) => None,
        };
        let end = match (entry.phase, &report) {
            (Phase::Running, Some(report)) => job_end(report),
            (Phase::Running | Phase::Cancelled, _) => JobEnd::Cancelled,
            (Phase::HandedBack, _) => JobEnd::HandedBack,
            (Phase::DeadlinePassed, _) => JobEnd::Failed(ErrorClass::Deadline),
        };
        self.metrics.job_finished(&entry.mall, end);
        info!(
            job.id = lease.job_id,
            job.lease_epoch = lease.epoch,
            mall = %entry.mall,
            phase = ?entry.phase,
            report = report.as_ref().map_or("none", Report::kind),
            elapsed = ?elapsed,
            "job ended"
        );
        Some(Event::Exited { lease, report })
    }

    /// Stops every job (no reports: the node is going away) and waits until `until` for
    /// their tasks to end; the rest are aborted.
    pub async fn stop_all(&mut self, until: Instant) {
        for entry in self.table.values_mut() {
            if entry.phase == Phase::Running {
                entry.phase = Phase::Cancelled;
            }
            entry.cancel.cancel();
        }
        let drained = tokio::time::timeout_at(until, async {
            while self.tasks.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            warn!(
                jobs = self.tasks.len(),
                "job tasks still stopping at exit; aborting them"
            );
            self.tasks.abort_all();
        }
        self.table.clear();
        self.by_task.clear();
    }
}

/// The `outcome` label of a job whose own report is `report`.
fn job_end(report: &Report) -> JobEnd {
    match report {
        Report::Result(result) => match result.outcome {
            lps_proto::model::Outcome::Found => JobEnd::Found,
            lps_proto::model::Outcome::NotFound => JobEnd::NotFound,
        },
        Report::Failure(failure) => JobEnd::Failed(failure.class),
        Report::HandBack(_) => JobEnd::HandedBack,
        Report::Stopped(_) => JobEnd::Cancelled,
        // NB: not job reports; never made here.
        Report::ProxyRelease { .. } | Report::Block(_) => JobEnd::Failed(ErrorClass::Internal),
    }
}

/// The outcome's name on the job's span.
fn outcome_name(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Found { .. } => "found",
        Outcome::NotFound { .. } => "not_found",
        Outcome::Failed { class, .. } => class.as_str(),
        Outcome::Deferred { .. } => "deferred",
    }
}

/// The report for a run that ended on its own.
fn report_outcome(
    lease: Lease,
    outcome: Outcome,
    elapsed: Duration,
    judged_with: JudgedWith,
) -> Report {
    let fill = |mut m: JobMetrics| {
        if m.elapsed.is_zero() {
            m.elapsed = elapsed;
        }
        m
    };
    match outcome {
        Outcome::Found {
            mut offers,
            rounds,
            metrics,
        } => {
            if offers.len() > MAX_OFFERS_PER_RESULT {
                offers.sort_by_key(|o| (o.effective_price(), o.shipping_fee));
                offers.truncate(MAX_OFFERS_PER_RESULT);
            }
            match JobResult::found(lease, offers) {
                Ok(result) => {
                    let mut result = result.judged_with(judged_with);
                    result.rounds = rounds.into_iter().take(MAX_ROUNDS).collect();
                    result.metrics = fill(metrics);
                    Report::Result(result)
                }
                Err(err) => {
                    let mut failure = JobFailure::new(
                        lease,
                        ErrorClass::Internal,
                        format!("executor reported found but {err}"),
                    );
                    failure.metrics = fill(metrics);
                    Report::Failure(failure)
                }
            }
        }
        Outcome::NotFound { rounds, metrics } => {
            let mut result = JobResult::not_found(lease).judged_with(judged_with);
            result.rounds = rounds.into_iter().take(MAX_ROUNDS).collect();
            result.metrics = fill(metrics);
            Report::Result(result)
        }
        Outcome::Failed {
            class,
            message,
            metrics,
            evidence,
        } => {
            let mut failure = JobFailure::new(lease, class, message);
            failure.metrics = fill(metrics);
            failure.evidence = evidence.map(|e| *e);
            Report::Failure(failure)
        }
        Outcome::Deferred {
            reason,
            not_before,
            metrics,
        } => Report::HandBack(JobHandBack::new(lease, reason, fill(metrics)).until(not_before)),
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use lps_proto::{
        model::{Offer, Outcome as Final, ProductSpec},
        pb,
    };

    use super::*;
    use crate::executor::ScriptedExecutor;

    fn job(job_id: i64, name: &str) -> Job {
        Job {
            lease: Lease { job_id, epoch: 1 },
            product: ProductSpec::new(None, name).unwrap(),
            mall: MallId::new("testmall-alpha").unwrap(),
            attempt: 1,
            max_attempts: 3,
            deadline: Utc::now(),
            traceparent: None,
            tracestate: None,
            profile: None,
            lexicon: crate::judge::Lexicon::builtin(),
            judged_with: JudgedWith::default(),
            limits: pb::Limits::default(),
        }
    }

    fn jobs(slots: u32) -> Jobs {
        Jobs::new(
            slots,
            Arc::new(ScriptedExecutor::new()),
            Arc::from("n1"),
            Arc::new(NodeMetrics::new()),
        )
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(30)
    }

    /// The `jobs_finished` count of testmall-alpha with `outcome`.
    fn finished(jobs: &Jobs, outcome: &str) -> u64 {
        jobs.metrics
            .jobs_finished
            .get_or_create(&crate::metrics::MallOutcomeLabels {
                mall: "testmall-alpha".into(),
                outcome: outcome.into(),
            })
            .get()
    }

    async fn next(jobs: &mut Jobs) -> Event {
        tokio::time::timeout(Duration::from_secs(5), jobs.next_event())
            .await
            .expect("a job event")
    }

    #[tokio::test]
    async fn a_finished_job_reports_and_frees_its_slot() {
        let mut jobs = jobs(2);
        jobs.start(job(1, "ok:500"), soon());
        assert_eq!(jobs.free_slots(), 1);
        match next(&mut jobs).await {
            Event::Exited {
                report: Some(Report::Result(r)),
                ..
            } => {
                assert_eq!(r.outcome, Final::Found);
                assert_eq!(r.offers[0].price, 500);
                assert!(!r.metrics.elapsed.is_zero());
            }
            other => panic!("want a result, got {other:?}"),
        }
        assert_eq!(jobs.free_slots(), 2);
        assert_eq!(finished(&jobs, "found"), 1);
    }

    #[tokio::test]
    async fn deadline_then_exit() {
        let mut jobs = jobs(1);
        jobs.start(job(1, "hang"), Instant::now() + Duration::from_millis(50));
        match next(&mut jobs).await {
            Event::Deadline {
                report: Report::Failure(f),
                ..
            } => assert_eq!(f.class, ErrorClass::Deadline),
            other => panic!("want a deadline, got {other:?}"),
        }
        assert!(matches!(
            next(&mut jobs).await,
            Event::Exited { report: None, .. }
        ));
        assert_eq!(jobs.free_slots(), 1);
        assert_eq!(finished(&jobs, "deadline"), 1);
    }

    #[tokio::test]
    async fn cancelled_and_handed_back_jobs_report_when_stopped_not_on_exit() {
        let mut jobs = jobs(3);
        jobs.start(job(1, "hang"), soon());
        jobs.start(job(2, "hang"), soon());
        jobs.start(job(3, "hang"), soon());
        assert!(jobs.cancel(1, Some(2), "x").is_empty(), "wrong epoch");
        let stopped = jobs.cancel(1, Some(1), "cancelled");
        assert!(
            matches!(&stopped[..], [Report::Stopped(s)] if s.lease.job_id == 1 && s.reason == "cancelled"),
            "{stopped:?}"
        );
        assert!(jobs.cancel(1, None, "x").is_empty(), "already cancelled");
        let handed = jobs.hand_back_all("draining");
        let ids: Vec<i64> = handed.iter().map(Report::job_id).collect();
        assert_eq!(ids, [2, 3]);
        assert_eq!(jobs.running(), 0);
        for _ in 0..3 {
            assert!(matches!(
                next(&mut jobs).await,
                Event::Exited { report: None, .. }
            ));
        }
        assert_eq!(jobs.free_slots(), 3);
        assert_eq!(finished(&jobs, "cancelled"), 1);
        assert_eq!(finished(&jobs, "handed_back"), 2);
    }

    /// USD per GB in the priced jobs' Welcome limits.
    const USD_PER_GB: f64 = 10.0;

    /// `job` with a proxy price, so that what it moves costs something.
    fn priced(job_id: i64, name: &str) -> Job {
        Job {
            limits: pb::Limits {
                proxy_usd_per_gb: USD_PER_GB,
                ..pb::Limits::default()
            },
            ..job(job_id, name)
        }
    }

    /// Waits until job `job_id` has moved `bytes` (its `progress` steps are done).
    async fn moved(jobs: &Jobs, job_id: i64, bytes: u64) {
        for _ in 0..200 {
            if jobs
                .progress()
                .iter()
                .any(|p| p.lease.job_id == job_id && p.bytes == bytes)
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("job {job_id} did not move {bytes} bytes");
    }

    /// The cost of the scripted `progress` step's 30,000 bytes at [`USD_PER_GB`].
    const PROGRESS_COST: f64 = 30_000.0 * USD_PER_GB / 1e9;

    #[tokio::test]
    async fn a_run_killed_at_its_deadline_reports_its_cost() {
        let mut jobs = jobs(1);
        jobs.start(
            priced(1, "progress hang"),
            Instant::now() + Duration::from_millis(400),
        );
        match next(&mut jobs).await {
            Event::Deadline {
                report: Report::Failure(f),
                ..
            } => {
                assert_eq!(f.class, ErrorClass::Deadline);
                assert_eq!(f.metrics.bytes(), 30_000, "{:?}", f.metrics);
                assert!(
                    f.metrics.cost_usd > 0.0,
                    "a deadline kill is priced: {:?}",
                    f.metrics
                );
                assert!((f.metrics.cost_usd - PROGRESS_COST).abs() < 1e-12);
                assert_eq!(f.metrics.pages_loaded, 3);
                assert!(!f.metrics.elapsed.is_zero());
            }
            other => panic!("want a deadline, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn stopped_and_handed_back_runs_report_their_cost() {
        let mut jobs = jobs(2);
        jobs.start(priced(1, "progress hang"), soon());
        jobs.start(priced(2, "progress hang"), soon());
        moved(&jobs, 1, 30_000).await;
        moved(&jobs, 2, 30_000).await;
        let spent = |r: &Report| match r {
            Report::Stopped(s) => s.metrics,
            Report::HandBack(h) => h.metrics,
            other => panic!("want a stop or a hand-back, got {other:?}"),
        };
        let stopped = jobs.cancel(1, None, "lease not renewed");
        let handed = jobs.hand_back_all("draining");
        for report in stopped.iter().chain(&handed) {
            let m = spent(report);
            assert_eq!(m.bytes(), 30_000, "{report:?}");
            assert!((m.cost_usd - PROGRESS_COST).abs() < 1e-12, "{report:?}");
        }
        assert_eq!((stopped.len(), handed.len()), (1, 1));
    }

    #[tokio::test]
    async fn a_finished_run_is_priced_the_same_way() {
        let mut jobs = jobs(1);
        jobs.start(priced(1, "progress ok"), soon());
        match next(&mut jobs).await {
            Event::Exited {
                report: Some(Report::Result(r)),
                ..
            } => assert!(
                (r.metrics.cost_usd - PROGRESS_COST).abs() < 1e-12,
                "{:?}",
                r.metrics
            ),
            other => panic!("want a result, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_panicking_executor_is_an_internal_failure() {
        let mut jobs = jobs(1);
        jobs.start(job(1, "panic"), soon());
        match next(&mut jobs).await {
            Event::Exited {
                report: Some(Report::Failure(f)),
                ..
            } => assert_eq!(f.class, ErrorClass::Internal),
            other => panic!("want a failure, got {other:?}"),
        }
        assert_eq!(finished(&jobs, "internal"), 1);
    }

    #[test]
    fn found_without_offers_is_a_failure_and_long_lists_keep_the_cheapest() {
        let lease = Lease {
            job_id: 1,
            epoch: 1,
        };
        let empty = Outcome::Found {
            offers: vec![],
            rounds: vec![],
            metrics: JobMetrics::default(),
        };
        assert!(matches!(
            report_outcome(lease, empty, Duration::from_secs(1), JudgedWith::default()),
            Report::Failure(_)
        ));
        let offer = |price| Offer {
            mall: MallId::new("naver").unwrap(),
            title: "t".into(),
            price,
            shipping_fee: 0,
            url: String::new(),
            seller: String::new(),
            match_score: 1.0,
            shipping: lps_proto::model::ShippingStatus::Free,
            list_price: 0,
            flags: Vec::new(),
        };
        let many = Outcome::Found {
            offers: (0..150).rev().map(offer).collect(),
            rounds: vec![],
            metrics: JobMetrics::default(),
        };
        let judged = JudgedWith::current("0123456789abcdef");
        match report_outcome(lease, many, Duration::from_secs(1), judged.clone()) {
            Report::Result(r) => {
                assert_eq!(r.offers.len(), MAX_OFFERS_PER_RESULT);
                assert_eq!(r.best_offer().unwrap().price, 0);
                assert!(r.offers.iter().all(|o| o.price < 100));
                assert_eq!(r.metrics.elapsed, Duration::from_secs(1));
                assert_eq!(r.judged_with, judged, "the result names what judged it");
            }
            other => panic!("want a result, got {other:?}"),
        }
    }
}
