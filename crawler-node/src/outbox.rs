//! The outbox: every report the node owes the coordinator, kept until it is acknowledged.
//!
//! A report (job result, failure, hand-back, stop, proxy release with its IP session's end,
//! block event) gets a `report_seq` when it is pushed: monotonic per [`Outbox`], starting at 1,
//! never reused. The outbox lives as long as the node process (across reconnects), so a seq
//! names one report for the whole process. Invariants:
//! - a report leaves only on an `Ack` with its seq (any status: `APPLIED`, or `STALE` /
//!   `REJECTED`, which are logged at WARN because resending cannot help). A report for a job
//!   the coordinator calls `lost` after a reconnect stays too: it is acked `STALE`, and the
//!   coordinator still records what the run spent on the attempt that ended its lease;
//! - a `Stopped` report goes only to a coordinator that takes them
//!   ([`Outbox::drop_stopped`] after a Welcome without `stopped_reports`);
//! - [`Outbox::pending`] yields reports in seq order, which is the order they are resent in
//!   after a reconnect's Welcome.
//!
//! Nothing is persisted: a node that dies loses its outbox, and the coordinator reclaims
//! the jobs (DESIGN §2, "Nodes are stateless"). Plain data, no I/O, no locks: the link
//! task owns it.

use std::collections::BTreeMap;

use lps_proto::{
    model::{JobFailure, JobHandBack, JobResult, JobStopped, Lease, ProxyRelease},
    pb,
};
use tracing::{debug, warn};

use lps_proto::model::{BlockEvent, SessionEnd};

/// Something the node reports and the coordinator acknowledges.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    /// The job finished: offers or a verified "not found".
    Result(JobResult),
    /// The attempt failed.
    Failure(JobFailure),
    /// The node gives the job back unfinished (draining, or it could not take it), with what
    /// the run spent so far.
    HandBack(JobHandBack),
    /// The node stopped the run on the coordinator's word (its lease is gone): what it spent.
    Stopped(JobStopped),
    /// A proxy port goes back to the ledger; `session` is its IP session's end.
    ProxyRelease {
        port: u16,
        /// The grant's lease id (`proxy::Grant::lease_id`).
        lease_id: i64,
        session: SessionEnd,
    },
    /// A mall blocked a page.
    Block(BlockEvent),
}

impl Report {
    /// The lease the report speaks for (`None` for reports about ports).
    pub fn lease(&self) -> Option<Lease> {
        match self {
            Self::Result(r) => Some(r.lease),
            Self::Failure(f) => Some(f.lease),
            Self::HandBack(h) => Some(h.lease),
            Self::Stopped(s) => Some(s.lease),
            Self::ProxyRelease { .. } | Self::Block(_) => None,
        }
    }

    /// The job the report is about, if any (for logs).
    pub fn job_id(&self) -> i64 {
        match self {
            Self::Result(r) => r.lease.job_id,
            Self::Failure(f) => f.lease.job_id,
            Self::HandBack(h) => h.lease.job_id,
            Self::Stopped(s) => s.lease.job_id,
            Self::ProxyRelease { session, .. } => session.stats.job_id.unwrap_or(0),
            Self::Block(event) => event.job_id.unwrap_or(0),
        }
    }

    /// A short name for logs: `result`, `failure`, `hand_back`, `stopped`, `proxy_release`,
    /// `block_event`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Result(_) => "result",
            Self::Failure(_) => "failure",
            Self::HandBack(_) => "hand_back",
            Self::Stopped(_) => "stopped",
            Self::ProxyRelease { .. } => "proxy_release",
            Self::Block(_) => "block_event",
        }
    }

    /// The wire message carrying this report as `seq`.
    pub fn to_message(&self, seq: u64) -> pb::NodeMessage {
        use pb::node_message::Body;
        let body = match self {
            Self::Result(r) => Body::Result(pb::JobResult {
                report_seq: seq,
                job_id: r.lease.job_id,
                lease_epoch: r.lease.epoch,
                outcome: pb::Outcome::from(r.outcome) as i32,
                offers: r.offers.iter().map(pb::Offer::from).collect(),
                rounds: r.rounds.iter().map(pb::RoundReport::from).collect(),
                metrics: Some(pb::JobMetrics::from(&r.metrics)),
                judge_version: r.judged_with.judge_version,
                vocabulary_revision: r.judged_with.vocabulary_revision.clone(),
            }),
            Self::Failure(f) => Body::Failure(pb::JobFailure {
                report_seq: seq,
                job_id: f.lease.job_id,
                lease_epoch: f.lease.epoch,
                class: pb::ErrorClass::from(f.class) as i32,
                message: f.message.clone(),
                metrics: Some(pb::JobMetrics::from(&f.metrics)),
                evidence: f
                    .evidence
                    .as_ref()
                    .map(|e| Box::new(pb::PageEvidence::from(e))),
            }),
            Self::HandBack(h) => Body::HandBack(h.to_pb(seq)),
            Self::Stopped(s) => Body::Stopped(s.to_pb(seq)),
            Self::ProxyRelease {
                port,
                lease_id,
                session,
            } => Body::ProxyRelease(pb::ProxyRelease::from(&ProxyRelease {
                report_seq: seq,
                port: *port,
                reason: session.reason,
                session: session.stats.clone(),
                lease_id: (*lease_id > 0).then_some(*lease_id),
            })),
            Self::Block(event) => Body::BlockEvent(pb::BlockEvent::from(&BlockEvent {
                report_seq: seq,
                ..event.clone()
            })),
        };
        pb::NodeMessage { body: Some(body) }
    }
}

