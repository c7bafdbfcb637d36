//! The link's proxy desk: `ProxyAcquire` requests in flight (matched to their answers by
//! `request_id`) and the ports this node holds (for `Hello.held_ports`).
//!
//! Owned by the link task; plain data, no I/O. Invariants:
//! - every acquire gets exactly one answer: the coordinator's, or `Unavailable` when the
//!   stream is down (at the request, or lost before the answer came);
//! - a port is held from its grant until its `ProxyRelease` report is queued; a grant that
//!   nobody waits for any more (the job was cancelled) is released at once, so no port is
//!   held by nobody.

use std::{
    collections::{BTreeSet, HashMap},
    time::Duration,
};

use chrono::Utc;
use lps_proto::{
    model::{MallId, timestamp_from_pb},
    pb::{self, node_message::Body as Out},
};
use tokio::sync::oneshot;
use tracing::{debug, warn};

use crate::{
    config::Secret,
    outbox::Report,
    proxy::{Acquired, Grant, SessionEnd, SessionEndReason, SessionStats},
};

/// When the stream is down, an acquire is told to try again this much later.
const RETRY_WHILE_DISCONNECTED: Duration = Duration::from_secs(1);

struct Pending {
    mall: MallId,
    job_id: i64,
    reply: oneshot::Sender<Acquired>,
}

/// See the module docs.
#[derive(Default)]
pub(super) struct ProxyDesk {
    next_id: u64,
    pending: HashMap<u64, Pending>,
    held: BTreeSet<u16>,
}

impl std::fmt::Debug for ProxyDesk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyDesk")
            .field("pending", &self.pending.len())
            .field("held", &self.held)
            .finish()
    }
}

impl ProxyDesk {
    /// A new acquire: the message to send, or `None` when it was answered already
    /// (disconnected).
    pub(super) fn acquire(
        &mut self,
        mall: MallId,
        job_id: i64,
        reply: oneshot::Sender<Acquired>,
        connected: bool,
    ) -> Option<pb::NodeMessage> {
        if !connected {
            let retry_at = Utc::now()
                + chrono::Duration::from_std(RETRY_WHILE_DISCONNECTED)
                    .unwrap_or(chrono::Duration::zero());
            let _ = reply.send(Acquired::Unavailable {
                retry_at: Some(retry_at),
            });
            return None;
        }
        self.next_id += 1;
        let request_id = self.next_id;
        let message = pb::NodeMessage {
            body: Some(Out::ProxyAcquire(pb::ProxyAcquire {
                request_id,
                mall: mall.to_string(),
                job_id,
            })),
        };
        self.pending.insert(
            request_id,
            Pending {
                mall,
                job_id,
                reply,
            },
        );
        Some(message)
    }

    /// A grant arrived; returns a release to report when nobody takes it.
    pub(super) fn on_grant(&mut self, grant: pb::ProxyGrant) -> Option<Report> {
        let Some(pending) = self.pending.remove(&grant.request_id) else {
            warn!(
                request_id = grant.request_id,
                port = grant.port,
                "proxy grant for no request (from an earlier stream?); its lease will expire"
            );
            return None;
        };
        let Ok(port) = u16::try_from(grant.port) else {
            warn!(
                port = grant.port,
                "proxy grant with an invalid port; ignored"
            );
            let _ = pending.reply.send(Acquired::Unavailable { retry_at: None });
            return None;
        };
        if port == 0 || grant.host.trim().is_empty() {
            warn!(port, "proxy grant without host or port; ignored");
            let _ = pending.reply.send(Acquired::Unavailable { retry_at: None });
            return None;
        }
        let lease_until = grant
            .lease_until
            .and_then(|t| timestamp_from_pb("lease_until", t).ok());
        let answer_lease_id = grant.lease_id;
        let answer = Grant {
            host: grant.host,
            port,
            username: grant.username,
            password: Secret::new(grant.password),
            lease_until,
            request_budget: grant.request_budget,
            lease_id: grant.lease_id,
        };
        self.held.insert(port);
        debug!(
            request_id = grant.request_id,
            port,
            job.id = pending.job_id,
            "proxy granted"
        );
        match pending.reply.send(Acquired::Granted(answer)) {
            Ok(()) => None,
            Err(_) => {
                debug!(
                    port,
                    "proxy grant arrived after its request was dropped; releasing"
                );
                self.held.remove(&port);
                Some(Report::ProxyRelease {
                    port,
                    lease_id: answer_lease_id,
                    session: SessionEnd {
                        report_seq: 0,
                        port,
                        reason: SessionEndReason::Rotate,
                        stats: SessionStats {
                            mall: pending.mall,
                            requests: 0,
                            ok: 0,
                            blocked: 0,
                            elapsed: Duration::ZERO,
                            job_id: (pending.job_id > 0).then_some(pending.job_id),
                        },
                    },
                })
            }
        }
    }

