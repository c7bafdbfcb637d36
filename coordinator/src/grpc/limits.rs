//! Per-client limits on SearchService calls: a rate (token bucket) and a number of calls in
//! progress, each optional and set per client name (`*`: every client without its own).
//!
//! A call over a limit ends `RESOURCE_EXHAUSTED` with a `RetryInfo` (when a call would be
//! admitted again) and an `ErrorInfo` (domain `lps.v1`, reason `RATE_LIMITED` or
//! `TOO_MANY_CALLS`, the client's name in its metadata). Nothing is stored for a refused
//! call.
//!
//! NB: the limits sit in the SearchService handlers rather than in a tower layer in front
//! of them: a layer only sees a call until its response headers, while a `WatchSearch`
//! stays in progress for as long as it streams, and its permit is held by the watcher task
//! until the stream ends.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt as _};

use super::ERROR_DOMAIN;

/// The name that sets a limit for every client without an entry of its own.
pub const ANY_CLIENT: &str = "*";

/// How many calls per `per`, as a token bucket holding at most `calls` (a burst of a whole
/// period's worth).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub calls: u32,
    pub per: Duration,
}

impl Rate {
    /// `N/s`, `N/min` or `N/h`, N ≥ 1.
    pub fn parse(s: &str) -> Option<Self> {
        let (n, unit) = s.trim().split_once('/')?;
        let calls: u32 = n.trim().parse().ok().filter(|n| *n >= 1)?;
        let per = match unit.trim() {
            "s" => Duration::from_secs(1),
            "min" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            _ => return None,
        };
        Some(Self { calls, per })
    }
}

/// The limits of one client.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Limit {
    pub rate: Option<Rate>,
    /// Calls in progress at once.
    pub concurrent: Option<u32>,
}

/// Configured limits by client name ([`ANY_CLIENT`] for the rest).
#[derive(Debug, Clone, Default)]
pub struct LimitConfig {
    pub by_client: HashMap<String, Limit>,
}

impl LimitConfig {
    fn for_client(&self, name: &str) -> Limit {
        let own = self.by_client.get(name);
        let any = self.by_client.get(ANY_CLIENT);
        Limit {
            rate: own.and_then(|l| l.rate).or(any.and_then(|l| l.rate)),
            concurrent: own
                .and_then(|l| l.concurrent)
                .or(any.and_then(|l| l.concurrent)),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_client.is_empty()
    }
}

/// The limiters of every client that called; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct ClientLimits {
    config: Arc<LimitConfig>,
    state: Arc<Mutex<HashMap<Arc<str>, ClientState>>>,
}

#[derive(Debug)]
struct ClientState {
    bucket: Option<Bucket>,
    calls: Option<Arc<Semaphore>>,
}

#[derive(Debug)]
struct Bucket {
    rate: Rate,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn per_sec(&self) -> f64 {
        f64::from(self.rate.calls) / self.rate.per.as_secs_f64()
    }

    /// Adds what the time since the last refill earned, up to the capacity.
    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.per_sec()).min(f64::from(self.rate.calls));
        self.at = now;
    }

    /// Takes a token, or says how long until one is there.
    fn take(&mut self, now: Instant) -> Result<(), Duration> {
        self.refill(now);
        let per_sec = self.per_sec();
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / per_sec))
        }
    }
}

/// Where a client stands against its limits on this replica (GetOps).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LimitState {
    pub limit: Limit,
    /// Calls its rate would admit now (the whole bucket before its first call).
    pub rate_available: Option<f64>,
    pub calls_in_progress: u32,
}

/// An admitted call: holds its place among the client's calls in progress until dropped.
#[derive(Debug)]
pub struct Admitted {
    _permit: Option<OwnedSemaphorePermit>,
}

impl ClientLimits {
    pub fn new(config: LimitConfig) -> Self {
        Self {
            config: Arc::new(config),
            state: Arc::default(),
        }
    }

    /// `client`'s limits and where it stands against them now; the bucket refills as it
    /// would for a call, without taking a token.
    pub fn state(&self, client: &str) -> LimitState {
        let limit = self.config.for_client(client);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = state.get_mut(client) else {
            return LimitState {
                limit,
                rate_available: limit.rate.map(|r| f64::from(r.calls)),
                calls_in_progress: 0,
            };
        };
        let rate_available = entry.bucket.as_mut().map(|b| {
            b.refill(Instant::now());
            b.tokens
        });
        let calls_in_progress = match (&entry.calls, limit.concurrent) {
            (Some(calls), Some(max)) => {
                max.saturating_sub(u32::try_from(calls.available_permits()).unwrap_or(max))
            }
            _ => 0,
        };
        LimitState {
            limit,
            rate_available,
            calls_in_progress,
        }
    }

