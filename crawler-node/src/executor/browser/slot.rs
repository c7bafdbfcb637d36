//! One browser slot of the executor: a locked profile directory, the Chromium using it,
//! the relay in front of it and the IP session it is on.
//!
//! A slot is behind an async mutex; a job holds it for its whole run, so everything here is
//! touched by one job at a time. Invariants:
//! - `ip` is `Some` exactly while a port is held for this slot, and the relay points at that
//!   port; [`Slot::end_ip`] is the only way to drop it, and it reports the `ProxyRelease`;
//!   an IP session never outlives the job that opened it (`Run::finish` ends it), and it
//!   holds its port in the executor's pacing book while it lives (`pace.rs`);
//! - `suspect` is set when a job starts and cleared when it ends on its own: still set at
//!   the next start means the last run was dropped mid-call, so the browser is pinged
//!   before it is trusted;
//! - [`Slot::close`] ends all of it (IP session, browser, relay, lock) and can be called
//!   again.

use std::time::Duration;

use lps_proto::model::MallId;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::pace::HeldPort;
use crate::{
    chromium::{Browser, ProfileSlot, Relay},
    proxy::{Grant, ProxySource, SessionEnd, SessionEndReason, SessionStats},
};

/// An IP session: one proxy port used by one slot for one mall.
#[derive(Debug)]
pub(super) struct IpSession {
    pub(super) grant: Grant,
    pub(super) mall: MallId,
    pub(super) started: Instant,
    pub(super) last_used: Instant,
    /// Searches allowed on this IP.
    pub(super) budget: u32,
    pub(super) requests: u32,
    pub(super) ok: u32,
    pub(super) blocked: u32,
    /// The last job that used it.
    pub(super) job_id: i64,
    /// The port is held in the executor's pacing book while the session lives.
    _held: Option<HeldPort>,
}

impl IpSession {
    pub(super) fn new(
        grant: Grant,
        mall: MallId,
        budget: u32,
        job_id: i64,
        held: Option<HeldPort>,
    ) -> Self {
        let now = Instant::now();
        Self {
            grant,
            mall,
            started: now,
            last_used: now,
            budget: budget.max(1),
            requests: 0,
            ok: 0,
            blocked: 0,
            job_id,
            _held: held,
        }
    }

    /// Why this IP session cannot serve a search for `mall` now, if it cannot.
    pub(super) fn end_reason(
        &self,
        mall: &MallId,
        window: Option<Duration>,
        idle_limit: Duration,
    ) -> Option<SessionEndReason> {
        let lease_over = self
            .grant
            .lease_until
            .is_some_and(|until| until <= chrono::Utc::now());
        if &self.mall != mall {
            Some(SessionEndReason::Rotate)
        } else if self.requests >= self.budget {
            Some(SessionEndReason::Budget)
        } else if window.is_some_and(|w| self.started.elapsed() >= w) || lease_over {
            Some(SessionEndReason::Window)
        } else if self.last_used.elapsed() >= idle_limit {
            Some(SessionEndReason::Idle)
        } else {
            None
        }
    }

    fn end(&self, reason: SessionEndReason) -> SessionEnd {
        SessionEnd {
            report_seq: 0,
            port: self.grant.port,
            reason,
            stats: SessionStats {
                mall: self.mall.clone(),
                requests: self.requests,
                ok: self.ok,
                blocked: self.blocked,
                elapsed: self.started.elapsed(),
                job_id: (self.job_id > 0).then_some(self.job_id),
            },
        }
    }
}

/// See the module docs.
#[derive(Debug)]
pub(super) struct Slot {
    pub(super) index: usize,
    pub(super) profile: Option<ProfileSlot>,
    pub(super) browser: Option<Browser>,
    pub(super) relay: Option<Relay>,
    pub(super) ip: Option<IpSession>,
    pub(super) suspect: bool,
    /// The browser may hold cookies and storage another exit IP earned: it started (its
    /// profile directory keeps them across restarts) or its IP changed since. Cleared
    /// before its next page (DESIGN §5 "Exit-IP hygiene").
    pub(super) site_data_stale: bool,
}

impl Slot {
    pub(super) fn new(index: usize) -> Self {
        Self {
            index,
            profile: None,
            browser: None,
            relay: None,
            ip: None,
            suspect: false,
            site_data_stale: true,
        }
    }

