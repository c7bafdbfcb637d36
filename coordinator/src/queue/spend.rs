//! What runs cost, and the hourly spend caps (DESIGN §2 "Spend").
//!
//! Owns the spend columns of `job_attempt` (`bytes`, `cost_usd`) and the `spend_minute`
//! ring. `sql/spend.sql` is the one statement that writes them: every report that ends a run
//! (a result, a failure, a hand-back, a stop) has its metrics recorded on the attempt of its
//! lease — the row the transition that ended the lease inserted, with no spend, just before,
//! or the row an earlier end left (cancelled, reaped, reclaimed) when the report came too
//! late. The job row is never changed by it. Recording takes the larger of the stored and the
//! reported figures, so a resent report records nothing twice; what the cost grew by goes into
//! the mall's bucket of the current minute.
//!
//! Caps: the deployment's ([`QueueConfig::spend_cap_hourly_usd`](super::QueueConfig)) and each
//! mall's (`mall.spend_cap_hourly_usd`, from its site profile) are enforced by the claim
//! statements themselves (`claim.sql`, `claim_unlimited.sql`, also on the completion path),
//! from the ring's last [`SPEND_WINDOW`]: a capped scope's jobs stay queued until spend falls
//! out of the window. Runs already going when a cap is reached finish and are recorded, so
//! the spend can pass a cap by what they cost.
//!
//! Cancellation safety: each call is one statement (or two, each idempotent): an aborted
//! call recorded its spend or did not, and the node resends an unacked report.

use std::time::Duration;

use chrono::{DateTime, Utc};
use lps_proto::model::{ErrorClass, JobFailure, JobHandBack, JobMetrics, JobStopped, Lease};
use tracing::instrument;

use super::{CompleteColumns, Error, Queue};

/// The rolling window the spend caps and the ops snapshot's hourly cost are taken over (the
/// `spend_minute` ring holds one bucket per minute of it).
pub const SPEND_WINDOW: Duration = Duration::from_secs(3600);

/// The largest spend cap accepted, USD per hour (the `mall` table's check).
const MAX_CAP_USD: f64 = 1e9;

/// What [`Queue::record_spend`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spent {
    /// The lease's attempt has ended and was the reporting node's: the report's spend is on it.
    pub matched: bool,
    /// What the attempt's cost grew by (0 for a resend).
    pub added_usd: f64,
}

/// A spend cap is positive and finite (`None`: no cap); the reason otherwise.
pub fn check_cap(cap: Option<f64>) -> Result<(), String> {
    match cap {
        Some(usd) if !(usd > 0.0 && usd < MAX_CAP_USD) => Err(format!(
            "must be a positive number of USD below {MAX_CAP_USD:e} (omit it for no cap)"
        )),
        _ => Ok(()),
    }
}

fn bytes(m: &JobMetrics) -> i64 {
    i64::try_from(m.bytes()).unwrap_or(i64::MAX)
}

impl Queue {
    /// Records what the run of `lease` spent (`metrics`, as `node` reported it) on its
    /// attempt, once the attempt has ended and if it was `node`'s; nothing otherwise (the
    /// run still holds its lease, or another node reported it). Idempotent.
    #[instrument(name = "queue.record_spend", skip_all, fields(job.id = lease.job_id, node.id = %node), err)]
    pub async fn record_spend(
        &self,
        node: &str,
        lease: Lease,
        metrics: &JobMetrics,
    ) -> Result<Spent, Error> {
        if metrics.is_free() {
            return Ok(Spent::default());
        }
        self.spend_one(node, lease, metrics).await
    }

    async fn spend_one(
        &self,
        node: &str,
        lease: Lease,
        metrics: &JobMetrics,
    ) -> Result<Spent, Error> {
        let rows = sqlx::query_file!(
            "src/queue/sql/spend.sql",
            &[lease.job_id],
            &[lease.epoch],
            &[node.to_owned()],
            &[bytes(metrics)],
            &[metrics.cost_usd],
            self.now,
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.first().map_or_else(Spent::default, |r| Spent {
            matched: true,
            added_usd: r.added_usd,
        }))
    }

    /// `spend.sql` over a batch's reported results (run after `complete.sql`, in its
    /// transaction), when one of them spent anything.
    pub(super) async fn spend_reported(
        &self,
        db: impl sqlx::PgExecutor<'_>,
        reported: &CompleteColumns,
        now: Option<DateTime<Utc>>,
    ) -> Result<(), Error> {
        if !reported.spent_any() {
            return Ok(());
        }
        sqlx::query_file!(
            "src/queue/sql/spend.sql",
            &reported.job_id,
            &reported.epoch,
            &reported.node,
            &reported.bytes,
            &reported.cost,
            now,
        )
        .fetch_all(db)
        .await?;
        Ok(())
    }

    /// A node's hand-back: the lease goes back to the queue ([`Queue::hand_back_if_leased`])
    /// and what the run spent is recorded on the handed-back attempt — also when the
    /// hand-back is stale ([`Error::LeaseLost`]).
    #[instrument(name = "queue.hand_back_reported", skip_all, fields(job.id = h.lease.job_id, node.id = %node), err(level = "info"))]
    pub async fn hand_back_reported(&self, node: &str, h: &JobHandBack) -> Result<(), Error> {
        let back = self.hand_back_until(node, h.lease, h.not_before).await;
        if matches!(back, Ok(()) | Err(Error::LeaseLost(_))) {
            self.record_spend(node, h.lease, &h.metrics).await?;
        }
        back
    }

    /// A run the node stopped because the coordinator said its lease is gone: its spend is
    /// recorded on the attempt that ended the lease. Should the lease still be `node`'s
    /// current one (the renewal was refused at the hard deadline and the reaper has not
    /// ended it yet), the run ends here as a failed attempt — `deadline` past the deadline,
    /// `internal` before it — with the stop's metrics: the node runs it no more.
    /// [`Error::LeaseLost`] when no attempt of `node`'s has the lease. Idempotent.
    #[instrument(name = "queue.record_stopped", skip_all, fields(job.id = s.lease.job_id, node.id = %node), err(level = "info"))]
    pub async fn record_stopped(&self, node: &str, s: &JobStopped) -> Result<(), Error> {
        // Twice at most: a lease ended by someone else between the two statements has its
        // attempt row on the second look.
        for _ in 0..2 {
            if self.spend_one(node, s.lease, &s.metrics).await?.matched {
                return Ok(());
            }
            let past_deadline = sqlx::query_scalar!(
                r#"select deadline_at <= coalesce($4::timestamptz, clock_timestamp()) as "past!"
                   from job
                   where job_id = $1 and state = 'running' and lease_epoch = $2 and node_id = $3"#,
                s.lease.job_id,
                s.lease.epoch,
                node,
                self.now,
            )
            .fetch_optional(&self.pool)
            .await?;
            let Some(past_deadline) = past_deadline else {
                return Err(Error::LeaseLost(s.lease));
            };
            let (class, why) = if past_deadline {
                (ErrorClass::Deadline, "the job ran past its hard deadline")
            } else {
                (ErrorClass::Internal, "the node stopped the run")
            };
            let mut failure = JobFailure::new(s.lease, class, format!("{why} ({})", s.reason));
            failure.metrics = s.metrics;
            match self.fail_if_leased(node, &failure).await {
                Ok(_) => return Ok(()),
                Err(Error::LeaseLost(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::LeaseLost(s.lease))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_are_positive_and_finite() {
        assert!(check_cap(None).is_ok());
        assert!(check_cap(Some(0.01)).is_ok());
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e9] {
            assert!(check_cap(Some(bad)).is_err(), "{bad}");
        }
    }
}
