//! Credit and Heartbeat: the node's free slots and the leases it still runs. Liveness is
//! the stream itself (any frame); a heartbeat renews leases and ports and refreshes the
//! node's `node_session` row. While the database cannot write (a [`crate::db::Fault`]) a
//! heartbeat is still answered, without extensions or cancels: nothing is renewed, and
//! nothing is lost for it (no lease expires while the database cannot write).

use std::time::Duration;

use lps_proto::{
    model,
    pb::{self, coordinator_message::Body as Out},
};
use tokio::time::Instant;
use tonic::Status;
use tracing::{debug, warn};

use super::NodeStream;
use crate::node_session;

/// How often a heartbeat refreshes the node_session row when nothing else changed.
const NODE_ROW_REFRESH: Duration = Duration::from_secs(30);

impl NodeStream {
    /// The node's free slots now (never more than its Hello's slots).
    pub(super) fn credit(&mut self, credit: model::Credit) {
        self.announced_free = credit.free_slots.min(self.slots);
    }

    /// Renews the leases (and proxy ports) the node still holds, answers with the renewed
    /// ones and the jobs to stop, refreshes the node's row (at most every 30 s unless its
    /// free slots changed) and repeats or starts a drain.
    pub(super) async fn heartbeat(&mut self, hb: model::Heartbeat) -> Result<(), Status> {
        self.announced_free = hb.free_slots.min(self.slots);
        let leases = hb.leases();
        // Each run's bytes so far: what it is charged should its node vanish.
        let progress: Vec<_> = hb
            .running
            .iter()
            .map(|p| (p.lease, Some(p.bytes)))
            .collect();
        let renewed = match self.d.queue.renew_reporting(&self.node_id, &progress).await {
            Ok(renewed) => renewed,
            Err(e) => {
                let status = crate::error::status(e);
                if !crate::error::is_outage(&status) {
                    return Err(status);
                }
                warn!(
                    message = status.message(),
                    "heartbeat not written; answered without renewals"
                );
                return self
                    .send(Out::HeartbeatAck(pb::HeartbeatAck::default()))
                    .await;
            }
        };
        let cancel: Vec<i64> = leases
            .iter()
            .filter(|l| !renewed.iter().any(|r| r.job_id == l.job_id))
            .map(|l| l.job_id)
            .collect();
        for job_id in &cancel {
            self.held.remove(job_id);
        }
        for lease in &leases {
            if let Some(held) = self.held.get_mut(&lease.job_id)
                && held.epoch == lease.epoch
            {
                held.confirmed = true;
            }
        }
        if let Some(ledger) = &self.d.ledger
            && !self.ports.is_empty()
        {
            let ports: Vec<u16> = self.ports.iter().copied().collect();
            match ledger.renew(&self.node_id, &ports).await {
                // A port whose lease ran out is no longer the node's; the node's next release
                // of it is recorded but changes nothing.
                Ok(renewed) => self.ports.retain(|p| renewed.iter().any(|r| r.port == *p)),
                Err(e) => {
                    let status = crate::error::status(e);
                    if !crate::error::is_outage(&status) {
                        return Err(status);
                    }
                    warn!(message = status.message(), "proxy ports not renewed");
                }
            }
        }
        let ack = pb::HeartbeatAck {
            extended: renewed
                .iter()
                .map(|r| pb::LeaseExtension {
                    job_id: r.job_id,
                    lease_until: Some(model::timestamp_to_pb(r.lease_until)),
                })
                .collect(),
            cancel,
        };

        // NB: liveness is the stream itself; the row is for ListNodes and the ops figures,
        // so it is written when the free slots change or every 30 s, not on every heartbeat.
        // The write also reads whether an operator asked for a drain: one whose control
        // message reached no stream here still arrives within that refresh.
        let mut drain_requested = false;
        if hb.free_slots != self.recorded_free || self.recorded_at.elapsed() >= NODE_ROW_REFRESH {
            match node_session::refresh(self.d.pool(), &self.node_id, self.stream_id, hb.free_slots)
                .await
            {
                Ok(standing) => {
                    drain_requested = standing.draining;
                    // NB: an operator may lift it; a quarantine that began meanwhile shows.
                    self.quarantined_until = standing.quarantined_until;
                    self.recorded_free = hb.free_slots;
                    self.recorded_at = Instant::now();
                }
                Err(e) => {
                    let status = crate::error::status(crate::error::Error::from(e));
                    if !crate::error::is_outage(&status) {
                        return Err(status);
                    }
                    // NB: tried again on the next heartbeat (recorded_* unchanged).
                    debug!(message = status.message(), "node row not refreshed");
                }
            }
        }
        self.send(Out::HeartbeatAck(ack)).await?;
        if self.draining {
            self.send(Out::Drain(self.drain_message())).await
        } else {
            if drain_requested {
                self.start_drain("operator request").await;
            }
            Ok(())
        }
    }
}
