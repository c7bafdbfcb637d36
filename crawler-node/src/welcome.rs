//! What a coordinator's `Welcome` tells the node, validated once on receive: the stream's
//! [`Welcome`] (id, heartbeat interval, lease TTL, which held jobs were re-attached or lost)
//! and the [`SiteProfiles`] the executor searches malls with.
//!
//! Site profiles are replaced wholesale by every Welcome and every `ProfileUpdate` (an
//! operator changes a selector without a rebuild or a restart, DESIGN §5); the node
//! publishes the latest ones through a `watch` channel and copies a job's profile into its
//! [`Job`](crate::executor::Job) when the job is assigned, so a running job keeps the
//! profile it started with. Pure data, no I/O.

use std::{collections::HashMap, sync::Arc, time::Duration};

use lps_profiles::vocabulary::Lexicon;
use lps_proto::{
    PROTOCOL_VERSION,
    model::{Lease, MallId, duration_from_pb, vocabulary_revision},
    pb,
};
use tonic::Status;
use tracing::warn;

/// Heartbeat interval when the Welcome names none.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);
/// Lease TTL when the Welcome names none.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(45);
/// Heartbeat intervals are clamped to this range.
pub const MIN_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(50);
pub const MAX_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(60);

/// One welcomed stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Welcome {
    /// The stream's id (`session_id` on the wire: the coordinator's `node_session` row).
    pub id: String,
    pub heartbeat_interval: Duration,
    pub lease_ttl: Duration,
    /// Held jobs (from Hello) that are still this node's.
    pub reattached: Vec<Lease>,
    /// Held jobs (from Hello) that are no longer this node's: stop them (their reports are
    /// still resent, for what they spent).
    pub lost: Vec<i64>,
    /// The coordinator takes `JobStopped` reports (false from an older one).
    pub stopped_reports: bool,
}

impl Welcome {
    /// How long the stream may stay silent before the node calls it dead: three heartbeats
    /// (each one is answered), and never less than a lease TTL.
    pub fn silence_limit(&self) -> Duration {
        (self.heartbeat_interval * 3).max(self.lease_ttl)
    }
}

/// The site profiles, judge vocabulary and limits of the latest Welcome.
#[derive(Debug, Clone)]
pub struct SiteProfiles {
    // NB: wire types until lps-proto has a validated SiteProfile model.
    by_mall: HashMap<String, Arc<pb::SiteProfile>>,
    /// The coordinator's vocabulary (the built-in one when it sent none).
    base: Arc<Lexicon>,
    /// Malls whose profile adds words: the base plus the additions.
    lexicons: HashMap<String, Arc<Lexicon>>,
    /// `model::vocabulary_revision` of `base`, and of each of `lexicons`.
    base_revision: String,
    revisions: HashMap<String, String>,
    limits: pb::Limits,
}

impl Default for SiteProfiles {
    fn default() -> Self {
        Self::new(Vec::new(), pb::Limits::default(), None)
    }
}

impl SiteProfiles {
    /// Compiles the vocabulary once per Welcome. The coordinator validated it; should a
    /// word still not compile here (another build), the node logs it and judges with the
    /// built-in words (or without the mall's additions) rather than refuse work.
    pub fn new(
        profiles: Vec<pb::SiteProfile>,
        limits: pb::Limits,
        vocabulary: Option<pb::Vocabulary>,
    ) -> Self {
        let (base, base_revision) = match &vocabulary {
            None => (
                Lexicon::builtin(),
                vocabulary_revision(&Lexicon::builtin_wire(), None),
            ),
            Some(v) => match Lexicon::compile(v, None) {
                Ok(lexicon) => (Arc::new(lexicon), vocabulary_revision(v, None)),
                Err(e) => {
                    warn!(error = %e, "the coordinator's vocabulary does not compile; judging with the built-in one");
                    (
                        Lexicon::builtin(),
                        vocabulary_revision(&Lexicon::builtin_wire(), None),
                    )
                }
            },
        };
        let base_wire = vocabulary.unwrap_or_else(Lexicon::builtin_wire);
        let mut lexicons = HashMap::new();
        let mut revisions = HashMap::new();
        for profile in &profiles {
            let Some(additions) = &profile.vocabulary else {
                continue;
            };
            match Lexicon::compile(&base_wire, Some(additions)) {
                Ok(lexicon) => {
                    lexicons.insert(profile.id.clone(), Arc::new(lexicon));
                    revisions.insert(
                        profile.id.clone(),
                        vocabulary_revision(&base_wire, Some(additions)),
                    );
                }
                Err(e) => {
                    warn!(mall = %profile.id, error = %e, "a profile's vocabulary does not compile; judging without its words");
                }
            }
        }
        Self {
            by_mall: profiles
                .into_iter()
                .map(|p| (p.id.clone(), Arc::new(p)))
                .collect(),
            base,
            lexicons,
            base_revision,
            revisions,
            limits,
        }
    }

    /// The revision of [`lexicon`](Self::lexicon)`(mall)`'s words, as the coordinator
    /// computes it for the mall (`model::vocabulary_revision`).
    pub fn vocabulary_revision(&self, mall: &MallId) -> &str {
        self.revisions
            .get(mall.as_str())
            .unwrap_or(&self.base_revision)
    }

