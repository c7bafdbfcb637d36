//! The profile directory, watched: a profile fix reaches the nodes without a restart
//! (DESIGN §5 "Profile revisions").
//!
//! [`Watcher::run`] reads `LPS_PROFILES_DIR` (if set) every `LPS_PROFILES_POLL` and hashes
//! what it read ([`super::revision`]); every [`SEEN_EVERY`] it renews its replica's
//! `profile_set` row, which the ops snapshot shows while it is younger than [`SHOWN_FOR`]. NB: polling, not file notifications: a mounted Kubernetes
//! ConfigMap changes by swapping the `..data` symbolic link the files point through, which
//! inotify on the directory does not report; reading the files through their links sees
//! the swap on the next poll.
//!
//! An edit (another revision) is checked as start-up checks it — every file parses and
//! compiles, every mall of `LPS_MALLS` keeps a profile — and besides keeps each mall's
//! `[vocabulary]` additions as they were at start-up (the queue's judge, which the negative
//! cache answers with, was built with them; changing words takes a restart). Then:
//! - valid: the set is published on a `watch` channel; every node stream sends it to its
//!   node as `ProfileUpdate` before its next Assign, and new streams get it in Welcome.
//!   The malls' queue limits are re-registered (as at start-up, by the replica whose
//!   settings are current). Logged, counted (`profile_reloads{outcome="applied"}`).
//! - invalid: refused and the loaded set kept; the error names the file and the field,
//!   is logged once per edit, counted (`profile_reloads{outcome="refused"}`,
//!   `profile_edit_refused` = 1) and shown by `lpsctl ops` (`profile_set`).
//!
//! Persisted (this module is the one writer of both tables): `profile_set`, per replica the
//! revision it serves and the last edit it refused; `job_profile_revision`, the revision
//! each assigned lease ran with ([`record_assigned`], called by the node streams).
//!
//! What an edit does not change until a restart: the vocabulary file, a mall's
//! `[vocabulary]` additions (refused, above), and the proxy ledger's per-mall
//! `ip_request_budget` (read when the ledger is built).
//!
//! Cancellation-safe: the loop awaits only between whole steps; a database write that
//! fails is retried on the next poll.

use std::{collections::BTreeMap, path::PathBuf, sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use lps_proto::{
    model::{Lease, MallId},
    pb,
};
use sqlx::PgPool;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, instrument, warn};

use super::{SiteProfile, limits, revision};
use crate::{
    metrics::{Metrics, OutcomeLabels},
    queue::Queue,
};

/// `LPS_PROFILES_POLL` when unset.
pub const DEFAULT_PROFILES_POLL: &str = "5s";
/// How often a running replica renews its `profile_set` row.
pub const SEEN_EVERY: Duration = Duration::from_secs(60);
/// A `profile_set` row renewed longer ago than this is a replica that is gone: not shown.
pub const SHOWN_FOR: Duration = Duration::from_secs(180);
/// Rows renewed longer ago than this are deleted when a replica starts.
const FORGOTTEN_AFTER: Duration = Duration::from_secs(3600);

/// The profile set the node streams send (Welcome, ProfileUpdate).
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileSet {
    /// [`super::revision`] of the files it was loaded from.
    pub revision: String,
    pub profiles: Vec<pb::SiteProfile>,
}

impl ProfileSet {
    pub fn new(revision: String, profiles: &[SiteProfile]) -> Self {
        Self {
            revision,
            profiles: profiles.iter().map(|p| p.wire.clone()).collect(),
        }
    }
}

/// Why an edit of the profile directory was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefusedEdit {
    /// A file that does not parse or compile, or an unreadable directory.
    #[error(transparent)]
    Profile(#[from] super::ProfileError),
    #[error("no site profile for mall {mall:?} any more (enabled by LPS_MALLS)")]
    EnabledMallMissing { mall: String },
    #[error(
        "site profile {file} (mall {mall}): vocabulary: the [vocabulary] additions changed; words take a coordinator restart (the negative cache is judged with the words it started with)"
    )]
    VocabularyChanged { file: String, mall: String },
}

/// What the watcher must record in `profile_set` (retried until it is written).
#[derive(Debug, Clone)]
enum Record {
    Loaded {
        revision: String,
    },
    Refused {
        revision: Option<String>,
        error: String,
    },
}