    pub(super) fn on_unavailable(&mut self, none: pb::ProxyUnavailable) {
        if let Some(pending) = self.pending.remove(&none.request_id) {
            let retry_at = none
                .next_free_at
                .and_then(|t| timestamp_from_pb("next_free_at", t).ok());
            let _ = pending.reply.send(Acquired::Unavailable { retry_at });
        }
    }

    /// A release report is being queued: the port is no longer held.
    pub(super) fn on_release(&mut self, port: u16) {
        self.held.remove(&port);
    }

    /// The stream is gone: every request in flight is answered `Unavailable`.
    pub(super) fn stream_lost(&mut self) {
        let retry_at = Utc::now()
            + chrono::Duration::from_std(RETRY_WHILE_DISCONNECTED)
                .unwrap_or(chrono::Duration::zero());
        for (_, pending) in self.pending.drain() {
            let _ = pending.reply.send(Acquired::Unavailable {
                retry_at: Some(retry_at),
            });
        }
    }

    /// Ports held now, for Hello.
    pub(super) fn held_ports(&self) -> Vec<u32> {
        self.held.iter().map(|&p| u32::from(p)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mall() -> MallId {
        MallId::new("testmall-alpha").unwrap()
    }

    fn grant(request_id: u64, port: u32) -> pb::ProxyGrant {
        pb::ProxyGrant {
            request_id,
            host: "127.0.0.1".into(),
            port,
            username: "u".into(),
            password: "p".into(),
            lease_until: None,
            request_budget: 3,
            lease_id: 41,
        }
    }

    #[tokio::test]
    async fn answers_are_matched_by_request_id() {
        let mut desk = ProxyDesk::default();
        let (tx1, rx1) = oneshot::channel();
        let (tx2, rx2) = oneshot::channel();
        let m1 = desk.acquire(mall(), 1, tx1, true).unwrap();
        let m2 = desk.acquire(mall(), 2, tx2, true).unwrap();
        let id = |m: &pb::NodeMessage| match &m.body {
            Some(Out::ProxyAcquire(a)) => a.request_id,
            _ => panic!("not an acquire"),
        };
        assert_ne!(id(&m1), id(&m2));
        desk.on_unavailable(pb::ProxyUnavailable {
            request_id: id(&m2),
            next_free_at: None,
        });
        assert!(desk.on_grant(grant(id(&m1), 8001)).is_none());
        match rx1.await.unwrap() {
            Acquired::Granted(g) => assert_eq!((g.port, g.password.expose()), (8001, "p")),
            other => panic!("{other:?}"),
        }
        assert_eq!(rx2.await.unwrap(), Acquired::Unavailable { retry_at: None });
        assert_eq!(desk.held_ports(), [8001]);
        desk.on_release(8001);
        assert!(desk.held_ports().is_empty());
    }

    #[tokio::test]
    async fn nobody_is_left_waiting_and_no_port_is_held_by_nobody() {
        let mut desk = ProxyDesk::default();
        let (tx, rx) = oneshot::channel();
        assert!(desk.acquire(mall(), 1, tx, false).is_none());
        assert!(matches!(rx.await.unwrap(), Acquired::Unavailable { .. }));

        let (tx, rx) = oneshot::channel();
        desk.acquire(mall(), 1, tx, true).unwrap();
        desk.stream_lost();
        assert!(matches!(rx.await.unwrap(), Acquired::Unavailable { .. }));

        let (tx, rx) = oneshot::channel();
        let msg = desk.acquire(mall(), 7, tx, true).unwrap();
        drop(rx);
        let Some(Out::ProxyAcquire(a)) = msg.body else {
            panic!()
        };
        match desk.on_grant(grant(a.request_id, 8002)) {
            Some(Report::ProxyRelease {
                port: 8002,
                lease_id: 41,
                session,
            }) => {
                assert_eq!(session.reason, SessionEndReason::Rotate);
                assert_eq!(session.stats.job_id, Some(7));
            }
            other => panic!("{other:?}"),
        }
        assert!(desk.held_ports().is_empty());
    }
}