    /// The profile of `mall`, if the coordinator sent one.
    pub fn get(&self, mall: &MallId) -> Option<Arc<pb::SiteProfile>> {
        self.by_mall.get(mall.as_str()).cloned()
    }

    /// The judge's vocabulary for `mall`: the coordinator's plus the mall's additions.
    pub fn lexicon(&self, mall: &MallId) -> Arc<Lexicon> {
        self.lexicons
            .get(mall.as_str())
            .unwrap_or(&self.base)
            .clone()
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
pub fn from_welcome(welcome: pb::Welcome) -> Result<(Welcome, SiteProfiles), Status> {
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
    let welcomed = Welcome {
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
        stopped_reports: welcome.stopped_reports,
    };
    let profiles = SiteProfiles::new(
        welcome.profiles,
        welcome.limits.unwrap_or_default(),
        welcome.vocabulary,
    );
    Ok((welcomed, profiles))
}

#[cfg(test)]
mod tests {
    use lps_proto::model::duration_to_pb;

    use super::*;

    #[test]
    fn welcome_defaults_and_clamps() {
        let (welcomed, profiles) = from_welcome(pb::Welcome {
            session_id: "s1".into(),
            profiles: vec![pb::SiteProfile {
                id: "naver".into(),
                ..Default::default()
            }],
            lost: vec![4],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(welcomed.heartbeat_interval, DEFAULT_HEARTBEAT_INTERVAL);
        assert_eq!(welcomed.lease_ttl, DEFAULT_LEASE_TTL);
        assert_eq!(welcomed.lost, [4]);
        assert_eq!(
            welcomed.silence_limit(),
            DEFAULT_LEASE_TTL,
            "a silent coordinator is given up once a lease would have run out"
        );
        assert!(profiles.get(&MallId::new("naver").unwrap()).is_some());
        assert!(profiles.get(&MallId::new("coupang").unwrap()).is_none());

        let (welcomed, _) = from_welcome(pb::Welcome {
            heartbeat_interval: Some(duration_to_pb(Duration::from_millis(1))),
            lease_ttl: Some(duration_to_pb(Duration::from_millis(100))),
            protocol_version: PROTOCOL_VERSION,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(welcomed.heartbeat_interval, MIN_HEARTBEAT_INTERVAL);
        assert_eq!(welcomed.silence_limit(), Duration::from_millis(150));
    }

    #[test]
    fn the_welcome_vocabulary_and_a_profile_s_words_judge_that_mall() {
        use lps_proto::pb::unit_word::Dimension;
        let unit = |word: &str| pb::UnitWord {
            word: word.into(),
            dimension: Dimension::Count.into(),
            milli_base: 0,
        };
        let mut base = Lexicon::builtin_wire();
        base.units.push(unit("꾸러미"));
        let additions = pb::Vocabulary {
            units: vec![unit("보따리")],
            ..Default::default()
        };
        let (_, profiles) = from_welcome(pb::Welcome {
            profiles: vec![
                pb::SiteProfile {
                    id: "naver".into(),
                    vocabulary: Some(additions),
                    ..Default::default()
                },
                pb::SiteProfile {
                    id: "coupang".into(),
                    ..Default::default()
                },
            ],
            vocabulary: Some(base),
            ..Default::default()
        })
        .unwrap();
        let naver = profiles.lexicon(&MallId::new("naver").unwrap());
        let coupang = profiles.lexicon(&MallId::new("coupang").unwrap());
        assert!(naver.unit("꾸러미").is_some() && naver.unit("보따리").is_some());
        assert!(coupang.unit("꾸러미").is_some() && coupang.unit("보따리").is_none());

        // Without a vocabulary (an older coordinator) the built-in words judge.
        let (_, profiles) = from_welcome(pb::Welcome::default()).unwrap();
        let any = profiles.lexicon(&MallId::new("naver").unwrap());
        assert!(any.unit("꾸러미").is_none() && any.unit("개").is_some());
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

    /// The revision a node reports for a mall is the one the coordinator computes from
    /// the same Welcome: the base words, plus the mall's additions when it has some.
    #[test]
    fn each_mall_has_the_revision_of_its_words() {
        let base = pb::Vocabulary {
            stopwords: vec!["무료배송".into()],
            ..Default::default()
        };
        let additions = pb::Vocabulary {
            stopwords: vec!["로켓배송".into()],
            ..Default::default()
        };
        let profiles = SiteProfiles::new(
            vec![
                pb::SiteProfile {
                    id: "coupang".into(),
                    vocabulary: Some(additions.clone()),
                    ..Default::default()
                },
                pb::SiteProfile {
                    id: "naver".into(),
                    ..Default::default()
                },
            ],
            pb::Limits::default(),
            Some(base.clone()),
        );
        let mall = |id: &str| MallId::new(id).unwrap();
        assert_eq!(
            profiles.vocabulary_revision(&mall("coupang")),
            vocabulary_revision(&base, Some(&additions))
        );
        assert_eq!(
            profiles.vocabulary_revision(&mall("naver")),
            vocabulary_revision(&base, None)
        );
        // No vocabulary from the coordinator: the built-in words' revision.
        assert_eq!(
            SiteProfiles::default().vocabulary_revision(&mall("naver")),
            vocabulary_revision(&Lexicon::builtin_wire(), None)
        );
    }
}
