//! Per-port counters of the gateway: lock-free atomics updated by connection tasks, read
//! as a [`PortStats`] snapshot (counters are independent; a snapshot is not atomic across
//! fields, which no test relies on).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// Live counters of one port.
#[derive(Debug, Default)]
pub(crate) struct PortCounters {
    pub(crate) connections: AtomicU64,
    pub(crate) requests: AtomicU64,
    pub(crate) refused: AtomicU64,
    pub(crate) auth_failures: AtomicU64,
    pub(crate) bad_requests: AtomicU64,
    pub(crate) forwarded: AtomicU64,
    pub(crate) tunnels: AtomicU64,
    pub(crate) upstream_errors: AtomicU64,
    pub(crate) bytes_from_client: AtomicU64,
    pub(crate) bytes_to_client: AtomicU64,
}

impl PortCounters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self, label: &str, addr: SocketAddr) -> PortStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        PortStats {
            label: label.to_owned(),
            addr,
            connections: get(&self.connections),
            requests: get(&self.requests),
            refused: get(&self.refused),
            auth_failures: get(&self.auth_failures),
            bad_requests: get(&self.bad_requests),
            forwarded: get(&self.forwarded),
            tunnels: get(&self.tunnels),
            upstream_errors: get(&self.upstream_errors),
            bytes_from_client: get(&self.bytes_from_client),
            bytes_to_client: get(&self.bytes_to_client),
        }
    }
}

/// A snapshot of one port's counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortStats {
    /// Exit IP label, e.g. `exit-01`.
    pub label: String,
    /// Bound address of the port.
    pub addr: SocketAddr,
    /// Client connections accepted.
    pub connections: u64,
    /// Requests received (CONNECT included), whatever the outcome.
    pub requests: u64,
    /// Requests refused with 403 (target not allowed).
    pub refused: u64,
    /// Requests answered 407 (missing or wrong credentials).
    pub auth_failures: u64,
    /// Requests answered 400 (not a proxy request).
    pub bad_requests: u64,
    /// Absolute-form requests forwarded upstream.
    pub forwarded: u64,
    /// CONNECT tunnels established.
    pub tunnels: u64,
    /// Upstream connection or protocol failures (answered 502).
    pub upstream_errors: u64,
    /// Bytes read from clients (headers, bodies, tunnel traffic).
    pub bytes_from_client: u64,
    /// Bytes written to clients (headers, bodies, tunnel traffic).
    pub bytes_to_client: u64,
}
