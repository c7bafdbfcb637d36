//! Validated proxy-protocol types: what a crawler node asks of and reports to the proxy
//! ledger (`ProxyAcquire`, `ProxyRelease`, `SessionEnd`, `BlockEvent`).
//!
//! Numbers are range-checked here so the ledger's SQL never sees a value its columns
//! reject (`integer` columns take at most `i32::MAX`; `ok + blocked <= requests`).

use std::{fmt, time::Duration};

use super::{FieldError, MallId, duration_from_pb, duration_to_pb};
use crate::pb;

/// Most requests one IP session may report (far above any sane per-IP budget).
pub const MAX_SESSION_REQUESTS: u32 = 1_000_000;
/// Longest stored block query, in characters (longer ones are cut, not rejected).
pub const MAX_BLOCK_QUERY_CHARS: usize = 400;
/// Longest stored block marker, in characters (longer ones are cut, not rejected).
pub const MAX_BLOCK_MARKER_CHARS: usize = 200;

/// Why an IP session ended, mirrored by the PostgreSQL enum `session_end_reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type))]
#[cfg_attr(
    feature = "sqlx",
    sqlx(type_name = "session_end_reason", rename_all = "snake_case")
)]
pub enum SessionEndReason {
    /// The per-IP request budget was used up: the port rests.
    Budget,
    /// The mall blocked this IP: the port cools down for that mall.
    Block,
    /// The gateway failed: a short cooldown for every mall.
    ProxyError,
    /// The sticky window ended.
    Window,
    Idle,
    Shutdown,
    Rotate,
}

impl SessionEndReason {
    /// Every reason, in wire order.
    pub const ALL: [Self; 7] = [
        Self::Budget,
        Self::Block,
        Self::ProxyError,
        Self::Window,
        Self::Idle,
        Self::Shutdown,
        Self::Rotate,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Budget => "budget",
            Self::Block => "block",
            Self::ProxyError => "proxy_error",
            Self::Window => "window",
            Self::Idle => "idle",
            Self::Shutdown => "shutdown",
            Self::Rotate => "rotate",
        }
    }

    /// Parses a wire value; `field` names it in the error.
    pub fn from_pb(field: &str, value: i32) -> Result<Self, FieldError> {
        use pb::SessionEndReason as P;
        Ok(match P::try_from(value) {
            Ok(P::Budget) => Self::Budget,
            Ok(P::Block) => Self::Block,
            Ok(P::ProxyError) => Self::ProxyError,
            Ok(P::Window) => Self::Window,
            Ok(P::Idle) => Self::Idle,
            Ok(P::Shutdown) => Self::Shutdown,
            Ok(P::Rotate) => Self::Rotate,
            Ok(P::Unspecified) | Err(_) => {
                return Err(FieldError::new(
                    field,
                    format!("unknown session end reason {value}"),
                ));
            }
        })
    }
}

impl fmt::Display for SessionEndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<SessionEndReason> for pb::SessionEndReason {
    fn from(value: SessionEndReason) -> Self {
        match value {
            SessionEndReason::Budget => Self::Budget,
            SessionEndReason::Block => Self::Block,
            SessionEndReason::ProxyError => Self::ProxyError,
            SessionEndReason::Window => Self::Window,
            SessionEndReason::Idle => Self::Idle,
            SessionEndReason::Shutdown => Self::Shutdown,
            SessionEndReason::Rotate => Self::Rotate,
        }
    }
}

/// A proxy port number: 1..=65535.
fn port(field: &str, value: u32) -> Result<u16, FieldError> {
    u16::try_from(value)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| FieldError::new(field, format!("{value} is not a port number")))
}

/// A job id on the wire: 0 means none (a warm-up), negative is invalid.
fn job_id(value: i64) -> Result<Option<i64>, FieldError> {
    match value {
        0 => Ok(None),
        v if v > 0 => Ok(Some(v)),
        _ => Err(FieldError::new("job_id", "must not be negative")),
    }
}

/// A node asks for a proxy port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyAcquire {
    /// Echoed in the answer.
    pub request_id: u64,
    pub mall: MallId,
    /// The job the IP is for (its burns count against the job); `None` for a warm-up.
    pub job_id: Option<i64>,
}

impl TryFrom<pb::ProxyAcquire> for ProxyAcquire {
    type Error = FieldError;

