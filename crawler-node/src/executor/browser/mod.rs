//! [`BrowserExecutor`]: runs jobs in real headless Chromium, one browser per slot.
//!
//! A job (DESIGN §2) takes a free slot, makes sure the slot's browser is alive (launching
//! one in the slot's locked profile directory, or replacing a suspect one), makes sure the
//! slot sits on an IP session for the job's mall (proxy mode), warms the mall up once per
//! browser, and then walks the query rounds (original → precise → broad) until a
//! round finds a matching card. The details of one run are in `run.rs`; the slot state in
//! `slot.rs`; when each exit IP may load its next page, for every slot, in `pace.rs`.
//!
//! Outcomes:
//! - matching cards → `Found` with every matched offer, best (lowest price + shipping)
//!   first;
//! - a healthy page without a match in every round (or the no-results marker) → with an
//!   LLM endpoint ([`BrowserExecutor::with_llm`]), its search strings and its judgement
//!   of the rejected cards (quantities must still agree; `run/llm.rs`); then `NotFound`.
//!   LLM calls are counted into the job's metrics and cost;
//! - a blocked page → a `BlockEvent`, the IP session ends (`ProxyRelease`, reason `block`)
//!   and the round is retried on a new IP while the job has time; more burned IPs than
//!   `Limits.max_ip_burns_per_job` → `PAGE_BLOCKED`; no IP to rotate to (direct mode, no
//!   port, no time) → `BLOCKED`. A blocked page is never `NotFound`;
//! - a page that is neither → `PARSE`; a browser that died → replaced once within the job,
//!   then `BROWSER`; navigation failures → `NETWORK`; the gateway failing → new IP, then
//!   `PROXY`.
//!
//! Cancellation: `run` selects on the job's cancel token (and, as a backstop for callers
//! without a node, its deadline) around the whole run, so it returns at once; the dropped
//! run leaves its slot `suspect`. Nothing here
//! needs an `.await` after a cancel. [`BrowserExecutor::shutdown`] closes every browser
//! (each within its own close timeout) and stops chromedriver; the node binary calls it
//! after the node has stopped.
//!
//! Chromedriver: once the first job needed it, a watch task (`browser.chromedriver_watch`,
//! ended by `shutdown` or by dropping the executor) looks at it every second and starts a
//! dead one again, backing off while it will not start; [`Executor::is_ready`] is false
//! while it is down. Metrics (page loads, relay bytes, browser launches and restarts,
//! chromedriver restarts) go to the [`NodeMetrics`] of
//! [`with_metrics`](BrowserExecutor::with_metrics).

mod pace;
mod run;
mod slot;

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::{
        Arc, Weak,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use futures::future::join_all;
use lps_profiles::{
    compiled::CompiledProfile,
    extract::{Card, apply_classes},
    price::evaluate_facts,
};
use lps_proto::{
    model::{CardClass, ErrorClass, JobMetrics, MallId, Offer},
    pb,
};
use tokio::sync::{Mutex, OwnedMutexGuard, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, info, info_span, warn};

use self::{pace::PortBook, run::Run, slot::Slot};
use super::{Executor, Job, Outcome, Progress};
use crate::{
    chromium::{BrowserMode, ChromeDriver, Display},
    config::Config,
    judge::{self, ProductQuery},
    llm::LlmClient,
    metrics::NodeMetrics,
    proxy::{EventSink, LogEvents, ProxySource, SessionEndReason},
};

/// Between two looks at the managed chromedriver.
const DRIVER_CHECK: Duration = Duration::from_secs(1);
/// Longest wait between two attempts to start a chromedriver that does not start.
const DRIVER_RETRY_MAX: Duration = Duration::from_secs(30);

/// Where the WebDriver server comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverSource {
    /// The node starts and supervises this chromedriver binary.
    Managed(PathBuf),
    /// A WebDriver server at this URL.
    External(String),
}

