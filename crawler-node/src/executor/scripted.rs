//! [`ScriptedExecutor`]: an [`Executor`] whose behaviour is written in the product name, for
//! tests of the node protocol, the coordinator and whole deployments without a browser.
//!
//! # Grammar
//! The product name is split on white space into steps, run in order:
//!
//! | step             | effect                                                         |
//! |------------------|----------------------------------------------------------------|
//! | `sleep:<ms>`     | wait `<ms>` milliseconds (cancellable), then go on             |
//! | `progress`       | report rounds 1, 2, 3 (a page and 10,000 bytes each, 20 ms apart), then go on |
//! | `ok`             | end: `Found` with one offer at ₩10,000                         |
//! | `ok:<price>`     | end: `Found` with one offer at `<price>` (shipping 0)          |
//! | `notfound`       | end: `NotFound`                                                |
//! | `defer:<ms>`     | end: `Deferred` (handed back, as when no proxy port is free) to run again in `<ms>` milliseconds |
//! | `fail:<class>`   | end: `Failed` with that [`ErrorClass`] (`network`, `blocked`, `page_blocked`, `proxy`, `browser`, `parse`, `deadline`, `lease_expired`, `poison`, `permanent`, `internal`) |
//! | `hang`           | end: never finishes until cancelled                            |
//! | `panic`          | end: the run panics (tests the node's panic handling)          |
//!
//! An ending step must be the last one; a script without one ends with `ok`. So `ok:12900`,
//! `sleep:200`, `progress fail:blocked` and `sleep:50 hang` are scripts.
//!
//! A name whose first word is not one of these keywords (`제주 삼다수 2L x 12`, `p-17`) is
//! not a script: it ends `Found` at ₩10,000 after a short delay (5 ms by default), so bulk
//! tests run fast. A name that starts with a keyword but does not parse (`sleep:abc`,
//! `fail:nope`, `hang ok`) fails with class `internal` and says why, so a typo in a test
//! never passes silently.
//!
//! Every sleep ends early when the job is cancelled; the run then returns a `Failed`
//! outcome that the node ignores.
//!
//! Metrics are what the steps moved (the bytes of `progress`), priced like a browser run's
//! at the Welcome's `proxy_usd_per_gb` ([`cost_usd`](super::cost_usd)).

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use lps_proto::model::{ErrorClass, JobMetrics, Offer, RoundReport, ShippingStatus};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Executor, Job, Outcome, Progress};

/// Price of the offer of `ok` and of names that are not scripts.
pub const DEFAULT_PRICE: i64 = 10_000;
/// Delay before a name that is not a script ends `Found`.
pub const DEFAULT_DELAY: Duration = Duration::from_millis(5);

const PROGRESS_ROUNDS: u32 = 3;
const PROGRESS_STEP: Duration = Duration::from_millis(20);
const PROGRESS_BYTES_PER_PAGE: u64 = 10_000;

const KEYWORDS: &[&str] = &[
    "ok", "notfound", "fail", "defer", "hang", "panic", "sleep", "progress",
];

/// The test executor: the product name is the script (see the module docs). Cloning shares
/// the counters.
#[derive(Debug, Clone)]
pub struct ScriptedExecutor {
    default_delay: Duration,
    started: Arc<AtomicUsize>,
    finished: Arc<AtomicUsize>,
}

impl Default for ScriptedExecutor {
    fn default() -> Self {
        Self::new()
    }
}

impl ScriptedExecutor {
    pub fn new() -> Self {
        Self {
            default_delay: DEFAULT_DELAY,
            started: Arc::default(),
            finished: Arc::default(),
        }
    }

    /// Names that are not scripts end after `delay` instead of [`DEFAULT_DELAY`].
    #[must_use]
    pub fn with_default_delay(mut self, delay: Duration) -> Self {
        self.default_delay = delay;
        self
    }

    /// Runs started so far (by this executor and its clones).
    pub fn started(&self) -> usize {
        self.started.load(Ordering::Relaxed)
    }

    /// Runs that returned so far, cancelled ones included.
    pub fn finished(&self) -> usize {
        self.finished.load(Ordering::Relaxed)
    }
}

