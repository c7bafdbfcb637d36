//! Reading one search-result page with a site profile: load, wait, classify, get more
//! results, read cards (DESIGN §5, `docs/site-profiles.md`).
//!
//! Every look at the page is one script ([`SNAPSHOT_JS`](super::scripts::SNAPSHOT_JS));
//! cards are read from what it returns by `lps_profiles::extract`, the same code the probe
//! and the unit tests use. The order of the verdict is the safety rule of DESIGN §5:
//! - **block first**: block texts, block selectors, the HTTP status, captcha frames, HTML
//!   smaller than `min_html_bytes` (noticed as soon as a small page has finished loading,
//!   not only after `wait_timeout`). A *challenge* marker is not a block yet: the page gets
//!   `clears_within` to turn healthy by itself; only a challenge that stays is a block;
//! - then the no-results marker;
//! - then cards: the first card source (profile order) that yields a real card (title and
//!   price). Placeholders (skeleton cards) are not cards: the page is waited on until real
//!   cards show.
//!
//! A page that gives none of those within `wait_timeout` is no verdict: placeholders only
//! → [`PageRead::Unreadable`] (retried), nothing a source recognises → [`PageRead::Layout`]
//! (the mall's markup changed; not retried). Neither is ever "no results".
//!
//! Once cards show, more results are fetched before the final read when the profile asks
//! and the cards come from a source that grows (DOM or captured responses): wheel-like
//! scrolling until enough cards, no growth or the step cap; a "more" button clicked while
//! it shows. Next pages are the caller's (each is a request of its own on the IP).
//!
//! Block and error checks run on every look, not only the first: after each scroll step,
//! each "more" click and on the final read. A block marker (the mall's error box among
//! them, when the profile lists it), Chromium's error page, or a request of the page's own
//! answered with a block status (`xhr_status:429`: a fetch/XHR on the page's host or one a
//! `captured_json` source reads) turns the page into that verdict, never into the cards
//! seen before it.

use std::time::Duration;

use lps_profiles::{
    compiled::CompiledProfile,
    extract::{CapturedResponse, Card, PageCards, PageSnapshot, SourceCards, extract_page},
};
use lps_proto::{model::duration_from_pb, pb};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tracing::{debug, info_span, instrument};

use super::{BrowserError, instance::Browser, scripts};

/// `wait_timeout` when the profile sets none.
pub const DEFAULT_WAIT_TIMEOUT: Duration = lps_profiles::format::DEFAULT_WAIT_TIMEOUT;
/// Between two looks at a loading page.
const POLL: Duration = Duration::from_millis(150);
/// Card elements per DOM source a poll reads (enough to tell real cards from skeletons).
const POLL_CARDS: u32 = 8;
/// A page this long past navigation, finished loading and smaller than `min_html_bytes`,
/// is a block without waiting for `wait_timeout` (a challenge page that names no marker).
const SMALL_PAGE_GRACE: Duration = Duration::from_millis(1500);
/// A saved page (the probe's `--html`) is complete once its document is ready: it is read
/// this long after, time for its own scripts to render, never waited on for the profile's
/// full `wait_timeout` (nothing more will arrive).
const SAVED_PAGE_SETTLE: Duration = Duration::from_millis(1000);
/// After a scroll step, how long a page that can still scroll is watched for new cards.
const SCROLL_PAUSE: Duration = Duration::from_millis(350);
/// Card elements per DOM source the final read takes at most (placeholders included).
const MAX_READ_ELEMENTS: u32 = 1000;

/// A fetch/XHR response of the page that failed.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct FailedResponse {
    url: String,
    status: u32,
}

