//! What a coordinator's `Welcome` tells the node, validated once on receive: the stream's
//! [`Session`] (id, heartbeat interval, lease TTL, which held jobs were re-attached or lost)
//! and the [`SiteProfiles`] the executor searches malls with.
//!
//! Site profiles are replaced wholesale by every Welcome (an operator changes a selector
//! without a rebuild, DESIGN §5); the node publishes the latest ones through a `watch`
//! channel and copies a job's profile into its [`Job`](crate::executor::Job) when the job
//! is assigned, so a running job keeps the profile it started with. Pure data, no I/O.

use std::{collections::HashMap, sync::Arc, time::Duration};

use lps_proto::{
    PROTOCOL_VERSION,
    model::{Lease, MallId, duration_from_pb},
    pb,
};
use tonic::Status;

/// Heartbeat interval when the Welcome names none.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);
/// Lease TTL when the Welcome names none.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(30);
/// Heartbeat intervals are clamped to this range.
pub const MIN_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(50);
pub const MAX_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(60);

/// One welcomed stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub id: String,
    pub heartbeat_interval: Duration,
    pub lease_ttl: Duration,
    /// Held jobs (from Hello) that are still this node's.
    pub reattached: Vec<Lease>,
    /// Held jobs (from Hello) that are no longer this node's: stop them, drop their reports.
    pub lost: Vec<i64>,
}

impl Session {
    /// How long the stream may stay silent before the node calls it dead: three heartbeats
    /// (each one is answered), and never less than a lease TTL.
    pub fn silence_limit(&self) -> Duration {
        (self.heartbeat_interval * 3).max(self.lease_ttl)
    }
}

/// The site profiles and limits of the latest Welcome.
#[derive(Debug, Clone, Default)]
pub struct SiteProfiles {
    // NB: wire types until lps-proto has a validated SiteProfile model.
    by_mall: HashMap<String, Arc<pb::SiteProfile>>,
    limits: pb::Limits,
}

impl SiteProfiles {
    pub fn new(profiles: Vec<pb::SiteProfile>, limits: pb::Limits) -> Self {
        Self {
            by_mall: profiles
                .into_iter()
                .map(|p| (p.id.clone(), Arc::new(p)))
                .collect(),
            limits,
        }
    }

    /// The profile of `mall`, if the coordinator sent one.
    pub fn get(&self, mall: &MallId) -> Option<Arc<pb::SiteProfile>> {
        self.by_mall.get(mall.as_str()).cloned()
    }

    pub fn limits(&self) -> &pb::Limits {
        &self.limits
    }

    /// Mall ids with a profile, sorted.
    pub fn malls(&self) -> Vec<&str> {
        let mut malls: Vec<&str> = self.by_mall.keys().map(String::as_str).collect();
        malls.sort_unstable();
        malls
    }

    pub fn len(&self) -> usize {
        self.by_mall.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_mall.is_empty()
    }
}

/// Validates a Welcome. A protocol version the node does not speak is
/// `FAILED_PRECONDITION` (fatal); other bad fields fall back to defaults, since a
/// heartbeat interval is not worth losing the stream over.
pub fn from_welcome(welcome: pb::Welcome) -> Result<(Session, SiteProfiles), Status> {
    if welcome.protocol_version != 0 && welcome.protocol_version != PROTOCOL_VERSION {
        return Err(Status::failed_precondition(format!(
            "coordinator speaks protocol_version {}, this node {PROTOCOL_VERSION}",
            welcome.protocol_version
        )));
    }
    let duration = |field: &str, d: Option<prost_types::Duration>| {
        d.and_then(|d| duration_from_pb(field, d).ok())
            .filter(|d| !d.is_zero())
    };
    let heartbeat_interval = duration("heartbeat_interval", welcome.heartbeat_interval)
        .unwrap_or(DEFAULT_HEARTBEAT_INTERVAL)
        .clamp(MIN_HEARTBEAT_INTERVAL, MAX_HEARTBEAT_INTERVAL);
    let lease_ttl = duration("lease_ttl", welcome.lease_ttl).unwrap_or(DEFAULT_LEASE_TTL);
    let session = Session {
        id: welcome.session_id,
        heartbeat_interval,
        lease_ttl,
        reattached: welcome
            .reattached
            .iter()
            .map(|j| Lease {
                job_id: j.job_id,
                epoch: j.lease_epoch,
            })
            .collect(),
        lost: welcome.lost,
    };
    let profiles = SiteProfiles::new(welcome.profiles, welcome.limits.unwrap_or_default());
    Ok((session, profiles))
}

#[cfg(test)]
mod tests {
    use lps_proto::model::duration_to_pb;

    use super::*;

    #[test]
    fn welcome_defaults_and_clamps() {
        let (session, profiles) = from_welcome(pb::Welcome {
            session_id: "s1".into(),
            profiles: vec![pb::SiteProfile {
                id: "naver".into(),
                ..Default::default()
            }],
            lost: vec![4],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(session.heartbeat_interval, DEFAULT_HEARTBEAT_INTERVAL);
        assert_eq!(session.lease_ttl, DEFAULT_LEASE_TTL);
        assert_eq!(session.lost, [4]);
        assert_eq!(session.silence_limit(), Duration::from_secs(30));
        assert!(profiles.get(&MallId::new("naver").unwrap()).is_some());
        assert!(profiles.get(&MallId::new("coupang").unwrap()).is_none());

        let (session, _) = from_welcome(pb::Welcome {
            heartbeat_interval: Some(duration_to_pb(Duration::from_millis(1))),
            lease_ttl: Some(duration_to_pb(Duration::from_millis(100))),
            protocol_version: PROTOCOL_VERSION,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(session.heartbeat_interval, MIN_HEARTBEAT_INTERVAL);
        assert_eq!(session.silence_limit(), Duration::from_millis(150));
    }

    #[test]
    fn another_protocol_is_fatal() {
        let err = from_welcome(pb::Welcome {
            protocol_version: PROTOCOL_VERSION + 1,
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    }
}