    /// Ends the IP session (if any): reports its release and points the relay nowhere.
    pub(super) fn end_ip(&mut self, proxies: Option<&dyn ProxySource>, reason: SessionEndReason) {
        let Some(ip) = self.ip.take() else {
            return;
        };
        if let Some(relay) = &self.relay {
            relay.point_to(None);
        }
        let end = ip.end(reason);
        info!(
            slot = self.index,
            port = end.port,
            mall = %end.stats.mall,
            requests = end.stats.requests,
            ok = end.stats.ok,
            blocked = end.stats.blocked,
            reason = reason.as_str(),
            "ip session ended"
        );
        match proxies {
            Some(proxies) => proxies.release(&ip.grant, end),
            None => warn!(port = end.port, "ip session without a proxy source"),
        }
    }

    /// Gives `grant` back unused (a port taken to look for one free sooner, DESIGN §5
    /// "Per-IP pacing"): a release with no requests, reason `rotate`.
    pub(super) fn give_back(
        &self,
        proxies: &dyn ProxySource,
        grant: &Grant,
        mall: &MallId,
        job_id: i64,
    ) {
        debug!(
            slot = self.index,
            port = grant.port,
            "port given back unused"
        );
        proxies.release(
            grant,
            SessionEnd {
                report_seq: 0,
                port: grant.port,
                reason: SessionEndReason::Rotate,
                stats: SessionStats {
                    mall: mall.clone(),
                    requests: 0,
                    ok: 0,
                    blocked: 0,
                    elapsed: Duration::ZERO,
                    job_id: (job_id > 0).then_some(job_id),
                },
            },
        );
    }

    /// Kills the browser (it misbehaved); the next job starts a new one.
    pub(super) async fn kill_browser(&mut self) {
        if let Some(browser) = self.browser.take() {
            browser.kill().await;
        }
    }

    /// Ends everything the slot holds; the profile lock is released last, after the browser
    /// is gone.
    pub(super) async fn close(
        &mut self,
        proxies: Option<&dyn ProxySource>,
        reason: SessionEndReason,
    ) {
        self.end_ip(proxies, reason);
        if let Some(browser) = self.browser.take() {
            browser.close().await;
        }
        if let Some(relay) = self.relay.take() {
            relay.stop().await;
        }
        self.profile = None;
        self.suspect = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;

    fn ip_session(budget: u32) -> IpSession {
        let grant = Grant {
            host: "127.0.0.1".into(),
            port: 8001,
            username: String::new(),
            password: Secret::default(),
            lease_until: None,
            request_budget: budget,
            lease_id: 1,
        };
        IpSession::new(grant, MallId::new("naver").unwrap(), budget, 1, None)
    }

    fn ago(secs: u64) -> Instant {
        Instant::now()
            .checked_sub(Duration::from_secs(secs))
            .unwrap_or_else(Instant::now)
    }

    #[test]
    fn ip_sessions_end_for_the_right_reason() {
        let naver = MallId::new("naver").unwrap();
        let coupang = MallId::new("coupang").unwrap();
        let idle = Duration::from_secs(120);
        let window = Some(Duration::from_secs(600));
        let mut ip = ip_session(3);
        assert_eq!(ip.end_reason(&naver, window, idle), None);
        assert_eq!(
            ip.end_reason(&coupang, window, idle),
            Some(SessionEndReason::Rotate)
        );
        ip.requests = 3;
        assert_eq!(
            ip.end_reason(&naver, window, idle),
            Some(SessionEndReason::Budget)
        );
        ip.requests = 1;
        ip.last_used = ago(130);
        assert_eq!(
            ip.end_reason(&naver, window, idle),
            Some(SessionEndReason::Idle)
        );
        ip.last_used = Instant::now();
        assert_eq!(ip.end_reason(&naver, window, idle), None);
        ip.started = ago(630);
        assert_eq!(
            ip.end_reason(&naver, window, idle),
            Some(SessionEndReason::Window)
        );
        assert_eq!(ip.end_reason(&naver, None, idle), None);
        ip.grant.lease_until = Some(chrono::Utc::now() - chrono::Duration::seconds(1));
        assert_eq!(
            ip.end_reason(&naver, None, idle),
            Some(SessionEndReason::Window)
        );
        // A budget of 0 still allows one search.
        assert_eq!(ip_session(0).budget, 1);
    }
}