    /// Admits a call of `client`, or refuses it with `RESOURCE_EXHAUSTED`.
    pub fn admit(&self, client: &Arc<str>) -> Result<Admitted, Status> {
        if self.config.is_empty() {
            return Ok(Admitted { _permit: None });
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let entry = state.entry(client.clone()).or_insert_with(|| {
            let limit = self.config.for_client(client);
            ClientState {
                bucket: limit.rate.map(|rate| Bucket {
                    rate,
                    tokens: f64::from(rate.calls),
                    at: Instant::now(),
                }),
                calls: limit
                    .concurrent
                    .map(|n| Arc::new(Semaphore::new(n as usize))),
            }
        });
        // NB: the concurrency place first: a call refused for it does not spend a token.
        let permit = match &entry.calls {
            None => None,
            Some(calls) => match calls.clone().try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => {
                    let limit = self.config.for_client(client).concurrent.unwrap_or(0);
                    return Err(exhausted(
                        "TOO_MANY_CALLS",
                        client,
                        format!("client {client:?} has {limit} calls in progress, its limit"),
                        Duration::from_secs(1),
                    ));
                }
            },
        };
        if let Some(bucket) = &mut entry.bucket
            && let Err(wait) = bucket.take(Instant::now())
        {
            let rate = bucket.rate;
            return Err(exhausted(
                "RATE_LIMITED",
                client,
                format!(
                    "client {client:?} is over its rate of {} calls per {}",
                    rate.calls,
                    humantime::format_duration(rate.per)
                ),
                wait,
            ));
        }
        Ok(Admitted { _permit: permit })
    }
}

fn exhausted(reason: &str, client: &str, message: String, retry_after: Duration) -> Status {
    let mut details =
        ErrorDetails::with_retry_info(Some(retry_after.max(Duration::from_millis(1))));
    details.set_error_info(
        reason,
        ERROR_DOMAIN,
        HashMap::from([("client".to_owned(), client.to_owned())]),
    );
    Status::with_error_details(Code::ResourceExhausted, message, details)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_read() {
        assert_eq!(
            Rate::parse("20/s"),
            Some(Rate {
                calls: 20,
                per: Duration::from_secs(1)
            })
        );
        assert_eq!(
            Rate::parse(" 5 / min").map(|r| r.per),
            Some(Duration::from_secs(60))
        );
        for bad in ["", "0/s", "5", "5/day", "x/s", "-1/s"] {
            assert_eq!(Rate::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_bucket_refills_at_its_rate() {
        let start = Instant::now();
        let mut b = Bucket {
            rate: Rate {
                calls: 2,
                per: Duration::from_secs(1),
            },
            tokens: 2.0,
            at: start,
        };
        assert!(b.take(start).is_ok());
        assert!(b.take(start).is_ok());
        let wait = b.take(start).unwrap_err();
        assert!((wait.as_secs_f64() - 0.5).abs() < 1e-6, "{wait:?}");
        assert!(b.take(start + Duration::from_millis(500)).is_ok());
        assert!(b.take(start + Duration::from_millis(500)).is_err());
    }

    #[test]
    fn limits_are_per_client_with_a_default() {
        let config = LimitConfig {
            by_client: HashMap::from([
                (
                    "a".to_owned(),
                    Limit {
                        rate: None,
                        concurrent: Some(1),
                    },
                ),
                (
                    ANY_CLIENT.to_owned(),
                    Limit {
                        rate: Some(Rate {
                            calls: 1,
                            per: Duration::from_secs(3600),
                        }),
                        concurrent: None,
                    },
                ),
            ]),
        };
        let limits = ClientLimits::new(config);
        let a: Arc<str> = "a".into();
        let b: Arc<str> = "b".into();
        let first = limits.admit(&a).unwrap();
        let e = limits.admit(&a).unwrap_err();
        assert_eq!(e.code(), Code::ResourceExhausted);
        assert_eq!(
            e.get_details_error_info().map(|i| i.reason),
            Some("TOO_MANY_CALLS".to_owned())
        );
        drop(first);
        // "a" has no rate of its own: the default's applies to it too (one per hour).
        assert!(limits.admit(&a).is_err());
        assert!(limits.admit(&b).is_ok());
        let e = limits.admit(&b).unwrap_err();
        assert_eq!(
            e.get_details_error_info().map(|i| i.reason),
            Some("RATE_LIMITED".to_owned())
        );
        assert!(
            e.get_details_retry_info()
                .and_then(|r| r.retry_delay)
                .is_some()
        );
    }
}