/// What the browser executor needs to know (from [`Config`], or built by tests).
#[derive(Debug, Clone)]
pub struct BrowserSettings {
    pub driver: DriverSource,
    pub chromium_path: PathBuf,
    pub profile_root: PathBuf,
    /// Browsers (= job slots) of this executor.
    pub slots: u32,
    /// Block images, fonts and media (the profile's patterns, or the defaults).
    pub block_resources: bool,
    /// More Chromium flags.
    pub chromium_args: Vec<String>,
    /// Headless, or headful under the node's Xvfb.
    pub mode: BrowserMode,
    /// The Xvfb binary of headful mode.
    pub xvfb_path: PathBuf,
    /// Least time between the starts of two page loads on one exit IP (0: no pacing).
    pub ip_page_gap: Duration,
    /// Show the browser identity (always, but to measure its cost).
    pub stealth: bool,
}

impl BrowserSettings {
    /// The settings of a node config.
    pub fn from_config(config: &Config) -> Self {
        let driver = match &config.webdriver_url {
            Some(url) => DriverSource::External(url.clone()),
            None => DriverSource::Managed(config.chromedriver_path.clone()),
        };
        Self {
            driver,
            chromium_path: config.chromium_path.clone(),
            profile_root: config.profile_root.clone(),
            slots: config.slots,
            block_resources: config.block_resources,
            chromium_args: config
                .chromium_args
                .iter()
                .filter(|a| !a.trim().is_empty())
                .cloned()
                .collect(),
            mode: config.browser_mode,
            xvfb_path: config.xvfb_path.clone(),
            ip_page_gap: config.ip_page_gap,
            stealth: config.browser_stealth,
        }
    }
}

/// The executor (see the module docs). Cloning shares the browsers.
#[derive(Clone)]
pub struct BrowserExecutor {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for BrowserExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrowserExecutor")
            .field("settings", &self.inner.settings)
            .field("proxies", &self.inner.proxies.is_some())
            .field("llm", &self.inner.llm)
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    settings: BrowserSettings,
    driver: ChromeDriver,
    proxies: Option<Arc<dyn ProxySource>>,
    events: Arc<dyn EventSink>,
    /// The LLM endpoint, asked only after the rule-based rounds found nothing.
    llm: Option<LlmClient>,
    slots: Vec<Arc<Mutex<Slot>>>,
    /// When each exit IP may load its next page, shared by every slot (per-IP pacing).
    pace: Arc<PortBook>,
    permits: Semaphore,
    closed: AtomicBool,
    launches: AtomicU64,
    metrics: Arc<NodeMetrics>,
    /// The chromedriver watch task has been started.
    watching: AtomicBool,
    /// The browser self-check passed (or is not run: executors built in tests); false
    /// makes the executor not ready.
    identity_checked: AtomicBool,
    /// Every slot directory this executor has taken (for [`BrowserExecutor::kill_now`]).
    dirs: std::sync::Mutex<Vec<PathBuf>>,
}

impl BrowserExecutor {
    /// An executor going straight to the malls (no proxy), reporting blocks only to the log,
    /// until [`with_proxies`](Self::with_proxies) / [`with_events`](Self::with_events).
    /// Nothing starts before the first job.
    pub fn new(settings: BrowserSettings) -> Self {
        let mut driver = match &settings.driver {
            DriverSource::Managed(path) => ChromeDriver::managed(path.clone()),
            DriverSource::External(url) => ChromeDriver::external(url.clone()),
        };
        if settings.mode == BrowserMode::Headful {
            driver = driver.with_display(Arc::new(Display::new(settings.xvfb_path.clone())));
        }
        let metrics = Arc::new(NodeMetrics::new());
        driver.set_metrics(metrics.clone());
        let slots = settings.slots.max(1) as usize;
        Self {
            inner: Arc::new(Inner {
                driver,
                proxies: None,
                events: Arc::new(LogEvents),
                llm: None,
                slots: (0..slots)
                    .map(|i| Arc::new(Mutex::new(Slot::new(i))))
                    .collect(),
                pace: Arc::new(PortBook::new(settings.ip_page_gap)),
                permits: Semaphore::new(slots),
                closed: AtomicBool::new(false),
                launches: AtomicU64::new(0),
                metrics,
                watching: AtomicBool::new(false),
                identity_checked: AtomicBool::new(true),
                dirs: std::sync::Mutex::new(Vec::new()),
                settings,
            }),
        }
    }

