//! The reports that end a run: Result, Failure, HandBack and Stopped. Each is acked after
//! its transition committed (STALE for a lease that is no longer this node's), and what the
//! run spent is counted once it is recorded, whether or not the lease was still held.
//!
//! Every report (these and the proxy ones) goes through [`NodeStream::report`]: one the
//! database could not write for a fault of its own is parked unacked and written again
//! later ([`NodeStream::write_parked`]), in arrival order.

use lps_proto::model::{self, JobFailure, JobResult};
use tonic::Status;
use tracing::{Instrument as _, debug, info, info_span, warn};

use super::{Held, NodeStream};
use crate::queue;

/// A report of any kind, kept as it arrived so that a parked one can be written again.
#[derive(Debug, Clone)]
pub(super) enum Report {
    Result(JobResult),
    Failure(JobFailure),
    HandBack(model::JobHandBack),
    Stopped(model::JobStopped),
    ProxyRelease(model::ProxyRelease),
    SessionEnd(model::SessionEnd),
    BlockEvent(model::BlockEvent),
}

impl NodeStream {
    /// Applies a valid report and acks it; one that a database fault kept from being
    /// written is parked (unacked) and so is every report that arrives while one is: they
    /// are written in order once the database takes writes again.
    pub(super) async fn report(&mut self, seq: u64, report: Report) -> Result<(), Status> {
        if !self.parked.is_empty() {
            return self.park(seq, report);
        }
        match self.apply(seq, report.clone()).await {
            Err(status) if crate::error::is_outage(&status) => {
                warn!(
                    report.seq = seq,
                    message = status.message(),
                    "report not written; kept unacked until the database takes writes"
                );
                self.d.metrics.parked_reports.inc();
                self.park(seq, report)
            }
            other => other,
        }
    }

    fn park(&mut self, seq: u64, report: Report) -> Result<(), Status> {
        if self.parked.len() >= super::PARKED_MAX {
            return Err(crate::error::unavailable(
                "database cannot write and too many reports wait; resend after reconnecting",
                crate::error::OUTAGE_RETRY,
            ));
        }
        self.parked.push_back((seq, report));
        Ok(())
    }

    /// Writes parked reports in order, acking each; stops at the first one the database
    /// still cannot take (it stays first).
    pub(super) async fn write_parked(&mut self) -> Result<(), Status> {
        while let Some((seq, report)) = self.parked.front().cloned() {
            match self.apply(seq, report).await {
                Err(status) if crate::error::is_outage(&status) => {
                    debug!(
                        report.seq = seq,
                        message = status.message(),
                        "parked report still not written"
                    );
                    return Ok(());
                }
                Err(status) => return Err(status),
                Ok(()) => {
                    self.parked.pop_front();
                    info!(
                        report.seq = seq,
                        left = self.parked.len(),
                        "parked report written"
                    );
                }
            }
        }
        Ok(())
    }

    async fn apply(&mut self, seq: u64, report: Report) -> Result<(), Status> {
        match report {
            Report::Result(r) => self.result(seq, r).await,
            Report::Failure(f) => self.failure(seq, f).await,
            Report::HandBack(h) => self.hand_back(seq, h).await,
            Report::Stopped(s) => self.stopped(seq, s).await,
            Report::ProxyRelease(r) => self.proxy_release(seq, r).await,
            Report::SessionEnd(e) => self.session_end(seq, e).await,
            Report::BlockEvent(b) => self.block_event(seq, b).await,
        }
    }

    /// A finished run: committed (the freed slot's next jobs claimed in its transaction),
    /// acked, then the claimed jobs assigned.
    pub(super) async fn result(&mut self, seq: u64, result: JobResult) -> Result<(), Status> {
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
        self.assign_all(claimed).await
    }

    /// A failed attempt (an error of its job's trace).
    pub(super) async fn failure(&mut self, seq: u64, failure: JobFailure) -> Result<(), Status> {
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
        self.fail(seq, &failure).instrument(span).await
    }

    /// A lease the node gives back unfinished: queued again, no attempt counted.
    pub(super) async fn hand_back(
        &mut self,
        seq: u64,
        h: model::JobHandBack,
    ) -> Result<(), Status> {
        self.held.remove(&h.lease.job_id);
        let r = self.d.queue.hand_back_reported(&self.node_id, &h).await;
        let ack = self.applied(r)?;
        self.observe_spend(&h.metrics);
        self.ack(seq, ack).await
    }

    /// A run the node stopped on our word: only its spend is recorded.
    pub(super) async fn stopped(&mut self, seq: u64, s: model::JobStopped) -> Result<(), Status> {
        if self
            .held
            .get(&s.lease.job_id)
            .is_some_and(|h| h.epoch == s.lease.epoch)
        {
            self.held.remove(&s.lease.job_id);
        }
        let r = self.d.queue.record_stopped(&self.node_id, &s).await;
        let ack = self.applied(r)?;
        self.observe_spend(&s.metrics);
        self.ack(seq, ack).await
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
                    Err(crate::error::Error::LeaseLost(result.lease))
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
        self.observe_spend(&result.metrics);
        if let Err(gone) = self.ack(seq, ack).await {
            self.hand_back_unsent(claimed.iter().map(|j| j.lease).collect());
            return Err(gone);
        }
        Ok(claimed)
    }

    /// Records a failed attempt (retry or dead-letter), then acks the report.
    async fn fail(&mut self, seq: u64, failure: &JobFailure) -> Result<(), Status> {
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
        self.observe_spend(&failure.metrics);
        self.ack(seq, ack).await
    }

    /// What a report says its run spent, into this replica's counters: every report that
    /// ends a run once it is recorded, whether this stream still held its lease or not (the
    /// money was spent); a parked report counts when it is written.
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
}

fn outcome_label(outcome: model::Outcome) -> &'static str {
    match outcome {
        model::Outcome::Found => "found",
        model::Outcome::NotFound => "not_found",
    }
}
