//! One job in one slot: prepare the browser and the IP, warm up, walk the rounds, and turn
//! what happened into an [`Outcome`] with its metrics.
//!
//! Invariants:
//! - the slot is marked `suspect` for the whole run and cleared only by [`Run::finish`]
//!   after [`Run::search`] returned on its own;
//! - every page load is counted (progress and metrics) and every search page is one
//!   request on the IP session, whatever its verdict;
//! - a blocked page is reported (`BlockEvent`) before anything else happens to the IP, and
//!   is never turned into "not found";
//! - every IP session that ends here is reported through `Slot::end_ip`, and every one
//!   this job opened ends here ([`Run::finish`]): none outlives its job;
//! - the LLM endpoint is asked only after every rule-based round gave a healthy verdict
//!   without a match, and each call is counted into the metrics (`run/llm.rs`).
//!
//! Cancellation: [`Run::search`] may be dropped at any await (the executor selects on the
//! cancel token and the deadline); what it leaves behind is a suspect slot, never a
//! half-reported IP session (`end_ip` is synchronous).

mod api;
mod llm;

use base64::Engine as _;
use std::{
    collections::{BTreeMap, HashSet},
    time::Duration,
};

use lps_profiles::{compiled::CompiledProfile, extract::Card};
use lps_proto::{
    model::{ErrorClass, JobMetrics, Offer, PageEvidence, RoundReport, duration_from_pb},
    pb,
};
use tokio::time::Instant;
use tracing::{Instrument as _, debug, info, info_span, warn};

use super::{Inner, judge_cards, slot::IpSession, slot::Slot};
use crate::{
    chromium::{
        Browser, BrowserError, LaunchOptions, PageRead, PageResult, ProfileSlot, Relay,
        RelayCounters, Upstream, default_blocked_patterns, navigate,
        page::{read_loaded_page, read_search_page},
        parse::{page_url, search_url},
    },
    executor::{Job, Outcome, Progress},
    judge::{self, ProductQuery, Round, RoundKind},
    llm::LlmClient,
    metrics::BrowserRestart,
    proxy::{Acquired, BlockEvent, Grant, SessionEndReason},
};

/// Warm-up visits have their own timeout (DESIGN §5).
pub const WARMUP_TIMEOUT: Duration = Duration::from_secs(60);
/// An IP session unused this long is given back before it is used again.
pub const IP_IDLE_LIMIT: Duration = Duration::from_secs(120);
/// Per-IP search budget when neither the grant, the profile nor the limits name one.
pub const DEFAULT_IP_BUDGET: u32 = 3;
/// IP burns per job when the limits name none.
pub const DEFAULT_MAX_IP_BURNS: u32 = 3;
/// Gateway failures per job before it fails `PROXY`.
const MAX_PROXY_ERRORS: u32 = 2;
/// Browser replacements within one job before it fails `BROWSER`.
const MAX_BROWSER_RESTARTS: u32 = 1;
/// Waiting for a free proxy port: between two asks when the ledger names no time.
const PROXY_RETRY: Duration = Duration::from_secs(2);
/// Grants asked for a port free sooner, per page load (per-IP pacing).
const MAX_PACE_ASKS: u32 = 3;
/// A job waits at most this long in all for proxy ports, then fails `PROXY` (retried with
/// the queue's backoff) instead of holding its slot.
pub const MAX_PROXY_WAIT: Duration = Duration::from_secs(60);

/// How a run stopped early.
#[derive(Debug)]
pub(super) enum Stop {
    Cancelled,
    Deadline,
    Failed(JobError),
}

/// A failed attempt: its class decides retry or dead-letter.
#[derive(Debug)]
pub(super) struct JobError {
    class: ErrorClass,
    message: String,
    /// Not a failure of the attempt but a wait for a proxy port: the job is handed back to
    /// run again then (`Some(None)`: at once), no attempt spent.
    deferred: Option<Option<chrono::DateTime<chrono::Utc>>>,
}

impl JobError {
    fn new(class: ErrorClass, message: impl Into<String>) -> Self {
        Self {
            class,
            message: message.into(),
            deferred: None,
        }
    }

    /// No proxy port is free for the job: give it back until `not_before` (the ledger's
    /// next free port, when it knows one).
    fn no_port(
        message: impl Into<String>,
        not_before: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Self {
        Self {
            deferred: Some(not_before),
            ..Self::new(ErrorClass::Proxy, message)
        }
    }
}

/// The cards of one round, over its pages.
#[derive(Debug, Default)]
pub(super) struct Read {
    /// The source that produced the first page's cards.
    source: String,
    cards: Vec<Card>,
    placeholders: u32,
    pages: u32,
    seen: HashSet<(String, String)>,
}

impl Read {
    /// Adds a page's cards, leaving out repeats (same link and title) and any past `max`.
    fn add(&mut self, cards: Vec<Card>, max: usize) {
        for card in cards {
            if self.cards.len() >= max {
                break;
            }
            if self.seen.insert((card.link.clone(), card.title.clone())) {
                self.cards.push(card);
            }
        }
    }
}

/// How a round's cards were got, for its report.
#[derive(Debug, Default)]
struct RoundCards {
    source: String,
    excluded: BTreeMap<String, u32>,
    pages: u32,
}

/// One page load's outcome for the round.
enum Loaded {
    Cards(Box<PageResult>),
    NoResults,
    /// A block, a failed gateway or a replaced browser: start the round over.
    Again,
}

/// What a finished search found.
pub(super) enum Found {
    Offers(Vec<Offer>),
    Nothing,
}

/// The state of one run (see the module docs).
pub(super) struct Run<'a> {
    inner: &'a Inner,
    job: &'a Job,
    profile: &'a pb::SiteProfile,
    compiled: &'a CompiledProfile,
    progress: &'a Progress,
    slot: &'a mut Slot,
    deadline: Instant,
    started: Instant,
    relay_start: Option<RelayCounters>,
    rounds: Vec<RoundReport>,
    pages: u32,
    ports_used: u32,
    burns: u32,
    proxy_errors: u32,
    browser_restarts: u32,
    proxy_waited: Duration,
    was_suspect: bool,
    /// Requests made to the LLM endpoint (each one is paid for).
    llm_calls: u32,
    /// Cards of healthy rounds without a match, kept for the LLM judge (with an endpoint).
    rejected: Vec<llm::Rejected>,
    /// The last blocked or unreadable page, for the failure report.
    evidence: Option<PageEvidence>,
}