    fn inner_mut(&mut self) -> &mut Inner {
        // NB: only called by the builder methods, before any clone exists.
        Arc::get_mut(&mut self.inner).unwrap_or_else(|| {
            unreachable!("BrowserExecutor builder methods are called before cloning")
        })
    }

    /// Leases IPs from `proxies` and sends every browser through them (proxy mode).
    #[must_use]
    pub fn with_proxies(mut self, proxies: Arc<dyn ProxySource>) -> Self {
        self.inner_mut().proxies = Some(proxies);
        self
    }

    /// Reports block events to `events`.
    #[must_use]
    pub fn with_events(mut self, events: Arc<dyn EventSink>) -> Self {
        self.inner_mut().events = events;
        self
    }

    /// Asks `llm` for more search strings and a second opinion on cards when a job's
    /// rule-based rounds found nothing on healthy pages (see `run/llm.rs`).
    #[must_use]
    pub fn with_llm(mut self, llm: LlmClient) -> Self {
        self.inner_mut().llm = Some(llm);
        self
    }

    /// Records page loads, bytes, browser and chromedriver restarts into `metrics` (the
    /// node's, so `/metrics` shows them; see [`Node::with_metrics`](crate::Node::with_metrics)).
    #[must_use]
    pub fn with_metrics(mut self, metrics: Arc<NodeMetrics>) -> Self {
        let inner = self.inner_mut();
        inner.driver.set_metrics(metrics.clone());
        inner.metrics = metrics;
        self
    }

    /// Whether the browser self-check allows jobs (see `selfcheck`): false keeps the
    /// executor, and so the node, not ready.
    pub fn set_identity_checked(&self, ok: bool) {
        self.inner.identity_checked.store(ok, Ordering::SeqCst);
    }

    /// The metrics this executor records into.
    pub fn metrics(&self) -> &Arc<NodeMetrics> {
        &self.inner.metrics
    }

    /// Browsers started so far (replacements included).
    pub fn launches(&self) -> u64 {
        self.inner.launches.load(Ordering::Relaxed)
    }

