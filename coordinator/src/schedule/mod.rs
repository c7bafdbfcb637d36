//! Schedules (watchlists): a stored product list searched again and again, and the
//! price-move events its rules fire (DESIGN §6 "Schedules").
//!
//! Owns the `schedule` and `schedule_observation` tables (migration 0021). Every change is
//! one guarded statement here (`sql/`), named after its precondition:
//!
//! - [`Schedules::create`], [`Schedules::pause_if_owned`], [`Schedules::delete_if_owned`]:
//!   the client's levers; another client's schedule is [`Error::NotFound`];
//! - [`Schedules::claim_due`]: `FOR UPDATE SKIP LOCKED` inside the `UPDATE … RETURNING`, due
//!   schedules in `next_run_at` order (index `schedule_due`), only those whose previous run
//!   is final and evaluated (`evaluated_run = run_number`): runs never overlap;
//! - [`Schedules::started_if_claimed`], [`Schedules::skipped_if_claimed`]: `WHERE claimed_by
//!   AND run_number` — the run number fences the claim; zero rows is
//!   [`Started::ClaimLost`], never applied;
//! - [`Schedules::evaluate`]: one transaction that locks the schedule if its run is not yet
//!   evaluated, stores the price-move events ([`crate::delivery::enqueue_price_moves`]) and
//!   the new observations, and marks the run evaluated — so an evaluation that runs again
//!   (another replica, a crash before commit) finds nothing to do or redoes all of it.
//!
//! A run is a search made by [`Queue::enqueue`], the path SearchService uses (active jobs
//! are joined), under the client's idempotency key `schedule-<id>-run-<n>`: a replica that
//! dies between the search and [`Schedules::started_if_claimed`] leaves a claim that
//! expires, and the replica that claims it next gets the same search back.
//!
//! The loop that drives these is [`scheduler`]; when runs are due is [`timing`]; what the
//! rules say is [`rules`].
//!
//! Time: every time-dependent statement takes an optional `now` (`None`: the database
//! clock); tests pin it with [`Schedules::at`].

pub mod rules;
pub mod scheduler;
pub mod timing;

use std::time::Duration;

use chrono::{DateTime, Utc};
use lps_proto::{
    model::{
        DestinationName, FieldError, MallId, Offer, PriceMoveRule, Priority, ProductHints,
        ProductSpec, ScheduleSpec, Timing, timestamp_to_pb,
    },
    pb,
};
use serde::{Deserialize, Serialize};
use sqlx::types::Json;
use tracing::instrument;

pub use scheduler::{ScheduleArgs, ScheduleConfig, Scheduler};

use crate::{
    delivery::{self, PriceMoveEvent, PriceMoveSource},
    error::Error,
    queue::Queue,
    search::{Page, ProductStatus, SearchStatus, Searches},
};

/// A stored schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub schedule_id: i64,
    pub client: String,
    pub products: Vec<ProductSpec>,
    pub malls: Vec<MallId>,
    pub timing: Timing,
    pub priority: Priority,
    pub destinations: Vec<DestinationName>,
    pub rules: Vec<PriceMoveRule>,
    pub paused: bool,
    pub next_run_at: DateTime<Utc>,
    /// Runs started so far.
    pub runs: u32,
    pub last_search_id: Option<i64>,
    pub last_run_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A product as stored in `schedule.products`.
#[derive(Debug, Serialize, Deserialize)]
struct StoredProduct {
    code: Option<String>,
    name: String,
    // NB: absent from schedules stored before products had hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    brand: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gtin: Option<String>,
}

fn stored_products(products: &[ProductSpec]) -> Json<Vec<StoredProduct>> {
    Json(
        products
            .iter()
            .map(|p| StoredProduct {
                code: p.code().map(str::to_owned),
                name: p.name().to_owned(),
                brand: p.hints().brand().map(str::to_owned),
                model_code: p.hints().model_code().map(str::to_owned),
                gtin: p.hints().gtin().map(str::to_owned),
            })
            .collect(),
    )
}

