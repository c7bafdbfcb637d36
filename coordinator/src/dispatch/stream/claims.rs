//! Claims for the node's free slots and the `Assign`s that deliver them.

use lps_proto::{model::Lease, pb::coordinator_message::Body as Out};
use opentelemetry::KeyValue;
use tonic::Status;
use tracing::{Instrument as _, debug, info_span, warn};

use super::{Held, NodeStream, assign};
use crate::queue::{self, ClaimedJob};

impl NodeStream {
    /// Claims as many jobs as the node has credits for and assigns them.
    pub(super) async fn claim(&mut self) -> Result<(), Status> {
        let n = self.credits();
        let jobs = self
            .d
            .queue
            .claim(&self.node_id, self.malls.as_deref(), n)
            .await
            .map_err(crate::error::status)?;
        self.assign_all(jobs).await
    }

    /// Records freshly claimed jobs as held and sends their `Assign`s.
    pub(super) async fn assign_all(&mut self, jobs: Vec<queue::ClaimedJob>) -> Result<(), Status> {
        let assigned: Vec<Lease> = jobs.iter().map(|j| j.lease).collect();
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
        if !assigned.is_empty()
            && let Err(e) = crate::profiles::watch::record_assigned(
                self.d.pool(),
                &self.profile_revision,
                &assigned,
            )
            .await
        {
            // NB: the jobs run all the same; only their record lacks the revision.
            warn!(error = %e, profiles.revision = %self.profile_revision, "could not record the jobs' profile revision");
        }
        Ok(())
    }

    /// Hands back leases this stream claimed but could not deliver, at once and without
    /// charge (a claim whose stream is gone must not sit leased until it expires).
    pub(super) fn hand_back_unsent(&mut self, leases: Vec<Lease>) {
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
}
