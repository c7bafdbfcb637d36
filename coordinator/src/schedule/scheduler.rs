//! The scheduler: one task per replica that, every `LPS_SCHEDULE_POLL` (jittered), first
//! evaluates the runs whose search became final, then claims due schedules and starts their
//! runs. Any number of replicas run it against one database: claims are `FOR UPDATE SKIP
//! LOCKED` with a lease (`LPS_SCHEDULE_CLAIM_TTL`), starts are fenced by the run number,
//! and an evaluation is one transaction that finds nothing to do once another committed.
//!
//! A run's search is made by [`crate::queue::Queue::enqueue`] under the idempotency key
//! `schedule-<id>-run-<n>` of the schedule's client, so a claim taken over after a crash
//! gets the same search back instead of a second one. A run that cannot start (a mall
//! since disabled) is skipped to the next slot with the reason on the schedule; a
//! database outage gives the claim back untouched, to be tried at the next pass.
//!
//! Cancellation-safe: it stops between passes; a pass cut off leaves claims that expire.

use std::{sync::Arc, time::Duration};

use chrono::Utc;
use clap::Args;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, info, info_span, warn};

use super::{Claimed, Schedules, Started, Unevaluated, timing};
use crate::{error::Error, metrics::Metrics, queue::EnqueueContext, settings::ConfigError};

/// How often the scheduler looks for due schedules and final runs (`LPS_SCHEDULE_POLL`).
pub const DEFAULT_POLL: &str = "1s";
/// How long a claim of a due schedule lasts (`LPS_SCHEDULE_CLAIM_TTL`).
pub const DEFAULT_CLAIM_TTL: &str = "30s";
/// The shortest interval a schedule may have (`LPS_SCHEDULE_MIN_INTERVAL`).
pub const DEFAULT_MIN_INTERVAL: &str = "60s";
/// Most schedules one pass claims, and most runs it evaluates.
pub const BATCH: u32 = 32;

fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (write e.g. 30s, 5m)"))
}

#[derive(Debug, Clone, Args)]
pub struct ScheduleArgs {
    /// How often the scheduler looks for due schedules and for runs whose search is final
    /// (jittered).
    #[arg(long, env = "LPS_SCHEDULE_POLL", default_value = DEFAULT_POLL, value_parser = duration)]
    pub schedule_poll: Duration,
    /// How long a replica's claim of a due schedule lasts: one that dies between claiming
    /// and recording the run leaves it to another replica after this.
    #[arg(long, env = "LPS_SCHEDULE_CLAIM_TTL", default_value = DEFAULT_CLAIM_TTL, value_parser = duration)]
    pub schedule_claim_ttl: Duration,
    /// The shortest interval (or gap between cron times) a schedule may ask for.
    #[arg(long, env = "LPS_SCHEDULE_MIN_INTERVAL", default_value = DEFAULT_MIN_INTERVAL, value_parser = duration)]
    pub schedule_min_interval: Duration,
}

/// The validated scheduler settings.
#[derive(Debug, Clone)]
pub struct ScheduleConfig {
    pub poll: Duration,
    pub claim_ttl: Duration,
    pub min_interval: Duration,
}

impl ScheduleArgs {
    pub fn validate(self) -> Result<ScheduleConfig, ConfigError> {
        let bad = |setting: &'static str, reason: &str| ConfigError {
            setting,
            reason: reason.to_owned(),
        };
        if self.schedule_poll.is_zero() {
            return Err(bad("LPS_SCHEDULE_POLL", "must be positive"));
        }
        if self.schedule_claim_ttl < Duration::from_secs(1) {
            return Err(bad("LPS_SCHEDULE_CLAIM_TTL", "must be at least 1s"));
        }
        if self.schedule_min_interval < Duration::from_secs(1) {
            return Err(bad("LPS_SCHEDULE_MIN_INTERVAL", "must be at least 1s"));
        }
        Ok(ScheduleConfig {
            poll: self.schedule_poll,
            claim_ttl: self.schedule_claim_ttl,
            min_interval: self.schedule_min_interval,
        })
    }
}

/// The scheduler of one replica.
#[derive(Debug, Clone)]
pub struct Scheduler {
    schedules: Schedules,
    config: ScheduleConfig,
    metrics: Arc<Metrics>,
    /// Names this replica on its claims.
    id: Arc<str>,
}

impl Scheduler {
    pub fn new(
        schedules: Schedules,
        config: ScheduleConfig,
        metrics: Arc<Metrics>,
        id: &str,
    ) -> Self {
        Self {
            schedules,
            config,
            metrics,
            id: Arc::from(id),
        }
    }