impl<'a> Run<'a> {
    pub(super) fn new(
        inner: &'a Inner,
        job: &'a Job,
        profile: &'a pb::SiteProfile,
        compiled: &'a CompiledProfile,
        progress: &'a Progress,
        slot: &'a mut Slot,
        deadline: Instant,
    ) -> Self {
        let was_suspect = slot.suspect;
        slot.suspect = true;
        let relay_start = slot.relay.as_ref().map(Relay::counters);
        Self {
            inner,
            job,
            profile,
            compiled,
            progress,
            slot,
            deadline,
            started: Instant::now(),
            relay_start,
            rounds: Vec::new(),
            pages: 0,
            ports_used: 0,
            burns: 0,
            proxy_errors: 0,
            browser_restarts: 0,
            proxy_waited: Duration::ZERO,
            was_suspect,
            llm_calls: 0,
            rejected: Vec::new(),
            evidence: None,
        }
    }

    fn proxies(&self) -> Option<&'a dyn crate::proxy::ProxySource> {
        self.inner.proxies.as_deref()
    }

    // ------------------------------------------------------------------ the search

    /// Prepares the slot and walks the rounds until one finds the product.
    pub(super) async fn search(&mut self, query: &ProductQuery) -> Result<Found, JobError> {
        // NB: a mall read through its JSON API needs no browser at all.
        if self.api_source().is_none() {
            self.prepare_browser().await?;
        }
        self.ensure_ip().await?;
        if self.api_source().is_none() {
            // NB: before the warm-up, so the cookies it earns are this exit IP's.
            self.forget_other_ips_site_data().await?;
            self.warm_up().await;
        }
        let rounds = judge::rounds(query);
        for (i, round) in rounds.iter().enumerate() {
            let number = u32::try_from(i + 1).unwrap_or(u32::MAX);
            self.progress.set_round(number);
            let span = info_span!(
                "browser.round",
                job.id = self.job.job_id(),
                mall = %self.job.mall,
                round = i64::from(number),
                kind = kind_str(round.kind),
            );
            let offers = self.search_round(round, query).instrument(span).await?;
            if !offers.is_empty() {
                self.after_search();
                return Ok(Found::Offers(offers));
            }
        }
        // NB: reached only when every round gave a healthy verdict: any other page ended
        // the search above with an error.
        let offers = self.ask_llm(query, &rounds).await?;
        self.after_search();
        Ok(if offers.is_empty() {
            Found::Nothing
        } else {
            Found::Offers(offers)
        })
    }

    /// One round: read its result pages (rotating IPs after blocks, replacing a dead
    /// browser once, restarting from the first page after either), judge the cards.
    async fn search_round(
        &mut self,
        round: &Round,
        query: &ProductQuery,
    ) -> Result<Vec<Offer>, JobError> {
        let started = Instant::now();
        let cards = match self.api_source() {
            Some(api) => self.api_round(round, &api).await?,
            None => self.browser_round(round).await?,
        };
        let Some(read) = cards else {
            self.push_round(round, started, RoundCards::default(), 0, 0);
            return Ok(Vec::new());
        };
        let cards = read.cards.clone();
        let judged = judge_cards(query, cards, &self.job.mall, self.profile, self.compiled);
        for (reason, n) in &judged.excluded {
            self.inner
                .metrics
                .cards_excluded(&self.job.mall, reason, *n);
        }
        if read.placeholders > 0 {
            self.inner
                .metrics
                .cards_excluded(&self.job.mall, "placeholder", read.placeholders);
        }
        let matches = u32::try_from(judged.offers.len()).unwrap_or(u32::MAX);
        info!(
            cards = judged.seen,
            matches,
            source = %read.source,
            pages = read.pages,
            excluded = ?judged.excluded,
            query = %round.query,
            "round read"
        );
        let mut excluded = judged.excluded.clone();
        if read.placeholders > 0 {
            excluded.insert("placeholder".into(), read.placeholders);
        }
        self.push_round(
            round,
            started,
            RoundCards {
                source: read.source,
                excluded,
                pages: read.pages,
            },
            judged.seen,
            matches,
        );
        if judged.offers.is_empty() && self.inner.llm.is_some() {
            let index = self.rounds.len() - 1;
            self.rejected.extend(
                judged
                    .rejected
                    .into_iter()
                    .map(|(card, flags)| llm::Rejected {
                        round: index,
                        card,
                        flags,
                    }),
            );
        }
        Ok(judged.offers)
    }

    /// The round's pages in the browser: `None` when the first page says "no results".
    async fn browser_round(&mut self, round: &Round) -> Result<Option<Read>, JobError> {
        let template = if self.profile.price_sort_url_template.is_empty() {
            &self.profile.search_url_template
        } else {
            &self.profile.price_sort_url_template
        };
        let first = search_url(template, &round.query);
        let next_page = self.profile.more.as_ref().and_then(|m| m.next_page.clone());
        let max_pages = next_page.as_ref().map_or(1, |n| n.max_pages.max(1));
        let max_cards = self.max_cards();
        'round: loop {
            let mut read = Read::default();
            let mut url = first.clone();
            let mut per_page = 0;
            loop {
                let page = read.pages + 1;
                let loaded = match self.load(round, &url, page == 1).await {
                    Ok(loaded) => loaded,
                    // NB: a later page that fails half-way through a round (an HTTP error,
                    // an error page, a page without cards) is no short answer: it is how a
                    // mall throttles an IP, so the round is a suspect block and starts over
                    // on another IP. Answering with the earlier pages' cards would report a
                    // lowest price over part of the results.
                    Err(err)
                        if page > 1
                            && (err.class.is_retryable() || err.class == ErrorClass::Layout) =>
                    {
                        warn!(page, class = err.class.as_str(), error = %err.message, "a later result page failed; the round is a suspect block");
                        let marker = format!("page_{page}:{}", err.class.as_str());
                        self.on_block(round, &marker, 0).await?;
                        continue 'round;
                    }
                    Err(err) => return Err(err),
                };
                let result = match loaded {
                    Loaded::Again => continue 'round,
                    Loaded::NoResults if page == 1 => return Ok(None),
                    Loaded::NoResults => break,
                    Loaded::Cards(result) => result,
                };
                if page == 1 {
                    per_page = u32::try_from(result.cards.len()).unwrap_or(u32::MAX);
                    read.source = result.source.clone();
                }
                read.pages = page;
                read.placeholders += result.placeholders;
                read.add(result.cards, max_cards);
                let next = match &next_page {
                    _ if page >= max_pages || read.cards.len() >= max_cards => None,
                    Some(n) if !n.url_template.is_empty() => Some(page_url(
                        &n.url_template,
                        &round.query,
                        page + 1,
                        per_page.max(1),
                    )),
                    Some(_) => result.next_href.clone(),
                    None => None,
                };
                match next {
                    Some(next) if next != url => url = next,
                    _ => break,
                }
            }
            return Ok(Some(read));
        }
    }

    fn max_cards(&self) -> usize {
        match self.profile.max_cards {
            0 => lps_profiles::format::DEFAULT_MAX_CARDS as usize,
            n => n as usize,
        }
    }

    /// Loads and reads one result page; `Again` after a block, a failed gateway or a
    /// replaced browser (the round starts over on the new IP or browser).
    async fn load(
        &mut self,
        round: &Round,
        url: &str,
        first_page: bool,
    ) -> Result<Loaded, JobError> {
        self.ensure_ip().await?;
        self.prepare_browser().await?;
        // NB: pacing may move the job to another port; the site data is cleared after it.
        self.pace_ip().await?;
        self.forget_other_ips_site_data().await?;
        self.forget_gateway_refusal(url);
        let before = self.relay_counters();
        if let Some(ip) = &self.slot.ip {
            self.inner.pace.started(ip.grant.port);
        }
        let loading = Instant::now();
        let human = self
            .profile
            .navigation
            .as_ref()
            .filter(|nav| nav.human && first_page);
        let read = {
            let browser = self.browser()?;
            match human {
                // A person's way to the first result page; next pages open by URL.
                Some(nav) => match navigate::search_like_a_person(browser, nav, &round.query).await
                {
                    Ok(()) => read_loaded_page(browser, self.profile, self.compiled).await,
                    Err(err) => Err(err),
                },
                None => read_search_page(browser, self.profile, self.compiled, url).await,
            }
        };
        self.inner
            .metrics
            .page_loaded(&self.job.mall, verdict_str(&read), loading.elapsed());
        self.count_request(before);
        // NB: the gateway refusing the mall's host itself is the deployment's mistake (its
        // allow-list, or a profile pointing elsewhere): never a block, no IP is blamed.
        if let Some(refused) = self.gateway_refused(url) {
            return Err(refused);
        }
        // NB: a page that still gave a verdict was served; a failed gateway shows as
        // anything else (the relay's error page, a browser error page, a timeout).
        let moved = self.relay_counters().since(before);
        let proxy_failed = moved.upstream_errors > 0 && self.slot.ip.is_some();
        let gave_verdict = matches!(
            read,
            Ok(PageRead::Cards(_) | PageRead::NoResults | PageRead::Blocked { .. })
        );
        if proxy_failed && !gave_verdict {
            self.on_proxy_error()?;
            return Ok(Loaded::Again);
        }
        match read {
            Ok(PageRead::Blocked { marker, html_bytes }) => {
                self.on_block(round, &marker, html_bytes).await?;
                Ok(Loaded::Again)
            }
            Ok(PageRead::ErrorPage { url: error, code }) => match code {
                Some(code)
                    if crate::chromium::error_pages::rules().is_suspect(&code)
                        && self.proxies().is_some() =>
                {
                    // Right after connecting: the exit IP is suspect; never retry on it.
                    self.on_block(round, &format!("suspect:{code}"), 0).await?;
                    Ok(Loaded::Again)
                }
                code => Err(JobError::new(
                    ErrorClass::Network,
                    format!(
                        "the mall could not be reached (browser error page {error}{})",
                        code.map(|c| format!(", {c}")).unwrap_or_default()
                    ),
                )),
            },
            Ok(PageRead::HttpError { status }) => Err(JobError::new(
                ErrorClass::Network,
                format!("the mall answered HTTP {status}"),
            )),
            Ok(PageRead::NoResults) => {
                self.page_ok();
                Ok(Loaded::NoResults)
            }
            Ok(PageRead::Cards(result)) => {
                self.page_ok();
                if result.challenge_cleared {
                    info!(source = %result.source, "a challenge cleared by itself");
                }
                Ok(Loaded::Cards(result))
            }
            Ok(PageRead::Unreadable { reason, html_bytes }) => {
                self.keep_evidence("unreadable").await;
                Err(JobError::new(
                    ErrorClass::Parse,
                    format!("result page unreadable ({html_bytes} bytes of HTML): {reason}"),
                ))
            }
            Ok(PageRead::Layout { reason, html_bytes }) => {
                self.keep_evidence("layout").await;
                self.page_ok();
                self.inner.metrics.layout_page(&self.job.mall);
                Err(JobError::new(
                    ErrorClass::Layout,
                    format!(
                        "the layout of the result page changed ({html_bytes} bytes of HTML): {reason}"
                    ),
                ))
            }
            Err(err) if err.is_gone() => {
                self.recover_browser(&err).await?;
                Ok(Loaded::Again)
            }
            Err(err) => Err(JobError::new(
                ErrorClass::Network,
                format!("loading the result page failed: {err}"),
            )),
        }
    }

    /// Counts one request on the IP session and the page into the job's figures.
    fn count_request(&mut self, before: RelayCounters) {
        let moved = self.relay_counters().since(before);
        self.pages += 1;
        self.progress.page_loaded();
        self.progress.add_bytes(moved.bytes());
        if let Some(ip) = &mut self.slot.ip {
            ip.requests += 1;
            ip.last_used = Instant::now();
            ip.job_id = self.job.job_id();
        }
    }

    fn page_ok(&mut self) {
        if let Some(ip) = &mut self.slot.ip {
            ip.ok += 1;
        }
    }

    fn push_round(
        &mut self,
        round: &Round,
        started: Instant,
        how: RoundCards,
        cards_seen: u32,
        matches: u32,
    ) {
        self.rounds.push(RoundReport {
            kind: kind_str(round.kind).to_owned(),
            query: round.query.clone(),
            cards_seen,
            matches,
            elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            source: how.source,
            excluded: how.excluded,
            pages: how.pages,
        });
    }

    /// A blocked page: report it, burn the IP, and say whether to retry on another one.
    async fn on_block(
        &mut self,
        round: &Round,
        marker: &str,
        html_bytes: u32,
    ) -> Result<(), JobError> {
        self.keep_evidence(marker).await;
        let (port, ip_request_no, elapsed) = match &mut self.slot.ip {
            Some(ip) => {
                ip.blocked += 1;
                (ip.grant.port, ip.requests, ip.started.elapsed())
            }
            None => (0, 0, self.started.elapsed()),
        };
        warn!(
            marker,
            port,
            ip_request_no,
            html_bytes,
            query = %round.query,
            "result page blocked"
        );
        self.inner.events.block(BlockEvent {
            report_seq: 0,
            mall: self.job.mall.clone(),
            job_id: Some(self.job.job_id()).filter(|id| *id > 0),
            query: round.query.clone(),
            ip_request_no,
            port: (port > 0).then_some(port),
            marker: marker.to_owned(),
            html_len: html_bytes,
            elapsed,
            headless: true,
        });
        if self.proxies().is_none() {
            return Err(JobError::new(
                ErrorClass::Blocked,
                format!("blocked ({marker}) with no proxy to rotate to"),
            ));
        }
        self.burns += 1;
        self.slot.end_ip(self.proxies(), SessionEndReason::Block);
        // The identity that was blocked should not follow the browser to the next IP.
        if let Some(browser) = &self.slot.browser
            && let Err(err) = browser.delete_cookies().await
        {
            debug!(error = %err, "could not delete cookies after a block");
        }
        let max_burns = match self.job.limits.max_ip_burns_per_job {
            0 => DEFAULT_MAX_IP_BURNS,
            n => n,
        };
        if self.burns > max_burns {
            return Err(JobError::new(
                ErrorClass::PageBlocked,
                format!(
                    "blocked ({marker}) on {} IPs in a row: a page problem, not an IP problem",
                    self.burns
                ),
            ));
        }
        let needed = crate::chromium::page::wait_timeout(self.profile) + Duration::from_secs(5);
        if self.deadline.saturating_duration_since(Instant::now()) < needed {
            return Err(JobError::new(
                ErrorClass::Blocked,
                format!("blocked ({marker}) and no time left to try another IP"),
            ));
        }
        Ok(())
    }

    /// Keeps what the browser shows now (URL, title, the start of the HTML, a screenshot)
    /// as the run's evidence of a blocked or unreadable page. Best effort within a few
    /// seconds: a browser that cannot answer leaves the earlier evidence (or none).
    async fn keep_evidence(&mut self, marker: &str) {
        const LOOK: &str = "var d = document.documentElement; \
            return [location.href, document.title || '', d ? d.outerHTML.slice(0, 40000) : ''];";
        let Ok(browser) = self.browser() else {
            return;
        };
        let look = tokio::time::timeout(EVIDENCE_TIMEOUT, browser.script(LOOK, Vec::new())).await;
        let Ok(Ok(serde_json::Value::Array(parts))) = look else {
            debug!(marker, "no page evidence: the browser did not answer");
            return;
        };
        let text = |i: usize| parts.get(i).and_then(|v| v.as_str()).unwrap_or_default();
        let shot = tokio::time::timeout(
            EVIDENCE_TIMEOUT,
            browser.cdp(
                "Page.captureScreenshot",
                serde_json::json!({ "format": "jpeg", "quality": 40 }),
            ),
        )
        .await;
        let jpeg = match shot {
            Ok(Ok(answer)) => answer
                .get("data")
                .and_then(|d| d.as_str())
                .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok())
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        self.evidence = Some(PageEvidence::new(
            text(0),
            text(1),
            marker,
            text(2),
            jpeg,
            chrono::Utc::now(),
        ));
    }

    /// Forgets what the gateway said of `url`'s host, so the load about to run decides.
    pub(super) fn forget_gateway_refusal(&self, url: &str) {
        if let (Some(relay), Some(host)) = (&self.slot.relay, url_host(url)) {
            relay.forget_refusal(&host);
        }
    }

    /// The gateway's own refusal of `url`'s host since [`Self::forget_gateway_refusal`], as
    /// the job's error: `config`, naming the host and what the gateway said.
    pub(super) fn gateway_refused(&self, url: &str) -> Option<JobError> {
        let relay = self.slot.relay.as_ref()?;
        let host = url_host(url)?;
        let refusal = relay.refusal(&host)?;
        warn!(host = %host, %refusal, "the proxy gateway refuses the mall's host");
        Some(JobError::new(
            ErrorClass::Config,
            format!(
                "the proxy gateway refused {host} itself ({refusal}): not a bot block; check \
                 the site profile's URL and the gateway's allow-list"
            ),
        ))
    }

    fn on_proxy_error(&mut self) -> Result<(), JobError> {
        self.proxy_errors += 1;
        warn!(
            errors = self.proxy_errors,
            "the proxy gateway failed; trying another IP"
        );
        self.slot
            .end_ip(self.proxies(), SessionEndReason::ProxyError);
        if self.proxy_errors > MAX_PROXY_ERRORS {
            return Err(JobError::new(
                ErrorClass::Proxy,
                format!("the proxy gateway failed {} times", self.proxy_errors),
            ));
        }
        Ok(())
    }

    /// After a search finished on its own: an IP at its budget (or past its window) is
    /// given back now, so the port rests instead of idling with the slot.
    fn after_search(&mut self) {
        let reason = self
            .slot
            .ip
            .as_ref()
            .and_then(|ip| ip.end_reason(&self.job.mall, self.ip_window(), IP_IDLE_LIMIT));
        if let Some(reason) = reason {
            self.slot.end_ip(self.proxies(), reason);
        }
    }

    /// The job is over, so is its IP session (DESIGN §4): the release is reported inside
    /// the job — its trace, its ledger record — and no later job inherits a lease, a budget
    /// count or cookies this job held. A session at its budget or past its window ends for
    /// that reason; otherwise `idle` (nothing more to search on it: a plain release), or
    /// `shutdown` when the run was cancelled.
    fn end_job_ip(&mut self, cancelled: bool) {
        let Some(ip) = self.slot.ip.as_ref() else {
            return;
        };
        let reason = if cancelled {
            SessionEndReason::Shutdown
        } else {
            ip.end_reason(&self.job.mall, self.ip_window(), IP_IDLE_LIMIT)
                .unwrap_or(SessionEndReason::Idle)
        };
        self.slot.end_ip(self.proxies(), reason);
    }

    // ------------------------------------------------------------------ the browser

    fn browser(&self) -> Result<&Browser, JobError> {
        self.slot
            .browser
            .as_ref()
            .ok_or_else(|| JobError::new(ErrorClass::Browser, "no browser in the slot"))
    }

    fn relay_counters(&self) -> RelayCounters {
        self.slot
            .relay
            .as_ref()
            .map(Relay::counters)
            .unwrap_or_default()
    }

    /// The slot's profile directory, relay (proxy mode) and a live browser with this job's
    /// blocked URL patterns.
    async fn prepare_browser(&mut self) -> Result<(), JobError> {
        let settings = &self.inner.settings;
        if self.slot.profile.is_none() {
            let profile = ProfileSlot::acquire(&settings.profile_root)
                .map_err(|e| JobError::new(ErrorClass::Browser, e.to_string()))?;
            self.inner.remember_dir(profile.dir());
            self.slot.profile = Some(profile);
        }
        self.ensure_relay().await?;
        if self.was_suspect {
            self.was_suspect = false;
            if let Some(browser) = &self.slot.browser
                && let Err(err) = browser.ping().await
            {
                warn!(error = %err, "the browser of an interrupted job does not answer; replacing it");
                self.inner
                    .metrics
                    .browser_restarted(BrowserRestart::Unresponsive);
                self.slot.kill_browser().await;
            }
        }
        if self.slot.browser.is_none() {
            let url = self
                .inner
                .driver
                .url()
                .await
                .map_err(|e| JobError::new(ErrorClass::Browser, e.to_string()))?;
            let Some(profile) = self.slot.profile.as_ref() else {
                return Err(JobError::new(
                    ErrorClass::Internal,
                    "slot without a profile",
                ));
            };
            let options = LaunchOptions {
                extra_args: settings.chromium_args.clone(),
                proxy: self.slot.relay.as_ref().map(Relay::addr),
                blocked: self.blocked_patterns(),
                stealth: settings.stealth,
                ..LaunchOptions::new(settings.chromium_path.clone(), settings.mode)
            };
            let browser = Browser::launch(&url, profile, &options)
                .await
                .map_err(|e| JobError::new(ErrorClass::Browser, e.to_string()))?;
            self.inner
                .launches
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.inner.metrics.browser_launches.inc();
            self.slot.browser = Some(browser);
            self.slot.site_data_stale = true;
        }
        let patterns = self.blocked_patterns();
        let blocked = match self.slot.browser.as_mut() {
            Some(browser) => browser.block_urls(&patterns).await,
            None => Ok(()),
        };
        if let Err(err) = blocked {
            return self.recover_browser(&err).await;
        }
        Ok(())
    }

    /// Exit-IP hygiene (DESIGN §5): before the first page of a new exit IP or a new
    /// browser, the mall's cookies and storage are cleared, so anti-bot cookies one IP
    /// earned are never presented from another. The warm-up is visited again.
    async fn forget_other_ips_site_data(&mut self) -> Result<(), JobError> {
        if !self.slot.site_data_stale {
            return Ok(());
        }
        let origins = site_origins(self.profile);
        let cleared = match self.slot.browser.as_mut() {
            Some(browser) => {
                browser.warmed.clear();
                browser.clear_site_data(&origins).await
            }
            None => return Ok(()),
        };
        match cleared {
            Ok(()) => {
                debug!(
                    origins = origins.len(),
                    "site data of other exit IPs cleared"
                );
                self.slot.site_data_stale = false;
                Ok(())
            }
            Err(err) => self.recover_browser(&err).await,
        }
    }

    /// Per-IP pacing (DESIGN §5): the next page load starts once its exit IP's gap has
    /// passed, and the slot does not sleep through a gap while another port is free sooner.
    /// While the pacing book knows a port nobody here holds that is free before this one,
    /// the ledger is asked again (it grants its least recently used free port, another
    /// one): a grant free sooner becomes the job's IP session (the old one ends `rotate`; the
    /// new exit IP's site data is cleared as after any rotation), any other is given back
    /// unused — at most [`MAX_PACE_ASKS`] asks a page, and none once the wait left is
    /// shorter than the last ask took. Then the slot waits for what is left
    /// of its port's gap, never past the job's deadline. Direct mode is not paced.
    async fn pace_ip(&mut self) -> Result<(), JobError> {
        let inner = self.inner;
        let book = &inner.pace;
        let Some(port) = self.slot.ip.as_ref().map(|ip| ip.grant.port) else {
            return Ok(());
        };
        let Some(mut until) = book.ready_at(port) else {
            return Ok(());
        };
        for _ in 0..MAX_PACE_ASKS {
            if !book.worth_asking(until) || !book.free_sooner_than(until) {
                break;
            }
            match self.ask_sooner_port(until).await {
                Some(Some(sooner)) => until = sooner,
                Some(None) => return Ok(()),
                None => {}
            }
        }
        let now = Instant::now();
        if until <= now {
            return Ok(());
        }
        if until >= self.deadline {
            return Err(JobError::new(
                ErrorClass::Deadline,
                "the exit IP's page gap ends after the job's deadline",
            ));
        }
        let port = self.slot.ip.as_ref().map_or(0, |ip| ip.grant.port);
        debug!(wait = ?(until - now), port, "pacing page loads on this exit IP");
        tokio::time::sleep_until(until).await;
        Ok(())
    }

    /// One more grant while the job's port is inside its gap until `until`: taken when its
    /// port is free sooner (`Some(None)`: free now, `Some(Some(at))`: free then), given back
    /// unused otherwise (`None`, as when no port is free).
    async fn ask_sooner_port(&mut self, until: Instant) -> Option<Option<Instant>> {
        let proxies = self.proxies()?;
        let asked = Instant::now();
        let acquired = proxies.acquire(&self.job.mall, self.job.job_id()).await;
        self.inner.pace.asked(asked.elapsed());
        let Acquired::Granted(grant) = acquired else {
            return None;
        };
        let ready = self.inner.pace.ready_at(grant.port);
        if ready.is_some_and(|at| at >= until) {
            self.slot
                .give_back(proxies, &grant, &self.job.mall, self.job.job_id());
            return None;
        }
        debug!(port = grant.port, "a port free sooner; moving to it");
        self.slot.end_ip(Some(proxies), SessionEndReason::Rotate);
        self.start_ip(grant);
        Some(ready)
    }

    /// Proxy mode: the slot's relay (every request of the slot goes through it).
    async fn ensure_relay(&mut self) -> Result<(), JobError> {
        if self.inner.proxies.is_some() && self.slot.relay.is_none() {
            let relay = Relay::start()
                .await
                .map_err(|e| JobError::new(ErrorClass::Internal, format!("proxy relay: {e}")))?;
            self.relay_start = Some(relay.counters());
            self.slot.relay = Some(relay);
        }
        Ok(())
    }

    fn blocked_patterns(&self) -> Vec<String> {
        if !self.inner.settings.block_resources {
            Vec::new()
        } else if self.profile.blocked_url_patterns.is_empty() {
            default_blocked_patterns()
        } else {
            self.profile.blocked_url_patterns.clone()
        }
    }

    /// The browser is gone or hangs: kill it; the caller's loop launches a new one, once
    /// per job.
    async fn recover_browser(&mut self, err: &BrowserError) -> Result<(), JobError> {
        warn!(error = %err, restarts = self.browser_restarts, "the browser failed; killing it");
        self.inner.metrics.browser_restarted(BrowserRestart::Failed);
        self.slot.kill_browser().await;
        if self.browser_restarts >= MAX_BROWSER_RESTARTS {
            return Err(JobError::new(ErrorClass::Browser, err.to_string()));
        }
        self.browser_restarts += 1;
        Ok(())
    }

    /// Visits the profile's warm-up page once per browser, under its own timeout;
    /// a failed warm-up is logged, never fatal.
    async fn warm_up(&mut self) {
        let url = self.profile.warmup_url.trim();
        let mall = self.job.mall.to_string();
        let Some(browser) = self.slot.browser.as_mut() else {
            return;
        };
        if url.is_empty() || browser.warmed.contains(&mall) {
            return;
        }
        browser.warmed.insert(mall);
        let span = info_span!("browser.warmup", mall = %self.job.mall, url);
        let visited = tokio::time::timeout(WARMUP_TIMEOUT, browser.goto(url))
            .instrument(span)
            .await;
        self.pages += 1;
        self.progress.page_loaded();
        match visited {
            Ok(Ok(())) => debug!("warm-up page visited"),
            Ok(Err(err)) => warn!(error = %err, "warm-up failed; searching anyway"),
            Err(_) => warn!(timeout = ?WARMUP_TIMEOUT, "warm-up timed out; searching anyway"),
        }
    }

    // ------------------------------------------------------------------ the IP

    fn ip_window(&self) -> Option<Duration> {
        self.job
            .limits
            .ip_session_window
            .and_then(|d| duration_from_pb("ip_session_window", d).ok())
            .filter(|d| !d.is_zero())
    }

    fn ip_budget(&self, granted: u32) -> u32 {
        [
            granted,
            self.profile.ip_request_budget,
            self.job.limits.ip_request_budget,
        ]
        .into_iter()
        .find(|&b| b > 0)
        .unwrap_or(DEFAULT_IP_BUDGET)
    }

    /// Proxy mode: the slot is on an IP session for this mall with budget left, acquiring
    /// one (waiting while none is free, within the deadline) if needed.
    async fn ensure_ip(&mut self) -> Result<(), JobError> {
        let Some(proxies) = self.proxies() else {
            return Ok(());
        };
        let reason = self
            .slot
            .ip
            .as_ref()
            .and_then(|ip| ip.end_reason(&self.job.mall, self.ip_window(), IP_IDLE_LIMIT));
        match (reason, &self.slot.ip) {
            (Some(reason), _) => self.slot.end_ip(Some(proxies), reason),
            (None, Some(_)) => return Ok(()),
            (None, None) => {}
        }
        self.ensure_relay().await?;
        loop {
            match proxies.acquire(&self.job.mall, self.job.job_id()).await {
                Acquired::Granted(grant) => {
                    self.start_ip(grant);
                    return Ok(());
                }
                Acquired::Unavailable { retry_at } => {
                    let wait = retry_at
                        .and_then(|at| (at - chrono::Utc::now()).to_std().ok())
                        .unwrap_or(PROXY_RETRY)
                        .clamp(Duration::from_millis(100), Duration::from_secs(30));
                    // NB: waiting for a port is not a failed attempt: past what the job can
                    // spend on it, the job goes back to the queue until the ledger expects
                    // a free port (the claim keeps jobs beyond the ports queued anyway).
                    let needed = wait + crate::chromium::page::wait_timeout(self.profile);
                    if self.deadline.saturating_duration_since(Instant::now()) < needed {
                        return Err(JobError::no_port(
                            "no proxy port free before the job's deadline",
                            retry_at,
                        ));
                    }
                    if self.proxy_waited + wait > MAX_PROXY_WAIT {
                        return Err(JobError::no_port(
                            format!("no proxy port free within {MAX_PROXY_WAIT:?}"),
                            retry_at,
                        ));
                    }
                    debug!(?wait, "no proxy port free; waiting");
                    tokio::time::sleep(wait).await;
                    self.proxy_waited += wait;
                }
            }
        }
    }

    /// The slot's IP session on `grant` for this job (the relay points at it; its port is
    /// held in the pacing book); the new exit IP's site data is cleared before its page.
    fn start_ip(&mut self, grant: Grant) {
        let budget = self.ip_budget(grant.request_budget);
        if let Some(relay) = &self.slot.relay {
            relay.point_to(Some(Upstream::new(
                grant.host.clone(),
                grant.port,
                &grant.username,
                grant.password.expose(),
            )));
        }
        info!(port = grant.port, budget, "ip session started");
        self.slot.site_data_stale = true;
        self.ports_used += 1;
        let held = self.inner.pace.hold(grant.port);
        self.slot.ip = Some(IpSession::new(
            grant,
            self.job.mall.clone(),
            budget,
            self.job.job_id(),
            Some(held),
        ));
    }

    // ------------------------------------------------------------------ the end

    /// The outcome of the run and its metrics; clears `suspect` when the run ended on its
    /// own.
    pub(super) fn finish(mut self, result: Result<Found, Stop>) -> Outcome {
        self.end_job_ip(matches!(result, Err(Stop::Cancelled)));
        let metrics = self.metrics();
        self.inner
            .metrics
            .proxy_bytes(&self.job.mall, metrics.bytes_in, metrics.bytes_out);
        let rounds = self.rounds;
        let evidence = self.evidence.map(Box::new);
        match result {
            Ok(found) => {
                self.slot.suspect = false;
                match found {
                    Found::Offers(offers) => Outcome::Found {
                        offers,
                        rounds,
                        metrics,
                    },
                    Found::Nothing => Outcome::NotFound { rounds, metrics },
                }
            }
            Err(Stop::Failed(JobError {
                message,
                deferred: Some(not_before),
                ..
            })) => {
                info!(reason = %message, ?not_before, "handing the job back until a proxy port is free");
                Outcome::Deferred {
                    reason: message,
                    not_before,
                    metrics,
                }
            }
            Err(Stop::Failed(err)) => {
                self.slot.suspect = false;
                warn!(class = err.class.as_str(), error = %err.message, "job failed");
                Outcome::Failed {
                    class: err.class,
                    message: err.message,
                    metrics,
                    evidence,
                }
            }
            Err(Stop::Cancelled) => Outcome::Failed {
                class: ErrorClass::Internal,
                message: "cancelled".into(),
                metrics,
                evidence,
            },
            Err(Stop::Deadline) => Outcome::Failed {
                class: ErrorClass::Deadline,
                message: "the job ran past its hard deadline".into(),
                metrics,
                evidence,
            },
        }
    }

    fn metrics(&self) -> JobMetrics {
        let moved = match (&self.slot.relay, self.relay_start) {
            (Some(relay), start) => relay.counters().since(start.unwrap_or_default()),
            (None, _) => RelayCounters::default(),
        };
        let per_call = self.inner.llm.as_ref().map_or(0.0, LlmClient::usd_per_call);
        JobMetrics {
            bytes_in: moved.to_browser,
            bytes_out: moved.from_browser,
            elapsed: self.started.elapsed(),
            cost_usd: crate::executor::cost_usd(
                moved.bytes(),
                self.job.limits.proxy_usd_per_gb,
                f64::from(self.llm_calls) * per_call,
            ),
            llm_calls: self.llm_calls,
            pages_loaded: self.pages,
            ports_used: self.ports_used,
        }
    }
}

