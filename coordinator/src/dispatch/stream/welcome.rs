//! Welcome: the node's row, its re-attached jobs and ports, and the `Welcome` message.

use lps_proto::{
    model::{self, Hello},
    pb::{self, coordinator_message::Body as Out},
};
use tonic::Status;
use tracing::{info, warn};

use super::{Held, NodeStream};
use crate::node_session;

impl NodeStream {
    /// Records the stream (its `node_session` row), re-attaches the jobs the node still runs (releasing the ones it
    /// forgot) and sends Welcome.
    pub(super) async fn welcome(&mut self, hello: &Hello) -> Result<(), Status> {
        let standing = self.register(hello).await?;
        let welcomed = self.welcome_registered(hello, standing).await;
        // NB: a node id seen for the first time leaves no row behind when its stream is not
        // welcomed (re-attaching failed, or the node went away first); a known node's row
        // keeps its history and is marked disconnected as the stream ends.
        if welcomed.is_err()
            && standing.new_row
            && let Err(e) =
                node_session::forget_unwelcomed(self.d.pool(), &self.node_id, self.stream_id).await
        {
            warn!(error = %e, "could not delete the row of a stream never welcomed");
        }
        welcomed
    }

    /// The node's row, or ALREADY_EXISTS while another node process holds the id.
    async fn register(&self, hello: &Hello) -> Result<node_session::Standing, Status> {
        let d = &self.d;
        let malls: Vec<String> = hello.malls.iter().map(|m| m.to_string()).collect();
        // NB: an operator's drain survives a reconnect of the same node process.
        let stream = node_session::Stream {
            node_id: &self.node_id,
            session_id: self.stream_id,
            coordinator_id: &d.config.coordinator_id,
            version: &hello.version,
            slots: hello.slots,
            malls: &malls,
            instance: hello.instance.as_deref(),
        };
        let registered = node_session::register(d.pool(), &stream)
            .await
            .map_err(|e| crate::error::status(crate::error::Error::from(e)))?;
        let Some(standing) = registered else {
            let live = node_session::holder(d.pool(), &self.node_id)
                .await
                .map_err(|e| crate::error::status(crate::error::Error::from(e)))?;
            let (coordinator, instance) = (live.coordinator_id, live.instance);
            warn!(live.coordinator = %coordinator, live.instance = %instance, "a second node process uses this node id (connected to another replica); refused");
            return Err(Status::already_exists(format!(
                "node id {:?} is already connected from another node process (instance {instance}, through coordinator {coordinator}); every node needs its own LPS_NODE_ID",
                self.node_id
            )));
        };
        Ok(standing)
    }

    /// Everything after the row: re-attached jobs and ports, then the Welcome.
    async fn welcome_registered(
        &mut self,
        hello: &Hello,
        standing: node_session::Standing,
    ) -> Result<(), Status> {
        let d = &self.d;
        let reattached = d
            .queue
            .reattach(&self.node_id, &hello.running)
            .await
            .map_err(crate::error::status)?;
        // Jobs leased to this node that it did not list are lost with its previous process.
        let released = d
            .queue
            .release_node(&self.node_id, &reattached)
            .await
            .map_err(crate::error::status)?;
        self.quarantined_until = standing.quarantined_until;
        if !released.is_empty() {
            info!(
                jobs = released.len(),
                "released jobs the node no longer runs"
            );
            // Its previous process dropped them: a node that keeps doing so is quarantined.
            if let Some(until) = d.record_drop(&self.node_id, released.len()).await {
                self.quarantined_until = Some(until);
            }
        }
        let lost: Vec<i64> = hello
            .running
            .iter()
            .filter(|l| !reattached.contains(l))
            .map(|l| l.job_id)
            .collect();
        if let Some(ledger) = &d.ledger
            && !hello.held_ports.is_empty()
        {
            let renewed = ledger
                .reattach(&self.node_id, &hello.held_ports)
                .await
                .map_err(crate::error::status)?;
            self.ports.extend(renewed.iter().map(|r| r.port));
        }
        for lease in &reattached {
            self.held.insert(
                lease.job_id,
                Held {
                    epoch: lease.epoch,
                    mall: String::new(),
                    attempt: 0,
                    trace: None,
                    confirmed: true,
                },
            );
        }
        self.announced_free = self
            .slots
            .saturating_sub(u32::try_from(self.held.len()).unwrap_or(u32::MAX));
        let profiles = self.profiles.borrow_and_update().clone();
        self.profile_revision.clone_from(&profiles.revision);
        let welcome = pb::Welcome {
            session_id: self.stream_id.to_string(),
            heartbeat_interval: Some(model::duration_to_pb(d.config.heartbeat_interval)),
            lease_ttl: Some(model::duration_to_pb(d.queue.config().lease_ttl)),
            profiles: profiles.profiles.clone(),
            profile_revision: profiles.revision.clone(),
            limits: Some(d.config.limits),
            reattached: reattached
                .iter()
                .map(|l| pb::HeldJob {
                    job_id: l.job_id,
                    lease_epoch: l.epoch,
                })
                .collect(),
            lost,
            protocol_version: lps_proto::PROTOCOL_VERSION,
            vocabulary: Some(d.config.vocabulary.clone()),
            stopped_reports: true,
        };
        info!(
            slots = self.slots,
            reattached = reattached.len(),
            "node welcomed"
        );
        self.send(Out::Welcome(welcome)).await?;
        if let Some(until) = self.quarantined() {
            warn!(%until, "node quarantined (it kept dropping its jobs): no new assignments until then");
        }
        if standing.draining {
            self.start_drain("operator request").await;
        }
        Ok(())
    }
}
