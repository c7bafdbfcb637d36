//! Proxy ports as the executor sees them: the [`ProxySource`] it leases IPs from, the
//! [`EventSink`] it reports blocks to, and [`NodeLink`], the implementation of both over the
//! node's coordinator stream (DESIGN §4).
//!
//! The ledger lives in the coordinator; the node only asks (`ProxyAcquire{request_id,
//! mall, job_id}`), is answered (`ProxyGrant` / `ProxyUnavailable`, matched by
//! `request_id`), and reports: every IP session's end is a `ProxyRelease` with its
//! [`SessionEnd`], every block a `BlockEvent`. Reports go through the outbox (acked,
//! resent after a reconnect), so a release is never lost while the node lives.
//!
//! Grants carry credentials: [`Grant`]'s `Debug` hides the password, and nothing here logs
//! it.
//!
//! Tracing: [`NodeLink`]'s acquire and release are the spans `proxy.acquire` and
//! `proxy.release`, children of whatever the executor is doing (a job's span, so the IP
//! lease is part of the search's trace).

use std::fmt;

use chrono::{DateTime, Utc};
use lps_proto::model::MallId;
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info_span, instrument, warn};

use crate::{outbox::Report, secret::Secret};

/// A leased proxy port (one sticky exit IP).
#[derive(Clone, PartialEq, Eq)]
pub struct Grant {
    pub host: String,
    pub port: u16,
    pub username: String,
    pub password: Secret,
    /// The lease ends then unless renewed (the coordinator renews it for a live node).
    pub lease_until: Option<DateTime<Utc>>,
    /// Searches allowed on this IP before rotating; 0: the profile's or the limits' budget.
    pub request_budget: u32,
    /// The ledger's id of this lease; the release names it (0: none, e.g. a direct proxy).
    pub lease_id: i64,
}

impl fmt::Debug for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Grant")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("lease_until", &self.lease_until)
            .field("request_budget", &self.request_budget)
            .finish_non_exhaustive()
    }
}

/// The answer to an acquire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    Granted(Grant),
    /// No port free now; `retry_at` when the ledger knows when one frees.
    Unavailable {
        retry_at: Option<DateTime<Utc>>,
    },
}

/// Why an IP session ended: the wire model's type, shared with the coordinator.
pub use lps_proto::model::SessionEndReason;

/// The reports of IP sessions and blocks: the wire model's types, shared with the
/// coordinator. The node leaves `report_seq` at 0; its outbox numbers a report when it
/// sends it.
pub use lps_proto::model::{BlockEvent, SessionEnd, SessionStats};

/// Where the executor leases IPs.
#[async_trait::async_trait]
pub trait ProxySource: Send + Sync + 'static {
    /// Asks for a port for `mall` (`job_id` 0 for a warm-up). Never errors: a source that
    /// cannot answer says `Unavailable`. Cancel-safe (a grant that arrives for a dropped
    /// request is released by the source).
    async fn acquire(&self, mall: &MallId, job_id: i64) -> Acquired;

    /// Returns `grant`'s port; `session` is recorded as the IP session's end.
    fn release(&self, grant: &Grant, session: SessionEnd);
}

/// Where the executor reports what it saw.
pub trait EventSink: Send + Sync + 'static {
    fn block(&self, event: BlockEvent);
}

/// An [`EventSink`] that only logs (for an executor without a coordinator).
#[derive(Debug, Clone, Copy, Default)]
pub struct LogEvents;

impl EventSink for LogEvents {
    fn block(&self, event: BlockEvent) {
        warn!(
            mall = %event.mall,
            job.id = event.job_id.unwrap_or(0),
            port = event.port.map_or(0, i64::from),
            marker = %event.marker,
            "blocked page (not reported: no coordinator link)"
        );
    }
}

/// What the executor asks of the link task.
#[derive(Debug)]
pub(crate) enum LinkRequest {
    Acquire {
        mall: MallId,
        job_id: i64,
        reply: oneshot::Sender<Acquired>,
    },
    Report(Report),
}

/// The receiving end of a [`NodeLink`]: hand it to [`crate::Node::with_link`].
#[derive(Debug)]
pub struct LinkInbox(pub(crate) mpsc::UnboundedReceiver<LinkRequest>);

/// [`ProxySource`] and [`EventSink`] over the node's coordinator stream. Cheap to clone.
/// Without a running node (or before the link serves it) acquires answer `Unavailable`
/// and reports are dropped with a warning.
#[derive(Debug, Clone)]
pub struct NodeLink {
    tx: mpsc::UnboundedSender<LinkRequest>,
}

impl NodeLink {
    /// A link handle and the inbox the node serves it from.
    pub fn channel() -> (NodeLink, LinkInbox) {
        let (tx, rx) = mpsc::unbounded_channel();
        (NodeLink { tx }, LinkInbox(rx))
    }

    fn report(&self, report: Report) {
        if self.tx.send(LinkRequest::Report(report)).is_err() {
            warn!("the node link is gone; report dropped");
        }
    }
}

#[async_trait::async_trait]
impl ProxySource for NodeLink {
    #[instrument(name = "proxy.acquire", skip_all, fields(mall = %mall, job.id = job_id, granted))]
    async fn acquire(&self, mall: &MallId, job_id: i64) -> Acquired {
        let (reply, answer) = oneshot::channel();
        let asked = self.tx.send(LinkRequest::Acquire {
            mall: mall.clone(),
            job_id,
            reply,
        });
        if asked.is_err() {
            debug!("the node link is gone; no proxy");
            return Acquired::Unavailable { retry_at: None };
        }
        let acquired = answer
            .await
            .unwrap_or(Acquired::Unavailable { retry_at: None });
        tracing::Span::current().record("granted", matches!(acquired, Acquired::Granted(_)));
        acquired
    }

    fn release(&self, grant: &Grant, session: SessionEnd) {
        // NB: the release is a report (acked, resent after a reconnect): this span covers
        // handing it to the outbox, the coordinator's `dispatch.proxy_release` the commit.
        let span = info_span!(
            "proxy.release",
            mall = %session.stats.mall,
            job.id = session.stats.job_id.unwrap_or(0),
            port = i64::from(grant.port),
            reason = session.reason.as_str(),
            requests = i64::from(session.stats.requests),
        );
        span.in_scope(|| {
            self.report(Report::ProxyRelease {
                port: grant.port,
                lease_id: grant.lease_id,
                session,
            });
        });
    }
}

impl EventSink for NodeLink {
    fn block(&self, event: BlockEvent) {
        // NB: called inside the job's span, so the block is part of its search's trace.
        let span = info_span!(
            "node.block",
            mall = %event.mall,
            job.id = event.job_id.unwrap_or(0),
            port = event.port.map_or(0, i64::from),
            ip_request_no = i64::from(event.ip_request_no),
            marker = %event.marker,
        );
        span.in_scope(|| self.report(Report::Block(event)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_hide_the_password() {
        let grant = Grant {
            host: "gw".into(),
            port: 8001,
            username: "user".into(),
            password: Secret::new("s3cr3t"),
            lease_until: None,
            request_budget: 3,
            lease_id: 1,
        };
        let shown = format!("{grant:?}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(shown.contains("8001"));
    }

    #[tokio::test]
    async fn a_link_without_a_node_says_unavailable() {
        let (link, inbox) = NodeLink::channel();
        drop(inbox);
        let mall = MallId::new("naver").unwrap();
        assert_eq!(
            link.acquire(&mall, 1).await,
            Acquired::Unavailable { retry_at: None }
        );
    }
}