    /// Passes until `cancel`.
    pub async fn run(self, cancel: CancellationToken) {
        loop {
            self.pass()
                .instrument(info_span!(parent: None, "schedule.pass"))
                .await;
            let wait = self.config.poll.mul_f64(0.75 + fastrand::f64() * 0.5);
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// One pass: evaluate the final runs, then start the due ones (so a schedule whose run
    /// just became final can start its next in the same pass).
    pub async fn pass(&self) {
        match self.schedules.unevaluated(BATCH).await {
            Ok(runs) => {
                for run in runs {
                    self.evaluate(run).await;
                }
            }
            Err(e) => warn!(error = %e, "runs to evaluate not read; next pass"),
        }
        let claimed = match self
            .schedules
            .claim_due(&self.id, BATCH, self.config.claim_ttl)
            .await
        {
            Ok(claimed) => claimed,
            Err(e) => {
                warn!(error = %e, "due schedules not claimed; next pass");
                return;
            }
        };
        for claim in claimed {
            self.start(&claim).await;
        }
    }

    async fn evaluate(&self, run: Unevaluated) {
        match self.schedules.evaluate(run).await {
            Ok(e) if e.evaluated => {
                for (_, fired) in &e.moves {
                    for reason in &fired.reasons {
                        self.metrics.record_price_move(reason.as_str());
                    }
                }
                info!(
                    schedule.id = run.schedule_id,
                    run = i64::from(run.run),
                    moves = e.moves.len() as i64,
                    events = e.events as i64,
                    "schedule run evaluated"
                );
            }
            Ok(_) => {}
            Err(e) => {
                warn!(schedule.id = run.schedule_id, run = i64::from(run.run), error = %e, "schedule run not evaluated; next pass");
            }
        }
    }

    /// Starts the run `claim` is for: a search of the schedule's client, then the start
    /// recorded (fenced by the run number) with the next run's due time.
    async fn start(&self, claim: &Claimed) {
        let run = claim.run_number + 1;
        let span = info_span!(
            "schedule.start",
            schedule.id = claim.schedule_id,
            run = i64::from(run),
            search.id = tracing::field::Empty,
        );
        async {
            let outcome = match self.try_start(claim, run).await {
                Ok(outcome) => outcome,
                Err(e) => {
                    warn!(error = %e, "schedule run start not recorded; its claim expires");
                    "unrecorded"
                }
            };
            self.metrics.record_schedule_run(outcome);
        }
        .instrument(span)
        .await;
    }

    async fn try_start(&self, claim: &Claimed, run: i32) -> Result<&'static str, Error> {
        let key = format!("schedule-{}-run-{run}", claim.schedule_id);
        let request = lps_proto::model::SearchRequest::new(
            claim.products.clone(),
            claim.malls.clone(),
            claim.priority,
            None,
            Some(key),
        );
        let ctx = EnqueueContext {
            client: claim.client.clone(),
            caller: Some(format!("schedule-{}", claim.schedule_id)),
            traceparent: None,
            tracestate: None,
            schedule_id: Some(claim.schedule_id),
        };
        let accepted = match request {
            Ok(request) => self.schedules.queue().enqueue(&request, &ctx).await,
            Err(e) => Err(e.into()),
        };
        let next = timing::next_run(&claim.timing, claim.due, claim.now);
        match (accepted, next) {
            (Ok(accepted), Ok(next)) => {
                tracing::Span::current().record("search.id", accepted.search_id);
                let started = self
                    .schedules
                    .started_if_claimed(&self.id, claim, run, accepted.search_id, next)
                    .await?;
                Ok(match started {
                    Started::Recorded => {
                        info!(replayed = accepted.replayed, next_run_at = %next, "schedule run started");
                        "started"
                    }
                    Started::ClaimLost => "claim_lost",
                })
            }
            (Err(e), _) if e.is_transient() => {
                warn!(error = %e, "schedule run not started; tried again at the next pass");
                self.schedules
                    .skipped_if_claimed(&self.id, claim, claim.due, None)
                    .await?;
                Ok("retry")
            }
            (Err(e), next) => {
                let reason = match &e {
                    Error::InvalidArgument(f) => f.to_string(),
                    other => other.to_string(),
                };
                warn!(error = %reason, "schedule run cannot start; skipped to its next time");
                // NB: a cron pattern without a next time (it cannot be: checked at create)
                // would leave the schedule due for ever; an hour's wait bounds the retries.
                let next = next.unwrap_or_else(|_| Utc::now() + chrono::Duration::hours(1));
                self.schedules
                    .skipped_if_claimed(&self.id, claim, next, Some(&reason))
                    .await?;
                Ok("skipped")
            }
            (Ok(_), Err(e)) => Err(Error::Internal(format!("next run time: {e}"))),
        }
    }
}