/// The verdict on a loaded page.
#[derive(Debug, Clone)]
pub enum PageRead {
    /// A block page; `marker` says what matched (`text:…`, `selector:…`, `status:418`,
    /// `captcha_frame`, `tiny_html`, `challenge:…` for one that did not clear).
    Blocked { marker: String, html_bytes: u32 },
    /// The mall's no-results marker: a healthy page without results.
    NoResults,
    /// Result cards.
    Cards(Box<PageResult>),
    /// Chromium's own error page (the mall or the proxy could not be reached); `code` is
    /// Chromium's `ERR_…` name when the page shows one.
    ErrorPage { url: String, code: Option<String> },
    /// The mall answered with an HTTP error that is not a block status (e.g. 503).
    HttpError { status: u32 },
    /// Only placeholders within the wait: not a verdict, worth another attempt.
    Unreadable { reason: String, html_bytes: u32 },
    /// A healthy page on which no card source found a card: the layout changed.
    Layout { reason: String, html_bytes: u32 },
}

/// The cards of a page and how they were got.
#[derive(Debug, Clone)]
pub struct PageResult {
    /// The source that produced the cards.
    pub source: String,
    /// Its kind (`dom`, `embedded_json`, `captured_json`, `http_api`).
    pub source_kind: &'static str,
    /// Real cards, page order, before the class policy.
    pub cards: Vec<Card>,
    /// Skeleton items of the chosen source left out.
    pub placeholders: u32,
    /// Every source as evaluated on the final read (for the probe).
    pub per_source: Vec<SourceCards>,
    /// The next-page link, when the profile names a selector for it and the page has one.
    pub next_href: Option<String>,
    /// A challenge showed and cleared by itself.
    pub challenge_cleared: bool,
    /// Scroll steps and "more" clicks made.
    pub scrolls: u32,
    /// The page's final URL.
    pub url: String,
}

/// What the snapshot script returns.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct Look {
    url: String,
    title: String,
    html_bytes: u64,
    status: u32,
    waited: bool,
    block: Option<String>,
    challenge: Option<usize>,
    no_results: bool,
    error_code: Option<String>,
    /// The page's markup is Chromium's error page (`error_pages.toml`'s markers), whatever
    /// its URL: a proxy or a saved page can serve it under the mall's.
    error_page: bool,
    counts: Vec<u32>,
    captured_count: u32,
    /// The page's fetch/XHR responses that failed (HTTP 400 or more), in arrival order.
    failed: Vec<FailedResponse>,
    next_href: Option<String>,
    more_button: Option<Point>,
    viewport: Viewport,
    scroll: ScrollPos,
    ready: bool,
    snapshot: PageSnapshot,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default)]
struct Point {
    x: f64,
    y: f64,
    in_view: bool,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default)]
struct ScrollPos {
    y: f64,
    height: f64,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default)]
struct Viewport {
    width: f64,
    height: f64,
}

/// The snapshot script's argument.
#[derive(Debug, Clone, Serialize)]
struct SnapshotArgs {
    wait_for: String,
    block_texts: Vec<String>,
    block_selectors: Vec<String>,
    block_statuses: Vec<u32>,
    challenges: Vec<ChallengeArg>,
    no_results_selector: String,
    no_results_text: String,
    /// Per source: the card selector of a DOM source, else null.
    dom: Vec<Option<String>>,
    /// Per source: the script selector of an embedded-JSON source, else null.
    scripts: Vec<Option<String>>,
    captured: bool,
    captured_from: usize,
    next_selector: String,
    more_button: String,
    /// Read card material (not only counts).
    read: bool,
    max_dom: u32,
    /// `error_pages.toml`: selectors of Chromium's error page, and of its code.
    error_markers: Vec<String>,
    error_code_selector: String,
}

#[derive(Debug, Clone, Serialize)]
struct ChallengeArg {
    text: String,
    selector: String,
}

/// The profile's wait timeout.
pub fn wait_timeout(profile: &pb::SiteProfile) -> Duration {
    profile
        .wait_timeout
        .and_then(|d| duration_from_pb("wait_timeout", d).ok())
        .filter(|d| !d.is_zero())
        .unwrap_or(DEFAULT_WAIT_TIMEOUT)
}