/// Watches one profile directory; see the module doc.
#[derive(Debug)]
pub struct Watcher {
    /// `None`: the built-in profiles only; the row is still renewed.
    pub dir: Option<PathBuf>,
    pub poll: Duration,
    pub queue: Queue,
    pub coordinator_id: String,
    /// `LPS_MALLS`: each needs a profile in every set.
    pub enabled: Vec<MallId>,
    /// Whether this replica registers the malls' queue limits (its settings are current).
    pub registers_malls: bool,
    pub metrics: Arc<Metrics>,
    /// Where the current set is published.
    pub current: watch::Sender<Arc<ProfileSet>>,
    /// Each mall's `[vocabulary]` additions at start-up.
    additions: BTreeMap<String, Option<pb::Vocabulary>>,
}

impl Watcher {
    /// A watcher whose start-up set is `profiles` (already published on `current`).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        dir: Option<PathBuf>,
        poll: Duration,
        queue: Queue,
        coordinator_id: String,
        enabled: Vec<MallId>,
        registers_malls: bool,
        metrics: Arc<Metrics>,
        current: watch::Sender<Arc<ProfileSet>>,
        profiles: &[SiteProfile],
    ) -> Self {
        let additions = profiles
            .iter()
            .map(|p| (p.wire.id.clone(), p.wire.vocabulary.clone()))
            .collect();
        Self {
            dir,
            poll,
            queue,
            coordinator_id,
            enabled,
            registers_malls,
            metrics,
            current,
            additions,
        }
    }

    /// Polls the directory until `cancel`.
    pub async fn run(self, cancel: CancellationToken) {
        let mut seen = self.current.borrow().revision.clone();
        let mut unrecorded: Option<Record> = None;
        let mut tick = tokio::time::interval(self.poll);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut seen_at = tokio::time::Instant::now();
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Some(record) = unrecorded.take() {
                unrecorded = self.record(record).await;
            }
            if seen_at.elapsed() >= SEEN_EVERY {
                match record_seen(self.queue.pool(), &self.coordinator_id).await {
                    Ok(()) => seen_at = tokio::time::Instant::now(),
                    Err(e) => warn!(error = %e, "could not renew the profile set's row; retrying"),
                }
            }
            let Some(dir) = &self.dir else {
                continue;
            };
            let files = match lps_profiles::format::read_dir(dir) {
                Ok(files) => files,
                Err(e) => {
                    let error = e.to_string();
                    if seen != error {
                        seen = error;
                        unrecorded = self.refuse(None, &RefusedEdit::from(e)).await;
                    }
                    continue;
                }
            };
            let revision = revision(&files);
            if revision == seen {
                continue;
            }
            seen = revision.clone();
            if revision == self.current.borrow().revision {
                // Back to what is loaded (a refused edit undone): nothing to send.
                info!(profiles.revision = %revision, "profile directory back to the loaded profiles");
                self.metrics.profile_edit_refused.set(0);
                unrecorded = self.record(Record::Loaded { revision }).await;
                continue;
            }
            unrecorded = match self.check(&files) {
                Ok(profiles) => self.apply(revision, &profiles).await,
                Err(e) => self.refuse(Some(revision), &e).await,
            };
        }
    }

    /// The profiles of `files`, or why they cannot replace the loaded ones.
    fn check(&self, files: &[(String, String)]) -> Result<Vec<SiteProfile>, RefusedEdit> {
        check_edit(files, &self.enabled, &self.additions)
    }

    #[instrument(name = "profiles.apply", skip_all, fields(profiles.revision = %revision))]
    async fn apply(&self, revision: String, profiles: &[SiteProfile]) -> Option<Record> {
        let set = Arc::new(ProfileSet::new(revision.clone(), profiles));
        let previous = self.current.borrow().clone();
        let changed: Vec<String> = set
            .profiles
            .iter()
            .filter(|p| !previous.profiles.contains(p))
            .map(|p| p.id.clone())
            .collect();
        if self.registers_malls {
            for profile in profiles {
                let enabled = self.enabled.contains(&profile.mall());
                if let Err(e) = self.queue.upsert_mall(&limits(profile, enabled)).await {
                    // NB: the limits stay as they were until the next edit or restart;
                    // the profiles themselves still go out.
                    warn!(mall = %profile.wire.id, error = %e, "could not register the mall's new limits");
                }
            }
        }
        self.current.send_replace(set);
        self.count("applied");
        self.metrics.profile_edit_refused.set(0);
        info!(
            previous = %previous.revision,
            profiles = profiles.len(),
            changed = ?changed,
            "site profiles reloaded; sending them to the nodes"
        );
        self.record(Record::Loaded { revision }).await
    }

    async fn refuse(&self, revision: Option<String>, e: &RefusedEdit) -> Option<Record> {
        let error = e.to_string();
        warn!(
            profiles.revision = revision.as_deref().unwrap_or_default(),
            loaded = %self.current.borrow().revision,
            error = %error,
            "refused an edit of the profile directory; keeping the loaded profiles"
        );
        self.count("refused");
        self.metrics.profile_edit_refused.set(1);
        self.record(Record::Refused { revision, error }).await
    }

    fn count(&self, outcome: &str) {
        self.metrics
            .profile_reloads
            .get_or_create(&OutcomeLabels {
                outcome: outcome.into(),
            })
            .inc();
    }

    /// Writes `record`; gives it back when the database failed (retried on the next poll).
    async fn record(&self, record: Record) -> Option<Record> {
        let pool = self.queue.pool();
        let written = match &record {
            Record::Loaded { revision } => {
                record_loaded(pool, &self.coordinator_id, revision).await
            }
            Record::Refused { revision, error } => {
                record_refused(pool, &self.coordinator_id, revision.as_deref(), error).await
            }
        };
        match written {
            Ok(()) => None,
            Err(e) => {
                warn!(error = %e, "could not record the profile set; retrying");
                Some(record)
            }
        }
    }
}