    /// The user-data-dirs of the slots that have one now (for tests and operators).
    pub async fn profile_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        for slot in &self.inner.slots {
            if let Some(profile) = &slot.lock().await.profile {
                dirs.push(profile.dir().to_path_buf());
            }
        }
        dirs
    }

    /// The pid of the chromedriver this executor started, if any (it may have died since).
    pub fn chromedriver_pid(&self) -> Option<u32> {
        self.inner.driver.pid()
    }

    /// Kills chromedriver and every browser of this executor's slots at once, without
    /// closing anything (synchronous; for a process that must exit now, e.g. on a second
    /// SIGTERM). IP sessions are not released: their leases expire.
    pub fn kill_now(&self) {
        let pids: Vec<u32> = self
            .inner
            .dirs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .flat_map(|dir| crate::chromium::process::browser_pids(dir))
            .collect();
        crate::chromium::process::kill_now(&pids, self.inner.driver.pid());
    }

    /// Ends every IP session, closes every browser (each within its own close timeout),
    /// stops the relays and chromedriver. Jobs started afterwards fail (`BROWSER`).
    pub async fn shutdown(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        let proxies = self.inner.proxies.as_deref();
        join_all(self.inner.slots.iter().map(|slot| async move {
            let mut slot = slot.lock().await;
            slot.close(proxies, SessionEndReason::Shutdown).await;
        }))
        .await;
        self.inner.driver.stop().await;
        info!("browser executor shut down");
    }

    /// Takes a free slot (there is one per permit).
    async fn take_slot(&self) -> OwnedMutexGuard<Slot> {
        loop {
            for slot in &self.inner.slots {
                if let Ok(guard) = slot.clone().try_lock_owned() {
                    return guard;
                }
            }
            // NB: only while `drain`/`shutdown` hold a slot briefly.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[async_trait::async_trait]
impl Executor for BrowserExecutor {
    async fn run(&self, job: Job, progress: Progress, cancel: CancellationToken) -> Outcome {
        let span = info_span!(
            "browser.job",
            job.id = job.job_id(),
            mall = %job.mall,
            job.attempt = i64::from(job.attempt),
        );
        // NB: under a node this span is a child of `node.job`, which continues the
        // Search call's trace already; run on its own, it continues the trace itself.
        if tracing::Span::current().is_none()
            && let Some(parent) = job.traceparent.as_deref()
        {
            lps_telemetry::set_parent(&span, parent, job.tracestate.as_deref().unwrap_or_default());
        }
        self.run_job(job, progress, cancel).instrument(span).await
    }

    fn is_ready(&self) -> bool {
        !self.inner.closed.load(Ordering::SeqCst)
            && self.inner.driver.is_up()
            && self.accepts_jobs()
    }

    fn accepts_jobs(&self) -> bool {
        self.inner.identity_checked.load(Ordering::SeqCst)
    }

    async fn drain(&self) {
        // Every slot gives its IP back now, so the releases are acked before Goodbye;
        // browsers close at shutdown.
        // NB: the node drains the executor once no job is *running*, but a job it just
        // handed back may still be stopping and hold its slot for a moment: wait for it
        // (the node bounds the whole drain by its deadline). Skipping a busy slot lost that
        // IP session's release: it was sent after Goodbye and dropped.
        let proxies = self.inner.proxies.as_deref();
        for slot in &self.inner.slots {
            slot.lock()
                .await
                .end_ip(proxies, SessionEndReason::Shutdown);
        }
    }
}

impl BrowserExecutor {
    async fn run_job(&self, job: Job, progress: Progress, cancel: CancellationToken) -> Outcome {
        let started = tokio::time::Instant::now();
        let fail = |class, message: String| Outcome::Failed {
            class,
            message,
            metrics: JobMetrics {
                elapsed: started.elapsed(),
                ..JobMetrics::default()
            },
            evidence: None,
        };
        if self.inner.closed.load(Ordering::SeqCst) {
            return fail(
                ErrorClass::Browser,
                "the browser executor is shut down".into(),
            );
        }
        let Some(profile) = job.profile.clone() else {
            return fail(
                ErrorClass::Permanent,
                format!("no site profile for mall {}", job.mall),
            );
        };
        let compiled = match lps_profiles::compiled::compile(&profile) {
            Ok(compiled) => compiled,
            Err(err) => {
                return fail(
                    ErrorClass::Permanent,
                    format!("site profile {}: {}: {}", job.mall, err.field, err.reason),
                );
            }
        };
        let query = match ProductQuery::new(job.product.name(), job.lexicon.clone()) {
            Ok(query) => query.with_hints(job.product.hints()),
            Err(err) => {
                return fail(
                    ErrorClass::Permanent,
                    format!("nothing to search for: {err}"),
                );
            }
        };
        let deadline = deadline_of(&job);
        let permit = tokio::select! {
            biased;
            () = cancel.cancelled() => return fail(ErrorClass::Internal, "cancelled".into()),
            () = tokio::time::sleep_until(deadline) => {
                return fail(ErrorClass::Deadline, "no browser slot before the deadline".into());
            }
            permit = self.inner.permits.acquire() => permit,
        };
        let Ok(_permit) = permit else {
            return fail(
                ErrorClass::Browser,
                "the browser executor is shut down".into(),
            );
        };
        self.watch_driver();
        let mut slot = self.take_slot().await;
        let mut run = Run::new(
            &self.inner,
            &job,
            &profile,
            &compiled,
            &progress,
            &mut slot,
            deadline,
        );
        // NB: the node cancels at the deadline and reports DEADLINE itself; the grace keeps
        // that order, and the branch is a backstop for callers without a node.
        let result = tokio::select! {
            biased;
            () = cancel.cancelled() => Err(run::Stop::Cancelled),
            () = tokio::time::sleep_until(deadline + DEADLINE_BACKSTOP) => Err(run::Stop::Deadline),
            result = run.search(&query) => result.map_err(run::Stop::Failed),
        };
        run.finish(result)
    }
}

/// How long after the job's deadline the executor stops a run the node has not cancelled.
const DEADLINE_BACKSTOP: Duration = Duration::from_secs(1);

/// The job's deadline on this host's clock.
fn deadline_of(job: &Job) -> tokio::time::Instant {
    let left = (job.deadline - chrono::Utc::now())
        .to_std()
        .unwrap_or(Duration::ZERO);
    tokio::time::Instant::now() + left
}

/// What the judge made of one round's cards: the offers of the cards that are the product
/// (best first), and the cards left out by the class policy.
#[derive(Debug, Default)]
pub struct Judged {
    pub offers: Vec<Offer>,
    /// Cards the profile's classes exclude, by class name.
    pub excluded: BTreeMap<String, u32>,
    /// Cards read after exclusion (what the judge looked at).
    pub seen: u32,
    /// Cards the judge rejected, with their flagged classes (kept for the LLM judge).
    pub rejected: Vec<(Card, Vec<CardClass>)>,
}

/// Judges `cards` against `query` with the profile's class policy: excluded classes are
/// left out (counted), flagged ones carried on the offer; the kept cards are judged
/// together as one result page ([`judge::judge_page`]: a word some of them add to the name
/// is another line); a card that is the product becomes an offer priced by the profile's
/// rules (sale price, coupon price only when the profile opts in, shipping evaluated
/// against the price), unless its item price is far under the page's other accepted
/// cards' ([`judge::price_outliers`]: it joins the rejected). Offers are best first: known
/// effective price ascending (lower shipping, then page order, on ties), then offers whose
/// shipping is unknown by price.
pub fn judge_cards(
    query: &ProductQuery,
    cards: Vec<Card>,
    mall: &MallId,
    profile: &pb::SiteProfile,
    compiled: &CompiledProfile,
) -> Judged {
    let classified = apply_classes(compiled, cards);
    let mut judged = Judged {
        excluded: classified.excluded,
        seen: u32::try_from(classified.kept.len()).unwrap_or(u32::MAX),
        ..Judged::default()
    };
    // The judge reads the page's kept cards together (page contrast, DESIGN §5).
    let page: Vec<judge::PageCard<'_>> = classified
        .kept
        .iter()
        .map(|(card, _)| judge::PageCard {
            title: &card.title,
            gtin: None,
        })
        .collect();
    let verdicts = judge::judge_page(query, &page);
    let mut accepted: Vec<(usize, Card, Offer)> = Vec::new();
    for (index, ((card, flags), verdict)) in classified.kept.into_iter().zip(verdicts).enumerate() {
        if !verdict.same {
            tracing::debug!(title = %card.title, reason = %verdict.reason, "card is not the product");
            judged.rejected.push((card, flags));
            continue;
        }
        let offer = card_offer(&card, flags, verdict.score, mall, profile);
        accepted.push((index, card, offer));
    }
    let (kept, dropped) = split_price_outliers(accepted, |(_, _, offer)| offer);
    for ((_, card, offer), reason) in dropped {
        tracing::debug!(title = %card.title, reason = %reason, "card is not the product");
        judged.rejected.push((card, offer.flags));
    }
    judged.offers = best_first(
        kept.into_iter()
            .map(|(index, _, offer)| (index, offer))
            .collect(),
    );
    judged
}

/// Splits a page's accepted cards into those kept and those whose item price is far under
/// the others' ([`judge::price_outliers`], with the reason): the answer is the lowest
/// accepted price, so a look-alike far cheaper than the page's other accepted cards is
/// dropped before it can be (DESIGN §5 "Price outliers"). Every path that accepts cards —
/// the rules' rounds and the LLM judge's — goes through it.
pub(crate) fn split_price_outliers<T>(
    accepted: Vec<T>,
    offer: impl Fn(&T) -> &Offer,
) -> (Vec<T>, Vec<(T, judge::Reason)>) {
    let priced: Vec<judge::PricedCard> = accepted
        .iter()
        .map(|a| {
            let o = offer(a);
            judge::PricedCard {
                price: u64::try_from(o.price).unwrap_or(0),
                score: o.match_score,
            }
        })
        .collect();
    let outliers = judge::price_outliers(&priced, judge::PriceGuard::DEFAULT);
    let mut kept = Vec::with_capacity(accepted.len());
    let mut dropped = Vec::new();
    for (a, outlier) in accepted.into_iter().zip(outliers) {
        match outlier {
            Some(reason) => dropped.push((a, reason)),
            None => kept.push(a),
        }
    }
    (kept, dropped)
}

/// The offer of a card judged to be the product.
pub fn card_offer(
    card: &Card,
    flags: Vec<CardClass>,
    score: f32,
    mall: &MallId,
    profile: &pb::SiteProfile,
) -> Offer {
    let price = match card.coupon_price {
        Some(coupon) if profile.accept_coupon_price && coupon > 0 => coupon.min(card.price),
        _ => card.price,
    };
    let shipping = evaluate_facts(&card.shipping_facts(), price, &profile.free_shipping_texts);
    let clip = |s: &str, n: usize| s.chars().take(n).collect::<String>();
    let money = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    Offer {
        mall: mall.clone(),
        title: clip(card.title.trim(), lps_proto::model::MAX_TITLE_CHARS),
        price: money(price),
        shipping_fee: if shipping.status.is_known() {
            money(shipping.fee)
        } else {
            0
        },
        url: clip(&card.link, lps_proto::model::MAX_URL_CHARS),
        seller: clip(
            card.seller.as_deref().unwrap_or_default().trim(),
            lps_proto::model::MAX_TITLE_CHARS,
        ),
        match_score: score.clamp(0.0, 1.0),
        shipping: shipping.status,
        list_price: card
            .list_price
            .filter(|&list| list > price)
            .map_or(0, money),
        flags,
    }
}

/// Offers tagged with their page order → best first: known effective prices ascending
/// (then lower shipping, then page order), then unknown-shipping offers by price.
pub(crate) fn best_first(mut offers: Vec<(usize, Offer)>) -> Vec<Offer> {
    offers.sort_by_key(|(index, o)| {
        (
            !o.effective_price_known(),
            o.effective_price(),
            o.shipping_fee,
            *index,
        )
    });
    offers.into_iter().map(|(_, o)| o).collect()
}

impl BrowserExecutor {
    /// Starts the chromedriver watch task, once (a managed chromedriver only).
    fn watch_driver(&self) {
        if !matches!(self.inner.settings.driver, DriverSource::Managed(_))
            || self.inner.watching.swap(true, Ordering::SeqCst)
        {
            return;
        }
        let inner = Arc::downgrade(&self.inner);
        // NB: a root span. The first job starts the watch, but the watch outlives it: under
        // the job's span it would hold that search's trace open for the node's lifetime.
        let span = info_span!(parent: None, "browser.chromedriver_watch", log_only = true);
        tokio::spawn(watch_driver(inner).instrument(span));
    }
}

/// Looks at the chromedriver every [`DRIVER_CHECK`] and starts a dead one again, backing
/// off to [`DRIVER_RETRY_MAX`] while it does not start. Ends when the executor is shut
/// down or dropped.
async fn watch_driver(inner: Weak<Inner>) {
    let mut wait = DRIVER_CHECK;
    loop {
        tokio::time::sleep(wait).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        if inner.closed.load(Ordering::SeqCst) {
            return;
        }
        wait = match inner.driver.check().await {
            Ok(()) => DRIVER_CHECK,
            Err(err) => {
                let next = (wait * 2).min(DRIVER_RETRY_MAX);
                warn!(error = %err, retry_in = ?next, "chromedriver is down");
                next
            }
        };
    }
}

impl Inner {
    fn remember_dir(&self, dir: &std::path::Path) {
        let mut dirs = self
            .dirs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !dirs.iter().any(|d| d == dir) {
            dirs.push(dir.to_path_buf());
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // NB: Drop cannot await; `shutdown` is the close path. Say so if it was skipped.
        if !self.closed.load(Ordering::SeqCst) && self.launches.load(Ordering::Relaxed) > 0 {
            warn!(
                "browser executor dropped without shutdown(); browsers are killed with chromedriver"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use lps_proto::model::ShippingStatus;

    use super::*;

    fn card(title: &str, price: u64, shipping: Option<&str>) -> Card {
        Card {
            title: title.into(),
            price,
            shipping_text: shipping.map(str::to_owned),
            link: "http://mall/p/1".into(),
            seller: Some("s".into()),
            text: title.into(),
            ..Card::default()
        }
    }

    fn profile() -> pb::SiteProfile {
        lps_profiles::format::parse(
            "alpha",
            lps_profiles::format::builtin_text("testmall-alpha.toml").unwrap(),
        )
        .unwrap()
        .wire
    }

    #[test]
    fn matched_cards_become_offers_best_first() {
        let query =
            ProductQuery::new("제주 삼다수 2L x 12", crate::judge::Lexicon::builtin()).unwrap();
        let mall = MallId::new("testmall-alpha").unwrap();
        let profile = profile();
        let compiled = lps_profiles::compiled::compile(&profile).unwrap();
        let mut option = card(
            "[택1] 제주 삼다수 2L x 12병 외 3종",
            5_000,
            Some("무료배송"),
        );
        option.classes = vec![CardClass::OptionListing];
        let mut abroad = card("제주 삼다수 2L x 12병 해외직구", 13_000, Some("무료배송"));
        abroad.classes = vec![CardClass::Overseas];
        let cards = vec![
            card("제주 삼다수 2L x 12병", 12_900, Some("무료배송")),
            card("제주 삼다수 500ml x 20병", 9_900, Some("무료배송")),
            card("삼다수 2L 12개", 11_500, Some("배송비 3,000원")),
            card("제주 삼다수 2L x 12병", 9_000, None),
            card("제주 삼다수 2L x 12병", 12_400, Some("배송비 500원")),
            option,
            abroad,
        ];
        let judged = judge_cards(&query, cards, &mall, &profile, &compiled);
        let prices: Vec<(i64, i64, ShippingStatus)> = judged
            .offers
            .iter()
            .map(|o| (o.price, o.shipping_fee, o.shipping))
            .collect();
        // 12,900 + 0 ties 12,400 + 500: lower shipping first; 11,500 + 3,000 after 13,000;
        // the cheaper offer without shipping last, never first; the option listing is out.
        assert_eq!(
            prices,
            [
                (12_900, 0, ShippingStatus::Free),
                (12_400, 500, ShippingStatus::Paid),
                (13_000, 0, ShippingStatus::Free),
                (11_500, 3_000, ShippingStatus::Paid),
                (9_000, 0, ShippingStatus::Unknown),
            ]
        );
        // Excluded classes are counted, flagged ones carried on the offer.
        assert_eq!(judged.excluded.get("option_listing"), Some(&1));
        assert_eq!(judged.offers[2].flags, [CardClass::Overseas]);
        assert_eq!(judged.seen, 6);
        assert_eq!(judged.rejected.len(), 1);
        assert!(
            judged
                .offers
                .iter()
                .all(|o| o.mall == mall && o.match_score > 0.0)
        );
    }

    #[test]
    fn a_card_far_under_the_pages_median_is_no_offer() {
        let query =
            ProductQuery::new("제주 삼다수 2L x 12", crate::judge::Lexicon::builtin()).unwrap();
        let mall = MallId::new("testmall-alpha").unwrap();
        let profile = profile();
        let compiled = lps_profiles::compiled::compile(&profile).unwrap();
        // The words are the product's on every card; the 3,900 one is not (a single
        // bottle listed under the pack's title): it would have been the lowest price.
        let page = |cheap: u64| {
            vec![
                card("제주 삼다수 2L x 12병", 12_900, Some("무료배송")),
                card("제주 삼다수 2L x 12병", cheap, Some("무료배송")),
                card("제주 삼다수 2L x 12병", 12_400, Some("무료배송")),
                card("제주 삼다수 2L x 12병", 13_000, Some("무료배송")),
            ]
        };
        let judged = judge_cards(&query, page(3_900), &mall, &profile, &compiled);
        let prices: Vec<i64> = judged.offers.iter().map(|o| o.price).collect();
        assert_eq!(prices, [12_400, 12_900, 13_000]);
        assert_eq!(judged.rejected.len(), 1);
        assert_eq!(judged.rejected[0].0.price, 3_900);
        // A deal within half the median is kept, and the lowest.
        let judged = judge_cards(&query, page(7_900), &mall, &profile, &compiled);
        assert_eq!(judged.offers.len(), 4);
        assert_eq!(judged.offers[0].price, 7_900);
    }

    #[test]
    fn accepts_of_any_judge_are_held_to_the_pages_prices() {
        // What the LLM judge's accepts go through: offers alone, with their page order.
        let mall = MallId::new("testmall-alpha").unwrap();
        let profile = profile();
        let offers: Vec<(usize, Offer)> = [49_000, 4_900, 51_000, 48_500]
            .into_iter()
            .enumerate()
            .map(|(i, price)| {
                let c = card("쿠쿠 IH 전기압력밥솥 CRP-HS0657F", price, Some("무료배송"));
                (i, card_offer(&c, Vec::new(), 0.8, &mall, &profile))
            })
            .collect();
        let (kept, dropped) = split_price_outliers(offers, |(_, o)| o);
        let kept: Vec<(usize, i64)> = kept.iter().map(|(i, o)| (*i, o.price)).collect();
        assert_eq!(kept, [(0, 49_000), (2, 51_000), (3, 48_500)]);
        assert_eq!(dropped.len(), 1);
        assert_eq!(dropped[0].0.1.price, 4_900);
        assert_eq!(dropped[0].1.as_str(), "price_outlier");
    }

    #[test]
    fn coupon_prices_only_when_the_profile_opts_in() {
        let mall = MallId::new("testmall-alpha").unwrap();
        let mut profile = profile();
        let mut c = card("x", 10_000, Some("무료배송"));
        c.coupon_price = Some(8_000);
        c.list_price = Some(12_000);
        let offer = card_offer(&c, Vec::new(), 1.0, &mall, &profile);
        assert_eq!((offer.price, offer.list_price), (10_000, 12_000));
        profile.accept_coupon_price = true;
        let offer = card_offer(&c, Vec::new(), 1.0, &mall, &profile);
        assert_eq!(offer.price, 8_000);
    }
}
