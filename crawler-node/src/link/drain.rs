//! Draining the node: no new jobs, running ones finish until the hand-back time, the
//! executor gives back what it holds between jobs, every report is acked, Goodbye.
//!
//! Part of the link task (these are `Link` methods and state); see the lifecycle in the
//! module docs of `link`. Cancellation: `executor_drained` and `say_goodbye` wait on
//! cancel-safe things only (a `JoinHandle`, the inbound stream under a timeout).

use std::time::Duration;

use chrono::Utc;
use futures::StreamExt as _;
use lps_proto::{
    model::timestamp_from_pb,
    pb::{self, node_message::Body as Out},
};
use tokio::time::Instant;
use tracing::{Instrument as _, debug, info, info_span, warn};

use super::{Link, Stream};
use crate::state::NodeError;

/// After Goodbye, wait at most this long for the coordinator to end the stream.
const GOODBYE_WAIT: Duration = Duration::from_secs(5);
/// The most of a drain kept for acks after handing jobs back.
const MAX_ACK_RESERVE: Duration = Duration::from_secs(10);

/// A drain in progress.
pub(super) struct Drain {
    pub(super) reason: String,
    pub(super) hand_back_at: Instant,
    pub(super) deadline: Instant,
    pub(super) handed_back: bool,
}

/// The executor's drain: not started, running, or done.
pub(super) enum ExecutorDrain {
    NotStarted,
    Running(tokio::task::JoinHandle<()>),
    Done,
}

/// The part of a drain kept for handing back and acks: a quarter, at most 10 s.
pub(super) fn ack_reserve(drain: Duration) -> Duration {
    (drain / 4).min(MAX_ACK_RESERVE)
}

/// Completes once when the executor's drain task has ended. Cancel-safe.
pub(super) async fn executor_drained(state: &mut ExecutorDrain) {
    match state {
        ExecutorDrain::Running(task) => {
            if let Err(err) = task.await {
                warn!(error = %err, "the executor's drain failed");
            }
            *state = ExecutorDrain::Done;
        }
        ExecutorDrain::NotStarted | ExecutorDrain::Done => std::future::pending().await,
    }
}

impl Link {
    /// Starts the executor's drain once draining and no job runs.
    pub(super) fn maybe_drain_executor(&mut self) {
        if self.drain.is_some()
            && self.jobs.running() == 0
            && matches!(self.executor_drain, ExecutorDrain::NotStarted)
        {
            let executor = self.executor.clone();
            let task = tokio::spawn(
                async move { executor.drain().await }.instrument(info_span!("node.executor_drain")),
            );
            self.executor_drain = ExecutorDrain::Running(task);
        }
    }

    pub(super) fn start_drain(&mut self, reason: String, deadline: Option<prost_types::Timestamp>) {
        let now = Instant::now();
        let mut budget = self.config.drain_timeout;
        if let Some(at) = deadline.and_then(|t| timestamp_from_pb("deadline", t).ok()) {
            budget = budget.min((at - Utc::now()).to_std().unwrap_or_default());
        }
        let deadline = now + budget;
        info!(
            reason = %reason,
            timeout = ?budget,
            running_jobs = self.jobs.running(),
            unacked_reports = self.outbox.len(),
            "draining: taking no new jobs"
        );
        self.drain = Some(Drain {
            reason,
            hand_back_at: deadline - ack_reserve(budget),
            deadline,
            handed_back: false,
        });
        self.send_credit();
    }

    pub(super) fn hand_back_all(&mut self) {
        let reports = self
            .jobs
            .hand_back_all("drain timeout: the node is stopping");
        if !reports.is_empty() {
            warn!(
                jobs = reports.len(),
                "handing back jobs that did not finish within the drain"
            );
        }
        for report in reports {
            self.report(report);
        }
        if let Some(drain) = &mut self.drain {
            drain.handed_back = true;
        }
    }

    pub(super) fn drain_is_complete(&self) -> bool {
        self.drain.is_some()
            && self.jobs.running() == 0
            && matches!(self.executor_drain, ExecutorDrain::Done)
            && self.outbox.is_empty()
    }

    pub(super) async fn drain_expired(&mut self) -> Result<(), NodeError> {
        let unacked_reports = self.outbox.len();
        let running_jobs = self.jobs.running();
        warn!(
            unacked_reports,
            running_jobs, "drain deadline passed before everything was handed over"
        );
        self.say_goodbye("drain deadline passed").await;
        Err(NodeError::DrainIncomplete {
            unacked_reports,
            running_jobs,
        })
    }

    /// Sends Goodbye and half-closes, then waits briefly for the coordinator to end the
    /// stream. Nothing to do when disconnected.
    pub(super) async fn say_goodbye(&mut self, why: &str) {
        let Some(out) = self.out.take() else {
            return;
        };
        let reason = match &self.drain {
            Some(drain) => format!("{why} ({})", drain.reason),
            None => why.to_owned(),
        };
        let _ = out.send(pb::NodeMessage {
            body: Some(Out::Goodbye(pb::Goodbye {
                reason: reason.clone(),
            })),
        });
        // NB: dropping the only sender ends the request stream: that is the half-close.
        drop(out);
        info!(reason = %reason, "goodbye sent; stream half-closed");
        let deadline = self.drain.as_ref().map_or(Instant::now(), |d| d.deadline);
        let until = (Instant::now() + GOODBYE_WAIT).min(deadline.max(Instant::now()));
        if let Stream::Connected(conn) = &mut self.stream {
            let closed = tokio::time::timeout_at(until, async {
                while let Some(Ok(msg)) = conn.inbound.next().await {
                    debug!(?msg, "message after goodbye ignored");
                }
            })
            .await;
            if closed.is_err() {
                debug!("the coordinator did not end the stream after goodbye");
            }
        }
        self.stream = Stream::Waiting {
            at: Instant::now() + Duration::from_secs(86_400),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ack_reserve_is_a_quarter_up_to_ten_seconds() {
        assert_eq!(ack_reserve(Duration::from_secs(240)), MAX_ACK_RESERVE);
        assert_eq!(
            ack_reserve(Duration::from_secs(2)),
            Duration::from_millis(500)
        );
    }
}