/// The profiles of `files` if they may replace the loaded ones: they load, every mall of
/// `enabled` has one, and each mall's `[vocabulary]` additions equal `additions` (the
/// start-up ones; a mall new since has none).
fn check_edit(
    files: &[(String, String)],
    enabled: &[MallId],
    additions: &BTreeMap<String, Option<pb::Vocabulary>>,
) -> Result<Vec<SiteProfile>, RefusedEdit> {
    let profiles = lps_profiles::format::load_files(files)?;
    for mall in enabled {
        if !profiles.iter().any(|p| p.wire.id == mall.as_str()) {
            return Err(RefusedEdit::EnabledMallMissing {
                mall: mall.to_string(),
            });
        }
    }
    for p in &profiles {
        let before = additions.get(&p.wire.id).cloned().flatten();
        if before != p.wire.vocabulary {
            return Err(RefusedEdit::VocabularyChanged {
                file: p.file.clone(),
                mall: p.wire.id.clone(),
            });
        }
    }
    Ok(profiles)
}

/// Records that this replica serves `revision` (and has no refused edit).
pub async fn record_loaded(
    pool: &PgPool,
    coordinator_id: &str,
    revision: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "insert into profile_set (coordinator_id, revision) values ($1, $2)
         on conflict (coordinator_id) do update
             set revision = excluded.revision, loaded_at = now(), seen_at = now(),
                 refused_revision = null, refused_error = null, refused_at = null",
        coordinator_id,
        revision
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Renews this replica's row: it still serves what the row says.
async fn record_seen(pool: &PgPool, coordinator_id: &str) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "update profile_set set seen_at = now() where coordinator_id = $1",
        coordinator_id
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Deletes the rows of replica processes gone for long (a replica id names one process).
pub async fn forget_gone_replicas(pool: &PgPool) -> Result<u64, sqlx::Error> {
    let gone = sqlx::query!(
        "delete from profile_set where seen_at < now() - make_interval(secs => $1)",
        FORGOTTEN_AFTER.as_secs_f64()
    )
    .execute(pool)
    .await?;
    Ok(gone.rows_affected())
}

/// Records an edit this replica refused (`revision`: `None` when the directory could not
/// be read at all). The row's served revision stays.
async fn record_refused(
    pool: &PgPool,
    coordinator_id: &str,
    revision: Option<&str>,
    error: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "update profile_set
            set refused_revision = $2, refused_error = $3, refused_at = now(), seen_at = now()
          where coordinator_id = $1",
        coordinator_id,
        revision,
        error
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Records the profile revision the leases of `leases` run with (the revision the node
/// stream last sent its node before their Assigns). A lease recorded before keeps its
/// revision.
pub async fn record_assigned(
    pool: &PgPool,
    revision: &str,
    leases: &[Lease],
) -> Result<(), sqlx::Error> {
    let (jobs, epochs): (Vec<i64>, Vec<i64>) = leases.iter().map(|l| (l.job_id, l.epoch)).unzip();
    sqlx::query!(
        "insert into job_profile_revision (job_id, lease_epoch, revision)
         select job_id, lease_epoch, $3 from unnest($1::bigint[], $2::bigint[]) as l (job_id, lease_epoch)
         on conflict do nothing",
        &jobs,
        &epochs,
        revision
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// The revision a job's lease ran with, if it was recorded.
pub async fn assigned_revision(pool: &PgPool, lease: Lease) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "select revision from job_profile_revision where job_id = $1 and lease_epoch = $2",
        lease.job_id,
        lease.epoch
    )
    .fetch_optional(pool)
    .await
}

/// One replica's profile set as `profile_set` records it (`lpsctl ops`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ProfileSetInfo {
    pub coordinator_id: String,
    pub revision: String,
    pub loaded_at: DateTime<Utc>,
    pub refused_revision: Option<String>,
    pub refused_error: Option<String>,
    pub refused_at: Option<DateTime<Utc>>,
}

/// The profile set of every replica that is running (renewed within [`SHOWN_FOR`] of
/// `now`, default the database's clock), by replica id.
pub async fn profile_sets(
    pool: &PgPool,
    now: Option<DateTime<Utc>>,
) -> Result<Vec<ProfileSetInfo>, sqlx::Error> {
    sqlx::query_as!(
        ProfileSetInfo,
        "select coordinator_id, revision, loaded_at, refused_revision, refused_error, refused_at
           from profile_set
          where seen_at > coalesce($1, now()) - make_interval(secs => $2)
          order by coordinator_id",
        now,
        SHOWN_FOR.as_secs_f64()
    )
    .fetch_all(pool)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alpha(extra: &str) -> (String, String) {
        let text = lps_profiles::format::builtin_text("testmall-alpha.toml").unwrap();
        (
            "/etc/lps/profiles/alpha.toml".into(),
            format!("{text}\n{extra}"),
        )
    }

    fn start_up() -> BTreeMap<String, Option<pb::Vocabulary>> {
        lps_profiles::format::load_files(&[])
            .unwrap()
            .into_iter()
            .map(|p| (p.wire.id.clone(), p.wire.vocabulary.clone()))
            .collect()
    }

    #[test]
    fn an_edit_that_loads_and_keeps_the_words_is_accepted() {
        let enabled = [MallId::new("testmall-alpha").unwrap()];
        let file = alpha("");
        let edited = (file.0, file.1.replace("max_cards = 40", "max_cards = 20"));
        let profiles = check_edit(&[edited], &enabled, &start_up()).unwrap();
        let alpha = profiles
            .iter()
            .find(|p| p.wire.id == "testmall-alpha")
            .unwrap();
        assert_eq!(alpha.wire.max_cards, 20);
    }

    #[test]
    fn an_invalid_file_is_refused_naming_the_file_and_the_field() {
        let file = alpha("");
        let broken = (file.0, file.1.replace("div.product-price", "div[["));
        let e = check_edit(&[broken], &[], &start_up()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("site profile /etc/lps/profiles/alpha.toml: sources[0].fields.price"),
            "{e}"
        );
    }

    #[test]
    fn changed_words_and_a_lost_enabled_mall_take_a_restart() {
        let words = alpha(
            "[[vocabulary.variants]]\nname = \"flavour\"\nvalues = [[\"흑임자\", \"black sesame\"]]\n",
        );
        let e = check_edit(&[words], &[], &start_up()).unwrap_err();
        assert!(
            matches!(&e, RefusedEdit::VocabularyChanged { file, mall }
                if file == "/etc/lps/profiles/alpha.toml" && mall == "testmall-alpha"),
            "{e:?}"
        );
        // Built-in profiles always load, so only an enabled mall without any profile is lost.
        let e = check_edit(&[], &[MallId::new("elsewhere").unwrap()], &start_up()).unwrap_err();
        assert_eq!(
            e,
            RefusedEdit::EnabledMallMissing {
                mall: "elsewhere".into()
            }
        );
    }
}
