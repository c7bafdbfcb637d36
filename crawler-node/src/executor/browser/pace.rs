//! Per-IP pacing across the executor's slots (DESIGN §5 "Per-IP pacing"): when each exit
//! IP (proxy port) may start its next page load, and which ports the slots hold now.
//!
//! One book per executor, shared by every slot: a port given back by one slot and granted
//! to another (or to the next job of the same slot) is paced from its last page, whichever
//! slot loaded it. Invariants:
//! - a port's next start is drawn once, when its page load starts (the gap plus up to half
//!   of it again at random, measured from start to start: what the mall sees), so every slot that looks at the port sees the same time;
//! - a port is held from its IP session's start to its end on this node (the session owns
//!   the [`HeldPort`] [`PortBook::hold`] gave it), so the book can tell which of the ports
//!   it knows the ledger could grant now;
//! - a port the book does not know may start a page now.
//!
//! Plain data behind a std mutex, never held across an `.await`; nothing is persisted (a
//! restarted node knows no port's last page).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::time::Instant;

/// Added to every gap: a request's way from the browser to the mall takes a varying time,
/// and the mall must never see two page loads of one IP closer than the gap.
const ARRIVAL_MARGIN: Duration = Duration::from_millis(30);

#[derive(Debug, Default, Clone, Copy)]
struct PortEntry {
    /// The next page load on this port starts no earlier.
    next: Option<Instant>,
    /// IP sessions of this node on the port now (the ledger grants a port once; a test's
    /// proxy source may not).
    held: u32,
}

/// See the module docs.
#[derive(Debug)]
pub(super) struct PortBook {
    gap: Duration,
    ports: Mutex<HashMap<u16, PortEntry>>,
    /// How long the last ask of the ledger took (see [`PortBook::asked`]).
    ask: Mutex<Duration>,
}

impl PortBook {
    pub(super) fn new(gap: Duration) -> Self {
        Self {
            gap,
            ports: Mutex::new(HashMap::new()),
            ask: Mutex::new(Duration::ZERO),
        }
    }

    /// An ask of the ledger for another port took `took`.
    pub(super) fn asked(&self, took: Duration) {
        *self
            .ask
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = took;
    }

    /// Whether asking the ledger for a port free sooner than one free at `until` can still
    /// pay: not when the wait left is shorter than the last ask took.
    pub(super) fn worth_asking(&self, until: Instant) -> bool {
        let ask = *self
            .ask
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        until.saturating_duration_since(Instant::now()) > ask
    }

    fn with<T>(&self, f: impl FnOnce(&mut HashMap<u16, PortEntry>) -> T) -> T {
        let mut ports = self
            .ports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut ports)
    }

    /// Whether page loads are paced at all (a gap of 0: not).
    pub(super) fn pacing(&self) -> bool {
        !self.gap.is_zero()
    }

    /// When `port` may start its next page load; `None`: now.
    pub(super) fn ready_at(&self, port: u16) -> Option<Instant> {
        let now = Instant::now();
        self.with(|ports| ports.get(&port).and_then(|e| e.next))
            .filter(|&next| next > now)
    }

    /// A page load on `port` starts now: its next one starts no earlier than the gap plus
    /// up to half of it again at random (and [`ARRIVAL_MARGIN`]) from now.
    pub(super) fn started(&self, port: u16) {
        if !self.pacing() {
            return;
        }
        let jitter = self.gap.mul_f64(fastrand::f64() * 0.5);
        let next = Instant::now() + self.gap + ARRIVAL_MARGIN + jitter;
        self.with(|ports| ports.entry(port).or_default().next = Some(next));
    }

    /// An IP session on `port` starts on this node; it holds the port until the returned
    /// guard is dropped.
    pub(super) fn hold(self: &Arc<Self>, port: u16) -> HeldPort {
        self.with(|ports| ports.entry(port).or_default().held += 1);
        HeldPort {
            book: Arc::clone(self),
            port,
        }
    }

    /// Whether a port this node knows and holds no session on may start a page before
    /// `until`: then the ledger has a port free sooner than one that waits until then.
    pub(super) fn free_sooner_than(&self, until: Instant) -> bool {
        self.with(|ports| {
            ports
                .values()
                .any(|e| e.held == 0 && e.next.is_none_or(|next| next < until))
        })
    }
}

/// An IP session's hold on its port in the [`PortBook`]; dropping it lets the port go.
#[derive(Debug)]
pub(super) struct HeldPort {
    book: Arc<PortBook>,
    port: u16,
}

impl Drop for HeldPort {
    fn drop(&mut self) {
        self.book.with(|ports| {
            if let Some(entry) = ports.get_mut(&self.port) {
                entry.held = entry.held.saturating_sub(1);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_port_is_paced_from_its_last_start_whoever_loaded_it() {
        let book = Arc::new(PortBook::new(Duration::from_secs(2)));
        assert_eq!(book.ready_at(8001), None);
        let before = Instant::now();
        let held = book.hold(8001);
        book.started(8001);
        let next = book.ready_at(8001).expect("inside its gap");
        assert!(next >= before + Duration::from_secs(2), "{next:?}");
        assert!(next <= Instant::now() + Duration::from_secs(3), "{next:?}");
        // Held ports are not free for another slot; a port let go is, once its gap ends.
        assert!(!book.free_sooner_than(next + Duration::from_secs(10)));
        drop(held);
        assert!(!book.free_sooner_than(next));
        assert!(book.free_sooner_than(next + Duration::from_millis(1)));
        // A port the book knows nothing of is ready now.
        assert_eq!(book.ready_at(8002), None);
    }

    #[tokio::test]
    async fn without_a_gap_nothing_is_paced() {
        let book = Arc::new(PortBook::new(Duration::ZERO));
        let _held = book.hold(8001);
        book.started(8001);
        assert!(!book.pacing());
        assert_eq!(book.ready_at(8001), None);
    }
}