fn read_products(products: serde_json::Value) -> Result<Vec<ProductSpec>, Error> {
    let stored: Vec<StoredProduct> = serde_json::from_value(products)
        .map_err(|e| Error::Internal(format!("stored schedule products: {e}")))?;
    stored
        .iter()
        .map(|p| {
            let hints = ProductHints::new(
                p.brand.as_deref().unwrap_or_default(),
                p.model_code.as_deref().unwrap_or_default(),
                p.gtin.as_deref().unwrap_or_default(),
            )?;
            Ok(ProductSpec::new(p.code.as_deref(), &p.name)?.with_hints(hints))
        })
        .collect()
}

fn read_malls(malls: Vec<String>) -> Result<Vec<MallId>, Error> {
    malls
        .into_iter()
        .map(|m| MallId::new(m).map_err(Error::from))
        .collect()
}

fn read_timing(interval_ms: Option<i64>, cron: Option<String>) -> Result<Timing, Error> {
    match (interval_ms, cron) {
        (Some(ms), None) => Ok(Timing::Interval(Duration::from_millis(
            u64::try_from(ms).unwrap_or_default(),
        ))),
        (None, Some(cron)) => Ok(Timing::Cron(cron)),
        _ => Err(Error::Internal("stored schedule timing".into())),
    }
}

fn priority(stored: i16) -> Result<Priority, Error> {
    Ok(Priority::new(u32::try_from(stored).unwrap_or(u32::MAX))?)
}

/// The digest CreateSchedule's idempotency key binds: what the schedule asks, in a fixed
/// form (malls and destinations as sets).
fn request_digest(spec: &ScheduleSpec) -> String {
    use sha2::{Digest as _, Sha256};
    let mut malls: Vec<&str> = spec.malls.iter().map(MallId::as_str).collect();
    malls.sort_unstable();
    let mut destinations: Vec<&str> = spec.destinations.iter().map(|d| d.as_str()).collect();
    destinations.sort_unstable();
    let products = crate::queue::digest_products(&spec.products);
    let (interval_ms, cron) = match &spec.timing {
        Timing::Interval(d) => (Some(d.as_millis()), None),
        Timing::Cron(c) => (None, Some(c.as_str())),
    };
    let canonical = serde_json::json!({
        "products": products,
        "malls": malls,
        "interval_ms": interval_ms,
        "cron": cron,
        "priority": spec.priority.get(),
        "destinations": destinations,
        "rules": spec.rules,
    });
    Sha256::digest(canonical.to_string().as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A claimed due schedule: what the scheduler needs to start its run.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub schedule_id: i64,
    pub client: String,
    pub products: Vec<ProductSpec>,
    pub malls: Vec<MallId>,
    pub timing: Timing,
    pub priority: Priority,
    /// The last run started (0 before the first); this claim starts the one after it.
    pub run_number: i32,
    /// When the run is due.
    pub due: DateTime<Utc>,
    /// The clock of the claim.
    pub now: DateTime<Utc>,
}

/// What recording a run's start did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Started {
    Recorded,
    /// The claim had expired and another replica took the schedule (or it was deleted):
    /// nothing was changed.
    ClaimLost,
}

/// A run whose search is final and not yet evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unevaluated {
    pub schedule_id: i64,
    pub run: i32,
    /// `None`: the search is gone (deleted by hand); the run is evaluated with nothing.
    pub search_id: Option<i64>,
}

/// What evaluating a run did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evaluation {
    /// Whether this call evaluated it (false: another did, or the schedule is gone).
    pub evaluated: bool,
    /// The products whose rules fired, with why.
    pub moves: Vec<(usize, rules::Fired)>,
    /// Delivery rows stored (a move per destination).
    pub events: u64,
}

/// The schedules of a deployment. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Schedules {
    queue: Queue,
    now: Option<DateTime<Utc>>,
}

impl Schedules {
    pub fn new(queue: Queue) -> Self {
        Self { queue, now: None }
    }

    /// The same schedules with their clock (and their queue's) pinned to `now`.
    #[must_use]
    pub fn at(&self, now: DateTime<Utc>) -> Self {
        Self {
            queue: self.queue.at(now),
            now: Some(now),
        }
    }

    pub fn queue(&self) -> &Queue {
        &self.queue
    }

    fn pool(&self) -> &sqlx::PgPool {
        self.queue.pool()
    }

    fn clock(&self) -> DateTime<Utc> {
        self.now.unwrap_or_else(Utc::now)
    }

