//! The delivery worker: one task per replica that claims due deliveries and posts them,
//! apart from the job queue's claim path (its own task, its own statements, a pooled
//! connection only for the length of one statement).
//!
//! A receiver that answers slowly or with 5xx never blocks the queue or the other
//! receivers: every request has a time limit (`LPS_DELIVERY_TIMEOUT`), at most
//! `LPS_DELIVERY_CONCURRENCY` are in flight (the worker claims only as many rows as it has
//! free permits), and a claim lasts the time limit plus a margin, so a replica that dies
//! mid-request leaves a row another replica claims once the claim expires.
//!
//! The worker wakes when a transaction that stored delivery events commits (NOTIFY on
//! `lps_delivery`, through the job listener's connection) and polls every
//! `LPS_DELIVERY_POLL` besides, for retries that come due and lost notifications.
//!
//! One attempt: the payload (a `DeliveryEvent` in the proto3 JSON mapping) is rendered from
//! the search's status on the first attempt and stored with its outcome, so every later
//! attempt sends the same bytes; the request is signed with a fresh timestamp
//! ([`super::signature`]); a 2xx answer is delivered, anything else (another status, a
//! redirect — never followed —, a timeout, a refused connection) a failed attempt, retried
//! after [`super::backoff`] or dead after `LPS_DELIVERY_MAX_ATTEMPTS`.
//!
//! An alert rule's announcement (`alert_rule` set) is stored with its message and posted
//! to the alert webhook (`LPS_ALERT_WEBHOOK_URL`, signed with `LPS_ALERT_WEBHOOK_SECRET`
//! when one is set) with the same retries, backoff and dead state.
//!
//! A replica claims only events of destinations it has configured (none: it claims
//! nothing), so one whose configuration lacks a destination — a rollout adding it — leaves
//! those events to the replicas that have it.
//!
//! Shutdown: no new claims; requests in flight get up to their time limit to finish;
//! whatever is cut off is claimed again after its claim expires (at-least-once).

use std::{sync::Arc, time::Duration};

use chrono::Utc;
use lps_proto::pb;
use tokio::{sync::Semaphore, task::JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, info, info_span, warn};

use super::{
    Claimed, DeliveryConfig, Outbox, Recorded, backoff,
    signature::{EVENT_ID_HEADER, SIGNATURE_HEADER, sign},
};
use crate::{metrics::Metrics, queue::Wakeups, search::Searches};

/// The full name of the payload's proto type.
pub const EVENT_TYPE: &str = "lps.v1.DeliveryEvent";

/// How much longer than one request's time limit a claim lasts.
const CLAIM_MARGIN: Duration = Duration::from_secs(5);

/// How long a claim whose payload could not be read waits before it is due again.
const RELEASE_DELAY: Duration = Duration::from_secs(1);

/// The delivery worker of one replica.
#[derive(Debug, Clone)]
pub struct Worker {
    outbox: Outbox,
    searches: Searches,
    config: Arc<DeliveryConfig>,
    metrics: Arc<Metrics>,
    client: reqwest::Client,
    /// Names this worker on its claims (the replica's id).
    id: Arc<str>,
    /// Moves when delivery events were stored (`None`: poll only).
    wakeups: Option<Wakeups>,
}

