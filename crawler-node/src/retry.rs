//! When the node stream ends: retry or give up, and how long to wait before the next try.
//!
//! [`decide`] is the whole decision table, an exhaustive `match` on [`tonic::Code`] so a
//! new code cannot slip through unclassified. Fatal codes mean "this node is
//! misconfigured or speaks the wrong protocol": retrying cannot fix it, so the node exits
//! non-zero with one clear line. Everything else is a coordinator that is restarting,
//! overloaded or unreachable, retried with [`Backoff`] under the total
//! `LPS_RECONNECT_DEADLINE` (enforced by the link). Pure logic, no I/O.

use std::time::Duration;

use tonic::Code;

/// First reconnect delay.
pub const BACKOFF_BASE: Duration = Duration::from_millis(200);
/// Longest reconnect delay.
pub const BACKOFF_CAP: Duration = Duration::from_secs(10);

/// What to do after the stream ended with a status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Reconnect after a backoff.
    Retry,
    /// Stop the node: retrying cannot help.
    Fatal,
}

/// The reconnect decision for a status code.
pub fn decide(code: Code) -> Decision {
    match code {
        // Our token, our identity, our Hello or our protocol version is wrong, or the
        // address is not a coordinator: the same request fails the same way again.
        Code::Unauthenticated
        | Code::PermissionDenied
        | Code::InvalidArgument
        | Code::FailedPrecondition
        | Code::Unimplemented => Decision::Fatal,
        // The coordinator went away, restarted, is overloaded, or closed the stream for a
        // reason of its own (OK without a Goodbye of ours); or the transport broke
        // (tonic reports those as Unknown/Internal/Unavailable). `AlreadyExists` is another
        // live node process with our node id: it may be our own previous process whose
        // stream the coordinator has not seen end yet (which ends by itself), so retry —
        // bounded by the reconnect deadline, the status naming the clash each time.
        // `NotFound` and `OutOfRange` are not used by NodeService: nothing says they are
        // permanent, so they get the benefit of the doubt (bounded by the deadline).
        Code::Ok
        | Code::NotFound
        | Code::OutOfRange
        | Code::Cancelled
        | Code::Unknown
        | Code::DeadlineExceeded
        | Code::AlreadyExists
        | Code::ResourceExhausted
        | Code::Aborted
        | Code::Internal
        | Code::Unavailable
        | Code::DataLoss => Decision::Retry,
    }
}

/// An operator hint for a fatal code, for the last log line.
pub fn hint(code: Code) -> &'static str {
    match code {
        Code::Unauthenticated | Code::PermissionDenied => {
            "check LPS_NODE_TOKEN (and LPS_TLS_CERT/LPS_TLS_KEY where the coordinator requires client certificates)"
        }
        Code::InvalidArgument => "check LPS_NODE_ID, LPS_NODE_SLOTS and LPS_MALLS",
        Code::FailedPrecondition => "the coordinator speaks another protocol version",
        Code::Unimplemented => "check LPS_COORDINATOR_URL: it does not serve lps.v1.NodeService",
        _ => "",
    }
}

/// Exponential backoff with jitter: the n-th delay is drawn from
/// `[d/2, d]` with `d = min(cap, base·2^(n-1))`, so many nodes that lost one coordinator
/// do not reconnect in lockstep.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    failures: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new(BACKOFF_BASE, BACKOFF_CAP)
    }
}

impl Backoff {
    pub fn new(base: Duration, cap: Duration) -> Self {
        Self {
            base,
            cap: cap.max(base),
            failures: 0,
        }
    }

    /// The delay before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        let exp = self.failures.min(20);
        self.failures = self.failures.saturating_add(1);
        let full = self.base.saturating_mul(1 << exp).min(self.cap);
        let half = full / 2;
        let jitter = fastrand::u64(0..=u64::try_from(half.as_millis()).unwrap_or(u64::MAX));
        half + Duration::from_millis(jitter)
    }

    /// A connection worked: start from the base again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decision_table() {
        let fatal = [
            Code::Unauthenticated,
            Code::PermissionDenied,
            Code::InvalidArgument,
            Code::FailedPrecondition,
            Code::Unimplemented,
        ];
        let retry = [
            Code::Ok,
            Code::NotFound,
            Code::OutOfRange,
            Code::Cancelled,
            Code::Unknown,
            Code::DeadlineExceeded,
            Code::AlreadyExists,
            Code::ResourceExhausted,
            Code::Aborted,
            Code::Internal,
            Code::Unavailable,
            Code::DataLoss,
        ];
        for code in fatal {
            assert_eq!(decide(code), Decision::Fatal, "{code:?}");
            assert!(!hint(code).is_empty(), "{code:?} needs a hint");
        }
        for code in retry {
            assert_eq!(decide(code), Decision::Retry, "{code:?}");
        }
        // Every code is in exactly one list (17 gRPC codes).
        assert_eq!(fatal.len() + retry.len(), 17);
    }

    #[test]
    fn backoff_grows_with_jitter_up_to_the_cap() {
        let base = Duration::from_millis(100);
        let cap = Duration::from_millis(1_000);
        let mut backoff = Backoff::new(base, cap);
        let want_full = [100, 200, 400, 800, 1_000, 1_000, 1_000];
        for full in want_full {
            let full = Duration::from_millis(full);
            let delay = backoff.next_delay();
            assert!(
                delay >= full / 2 && delay <= full,
                "{delay:?} not within [{:?}, {full:?}]",
                full / 2
            );
        }
        backoff.reset();
        assert!(backoff.next_delay() <= base);
        // Far past the cap: no overflow.
        for _ in 0..100 {
            assert!(backoff.next_delay() <= cap);
        }
    }
}