    /// Stores `spec` as client `client`'s schedule (or, for a repeated idempotency key with
    /// the same request, finds the first: `true`). Runs no more often than `min_interval`;
    /// every named mall must be enabled.
    #[instrument(name = "schedule.create", skip_all, fields(client = client), err(level = "info"))]
    pub async fn create(
        &self,
        spec: &ScheduleSpec,
        client: &str,
        min_interval: Duration,
    ) -> Result<(Schedule, bool), Error> {
        let now = self.clock();
        timing::check(&spec.timing, min_interval, now)?;
        let malls: Vec<String> = spec.malls.iter().map(|m| m.as_str().to_owned()).collect();
        let enabled = sqlx::query_scalar!(
            "select mall_id from mall where enabled and mall_id = any($1)",
            &malls
        )
        .fetch_all(self.pool())
        .await?;
        if let Some(i) = malls.iter().position(|m| !enabled.contains(m)) {
            return Err(FieldError::new(
                format!("malls[{i}]"),
                format!("unknown or disabled mall {:?}", malls[i]),
            )
            .into());
        }
        let first = timing::first_run(&spec.timing, now)?;
        let (interval_ms, cron) = match &spec.timing {
            Timing::Interval(d) => (Some(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)), None),
            Timing::Cron(c) => (None, Some(c.as_str())),
        };
        let destinations: Vec<String> = spec.destinations.iter().map(|d| d.to_string()).collect();
        let digest = request_digest(spec);
        let products = stored_products(&spec.products);
        let rules = Json(&spec.rules);
        let mut tries = 0;
        let row = loop {
            tries += 1;
            let result = sqlx::query_file!(
                "src/schedule/sql/create.sql",
                client,
                spec.idempotency_key.as_deref(),
                digest.as_str(),
                &products as _,
                &malls,
                interval_ms,
                cron,
                i16::from(spec.priority.get()),
                &destinations,
                &rules as _,
                first,
                self.now,
            )
            .fetch_one(self.pool())
            .await;
            match result {
                Ok(row) => break row,
                Err(sqlx::Error::Database(db))
                    if tries < 3
                        && db.is_unique_violation()
                        && db.constraint() == Some("schedule_client_key") => {}
                Err(e) => return Err(Error::from_db(e, "idempotency_key")),
            }
        };
        let replayed = row.replay_digest.is_some();
        if row.replay_digest.is_some_and(|d| d != digest) {
            return Err(Error::KeyReused {
                key: spec.idempotency_key.clone().unwrap_or_default(),
                what: "schedule",
                id: row.schedule_id,
            });
        }
        Ok((self.get(row.schedule_id, None).await?, replayed))
    }

    /// Schedule `id` if it is `client`'s (`None`: any client's, an admin); else
    /// [`Error::NotFound`].
    pub async fn get(&self, id: i64, client: Option<&str>) -> Result<Schedule, Error> {
        self.read(Some(id), client, None, 1)
            .await?
            .into_iter()
            .next()
            .ok_or(Error::NotFound("schedule", id))
    }

    /// One page of schedules, newest first: `client`'s (`None`: every client's), before
    /// schedule `before` when given, at most `limit`.
    #[instrument(name = "schedule.list", skip_all, err(level = "info"))]
    pub async fn list(
        &self,
        client: Option<&str>,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Page<Schedule>, Error> {
        let rows = self
            .read(None, client, before, i64::from(limit) + 1)
            .await?;
        Ok(Page::of(rows, limit, |s| s))
    }

    async fn read(
        &self,
        id: Option<i64>,
        client: Option<&str>,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<Schedule>, Error> {
        let rows = sqlx::query_file!("src/schedule/sql/get.sql", id, client, before, limit)
            .fetch_all(self.pool())
            .await?;
        rows.into_iter()
            .map(|r| {
                Ok(Schedule {
                    schedule_id: r.schedule_id,
                    client: r.client,
                    products: read_products(r.products)?,
                    malls: read_malls(r.malls)?,
                    timing: read_timing(r.interval_ms, r.cron)?,
                    priority: priority(r.priority)?,
                    destinations: r
                        .destinations
                        .into_iter()
                        .map(|d| DestinationName::new(d).map_err(Error::from))
                        .collect::<Result<_, _>>()?,
                    rules: serde_json::from_value(r.rules)
                        .map_err(|e| Error::Internal(format!("stored schedule rules: {e}")))?,
                    paused: r.paused,
                    next_run_at: r.next_run_at,
                    runs: u32::try_from(r.run_number).unwrap_or_default(),
                    last_search_id: r.last_search_id,
                    last_run_at: r.last_run_at,
                    last_error: r.last_error,
                    created_at: r.created_at,
                    updated_at: r.updated_at,
                })
            })
            .collect()
    }

    /// Pauses (`paused`) or resumes schedule `id` if it is `client`'s (`None`: an admin);
    /// else [`Error::NotFound`]. Repeating it is harmless.
    #[instrument(name = "schedule.pause", skip_all, fields(schedule.id = id, paused), err(level = "info"))]
    pub async fn pause_if_owned(
        &self,
        id: i64,
        paused: bool,
        client: Option<&str>,
    ) -> Result<Schedule, Error> {
        sqlx::query_file!("src/schedule/sql/pause.sql", id, paused, client, self.now)
            .fetch_optional(self.pool())
            .await?
            .ok_or(Error::NotFound("schedule", id))?;
        self.get(id, None).await
    }

    /// Deletes schedule `id` if it is `client`'s (`None`: an admin); else
    /// [`Error::NotFound`].
    #[instrument(name = "schedule.delete", skip_all, fields(schedule.id = id), err(level = "info"))]
    pub async fn delete_if_owned(&self, id: i64, client: Option<&str>) -> Result<(), Error> {
        sqlx::query_file!("src/schedule/sql/delete.sql", id, client)
            .fetch_optional(self.pool())
            .await?
            .ok_or(Error::NotFound("schedule", id))?;
        Ok(())
    }

    /// Claims at most `n` due schedules for `replica`, each for `claim_for`.
    #[instrument(name = "schedule.claim", skip_all, fields(count = tracing::field::Empty), err)]
    pub async fn claim_due(
        &self,
        replica: &str,
        n: u32,
        claim_for: Duration,
    ) -> Result<Vec<Claimed>, Error> {
        let rows = sqlx::query_file!(
            "src/schedule/sql/claim.sql",
            replica,
            i64::from(n),
            i64::try_from(claim_for.as_millis()).unwrap_or(i64::MAX),
            self.now
        )
        .fetch_all(self.pool())
        .await?;
        tracing::Span::current().record("count", rows.len() as i64);
        rows.into_iter()
            .map(|r| {
                Ok(Claimed {
                    schedule_id: r.schedule_id,
                    client: r.client,
                    products: read_products(r.products)?,
                    malls: read_malls(r.malls)?,
                    timing: read_timing(r.interval_ms, r.cron)?,
                    priority: priority(r.priority)?,
                    run_number: r.run_number,
                    due: r.next_run_at,
                    now: r.now,
                })
            })
            .collect()
    }

    /// Records run `run` of `claim` as started with search `search_id`, the next due at
    /// `next`, if `replica` still holds the claim and nobody started that run.
    pub async fn started_if_claimed(
        &self,
        replica: &str,
        claim: &Claimed,
        run: i32,
        search_id: i64,
        next: DateTime<Utc>,
    ) -> Result<Started, Error> {
        let row = sqlx::query_file!(
            "src/schedule/sql/started.sql",
            claim.schedule_id,
            replica,
            run,
            search_id,
            next,
            self.now
        )
        .fetch_optional(self.pool())
        .await?;
        Ok(match row {
            Some(_) => Started::Recorded,
            None => Started::ClaimLost,
        })
    }

    /// Gives `claim` back without a run, due again at `next`; `error`: why the run could not
    /// start (kept on the schedule), `None` for a transient failure.
    pub async fn skipped_if_claimed(
        &self,
        replica: &str,
        claim: &Claimed,
        next: DateTime<Utc>,
        error: Option<&str>,
    ) -> Result<Started, Error> {
        let row = sqlx::query_file!(
            "src/schedule/sql/skipped.sql",
            claim.schedule_id,
            replica,
            claim.run_number,
            next,
            error,
            self.now
        )
        .fetch_optional(self.pool())
        .await?;
        Ok(match row {
            Some(_) => Started::Recorded,
            None => Started::ClaimLost,
        })
    }

    /// At most `n` runs whose search is final and not yet evaluated.
    pub async fn unevaluated(&self, n: u32) -> Result<Vec<Unevaluated>, Error> {
        let rows = sqlx::query_file!("src/schedule/sql/unevaluated.sql", i64::from(n))
            .fetch_all(self.pool())
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| Unevaluated {
                schedule_id: r.schedule_id,
                run: r.run_number,
                search_id: r.last_search_id,
            })
            .collect())
    }

    /// Evaluates run `run.run`'s final search against the schedule's rules and previous
    /// observations, in one transaction: the price-move events (one per product that fired
    /// and destination), the new observations and the run marked evaluated commit together.
    /// A run that is no longer current or was evaluated already changes nothing.
    #[instrument(name = "schedule.evaluate", skip_all, fields(schedule.id = run.schedule_id, run = run.run), err)]
    pub async fn evaluate(&self, run: Unevaluated) -> Result<Evaluation, Error> {
        // NB: read before the transaction: the search is final, and no transaction waits on
        // a status read.
        let status = match run.search_id {
            Some(id) => match Searches::new(self.queue.clone()).status(id).await {
                Ok(status) => Some(status),
                Err(Error::NotFound(..)) => None,
                Err(e) => return Err(e),
            },
            None => None,
        };
        let now = self.clock();
        let mut tx = self.pool().begin().await?;
        let Some(locked) = sqlx::query_file!(
            "src/schedule/sql/evaluate_lock.sql",
            run.schedule_id,
            run.run
        )
        .fetch_optional(&mut *tx)
        .await?
        else {
            return Ok(Evaluation::default());
        };
        let rules: Vec<PriceMoveRule> = serde_json::from_value(locked.rules)
            .map_err(|e| Error::Internal(format!("stored schedule rules: {e}")))?;
        let products = read_products(locked.products)?;
        let previous: Vec<(i32, rules::Observed)> =
            sqlx::query_file!("src/schedule/sql/observations.sql", run.schedule_id)
                .fetch_all(&mut *tx)
                .await?
                .into_iter()
                .map(|r| {
                    (
                        r.product_index,
                        rules::Observed {
                            price: r.lowest_effective_price,
                            at: r.observed_at,
                        },
                    )
                })
                .collect();
        let mut evaluation = Evaluation {
            evaluated: true,
            ..Evaluation::default()
        };
        // NB: the status was read before the lock; it counts only if it is of the search
        // the locked row names for this run.
        let status = status.filter(|s| Some(s.search_id) == locked.last_search_id);
        let mut observed_index = Vec::new();
        let mut observed_price = Vec::new();
        if let Some(status) = &status {
            for product in &status.products {
                let Some(lowest) = product.lowest() else {
                    continue;
                };
                let price = lowest.effective_price();
                let index = i32::try_from(product.index).unwrap_or(i32::MAX);
                let before = previous.iter().find(|(i, _)| *i == index).map(|(_, o)| *o);
                observed_index.push(index);
                observed_price.push(price);
                let Some(fired) = rules::evaluate(&rules, product.index, price, before) else {
                    continue;
                };
                let spec = products.get(product.index);
                let events: Vec<PriceMoveEvent> = locked
                    .destinations
                    .iter()
                    .map(|destination| {
                        let event_id = uuid::Uuid::new_v4();
                        let body = render_price_move(&PriceMoveRender {
                            event_id,
                            destination,
                            schedule_id: run.schedule_id,
                            run: run.run,
                            status,
                            product,
                            spec,
                            price,
                            now,
                            previous: before,
                            fired: &fired,
                        })?;
                        Ok(PriceMoveEvent {
                            event_id,
                            destination: destination.clone(),
                            body,
                        })
                    })
                    .collect::<Result<_, Error>>()?;
                evaluation.events += delivery::enqueue_price_moves(
                    &mut tx,
                    PriceMoveSource {
                        schedule_id: run.schedule_id,
                        run: run.run,
                        search_id: status.search_id,
                        product_index: index,
                        search_version: status.version,
                    },
                    &events,
                    self.now,
                )
                .await?;
                evaluation.moves.push((product.index, fired));
            }
            if !observed_index.is_empty() {
                sqlx::query_file!(
                    "src/schedule/sql/observe.sql",
                    run.schedule_id,
                    run.run,
                    status.search_id,
                    now,
                    &observed_index,
                    &observed_price
                )
                .execute(&mut *tx)
                .await?;
            }
        }
        let marked = sqlx::query_file!(
            "src/schedule/sql/evaluated.sql",
            run.schedule_id,
            run.run,
            self.now
        )
        .fetch_optional(&mut *tx)
        .await?;
        if marked.is_none() {
            return Err(Error::Internal(format!(
                "schedule {} run {} changed under its lock",
                run.schedule_id, run.run
            )));
        }
        tx.commit().await?;
        Ok(evaluation)
    }
}