/// The `verdict` label of a search page load.
/// The page-load verdict of `read`: one of [`PAGE_VERDICTS`](crate::metrics::PAGE_VERDICTS).
fn verdict_str(read: &Result<PageRead, BrowserError>) -> &'static str {
    match read {
        Ok(PageRead::Cards(_)) => "results",
        Ok(PageRead::NoResults) => "no_results",
        Ok(PageRead::Blocked { .. }) => "blocked",
        Ok(PageRead::Unreadable { .. }) => "unreadable",
        Ok(PageRead::Layout { .. }) => "layout",
        Ok(PageRead::ErrorPage { .. } | PageRead::HttpError { .. }) => "error_page",
        Err(_) => "failed",
    }
}

fn kind_str(kind: RoundKind) -> &'static str {
    match kind {
        RoundKind::Original => "original",
        RoundKind::Precise => "precise",
        RoundKind::Broad => "broad",
        RoundKind::Llm => "llm",
    }
}

/// The origins (`scheme://host[:port]`) of a profile's URLs: what its cookies and storage
/// are kept under.
fn site_origins(profile: &pb::SiteProfile) -> Vec<String> {
    let mut origins: Vec<String> = Vec::new();
    for url in [
        &profile.search_url_template,
        &profile.price_sort_url_template,
        &profile.warmup_url,
    ] {
        let Some(rest) = url
            .strip_prefix("https://")
            .map(|r| ("https", r))
            .or_else(|| url.strip_prefix("http://").map(|r| ("http", r)))
        else {
            continue;
        };
        let host = rest.1.split(['/', '?', '#']).next().unwrap_or_default();
        if host.is_empty() || host.contains('{') {
            continue;
        }
        let origin = format!("{}://{host}", rest.0);
        if !origins.contains(&origin) {
            origins.push(origin);
        }
    }
    origins
}

/// How long keeping a page's evidence may take, per browser call.
const EVIDENCE_TIMEOUT: Duration = Duration::from_secs(5);

/// The host of `url` (lowercase), if it has one.
fn url_host(url: &str) -> Option<String> {
    reqwest::Url::parse(url)
        .ok()?
        .host_str()
        .map(str::to_ascii_lowercase)
}