impl Worker {
    pub fn new(
        searches: Searches,
        config: DeliveryConfig,
        metrics: Arc<Metrics>,
        id: &str,
    ) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            // NB: a redirect would send the signed event to an address no operator
            // configured; it is a failed attempt instead.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("lps-coordinator/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self {
            outbox: Outbox::new(searches.queue().pool().clone()),
            searches,
            config: Arc::new(config),
            metrics,
            client,
            id: Arc::from(id),
            wakeups: None,
        })
    }

    /// Wakes the worker when delivery events are stored, besides its poll.
    #[must_use]
    pub fn with_wakeups(mut self, wakeups: Wakeups) -> Self {
        self.wakeups = Some(wakeups);
        self
    }

    /// Claims and posts deliveries until `cancel`.
    pub async fn run(mut self, cancel: CancellationToken) {
        let concurrency = usize::try_from(self.config.concurrency).unwrap_or(1).max(1);
        let permits = Arc::new(Semaphore::new(concurrency));
        let claim_for = self.config.timeout + CLAIM_MARGIN;
        let mut destinations: Vec<String> = self
            .config
            .destinations
            .names()
            .map(str::to_owned)
            .collect();
        if self.config.alert_webhook.is_some() {
            destinations.push(super::ALERT_DESTINATION.to_owned());
        }
        let mut in_flight = JoinSet::new();
        info!(
            destinations = ?destinations,
            concurrency,
            "delivery worker started"
        );
        loop {
            while in_flight.try_join_next().is_some() {}
            let free = permits.available_permits();
            let mut more_due = false;
            if let Some(w) = &mut self.wakeups {
                w.mark_seen();
            }
            if free > 0 && !destinations.is_empty() {
                let n = u32::try_from(free).unwrap_or(u32::MAX);
                match self
                    .outbox
                    .claim(&self.id, &destinations, n, claim_for)
                    .await
                {
                    Ok(claimed) => {
                        more_due = claimed.len() == free;
                        for claim in claimed {
                            // NB: never waits: at most `free` rows were claimed.
                            let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
                                break;
                            };
                            let worker = self.clone();
                            let span = info_span!(
                                parent: None,
                                "delivery.attempt",
                                delivery.id = claim.delivery_id,
                                search.id = claim.search_id,
                                destination = %claim.destination,
                                attempt = i64::from(claim.attempt),
                            );
                            in_flight.spawn(
                                async move {
                                    worker.attempt(claim).await;
                                    drop(permit);
                                }
                                .instrument(span),
                            );
                        }
                    }
                    Err(e) => warn!(error = %e, "delivery claim failed; trying again"),
                }
            }
            if more_due && permits.available_permits() > 0 {
                continue;
            }
            let poll = self.config.poll;
            let woken = async {
                match &mut self.wakeups {
                    Some(w) => {
                        w.wait(poll).await;
                    }
                    None => tokio::time::sleep(poll.mul_f64(0.8 + fastrand::f64() * 0.4)).await,
                }
            };
            tokio::select! {
                () = cancel.cancelled() => break,
                () = woken => {}
                Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
            }
        }
        let drain = tokio::time::timeout(self.config.timeout + Duration::from_secs(1), async {
            while in_flight.join_next().await.is_some() {}
        });
        if drain.await.is_err() {
            warn!(
                in_flight = in_flight.len(),
                "deliveries still in flight at shutdown; they are claimed again when their claims expire"
            );
            in_flight.abort_all();
        }
    }

    /// One attempt of `claim`: render (first attempt), post, record the outcome.
    async fn attempt(&self, claim: Claimed) {
        let body = match &claim.body {
            Some(body) => body.clone(),
            None => match self.render(&claim).await {
                Ok(body) => body,
                Err(e) => {
                    warn!(error = %e, "delivery payload not rendered; the claim is given back");
                    if let Err(e) = self
                        .outbox
                        .release_if_claimed(&self.id, &claim, RELEASE_DELAY)
                        .await
                    {
                        warn!(error = %e, "claim not given back; it is due again when it expires");
                    }
                    return;
                }
            },
        };
        let (status, error) = self.post(&claim, &body).await;
        let recorded = match (status, &error) {
            (Some(s), None) => {
                self.outbox
                    .delivered_if_claimed(&self.id, &claim, s, &body)
                    .await
            }
            (_, error) => {
                let error = error.as_deref().unwrap_or("failed");
                // NB: a failed attempt is an error span (status ERROR with the message).
                lps_telemetry::fail(&tracing::Span::current(), error);
                let delay = backoff(
                    claim.attempt,
                    self.config.backoff_base,
                    self.config.backoff_cap,
                );
                self.outbox
                    .failed_if_claimed(
                        &self.id,
                        &claim,
                        status,
                        error,
                        self.config.max_attempts,
                        delay,
                        Some(&body),
                    )
                    .await
            }
        };
        let outcome = match recorded {
            Ok(Recorded::Delivered) => {
                info!(status = status.map(i64::from), "delivered");
                "delivered"
            }
            Ok(Recorded::Retry(at)) => {
                info!(error = error.as_deref().unwrap_or(""), next_attempt_at = %at, "delivery failed; retrying");
                "retry"
            }
            Ok(Recorded::Dead) => {
                warn!(
                    error = error.as_deref().unwrap_or(""),
                    "delivery dead after its last attempt"
                );
                "dead"
            }
            Ok(Recorded::ClaimLost) => {
                warn!(
                    "delivery claim expired before its outcome was recorded; another attempt follows"
                );
                "claim_lost"
            }
            Err(e) => {
                warn!(error = %e, "delivery outcome not recorded; it is attempted again when its claim expires");
                "unrecorded"
            }
        };
        self.metrics.record_delivery(outcome);
    }

    /// The payload of `claim`: its event with the search's status (for a product's event,
    /// with that product only), in the proto3 JSON mapping.
    async fn render(&self, claim: &Claimed) -> Result<String, crate::error::Error> {
        let Some(search_id) = claim.search_id else {
            // NB: an alert's body is stored with it (migration 0026 checks it).
            return Err(crate::error::Error::Internal(
                "an alert delivery without its body".into(),
            ));
        };
        let status = self.searches.status(search_id).await?;
        let mut search = lps_proto::pb::SearchStatus::from(&status);
        if let Some(index) = claim.product_index {
            let index = usize::try_from(index).unwrap_or(usize::MAX);
            search.products = search.products.into_iter().skip(index).take(1).collect();
        }
        let kind = match claim.product_index {
            Some(_) => pb::DeliveryEventKind::ProductFinal,
            None => pb::DeliveryEventKind::SearchFinal,
        };
        let event = pb::DeliveryEvent {
            event_id: claim.event_id.to_string(),
            kind: kind as i32,
            occurred_at: Some(lps_proto::model::timestamp_to_pb(claim.created_at)),
            destination: claim.destination.clone(),
            search_id,
            product_index: claim.product_index,
            search: Some(search),
            price_move: None,
        };
        lps_proto::json::to_json(&event, EVENT_TYPE)
            .map_err(|e| crate::error::Error::Internal(format!("delivery payload: {e}")))
    }

    /// Posts `body` to `claim`'s destination: `(Some(status), None)` for a 2xx answer,
    /// else the status if any and what went wrong. Error texts never carry the URL.
    async fn post(&self, claim: &Claimed, body: &str) -> (Option<u16>, Option<String>) {
        // An alert's announcement goes to the alert webhook, whatever its destination's name.
        let destination = match &claim.alert_rule {
            Some(_) => self
                .config
                .alert_webhook
                .as_ref()
                .ok_or("LPS_ALERT_WEBHOOK_URL"),
            None => self
                .config
                .destinations
                .get(&claim.destination)
                .ok_or("LPS_DESTINATIONS"),
        };
        let destination = match destination {
            Ok(d) => d,
            Err(setting) => {
                return (
                    None,
                    Some(format!(
                        "destination {} is not configured on this replica ({setting})",
                        claim.destination
                    )),
                );
            }
        };
        let mut request = self
            .client
            .post(destination.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(EVENT_ID_HEADER, claim.event_id.to_string());
        // NB: only an alert webhook without LPS_ALERT_WEBHOOK_SECRET has no secret.
        if !destination.secret().is_empty() {
            let signature = sign(
                destination.secret(),
                Utc::now().timestamp(),
                body.as_bytes(),
            );
            request = request.header(SIGNATURE_HEADER, signature);
        }
        let sent = request.body(body.to_owned()).send().await;
        match sent {
            Ok(response) => {
                let status = response.status();
                // NB: read the answer within the time limit so the connection is reusable;
                // its content is not kept.
                let _ = response.bytes().await;
                if status.is_success() {
                    (Some(status.as_u16()), None)
                } else {
                    (Some(status.as_u16()), Some(format!("HTTP {status}")))
                }
            }
            Err(e) if e.is_timeout() => (
                None,
                Some(format!(
                    "timed out after {}",
                    humantime::format_duration(self.config.timeout)
                )),
            ),
            Err(e) if e.is_connect() => (
                None,
                Some(format!("connection failed: {}", e.without_url())),
            ),
            Err(e) => (None, Some(e.without_url().to_string())),
        }
    }
}