    fn try_from(a: pb::ProxyAcquire) -> Result<Self, FieldError> {
        Ok(Self {
            request_id: a.request_id,
            mall: MallId::new(a.mall)?,
            job_id: job_id(a.job_id)?,
        })
    }
}

/// What one IP session did: the figures the per-IP budget is tuned from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionStats {
    pub mall: MallId,
    /// Requests made on the IP, the blocked one included.
    pub requests: u32,
    pub ok: u32,
    pub blocked: u32,
    pub elapsed: Duration,
    pub job_id: Option<i64>,
}

impl SessionStats {
    /// Checks `ok + blocked <= requests <= MAX_SESSION_REQUESTS` and the job id.
    pub fn new(
        mall: MallId,
        requests: u32,
        ok: u32,
        blocked: u32,
        elapsed: Duration,
        job_id: Option<i64>,
    ) -> Result<Self, FieldError> {
        if requests > MAX_SESSION_REQUESTS {
            return Err(FieldError::new(
                "requests",
                format!("at most {MAX_SESSION_REQUESTS}, got {requests}"),
            ));
        }
        if u64::from(ok) + u64::from(blocked) > u64::from(requests) {
            return Err(FieldError::new(
                "ok",
                format!("ok ({ok}) + blocked ({blocked}) exceeds requests ({requests})"),
            ));
        }
        if job_id.is_some_and(|j| j <= 0) {
            return Err(FieldError::new("job_id", "must be positive"));
        }
        Ok(Self {
            mall,
            requests,
            ok,
            blocked,
            elapsed,
            job_id,
        })
    }
}

/// `SessionEnd` on the wire as stats, port and reason.
fn session(s: pb::SessionEnd) -> Result<(u16, SessionEndReason, SessionStats), FieldError> {
    let port = port("port", s.port)?;
    let reason = SessionEndReason::from_pb("end_reason", s.end_reason)?;
    let elapsed = s
        .elapsed
        .map(|d| duration_from_pb("elapsed", d))
        .transpose()?
        .unwrap_or_default();
    let stats = SessionStats::new(
        MallId::new(s.mall)?,
        s.requests,
        s.ok,
        s.blocked,
        elapsed,
        job_id(s.job_id)?,
    )?;
    Ok((port, reason, stats))
}

/// An IP session ended without its port being released (a `SessionEnd` report).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionEnd {
    pub report_seq: u64,
    pub port: u16,
    pub reason: SessionEndReason,
    pub stats: SessionStats,
}

impl TryFrom<pb::SessionEnd> for SessionEnd {
    type Error = FieldError;

    fn try_from(s: pb::SessionEnd) -> Result<Self, FieldError> {
        let report_seq = s.report_seq;
        let (port, reason, stats) = session(s)?;
        Ok(Self {
            report_seq,
            port,
            reason,
            stats,
        })
    }
}

/// A node returns a port; its session is the IP session's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyRelease {
    pub report_seq: u64,
    pub port: u16,
    pub reason: SessionEndReason,
    pub session: SessionStats,
    /// The grant's lease id; `None` from a node older than lease ids (matched by job).
    pub lease_id: Option<i64>,
}

impl TryFrom<pb::ProxyRelease> for ProxyRelease {
    type Error = FieldError;

    /// `session` is required (a block cools the port for the session's mall); its port
    /// must be the released one, and its own `end_reason` may be left unspecified.
    fn try_from(r: pb::ProxyRelease) -> Result<Self, FieldError> {
        let port = port("port", r.port)?;
        let reason = SessionEndReason::from_pb("reason", r.reason)?;
        let lease_id = match r.lease_id {
            0 => None,
            id if id > 0 => Some(id),
            id => return Err(FieldError::new("lease_id", format!("{id} is negative"))),
        };
        let mut s = r
            .session
            .ok_or_else(|| FieldError::new("session", "is required"))?;
        if s.port != 0 && s.port != r.port {
            return Err(FieldError::new(
                "session.port",
                format!("{} is not the released port {}", s.port, r.port),
            ));
        }
        s.port = r.port;
        if s.end_reason == pb::SessionEndReason::Unspecified as i32 {
            s.end_reason = r.reason;
        }
        let (_, _, session) = session(s).map_err(|e| e.under("session"))?;
        Ok(Self {
            report_seq: r.report_seq,
            port,
            reason,
            session,
            lease_id,
        })
    }
}

