//! What this replica saw of the database's availability, so that time in which it could
//! not write does not count against a lease or a lost node's grace period (DESIGN §2
//! "Database outages").
//!
//! The reaper reports every pass: a pass that failed, or one whose statements waited
//! longer than the stall limit (a table lock, a database that hangs), marks the database
//! down; the next prompt pass marks it back. Rules that time leases ask [`Outages::hold`]
//! how much longer to wait: nodes could not renew while the database was away, and they
//! need a lease TTL (or a grace period) from its return to reconnect and renew.

use std::{
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

/// Shared by the reaper, the grace timers and the ops figures (a clone of the queue shares
/// it).
#[derive(Debug, Default)]
pub struct Outages(Mutex<State>);

#[derive(Debug, Default, Clone, Copy)]
struct State {
    /// Set while the database cannot be reached (or stalls).
    down_since: Option<Instant>,
    /// When it last came back.
    back_at: Option<Instant>,
}

impl Outages {
    /// A database call failed, or waited so long it was as good as failed.
    pub fn failed(&self) {
        let mut s = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        s.down_since.get_or_insert_with(Instant::now);
    }

    /// A database call went through promptly; true when this ends an outage.
    pub fn reached(&self) -> bool {
        let mut s = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if s.down_since.take().is_some() {
            s.back_at = Some(Instant::now());
            return true;
        }
        false
    }

    /// How much longer a rule that gives nodes `window` to act must wait: the whole window
    /// while the database is down, what is left of it after the database came back, `None`
    /// once it has passed (or when nothing went wrong).
    pub fn hold(&self, window: Duration) -> Option<Duration> {
        let s = *self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if s.down_since.is_some() {
            return Some(window);
        }
        window
            .checked_sub(s.back_at?.elapsed())
            .filter(|left| !left.is_zero())
    }

    /// Whether the database is down as far as this replica knows.
    pub fn is_down(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .down_since
            .is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_counts_from_the_databases_return() {
        let o = Outages::default();
        let window = Duration::from_secs(30);
        assert_eq!(o.hold(window), None, "nothing went wrong");
        assert!(!o.reached(), "nothing to end");

        o.failed();
        o.failed();
        assert!(o.is_down());
        assert_eq!(o.hold(window), Some(window), "down: the whole window");

        assert!(o.reached());
        let left = o.hold(window).expect("just back: still holding");
        assert!(left <= window && left > Duration::from_secs(29), "{left:?}");
        assert_eq!(o.hold(Duration::ZERO), None);
        assert!(!o.reached(), "already back");
    }
}