/// The kind name of a card source.
pub fn source_kind(source: &pb::CardSource) -> &'static str {
    use pb::card_source::Kind;
    match source.kind {
        Some(Kind::EmbeddedJson(_)) => "embedded_json",
        Some(Kind::CapturedJson(_)) => "captured_json",
        Some(Kind::Dom(_)) => "dom",
        Some(Kind::HttpApi(_)) => "http_api",
        None => "none",
    }
}

fn args(profile: &pb::SiteProfile, read: bool, max_dom: u32, captured_from: usize) -> SnapshotArgs {
    use pb::card_source::Kind;
    let block = profile.block.clone().unwrap_or_default();
    let more = profile.more.clone().unwrap_or_default();
    SnapshotArgs {
        wait_for: profile.wait_for.clone(),
        block_texts: block.texts,
        block_selectors: block.selectors,
        block_statuses: block.statuses,
        challenges: block
            .challenges
            .iter()
            .map(|c| ChallengeArg {
                text: c.text.clone(),
                selector: c.selector.clone(),
            })
            .collect(),
        no_results_selector: profile.no_results_selector.clone(),
        no_results_text: profile.no_results_text.clone(),
        dom: profile
            .sources
            .iter()
            .map(|s| match &s.kind {
                Some(Kind::Dom(dom)) => Some(dom.card_selector.clone()),
                _ => None,
            })
            .collect(),
        scripts: profile
            .sources
            .iter()
            .map(|s| match &s.kind {
                Some(Kind::EmbeddedJson(e)) => Some(e.script_selector.clone()),
                _ => None,
            })
            .collect(),
        captured: profile
            .sources
            .iter()
            .any(|s| matches!(s.kind, Some(Kind::CapturedJson(_)))),
        captured_from,
        next_selector: more
            .next_page
            .as_ref()
            .map(|n| n.selector.clone())
            .unwrap_or_default(),
        more_button: more.more_button_selector,
        read,
        max_dom,
        error_markers: super::error_pages::rules().markers.clone(),
        error_code_selector: super::error_pages::rules().code_selector.clone(),
    }
}

/// One page being read: the captured responses seen so far and when it was loaded.
struct Reader<'a> {
    browser: &'a Browser,
    profile: &'a pb::SiteProfile,
    compiled: &'a CompiledProfile,
    captured: Vec<CapturedResponse>,
    loaded: Instant,
}