/// A detected bot block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockEvent {
    pub report_seq: u64,
    pub mall: MallId,
    pub query: String,
    /// 1-based number of the request on this IP that was blocked.
    pub ip_request_no: u32,
    pub port: Option<u16>,
    pub marker: String,
    pub html_len: u32,
    pub elapsed: Duration,
    pub headless: bool,
    pub job_id: Option<i64>,
}

impl TryFrom<pb::BlockEvent> for BlockEvent {
    type Error = FieldError;

    fn try_from(b: pb::BlockEvent) -> Result<Self, FieldError> {
        if b.ip_request_no > MAX_SESSION_REQUESTS {
            return Err(FieldError::new(
                "ip_request_no",
                format!("at most {MAX_SESSION_REQUESTS}"),
            ));
        }
        if i32::try_from(b.html_len).is_err() {
            return Err(FieldError::new("html_len", "out of range"));
        }
        Ok(Self {
            report_seq: b.report_seq,
            mall: MallId::new(b.mall)?,
            query: b.query.chars().take(MAX_BLOCK_QUERY_CHARS).collect(),
            ip_request_no: b.ip_request_no,
            port: match b.port {
                0 => None,
                p => Some(port("port", p)?),
            },
            marker: b.marker.chars().take(MAX_BLOCK_MARKER_CHARS).collect(),
            html_len: b.html_len,
            elapsed: b
                .elapsed
                .map(|d| duration_from_pb("elapsed", d))
                .transpose()?
                .unwrap_or_default(),
            headless: b.headless,
            job_id: job_id(b.job_id)?,
        })
    }
}

/// The wire form of an IP session's figures (`port` and `end_reason` are the caller's).
fn stats_to_pb(stats: &SessionStats, port: u16, reason: SessionEndReason) -> pb::SessionEnd {
    pb::SessionEnd {
        report_seq: 0,
        port: u32::from(port),
        mall: stats.mall.to_string(),
        requests: stats.requests,
        ok: stats.ok,
        blocked: stats.blocked,
        elapsed: Some(duration_to_pb(stats.elapsed)),
        end_reason: pb::SessionEndReason::from(reason) as i32,
        job_id: stats.job_id.unwrap_or(0),
    }
}

impl From<&SessionEnd> for pb::SessionEnd {
    fn from(s: &SessionEnd) -> Self {
        Self {
            report_seq: s.report_seq,
            ..stats_to_pb(&s.stats, s.port, s.reason)
        }
    }
}

impl From<&ProxyRelease> for pb::ProxyRelease {
    fn from(r: &ProxyRelease) -> Self {
        Self {
            report_seq: r.report_seq,
            port: u32::from(r.port),
            reason: pb::SessionEndReason::from(r.reason) as i32,
            session: Some(pb::SessionEnd {
                report_seq: r.report_seq,
                ..stats_to_pb(&r.session, r.port, r.reason)
            }),
            lease_id: r.lease_id.unwrap_or(0),
        }
    }
}

