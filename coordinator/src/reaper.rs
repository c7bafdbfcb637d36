//! The reaper loop: ends runs whose lease expired or whose hard deadline passed, so a hung
//! browser on a live node still ends (DESIGN §2). Safe to run on every replica at once: the
//! reap statement skips rows another reaper holds. (Price history needs no sweep: the
//! statement that finishes a product's last job writes its entry, see migrations/0013.)
//!
//! It is also this replica's judge of database outages ([`crate::queue::Outages`]): a pass
//! that fails or stalls marks the database down, the next prompt one marks it back, and
//! expired leases are left alone until a lease TTL has passed since then, so that nodes
//! which could not renew while it was away get to reconnect and renew first.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::queue::Queue;

/// Reaps every `interval` until cancelled. A failed pass is logged and retried next tick.
pub async fn run(queue: Queue, interval: Duration, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        let outages = queue.outages();
        let ttl = queue.config().lease_ttl;
        loop {
            let hold = outages.hold(ttl);
            let was_down = outages.is_down();
            let pass = queue.reap_pass(hold.is_none()).await;
            if was_down && !outages.is_down() {
                info!(
                    ?ttl,
                    "database reachable again; expired leases wait a lease TTL for their nodes to renew"
                );
            } else if !was_down && outages.is_down() {
                warn!("database unreachable; no lease expires until it is back for a lease TTL");
            } else if hold.is_none() && outages.hold(ttl).is_some() {
                warn!(
                    ?ttl,
                    "database stalled; expired leases wait a lease TTL for their nodes to renew"
                );
            }
            match pass {
                Ok(reaped) => {
                    if let Some(left) = hold {
                        debug!(?left, "holding expired leases after a database outage");
                    }
                    for job in &reaped {
                        info!(job.id = job.job_id, state = ?job.state, class = job.class.as_str(), "reaped job");
                    }
                    if reaped.len() < queue.config().reap_batch as usize {
                        break;
                    }
                }
                Err(e) => {
                    warn!(error = %e, "reap failed");
                    break;
                }
            }
        }
    }
}