impl Reader<'_> {
    async fn look(&mut self, read: bool, max_dom: u32) -> Result<Look, BrowserError> {
        let args = args(self.profile, read, max_dom, self.captured.len());
        let arg = serde_json::to_value(&args)
            .map_err(|e| BrowserError::WebDriver(format!("snapshot arguments: {e}")))?;
        let value = self.browser.script(scripts::SNAPSHOT_JS, vec![arg]).await?;
        let mut look: Look = serde_json::from_value(value).map_err(|e| {
            BrowserError::WebDriver(format!("the page snapshot answered oddly: {e}"))
        })?;
        // Captured responses arrive once each; a look that reads cards carries all seen so
        // far (a count-only look, e.g. while scrolling, needs none of them).
        self.captured.append(&mut look.snapshot.captured);
        if read {
            look.snapshot.captured = self.captured.clone();
        }
        Ok(look)
    }

    fn cards(&self, look: &Look) -> PageCards {
        extract_page(self.compiled, &look.snapshot)
    }

    fn min_html(&self) -> u32 {
        self.profile.block.as_ref().map_or(0, |b| b.min_html_bytes)
    }

    fn challenge_window(&self, index: usize) -> Duration {
        self.profile
            .block
            .as_ref()
            .and_then(|b| b.challenges.get(index))
            .and_then(|c| c.clears_within)
            .and_then(|d| duration_from_pb("clears_within", d).ok())
            .unwrap_or_default()
    }

    fn challenge_name(&self, index: usize) -> String {
        self.profile
            .block
            .as_ref()
            .and_then(|b| b.challenges.get(index))
            .map(|c| {
                if c.text.is_empty() {
                    c.selector.clone()
                } else {
                    c.text.clone()
                }
            })
            .unwrap_or_default()
    }

    /// A look's verdict when the page is no longer a healthy result page: Chromium's error
    /// page, a block marker, or a request of the page's own (same host, or one a
    /// `captured_json` source reads) answered with a block status. Checked on the first
    /// load and again after every scroll step and "more" click, so a page that fails half
    /// way is never read as a short list.
    fn interrupted(&self, look: &Look) -> Option<PageRead> {
        if look.url.starts_with("chrome-error://")
            || look.error_page
            || look.title.starts_with(super::relay::ERROR_TITLE)
        {
            return Some(PageRead::ErrorPage {
                url: look.url.clone(),
                code: look.error_code.clone(),
            });
        }
        let marker = look.block.clone().or_else(|| {
            let statuses = self.profile.block.as_ref().map(|b| b.statuses.as_slice())?;
            look.failed
                .iter()
                .find(|f| statuses.contains(&f.status) && self.own_request(&look.url, &f.url))
                .map(|f| format!("xhr_status:{}", f.status))
        })?;
        Some(PageRead::Blocked {
            marker,
            html_bytes: html_bytes(look),
        })
    }

    /// Whether `request` is the page's own: on the page's host, or read by a
    /// `captured_json` source (third-party calls — analytics, ads — are not the mall's
    /// answer).
    fn own_request(&self, page: &str, request: &str) -> bool {
        let host = |url: &str| {
            url.split_once("://").map(|(_, rest)| {
                rest.split(['/', '?', '#'])
                    .next()
                    .unwrap_or_default()
                    .to_owned()
            })
        };
        if host(page).is_some() && host(page) == host(request) {
            return true;
        }
        self.compiled.sources().iter().any(|s| match &s.kind {
            lps_profiles::compiled::SourceKind::CapturedJson { url_pattern, .. } => {
                url_pattern.is_match(request)
            }
            _ => false,
        })
    }

    /// The card count of `source` that grows with scrolling.
    fn growth(&self, look: &Look, source: usize) -> u32 {
        match source_kind(&self.profile.sources[source]) {
            "dom" => look.counts.get(source).copied().unwrap_or(0),
            _ => look.captured_count,
        }
    }
}

fn html_bytes(look: &Look) -> u32 {
    u32::try_from(look.html_bytes).unwrap_or(u32::MAX)
}

/// Loads `url` and reads it with `profile` (see the module docs). Errors are the
/// browser's (navigation failures included); page verdicts are `Ok`.
#[instrument(name = "browser.page_load", skip_all, fields(url = %url), err(level = "warn"))]
pub async fn read_search_page(
    browser: &Browser,
    profile: &pb::SiteProfile,
    compiled: &CompiledProfile,
    url: &str,
) -> Result<PageRead, BrowserError> {
    browser.goto(url).await?;
    read_loaded_page(browser, profile, compiled).await
}

/// Reads the page the browser has navigated to (by [`read_search_page`], or by a person's
/// search on the home page: `navigate`), with the same rules.
pub async fn read_loaded_page(
    browser: &Browser,
    profile: &pb::SiteProfile,
    compiled: &CompiledProfile,
) -> Result<PageRead, BrowserError> {
    read_page(browser, profile, compiled, false).await
}

/// Loads the saved page `url` (a `file://` URL) and reads it with `profile` as
/// [`read_search_page`] does, except that the page is complete once its document is ready:
/// a verdict comes `SAVED_PAGE_SETTLE` after that, not at the profile's `wait_timeout`.
pub async fn read_saved_page(
    browser: &Browser,
    profile: &pb::SiteProfile,
    compiled: &CompiledProfile,
    url: &str,
) -> Result<PageRead, BrowserError> {
    browser.goto(url).await?;
    read_page(browser, profile, compiled, true).await
}

