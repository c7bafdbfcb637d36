//! The proxy ledger's reports: ProxyAcquire (answered in-band with a grant or "none
//! free"), ProxyRelease, SessionEnd and BlockEvent. Without a configured gateway there is
//! no ledger: acquires are answered "none free" and the others acked as applied.

use lps_proto::{
    model::{self, FieldError, JobFailure, Lease},
    pb::{self, coordinator_message::Body as Out},
};
use tonic::Status;
use tracing::{Instrument as _, Span, debug, info, info_span, warn};

use super::NodeStream;

impl NodeStream {
    /// Leases a proxy port for the node, or says none is free (in-band; an invalid request
    /// is answered "none free" too, and so is every request without a ledger).
    pub(super) async fn proxy_acquire(
        &mut self,
        request_id: u64,
        acquire: Result<model::ProxyAcquire, FieldError>,
    ) -> Result<(), Status> {
        let unavailable = |next_free_at| {
            Out::ProxyUnavailable(pb::ProxyUnavailable {
                request_id,
                next_free_at,
            })
        };
        let acquire = match acquire {
            Ok(acquire) => acquire,
            Err(e) => {
                warn!(error = %e, "invalid proxy acquire");
                return self.send(unavailable(None)).await;
            }
        };
        let job_id = acquire.job_id.unwrap_or_default();
        let span = self.job_span(
            info_span!(
                "dispatch.proxy_acquire",
                job.id = job_id,
                job.attempt = self.held_attempt(job_id),
                mall = %acquire.mall,
                node.id = %self.node_id,
            ),
            job_id,
        );
        async {
            let Some(ledger) = self.d.ledger.clone() else {
                return self.send(unavailable(None)).await;
            };
            let acquired = match ledger
                .acquire(&self.node_id, &acquire.mall, acquire.job_id)
                .await
            {
                Ok(acquired) => acquired,
                Err(e) => {
                    let status = crate::error::status(e);
                    if !crate::error::is_outage(&status) {
                        return Err(status);
                    }
                    // The node asks again after its own back-off.
                    warn!(
                        message = status.message(),
                        "proxy acquire not written; answered none free"
                    );
                    return self.send(unavailable(None)).await;
                }
            };
            match acquired {
                crate::ledger::Acquired::Grant(g) => {
                    self.ports.insert(g.port);
                    debug!(port = g.port, mall = %acquire.mall, "proxy port granted");
                    let grant = pb::ProxyGrant {
                        request_id,
                        host: g.host,
                        port: u32::from(g.port),
                        username: g.username,
                        password: g.password.expose().to_owned(),
                        lease_until: Some(model::timestamp_to_pb(g.lease_until)),
                        request_budget: g.request_budget,
                        lease_id: g.lease_id,
                    };
                    self.send(Out::ProxyGrant(grant)).await
                }
                crate::ledger::Acquired::NoneFree { next_free_at } => {
                    self.send(unavailable(next_free_at.map(model::timestamp_to_pb)))
                        .await
                }
            }
        }
        .instrument(span)
        .await
    }

    /// A port the node gives back (see [`NodeStream::release_port`]), acked.
    pub(super) async fn proxy_release(
        &mut self,
        seq: u64,
        release: model::ProxyRelease,
    ) -> Result<(), Status> {
        let job_id = release.session.job_id.unwrap_or_default();
        let span = self.job_span(
            info_span!(
                "dispatch.proxy_release",
                job.id = job_id,
                job.attempt = self.held_attempt(job_id),
                mall = self.held_mall(job_id),
                node.id = %self.node_id,
                port = i64::from(release.port),
                reason = release.reason.as_str(),
            ),
            job_id,
        );
        let ack = self.release_port(release).instrument(span).await?;
        self.ack(seq, ack).await
    }

    /// An IP session that ended without a release, recorded.
    pub(super) async fn session_end(
        &mut self,
        seq: u64,
        end: model::SessionEnd,
    ) -> Result<(), Status> {
        let ack = match &self.d.ledger {
            Some(ledger) => {
                let r = ledger
                    .record_session(&self.node_id, end.port, &end.stats, end.reason)
                    .await;
                self.ledger_applied(r)?
            }
            None => (pb::AckStatus::Applied, String::new()),
        };
        self.ack(seq, ack).await
    }

    /// A bot block, recorded (part of its job's trace when this stream holds the job).
    pub(super) async fn block_event(
        &mut self,
        seq: u64,
        block: model::BlockEvent,
    ) -> Result<(), Status> {
        let job_id = block.job_id.unwrap_or_default();
        let span = self.job_span(
            info_span!(
                "dispatch.block",
                job.id = block.job_id,
                job.attempt = self.held_attempt(job_id),
                mall = %block.mall,
                node.id = %self.node_id,
                port = block.port.map(i64::from),
                ip_request_no = i64::from(block.ip_request_no),
                marker = %block.marker,
            ),
            job_id,
        );
        span.in_scope(|| info!("bot block reported"));
        let ack = match &self.d.ledger {
            Some(ledger) => {
                let r = ledger
                    .record_block(&self.node_id, &block)
                    .instrument(span)
                    .await;
                self.ledger_applied(r)?
            }
            None => (pb::AckStatus::Applied, String::new()),
        };
        // NB: counted once recorded (a parked report is written again later).
        self.d.metrics.blocks.inc();
        self.ack(seq, ack).await
    }

    /// Returns a port to the ledger; a job over its IP-burn cap fails as `page_blocked`
    /// and the node is told to stop it.
    async fn release_port(
        &mut self,
        release: model::ProxyRelease,
    ) -> Result<(pb::AckStatus, String), Status> {
        self.ports.remove(&release.port);
        let Some(ledger) = self.d.ledger.clone() else {
            return Ok((pb::AckStatus::Applied, String::new()));
        };
        let released = match ledger
            .release(
                &self.node_id,
                release.port,
                release.lease_id,
                release.reason,
                &release.session,
            )
            .await
        {
            Ok(r) => r,
            Err(e) => return self.ledger_applied(Err(e)),
        };
        if released.over_burn_cap
            && let Some(job_id) = release.session.job_id
            && let Some(held) = self.held.get(&job_id).cloned()
        {
            let lease = Lease {
                job_id,
                epoch: held.epoch,
            };
            let failure = JobFailure::new(
                lease,
                model::ErrorClass::PageBlocked,
                format!(
                    "blocked on {} proxy IPs: a page problem, not an IP problem",
                    released.job_ip_burns.unwrap_or_default()
                ),
            );
            warn!(job.id = job_id, burns = ?released.job_ip_burns, "job over its IP-burn cap; failing it as page_blocked");
            // The job's attempt ends here: an error of its trace (`dispatch.proxy_release`).
            lps_telemetry::fail(&Span::current(), failure.message.as_str());
            match self.d.queue.fail_if_leased(&self.node_id, &failure).await {
                Ok(_) | Err(crate::error::Error::LeaseLost(_)) => {
                    self.held.remove(&job_id);
                    let cancel = pb::Cancel {
                        job_id,
                        lease_epoch: held.epoch,
                        reason: "page_blocked".into(),
                    };
                    self.send(Out::Cancel(cancel)).await?;
                }
                Err(e) => return Err(crate::error::status(e)),
            }
        }
        Ok((pb::AckStatus::Applied, String::new()))
    }
}
