//! The ops snapshot (DESIGN §6): the queue's figures, the fleet's, the alert rules'
//! state, the clients' searches, the delivery outbox and the schedules, read in a few single statements
//! (each from indexes or counters, so its cost does not grow with history). What
//! `GetOps`, `/ops`, the metrics and the alert evaluators read.

use chrono::{DateTime, Utc};
use tracing::instrument;

use crate::{
    error::Error,
    fleet::{Fleet, FleetOps},
    queue::{Queue, QueueOps},
};

/// Reads the ops snapshot. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Ops {
    queue: Queue,
    fleet: Fleet,
    now: Option<DateTime<Utc>>,
}

impl Ops {
    pub fn new(queue: Queue) -> Self {
        let fleet = Fleet::new(queue.pool().clone());
        Self {
            queue,
            fleet,
            now: None,
        }
    }

    /// The same reads with their clock (and the queue's) pinned to `now`.
    #[must_use]
    pub fn at(&self, now: DateTime<Utc>) -> Self {
        Self {
            queue: self.queue.at(now),
            fleet: self.fleet.at(now),
            now: Some(now),
        }
    }

    /// The whole ops snapshot.
    #[instrument(name = "ops.snapshot", skip_all, err(level = "info"))]
    pub async fn snapshot(&self) -> Result<OpsSnapshot, Error> {
        let queue = self.queue.ops().await?;
        let fleet = self.fleet.figures().await?;
        let alerts = sqlx::query_as!(
            AlertInfo,
            "select rule, firing, value, threshold, since from alert_state order by rule"
        )
        .fetch_all(self.queue.pool())
        .await?;
        let clients = sqlx::query_file_as!(ClientOps, "src/ops/sql/client_ops.sql", self.now)
            .fetch_all(self.queue.pool())
            .await?;
        let outbox = crate::delivery::Outbox::new(self.queue.pool().clone());
        let deliveries = match self.now {
            Some(now) => outbox.at(now),
            None => outbox,
        }
        .ops()
        .await?;
        let s = sqlx::query_file!("src/ops/sql/schedules.sql", self.now)
            .fetch_one(self.queue.pool())
            .await?;
        let schedules = ScheduleOps {
            active: s.active,
            paused: s.paused,
            waiting: s.waiting,
            failing: s.failing,
        };
        let profile_sets =
            crate::profiles::watch::profile_sets(self.queue.pool(), self.now).await?;
        Ok(OpsSnapshot {
            at: self.now.unwrap_or_else(Utc::now),
            profile_sets,
            queue,
            fleet,
            alerts,
            clients,
            deliveries,
            schedules,
        })
    }
}

/// One alert rule's state as the evaluators last recorded it (`alert_state`, shared by the
/// replicas).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AlertInfo {
    pub rule: String,
    pub firing: bool,
    pub value: f64,
    pub threshold: f64,
    /// When it last changed between firing and resolved.
    pub since: DateTime<Utc>,
}

/// The whole ops snapshot: the queue's figures, the fleet's and the alert rules' state.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OpsSnapshot {
    pub at: DateTime<Utc>,
    pub queue: QueueOps,
    pub fleet: FleetOps,
    /// Every rule evaluated so far, firing or not.
    pub alerts: Vec<AlertInfo>,
    /// Clients with a search in the last 24 hours, busiest first.
    pub clients: Vec<ClientOps>,
    /// The delivery outbox.
    pub deliveries: crate::delivery::DeliveryOps,
    /// The schedules (watchlists).
    pub schedules: ScheduleOps,
    /// The site profiles each replica serves, and an edit it refused.
    pub profile_sets: Vec<crate::profiles::watch::ProfileSetInfo>,
}

/// The schedules' figures.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ScheduleOps {
    /// Not paused.
    pub active: i64,
    pub paused: i64,
    /// Active, due, and waiting for the previous run to finish (a run that takes longer
    /// than the interval; many such schedules mean the crawl cannot keep up).
    pub waiting: i64,
    /// Whose last due run could not start (`Schedule.last_error`, e.g. a mall since
    /// disabled).
    pub failing: i64,
}

/// One client's searches of the last 24 hours.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ClientOps {
    pub client: String,
    pub searches_last_hour: i64,
    /// Searches with a queued or running job.
    pub active_searches: i64,
    /// Distinct jobs those searches wait for, by state (a shared job counts for each
    /// client whose search has it).
    pub queued_jobs: i64,
    pub running_jobs: i64,
    /// What the attempts of the jobs its searches queued cost in the last hour, USD.
    pub spend_usd_last_hour: f64,
}

impl ClientOps {
    /// A client without a search in the last 24 hours.
    pub fn idle(client: &str) -> Self {
        Self {
            client: client.to_owned(),
            searches_last_hour: 0,
            active_searches: 0,
            queued_jobs: 0,
            running_jobs: 0,
            spend_usd_last_hour: 0.0,
        }
    }
}