async fn read_page(
    browser: &Browser,
    profile: &pb::SiteProfile,
    compiled: &CompiledProfile,
    saved: bool,
) -> Result<PageRead, BrowserError> {
    let mut reader = Reader {
        browser,
        profile,
        compiled,
        captured: Vec::new(),
        loaded: Instant::now(),
    };
    let mut wait = wait_timeout(profile);
    let mut deadline = Instant::now() + wait;
    let mut challenge: Option<(usize, Instant)> = None;
    let mut challenge_cleared = false;
    let (settled, first) = loop {
        let look = match reader.look(true, POLL_CARDS).await {
            Ok(look) => look,
            // NB: a page that navigates by itself (a challenge that reloads, a redirect)
            // can fail a script mid-navigation; the next look sees the new document.
            Err(BrowserError::WebDriver(why)) if Instant::now() < deadline => {
                debug!(error = %why, "page snapshot failed; looking again");
                tokio::time::sleep(POLL).await;
                continue;
            }
            Err(err) => return Err(err),
        };
        if let Some(verdict) = reader.interrupted(&look) {
            return Ok(verdict);
        }
        if saved && look.ready && challenge.is_none() {
            let settled = reader.loaded + SAVED_PAGE_SETTLE;
            if settled < deadline {
                deadline = settled;
                wait = SAVED_PAGE_SETTLE;
            }
        }
        if let Some(index) = look.challenge {
            let since = challenge.map_or_else(Instant::now, |(_, since)| since);
            challenge = Some((index, since));
            let window = reader.challenge_window(index);
            if since.elapsed() >= window {
                return Ok(PageRead::Blocked {
                    marker: format!("challenge:{}", reader.challenge_name(index)),
                    html_bytes: html_bytes(&look),
                });
            }
            deadline = deadline.max(since + window + wait);
            tokio::time::sleep(POLL).await;
            continue;
        }
        if challenge.take().is_some() {
            // The challenge cleared: the page it turned into gets a full wait of its own.
            debug!("challenge cleared by itself");
            challenge_cleared = true;
            deadline = Instant::now() + wait;
            reader.loaded = Instant::now();
        }
        if look.status >= 400 {
            return Ok(PageRead::HttpError {
                status: look.status,
            });
        }
        let min_html = reader.min_html();
        let small = min_html > 0 && html_bytes(&look) < min_html;
        if small && look.ready && reader.loaded.elapsed() >= SMALL_PAGE_GRACE {
            return Ok(PageRead::Blocked {
                marker: "tiny_html".into(),
                html_bytes: html_bytes(&look),
            });
        }
        if look.no_results {
            return Ok(PageRead::NoResults);
        }
        let cards = reader.cards(&look);
        let joiner_loading = joiner_loading(reader.compiled, &cards);
        if cards.chosen.is_some()
            && (look.waited || Instant::now() >= deadline)
            && (!joiner_loading || Instant::now() >= deadline)
        {
            break (look, cards);
        }
        if Instant::now() >= deadline {
            return Ok(no_verdict(&cards, &look, small, wait));
        }
        tokio::time::sleep(POLL).await;
    };
    let chosen = first
        .chosen
        .and_then(|i| first.per_source.get(i))
        .map_or(0, |s| s.source_index);
    let scrolls = match more_results(&mut reader, &settled, chosen).await? {
        More::Steps(steps) => steps,
        More::Interrupted(verdict) => return Ok(verdict),
    };
    let max_read = profile
        .max_cards
        .saturating_mul(2)
        .clamp(POLL_CARDS, MAX_READ_ELEMENTS);
    let last = reader.look(true, max_read).await?;
    if let Some(verdict) = reader.interrupted(&last) {
        debug!(scrolls, "the page failed after it showed cards");
        return Ok(verdict);
    }
    let mut page = {
        let span = info_span!(
            "browser.parse",
            source = tracing::field::Empty,
            cards = tracing::field::Empty
        );
        let _parsing = span.enter();
        let page = reader.cards(&last);
        if let Some(chosen) = page.chosen.and_then(|i| page.per_source.get(i)) {
            span.record("source", chosen.source_name.as_str());
            span.record("cards", chosen.cards.len() as i64);
        }
        page
    };
    let Some(index) = page.chosen else {
        // The cards seen a moment ago are gone (the page re-rendered): keep those.
        return Ok(result(profile, first, settled, challenge_cleared, scrolls));
    };
    page.chosen = Some(index);
    Ok(result(profile, page, last, challenge_cleared, scrolls))
}

