//! The reports that end a run: Result, Failure, HandBack and Stopped. Each is acked after
//! its transition committed (STALE for a lease that is no longer this node's), and what the
//! run spent is counted whether or not the lease was still held.

use lps_proto::model::{self, JobFailure, JobResult};
use tonic::Status;
use tracing::{Instrument as _, info_span, warn};

use super::{Held, NodeStream};
use crate::queue;

impl NodeStream {
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
        self.observe_spend(&h.metrics);
        let r = self.d.queue.hand_back_reported(&self.node_id, &h).await;
        let ack = self.applied(r)?;
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
        self.observe_spend(&s.metrics);
        let r = self.d.queue.record_stopped(&self.node_id, &s).await;
        let ack = self.applied(r)?;
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
    /// ends a run, whether this stream still held its lease or not (the money was spent).
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