/// What an `Ack` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckOutcome {
    /// The report was committed and removed.
    Applied,
    /// The report was stale or rejected; removed anyway (resending cannot help).
    Discarded,
    /// No report with that seq is pending (a duplicate ack, or dropped already).
    Unknown,
}

/// Reports waiting for their `Ack`, by seq.
#[derive(Debug)]
pub struct Outbox {
    next_seq: u64,
    pending: BTreeMap<u64, Report>,
}

impl Default for Outbox {
    fn default() -> Self {
        Self::new()
    }
}

impl Outbox {
    pub fn new() -> Self {
        Self {
            next_seq: 1,
            pending: BTreeMap::new(),
        }
    }

    /// Keeps `report` until acked; returns its seq.
    pub fn push(&mut self, report: Report) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.pending.insert(seq, report);
        seq
    }

    pub fn get(&self, seq: u64) -> Option<&Report> {
        self.pending.get(&seq)
    }

    /// Applies an `Ack`: the report with that seq leaves the outbox whatever the status.
    pub fn ack(&mut self, ack: &pb::Ack) -> AckOutcome {
        let Some(report) = self.pending.remove(&ack.report_seq) else {
            debug!(report.seq = ack.report_seq, "ack for no pending report");
            return AckOutcome::Unknown;
        };
        let job_id = report.job_id();
        match pb::AckStatus::try_from(ack.status) {
            Ok(pb::AckStatus::Applied) => {
                debug!(
                    report.seq = ack.report_seq,
                    report.kind = report.kind(),
                    job.id = job_id,
                    "report acked"
                );
                AckOutcome::Applied
            }
            Ok(pb::AckStatus::Stale) => {
                warn!(
                    report.seq = ack.report_seq,
                    report.kind = report.kind(),
                    job.id = job_id,
                    reason = %ack.error,
                    "report was stale: the lease is no longer this node's"
                );
                AckOutcome::Discarded
            }
            Ok(pb::AckStatus::Rejected) => {
                warn!(
                    report.seq = ack.report_seq,
                    report.kind = report.kind(),
                    job.id = job_id,
                    reason = %ack.error,
                    "report rejected by the coordinator"
                );
                AckOutcome::Discarded
            }
            Ok(pb::AckStatus::Unspecified) | Err(_) => {
                warn!(
                    report.seq = ack.report_seq,
                    report.kind = report.kind(),
                    job.id = job_id,
                    status = ack.status,
                    reason = %ack.error,
                    "ack with an unknown status; report dropped"
                );
                AckOutcome::Discarded
            }
        }
    }

    /// Drops every `Stopped` report (the coordinator does not take them); returns how many.
    pub fn drop_stopped(&mut self) -> usize {
        let before = self.pending.len();
        self.pending.retain(|_, r| !matches!(r, Report::Stopped(_)));
        before - self.pending.len()
    }

    /// Pending reports in seq order (the resend order).
    pub fn pending(&self) -> impl Iterator<Item = (u64, &Report)> {
        self.pending.iter().map(|(seq, r)| (*seq, r))
    }

    /// The leases that pending reports speak for.
    pub fn leases(&self) -> impl Iterator<Item = Lease> + '_ {
        self.pending.values().filter_map(Report::lease)
    }

    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use lps_proto::model::{ErrorClass, JobFailure, JobMetrics};

    use super::*;

    fn lease(job_id: i64) -> Lease {
        Lease { job_id, epoch: 1 }
    }

    fn hand_back(job_id: i64) -> Report {
        Report::HandBack(JobHandBack::new(
            lease(job_id),
            "draining",
            JobMetrics::default(),
        ))
    }

    fn ack(seq: u64, status: pb::AckStatus) -> pb::Ack {
        pb::Ack {
            report_seq: seq,
            status: status as i32,
            error: "lease lost".into(),
        }
    }

    fn seqs(outbox: &Outbox) -> Vec<u64> {
        outbox.pending().map(|(seq, _)| seq).collect()
    }

    #[test]
    fn seqs_are_monotonic_from_one() {
        let mut outbox = Outbox::new();
        assert_eq!(outbox.push(hand_back(1)), 1);
        assert_eq!(outbox.push(hand_back(2)), 2);
        assert_eq!(
            outbox.ack(&ack(2, pb::AckStatus::Applied)),
            AckOutcome::Applied
        );
        // A seq is never reused, even after its report left.
        assert_eq!(outbox.push(hand_back(3)), 3);
    }

    #[test]
    fn resend_order_is_seq_order_without_acked_reports() {
        let mut outbox = Outbox::new();
        for job in 1..=5 {
            outbox.push(hand_back(job));
        }
        assert_eq!(
            outbox.ack(&ack(2, pb::AckStatus::Applied)),
            AckOutcome::Applied
        );
        assert_eq!(
            outbox.ack(&ack(4, pb::AckStatus::Applied)),
            AckOutcome::Applied
        );
        assert_eq!(seqs(&outbox), [1, 3, 5]);
        let jobs: Vec<i64> = outbox.pending().map(|(_, r)| r.job_id()).collect();
        assert_eq!(jobs, [1, 3, 5]);
        // Resending does not consume anything: the same reports come out again.
        assert_eq!(seqs(&outbox), [1, 3, 5]);
    }

    #[test]
    fn stale_and_rejected_acks_remove_the_report() {
        let mut outbox = Outbox::new();
        let a = outbox.push(hand_back(1));
        let b = outbox.push(hand_back(2));
        let c = outbox.push(hand_back(3));
        assert_eq!(
            outbox.ack(&ack(a, pb::AckStatus::Stale)),
            AckOutcome::Discarded
        );
        assert_eq!(
            outbox.ack(&ack(b, pb::AckStatus::Rejected)),
            AckOutcome::Discarded
        );
        assert_eq!(seqs(&outbox), [c]);
        assert_eq!(
            outbox.ack(&ack(a, pb::AckStatus::Applied)),
            AckOutcome::Unknown
        );
        assert_eq!(
            outbox.ack(&ack(99, pb::AckStatus::Applied)),
            AckOutcome::Unknown
        );
        assert_eq!(outbox.len(), 1);
    }

    #[test]
    fn stopped_reports_go_only_where_they_are_taken() {
        let mut outbox = Outbox::new();
        outbox.push(hand_back(1));
        outbox.push(Report::Stopped(JobStopped::new(
            lease(2),
            "cancelled",
            JobMetrics::default(),
        )));
        outbox.push(Report::Failure(JobFailure::new(
            lease(3),
            ErrorClass::Network,
            "x",
        )));
        assert_eq!(outbox.drop_stopped(), 1);
        assert_eq!(outbox.drop_stopped(), 0);
        assert_eq!(seqs(&outbox), [1, 3]);
    }

    #[test]
    fn messages_carry_the_seq_and_the_lease() {
        use pb::node_message::Body;
        let failure = Report::Failure(JobFailure::new(
            Lease {
                job_id: 9,
                epoch: 4,
            },
            ErrorClass::Deadline,
            "too slow",
        ));
        match failure.to_message(17).body {
            Some(Body::Failure(f)) => {
                assert_eq!((f.report_seq, f.job_id, f.lease_epoch), (17, 9, 4));
                assert_eq!(f.class, pb::ErrorClass::Deadline as i32);
                assert_eq!(f.message, "too slow");
            }
            other => panic!("want a failure, got {other:?}"),
        }
        match hand_back(3).to_message(5).body {
            Some(Body::HandBack(h)) => {
                assert_eq!((h.report_seq, h.job_id, h.lease_epoch), (5, 3, 1));
                assert_eq!(h.reason, "draining");
            }
            other => panic!("want a hand-back, got {other:?}"),
        }
        let spent = JobMetrics {
            bytes_in: 40_000,
            cost_usd: 0.0003,
            ..JobMetrics::default()
        };
        let stopped = Report::Stopped(JobStopped::new(lease(4), "cancelled", spent));
        match stopped.to_message(6).body {
            Some(Body::Stopped(s)) => {
                assert_eq!((s.report_seq, s.job_id, s.lease_epoch), (6, 4, 1));
                let m = s.metrics.unwrap();
                assert_eq!((m.bytes_in, m.cost_usd), (40_000, 0.0003));
            }
            other => panic!("want a stop, got {other:?}"),
        }
    }
}