fn result(
    profile: &pb::SiteProfile,
    page: PageCards,
    look: Look,
    challenge_cleared: bool,
    scrolls: u32,
) -> PageRead {
    let Some(chosen) = page.chosen.and_then(|i| page.per_source.get(i)).cloned() else {
        return PageRead::Unreadable {
            reason: "no card source yielded a card".into(),
            html_bytes: html_bytes(&look),
        };
    };
    PageRead::Cards(Box::new(PageResult {
        source: chosen.source_name.clone(),
        source_kind: profile
            .sources
            .get(chosen.source_index)
            .map_or("none", source_kind),
        cards: chosen.cards,
        placeholders: chosen.placeholders,
        per_source: page.per_source,
        next_href: look.next_href,
        challenge_cleared,
        scrolls,
        url: look.url,
    }))
}

/// Whether the source the page would be read from is one another source joins (it
/// supplies fields per card) while that joining source still shows only placeholders: the
/// page is waited on for the joining source, which is the one to read; at the deadline the
/// supplier is read alone.
fn joiner_loading(compiled: &CompiledProfile, cards: &PageCards) -> bool {
    let Some(chosen) = cards.chosen_source() else {
        return false;
    };
    compiled
        .sources()
        .iter()
        .enumerate()
        .any(|(index, source)| {
            source
                .join
                .as_ref()
                .is_some_and(|j| j.source == chosen.source_index)
                && cards
                    .per_source
                    .get(index)
                    .is_some_and(|s| s.cards.is_empty() && s.placeholders > 0)
        })
}

/// The wait ended without cards, a marker or a block.
fn no_verdict(cards: &PageCards, look: &Look, small: bool, waited: Duration) -> PageRead {
    let bytes = html_bytes(look);
    if small {
        return PageRead::Blocked {
            marker: "tiny_html".into(),
            html_bytes: bytes,
        };
    }
    let unparsed: u32 = cards.per_source.iter().map(|s| s.unparsed).sum();
    let placeholders: u32 = cards.per_source.iter().map(|s| s.placeholders).sum();
    if unparsed > 0 {
        return PageRead::Layout {
            reason: format!(
                "{unparsed} card elements have text but no title or price within {waited:?}: the markup inside the cards changed"
            ),
            html_bytes: bytes,
        };
    }
    if placeholders > 0 {
        return PageRead::Unreadable {
            reason: format!("only {placeholders} placeholder cards within {waited:?}"),
            html_bytes: bytes,
        };
    }
    PageRead::Layout {
        reason: format!(
            "no card source found a card and no no-results marker showed within {waited:?} (wait_for matched: {})",
            look.waited
        ),
        html_bytes: bytes,
    }
}

/// How getting more results ended.
enum More {
    /// Scroll steps and clicks made.
    Steps(u32),
    /// The page turned into a block or an error page on the way.
    Interrupted(PageRead),
}