/// What one price-move event says.
struct PriceMoveRender<'a> {
    event_id: uuid::Uuid,
    destination: &'a str,
    schedule_id: i64,
    run: i32,
    status: &'a SearchStatus,
    product: &'a ProductStatus,
    /// The schedule's spelling of the product (the status has the answering job's).
    spec: Option<&'a ProductSpec>,
    price: i64,
    now: DateTime<Utc>,
    previous: Option<rules::Observed>,
    fired: &'a rules::Fired,
}

/// The cheapest offer with known shipping of each mall that found the product, cheapest
/// first: the offers that caused a move.
fn causing_offers(product: &ProductStatus) -> Vec<&Offer> {
    let mut offers: Vec<&Offer> = product
        .malls
        .iter()
        .filter_map(|m| {
            m.offers
                .iter()
                .filter(|o| o.shipping.is_known())
                .min_by_key(|o| (o.effective_price(), o.shipping_fee))
        })
        .collect();
    offers.sort_by_key(|o| (o.effective_price(), o.shipping_fee));
    offers
}

/// A price-move `DeliveryEvent` in the proto3 JSON mapping.
fn render_price_move(r: &PriceMoveRender<'_>) -> Result<String, Error> {
    let product = match r.spec {
        Some(p) => pb::Product::from(p),
        None => r.product.hints.to_pb(
            r.product.code.as_deref().unwrap_or_default(),
            &r.product.name,
        ),
    };
    let reasons = r
        .fired
        .reasons
        .iter()
        .map(|reason| match reason {
            rules::Reason::BelowTarget => pb::PriceMoveReason::BelowTarget as i32,
            rules::Reason::Moved => pb::PriceMoveReason::Moved as i32,
        })
        .collect();
    let event = pb::DeliveryEvent {
        event_id: r.event_id.to_string(),
        kind: pb::DeliveryEventKind::PriceMove as i32,
        occurred_at: Some(timestamp_to_pb(r.now)),
        destination: r.destination.to_owned(),
        search_id: r.status.search_id,
        product_index: u32::try_from(r.product.index).ok(),
        search: None,
        price_move: Some(pb::PriceMove {
            schedule_id: r.schedule_id,
            run: u32::try_from(r.run).unwrap_or_default(),
            product_index: u32::try_from(r.product.index).unwrap_or_default(),
            product: Some(product),
            lowest_effective_price: r.price,
            observed_at: Some(timestamp_to_pb(r.now)),
            previous_effective_price: r.previous.map(|p| p.price),
            previous_observed_at: r.previous.map(|p| timestamp_to_pb(p.at)),
            change_percent: r.fired.change_percent,
            reasons,
            target: r.fired.target,
            offers: causing_offers(r.product)
                .into_iter()
                .map(pb::Offer::from)
                .collect(),
            currency: lps_proto::model::CURRENCY.to_owned(),
        }),
    };
    lps_proto::json::to_json(&event, delivery::worker::EVENT_TYPE)
        .map_err(|e| Error::Internal(format!("price-move payload: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_binds_what_is_asked_not_its_order_of_sets() {
        let spec = |malls: &[&str], below: i64| ScheduleSpec {
            products: vec![ProductSpec::new(None, "삼다수 2L").unwrap()],
            malls: malls.iter().map(|m| MallId::new(*m).unwrap()).collect(),
            timing: Timing::Interval(Duration::from_secs(60)),
            priority: Priority::BATCH,
            destinations: vec![],
            rules: vec![PriceMoveRule {
                product_index: None,
                below: Some(below),
                move_percent: None,
            }],
            idempotency_key: None,
        };
        assert_eq!(
            request_digest(&spec(&["a", "b"], 100)),
            request_digest(&spec(&["b", "a"], 100))
        );
        assert_ne!(
            request_digest(&spec(&["a"], 100)),
            request_digest(&spec(&["a"], 101))
        );
    }
}