#[async_trait::async_trait]
impl Executor for ScriptedExecutor {
    async fn run(&self, job: Job, progress: Progress, cancel: CancellationToken) -> Outcome {
        self.started.fetch_add(1, Ordering::Relaxed);
        let outcome = run_script(&job, &progress, &cancel, self.default_delay).await;
        self.finished.fetch_add(1, Ordering::Relaxed);
        outcome
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Sleep(Duration),
    Progress,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Found { price: i64 },
    NotFound,
    Fail(ErrorClass),
    Defer(Duration),
    Hang,
    Panic,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Script {
    steps: Vec<Step>,
    end: End,
}

/// `Ok(None)`: not a script. `Err`: starts like one but does not parse.
fn parse(name: &str) -> Result<Option<Script>, String> {
    let words: Vec<&str> = name.split_whitespace().collect();
    let Some(first) = words.first() else {
        return Ok(None);
    };
    let keyword = first.split(':').next().unwrap_or_default();
    if !KEYWORDS.contains(&keyword) {
        return Ok(None);
    }
    let mut steps = Vec::new();
    for (i, word) in words.iter().enumerate() {
        let last = i + 1 == words.len();
        let (head, arg) = match word.split_once(':') {
            Some((head, arg)) => (head, Some(arg)),
            None => (*word, None),
        };
        let end = match (head, arg) {
            ("sleep", Some(ms)) => {
                let ms: u64 = ms
                    .parse()
                    .map_err(|_| format!("sleep:{ms}: not a number of milliseconds"))?;
                steps.push(Step::Sleep(Duration::from_millis(ms)));
                continue;
            }
            ("progress", None) => {
                steps.push(Step::Progress);
                continue;
            }
            ("ok", None) => End::Found {
                price: DEFAULT_PRICE,
            },
            ("ok", Some(price)) => match price.parse::<i64>() {
                Ok(price) if price >= 0 => End::Found { price },
                _ => return Err(format!("ok:{price}: not a price")),
            },
            ("notfound", None) => End::NotFound,
            ("fail", Some(class)) => End::Fail(
                parse_class(class).ok_or_else(|| format!("fail:{class}: unknown error class"))?,
            ),
            ("defer", Some(ms)) => {
                End::Defer(Duration::from_millis(ms.parse().map_err(|_| {
                    format!("defer:{ms}: not a number of milliseconds")
                })?))
            }
            ("hang", None) => End::Hang,
            ("panic", None) => End::Panic,
            _ => return Err(format!("{word:?} is not a step")),
        };
        if !last {
            return Err(format!("{word:?} ends the script but more steps follow"));
        }
        return Ok(Some(Script { steps, end }));
    }
    Ok(Some(Script {
        steps,
        end: End::Found {
            price: DEFAULT_PRICE,
        },
    }))
}

fn parse_class(name: &str) -> Option<ErrorClass> {
    use ErrorClass::*;
    [
        Network,
        Blocked,
        PageBlocked,
        Proxy,
        Browser,
        Parse,
        Deadline,
        LeaseExpired,
        Poison,
        Permanent,
        Internal,
    ]
    .into_iter()
    .find(|class| class.as_str() == name)
}

async fn run_script(
    job: &Job,
    progress: &Progress,
    cancel: &CancellationToken,
    default_delay: Duration,
) -> Outcome {
    let started = Instant::now();
    let script = match parse(job.product.name()) {
        Ok(Some(script)) => script,
        Ok(None) => Script {
            steps: vec![Step::Sleep(default_delay)],
            end: End::Found {
                price: DEFAULT_PRICE,
            },
        },
        Err(reason) => {
            return Outcome::Failed {
                class: ErrorClass::Internal,
                message: format!("bad script: {reason}"),
                metrics: metrics(job, progress, started),
                evidence: None,
            };
        }
    };
    for step in script.steps {
        match step {
            Step::Sleep(duration) => {
                if !sleep(duration, cancel).await {
                    return cancelled(job, progress, started);
                }
            }
            Step::Progress => {
                for round in 1..=PROGRESS_ROUNDS {
                    progress.set_round(round);
                    progress.page_loaded();
                    progress.add_bytes(PROGRESS_BYTES_PER_PAGE);
                    if !sleep(PROGRESS_STEP, cancel).await {
                        return cancelled(job, progress, started);
                    }
                }
            }
        }
    }
    match script.end {
        End::Found { price } => {
            if progress.snapshot().round == 0 {
                progress.set_round(1);
            }
            if progress.snapshot().pages_loaded == 0 {
                progress.page_loaded();
            }
            let offer = Offer {
                mall: job.mall.clone(),
                title: job.product.name().to_owned(),
                price,
                shipping_fee: 0,
                url: format!("http://127.0.0.1/scripted/{}", job.job_id()),
                seller: "scripted".to_owned(),
                match_score: 1.0,
                shipping: ShippingStatus::Free,
                list_price: 0,
                flags: Vec::new(),
            };
            Outcome::Found {
                offers: vec![offer],
                rounds: vec![round_report(job, started, 1)],
                metrics: metrics(job, progress, started),
            }
        }
        End::NotFound => Outcome::NotFound {
            rounds: vec![round_report(job, started, 0)],
            metrics: metrics(job, progress, started),
        },
        End::Fail(class) => Outcome::Failed {
            class,
            message: format!("scripted failure: {}", class.as_str()),
            metrics: metrics(job, progress, started),
            evidence: None,
        },
        End::Defer(after) => Outcome::Deferred {
            reason: "scripted: no proxy port free".to_owned(),
            not_before: chrono::TimeDelta::from_std(after)
                .ok()
                .map(|after| chrono::Utc::now() + after),
            metrics: metrics(job, progress, started),
        },
        End::Hang => {
            cancel.cancelled().await;
            cancelled(job, progress, started)
        }
        End::Panic => panic!("scripted panic for job {}", job.job_id()),
    }
}

/// Sleeps unless cancelled first; `false` when cancelled.
async fn sleep(duration: Duration, cancel: &CancellationToken) -> bool {
    tokio::select! {
        () = tokio::time::sleep(duration) => true,
        () = cancel.cancelled() => false,
    }
}

fn cancelled(job: &Job, progress: &Progress, started: Instant) -> Outcome {
    Outcome::Failed {
        class: ErrorClass::Internal,
        message: "cancelled".to_owned(),
        metrics: metrics(job, progress, started),
        evidence: None,
    }
}

/// What the run moved so far, priced like a browser run's ([`cost_usd`](super::cost_usd) at
/// the Welcome's proxy price).
fn metrics(job: &Job, progress: &Progress, started: Instant) -> JobMetrics {
    progress
        .snapshot()
        .spent(job.limits.proxy_usd_per_gb, started.elapsed())
}

fn round_report(job: &Job, started: Instant, matches: u32) -> RoundReport {
    RoundReport {
        kind: "original".to_owned(),
        query: job.product.name().to_owned(),
        cards_seen: 1,
        matches,
        elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        source: "scripted".to_owned(),
        excluded: Default::default(),
        pages: 1,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc as StdArc;

    use chrono::Utc;
    use lps_proto::model::{Lease, MallId, ProductSpec};

    use super::*;

    fn job(name: &str) -> Job {
        Job {
            lease: Lease {
                job_id: 7,
                epoch: 1,
            },
            product: ProductSpec::new(None, name).unwrap(),
            mall: MallId::new("testmall-alpha").unwrap(),
            attempt: 1,
            max_attempts: 3,
            deadline: Utc::now(),
            traceparent: None,
            tracestate: None,
            profile: None,
            lexicon: crate::judge::Lexicon::builtin(),
            judged_with: lps_proto::model::JudgedWith::default(),
            limits: Default::default(),
        }
    }

    #[test]
    fn grammar() {
        let found = |price| End::Found { price };
        let ms = Duration::from_millis;
        let cases: Vec<(&str, Option<Script>)> = vec![
            (
                "ok",
                Some(Script {
                    steps: vec![],
                    end: found(DEFAULT_PRICE),
                }),
            ),
            (
                "ok:12900",
                Some(Script {
                    steps: vec![],
                    end: found(12_900),
                }),
            ),
            (
                "notfound",
                Some(Script {
                    steps: vec![],
                    end: End::NotFound,
                }),
            ),
            (
                "fail:blocked",
                Some(Script {
                    steps: vec![],
                    end: End::Fail(ErrorClass::Blocked),
                }),
            ),
            (
                "fail:page_blocked",
                Some(Script {
                    steps: vec![],
                    end: End::Fail(ErrorClass::PageBlocked),
                }),
            ),
            (
                "sleep:200",
                Some(Script {
                    steps: vec![Step::Sleep(ms(200))],
                    end: found(DEFAULT_PRICE),
                }),
            ),
            (
                "sleep:10 progress fail:network",
                Some(Script {
                    steps: vec![Step::Sleep(ms(10)), Step::Progress],
                    end: End::Fail(ErrorClass::Network),
                }),
            ),
            (
                "sleep:50 hang",
                Some(Script {
                    steps: vec![Step::Sleep(ms(50))],
                    end: End::Hang,
                }),
            ),
            (
                "panic",
                Some(Script {
                    steps: vec![],
                    end: End::Panic,
                }),
            ),
            ("제주 삼다수 2L x 12", None),
            ("okay", None),
            ("p-17", None),
        ];
        for (name, want) in cases {
            assert_eq!(parse(name).unwrap(), want, "{name}");
        }
        for bad in [
            "sleep:abc",
            "fail:nope",
            "hang ok",
            "ok:-1",
            "ok extra",
            "fail",
        ] {
            assert!(parse(bad).is_err(), "{bad} should not parse");
        }
    }

    async fn run(name: &str) -> Outcome {
        let exec = ScriptedExecutor::new();
        exec.run(job(name), Progress::new(), CancellationToken::new())
            .await
    }

    #[tokio::test]
    async fn outcomes_follow_the_script() {
        match run("ok:12900").await {
            Outcome::Found { offers, rounds, .. } => {
                assert_eq!(offers.len(), 1);
                assert_eq!(offers[0].price, 12_900);
                assert_eq!(offers[0].mall.as_str(), "testmall-alpha");
                assert_eq!(rounds.len(), 1);
            }
            other => panic!("want found, got {other:?}"),
        }
        match run("제주 삼다수").await {
            Outcome::Found { offers, .. } => assert_eq!(offers[0].price, DEFAULT_PRICE),
            other => panic!("want found, got {other:?}"),
        }
        assert!(matches!(run("notfound").await, Outcome::NotFound { .. }));
        assert!(matches!(
            run("fail:browser").await,
            Outcome::Failed {
                class: ErrorClass::Browser,
                ..
            }
        ));
        match run("fail:bogus").await {
            Outcome::Failed { class, message, .. } => {
                assert_eq!(class, ErrorClass::Internal);
                assert!(message.contains("bogus"), "{message}");
            }
            other => panic!("want failed, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn progress_is_reported() {
        let exec = ScriptedExecutor::new();
        let progress = Progress::new();
        let outcome = exec
            .run(job("progress"), progress.clone(), CancellationToken::new())
            .await;
        let seen = progress.snapshot();
        assert_eq!(seen.round, 3);
        assert_eq!(seen.pages_loaded, 3);
        assert_eq!(seen.bytes, 3 * PROGRESS_BYTES_PER_PAGE);
        match outcome {
            Outcome::Found { metrics, .. } => assert_eq!(metrics.pages_loaded, 3),
            other => panic!("want found, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn hang_and_sleep_end_on_cancel() {
        let exec = StdArc::new(ScriptedExecutor::new());
        for name in ["hang", "sleep:60000", "sleep:10 hang"] {
            let cancel = CancellationToken::new();
            let run = tokio::spawn({
                let (exec, cancel) = (exec.clone(), cancel.clone());
                let job = job(name);
                async move { exec.run(job, Progress::new(), cancel).await }
            });
            tokio::time::sleep(Duration::from_millis(30)).await;
            assert!(!run.is_finished(), "{name} ended before the cancel");
            cancel.cancel();
            let outcome = tokio::time::timeout(Duration::from_secs(2), run)
                .await
                .expect("the run ends soon after the cancel")
                .unwrap();
            assert!(matches!(outcome, Outcome::Failed { .. }), "{name}");
        }
        assert_eq!(exec.started(), 3);
        assert_eq!(exec.finished(), 3);
    }
}