/// Scrolls and clicks "more" as the profile says, when `source` grows; every look on the
/// way is checked for blocks and error pages ([`Reader::interrupted`]).
async fn more_results(
    reader: &mut Reader<'_>,
    settled: &Look,
    source: usize,
) -> Result<More, BrowserError> {
    let profile = reader.profile;
    let Some(more) = profile.more.as_ref() else {
        return Ok(More::Steps(0));
    };
    if !matches!(
        profile.sources.get(source).map(source_kind),
        Some("dom" | "captured_json")
    ) {
        return Ok(More::Steps(0));
    }
    let mut steps = 0;
    let mut count = reader.growth(settled, source);
    let mut viewport = settled.viewport;
    if let Some(scroll) = &more.scroll {
        let target = if scroll.until_cards == 0 {
            profile.max_cards
        } else {
            scroll.until_cards
        };
        let settle = scroll
            .settle
            .and_then(|d| duration_from_pb("settle", d).ok())
            .unwrap_or(lps_profiles::format::DEFAULT_SCROLL_SETTLE);
        for _ in 0..scroll.max_scrolls {
            if count >= target {
                break;
            }
            // NB: jitter keeps the steps from looking machine-made.
            let step = viewport.height.max(600.0) * (0.7 + fastrand::f64() * 0.2);
            reader
                .browser
                .wheel(
                    viewport.width.max(800.0) / 2.0,
                    viewport.height.max(600.0) / 2.0,
                    step,
                )
                .await?;
            steps += 1;
            // A page that can still scroll is scrolled on at once; only at the bottom is it
            // given `settle` to load more.
            let (grown, look) = wait_growth(reader, source, count, SCROLL_PAUSE).await?;
            if let Some(verdict) = reader.interrupted(&look) {
                return Ok(More::Interrupted(verdict));
            }
            viewport = look.viewport;
            let bottom = look.scroll.y + look.viewport.height >= look.scroll.height - 2.0;
            debug!(
                y = look.scroll.y,
                height = look.scroll.height,
                cards = grown,
                bottom,
                "scrolled"
            );
            if grown > count {
                count = grown;
                continue;
            }
            if !bottom {
                continue;
            }
            let (grown, look) = wait_growth(reader, source, count, settle).await?;
            if let Some(verdict) = reader.interrupted(&look) {
                return Ok(More::Interrupted(verdict));
            }
            if grown <= count {
                break;
            }
            count = grown;
        }
    }
    let selector = more.more_button_selector.trim();
    if !selector.is_empty() {
        let settle = lps_profiles::format::DEFAULT_SCROLL_SETTLE;
        for _ in 0..more.max_clicks {
            let look = reader.look(false, 0).await?;
            let Some(mut button) = look.more_button else {
                break;
            };
            if !button.in_view {
                reader
                    .browser
                    .script(scripts::SCROLL_INTO_VIEW_JS, vec![selector.into()])
                    .await?;
                match reader.look(false, 0).await?.more_button {
                    Some(b) => button = b,
                    None => break,
                }
            }
            reader.browser.click_at(button.x, button.y).await?;
            steps += 1;
            let (grown, look) = wait_growth(reader, source, count, settle).await?;
            if let Some(verdict) = reader.interrupted(&look) {
                return Ok(More::Interrupted(verdict));
            }
            if grown <= count {
                break;
            }
            count = grown;
        }
    }
    Ok(More::Steps(steps))
}

/// Waits up to `settle` for `source`'s count to pass `count`.
async fn wait_growth(
    reader: &mut Reader<'_>,
    source: usize,
    count: u32,
    settle: Duration,
) -> Result<(u32, Look), BrowserError> {
    let until = Instant::now() + settle;
    loop {
        let look = reader.look(false, 0).await?;
        let now = reader.growth(&look, source);
        if now > count || Instant::now() >= until {
            return Ok((now, look));
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_verdict_tells_placeholders_from_a_changed_layout() {
        let look = Look {
            html_bytes: 5_000,
            ..Look::default()
        };
        let source = |placeholders, unparsed| SourceCards {
            source_index: 0,
            source_name: "dom".into(),
            cards: Vec::new(),
            placeholders,
            unparsed,
            matched: placeholders + unparsed,
            ..SourceCards::default()
        };
        let page = |s| PageCards {
            per_source: vec![s],
            chosen: None,
        };
        let t = Duration::from_secs(1);
        assert!(matches!(
            no_verdict(&page(source(6, 0)), &look, false, t),
            PageRead::Unreadable { .. }
        ));
        assert!(matches!(
            no_verdict(&page(source(0, 4)), &look, false, t),
            PageRead::Layout { .. }
        ));
        assert!(matches!(
            no_verdict(&page(source(0, 0)), &look, false, t),
            PageRead::Layout { .. }
        ));
        assert!(matches!(
            no_verdict(&page(source(6, 0)), &look, true, t),
            PageRead::Blocked { ref marker, .. } if marker == "tiny_html"
        ));
    }
}