impl From<&BlockEvent> for pb::BlockEvent {
    fn from(b: &BlockEvent) -> Self {
        Self {
            report_seq: b.report_seq,
            mall: b.mall.to_string(),
            query: b.query.clone(),
            ip_request_no: b.ip_request_no,
            port: b.port.map_or(0, u32::from),
            marker: b.marker.clone(),
            html_len: b.html_len,
            elapsed: Some(duration_to_pb(b.elapsed)),
            headless: b.headless,
            job_id: b.job_id.unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session_end(requests: u32, ok: u32, blocked: u32) -> pb::SessionEnd {
        pb::SessionEnd {
            report_seq: 1,
            port: 10_001,
            mall: "naver".into(),
            requests,
            ok,
            blocked,
            elapsed: None,
            end_reason: pb::SessionEndReason::Block as i32,
            job_id: 7,
        }
    }

    #[test]
    fn session_ends_are_checked() {
        let s = SessionEnd::try_from(session_end(3, 2, 1)).unwrap();
        assert_eq!(s.reason, SessionEndReason::Block);
        assert_eq!(s.stats.job_id, Some(7));
        let e = SessionEnd::try_from(session_end(2, 2, 1)).unwrap_err();
        assert_eq!(e.field, "ok");
        let e = SessionEnd::try_from(pb::SessionEnd {
            port: 70_000,
            ..session_end(1, 1, 0)
        })
        .unwrap_err();
        assert_eq!(e.field, "port");
        let e = SessionEnd::try_from(pb::SessionEnd {
            end_reason: 0,
            ..session_end(1, 1, 0)
        })
        .unwrap_err();
        assert_eq!(e.field, "end_reason");
    }

    #[test]
    fn releases_need_a_matching_session() {
        let good = pb::ProxyRelease {
            report_seq: 4,
            port: 10_001,
            reason: pb::SessionEndReason::Budget as i32,
            session: Some(pb::SessionEnd {
                end_reason: 0,
                ..session_end(3, 3, 0)
            }),
            lease_id: 17,
        };
        let r = ProxyRelease::try_from(good.clone()).unwrap();
        assert_eq!(r.reason, SessionEndReason::Budget);
        assert_eq!(r.session.requests, 3);
        assert_eq!(r.lease_id, Some(17));
        let old_node = ProxyRelease::try_from(pb::ProxyRelease {
            lease_id: 0,
            ..good.clone()
        })
        .unwrap();
        assert_eq!(old_node.lease_id, None);
        let e = ProxyRelease::try_from(pb::ProxyRelease {
            lease_id: -3,
            ..good.clone()
        })
        .unwrap_err();
        assert_eq!(e.field, "lease_id");
        let e = ProxyRelease::try_from(pb::ProxyRelease {
            session: None,
            ..good.clone()
        })
        .unwrap_err();
        assert_eq!(e.field, "session");
        let e = ProxyRelease::try_from(pb::ProxyRelease {
            port: 10_002,
            ..good
        })
        .unwrap_err();
        assert_eq!(e.field, "session.port");
    }

    #[test]
    fn every_reason_round_trips() {
        for r in [
            SessionEndReason::Budget,
            SessionEndReason::Block,
            SessionEndReason::ProxyError,
            SessionEndReason::Window,
            SessionEndReason::Idle,
            SessionEndReason::Shutdown,
            SessionEndReason::Rotate,
        ] {
            let wire = pb::SessionEndReason::from(r) as i32;
            assert_eq!(SessionEndReason::from_pb("reason", wire).unwrap(), r);
        }
    }

    #[test]
    fn acquire_job_zero_is_a_warm_up() {
        let a = ProxyAcquire::try_from(pb::ProxyAcquire {
            request_id: 9,
            mall: "coupang".into(),
            job_id: 0,
        })
        .unwrap();
        assert_eq!(a.job_id, None);
        let e = ProxyAcquire::try_from(pb::ProxyAcquire {
            request_id: 9,
            mall: "Coupang".into(),
            job_id: 1,
        })
        .unwrap_err();
        assert_eq!(e.field, "mall");
    }

    /// Each report the node sends is the model's type on both sides: model → wire → model
    /// gives back the same value.
    #[test]
    fn reports_round_trip_through_the_wire() {
        let stats = SessionStats {
            mall: MallId::new("naver").unwrap(),
            requests: 3,
            ok: 2,
            blocked: 1,
            elapsed: Duration::from_millis(1500),
            job_id: Some(7),
        };
        let end = SessionEnd {
            report_seq: 4,
            port: 10_001,
            reason: SessionEndReason::Block,
            stats: stats.clone(),
        };
        assert_eq!(
            SessionEnd::try_from(pb::SessionEnd::from(&end)).unwrap(),
            end
        );
        for (lease_id, reason) in [
            (Some(9), SessionEndReason::Budget),
            (None, SessionEndReason::Rotate),
        ] {
            let release = ProxyRelease {
                report_seq: 5,
                port: 10_002,
                reason,
                session: SessionStats {
                    job_id: None,
                    ..stats.clone()
                },
                lease_id,
            };
            assert_eq!(
                ProxyRelease::try_from(pb::ProxyRelease::from(&release)).unwrap(),
                release
            );
        }
        for (port, job_id) in [(Some(10_003), Some(8)), (None, None)] {
            let block = BlockEvent {
                report_seq: 6,
                mall: MallId::new("coupang").unwrap(),
                query: "제주 삼다수 2L".into(),
                ip_request_no: 2,
                port,
                marker: "text:captcha".into(),
                html_len: 512,
                elapsed: Duration::from_millis(250),
                headless: true,
                job_id,
            };
            assert_eq!(
                BlockEvent::try_from(pb::BlockEvent::from(&block)).unwrap(),
                block
            );
        }
        for reason in SessionEndReason::ALL {
            let wire = pb::SessionEndReason::from(reason) as i32;
            assert_eq!(SessionEndReason::from_pb("reason", wire).unwrap(), reason);
        }
    }
}
