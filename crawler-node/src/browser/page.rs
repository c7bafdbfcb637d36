//! Reading one search-result page with a site profile: load, wait, classify, read cards.
//!
//! Every look at the page is one script ([`PROBE_JS`]) that returns the page's state as
//! JSON, so a poll costs one WebDriver round trip instead of one per selector. The order of
//! the verdict is the safety rule of DESIGN §5: **block first** (block texts, block
//! selectors, the HTTP status, captcha frames, HTML smaller than `min_html_bytes`), then the
//! no-results marker, then cards. A page that is none of those after `wait_timeout` is
//! [`PageRead::Unreadable`], never "no results": only a healthy page may say "not found".
//!
//! Texts are read with `innerText`, which leaves out `<script>` bodies: a mall's renderer
//! script often contains its own no-results text.

use std::time::Duration;

use lps_proto::{model::duration_from_pb, pb};
use serde::Deserialize;
use serde_json::json;
use tokio::time::Instant;
use tracing::{debug, instrument};

use super::{BrowserError, session::Browser};

/// `wait_timeout` when the profile sets none.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(10);
/// `max_cards` when the profile sets none.
pub const DEFAULT_MAX_CARDS: u32 = 40;
/// Between two looks at a loading page.
const POLL: Duration = Duration::from_millis(100);

/// The page-state script. Argument: the profile's selectors and markers (see [`probe_args`]).
pub const PROBE_JS: &str = r#"
var p = arguments[0] || {};
var d = document;
function q(s, root) { if (!s) { return null; } try { return (root || d).querySelector(s); } catch (e) { return null; } }
function txt(e) { return e ? String(e.innerText || e.textContent || '').replace(/\s+/g, ' ').trim() : null; }
function pick(card, s) { if (!s) { return null; } try { return card.matches(s) ? card : card.querySelector(s); } catch (e) { return null; } }
var html = d.documentElement ? d.documentElement.outerHTML : '';
var bytes = html.length;
try { bytes = new TextEncoder().encode(html).length; } catch (e) {}
var body = d.body ? String(d.body.innerText || '') : '';
var nav = null;
try { nav = performance.getEntriesByType('navigation')[0] || null; } catch (e) {}
var out = { url: String(location.href), title: String(d.title || ''), html_bytes: bytes, status: (nav && nav.responseStatus) || 0,
            waited: !!q(p.wait_for), block: null, no_results: false, card_count: 0, cards: null };
(p.block_texts || []).some(function (t) { if (t && body.indexOf(t) >= 0) { out.block = 'text:' + t; return true; } return false; });
if (!out.block) { (p.block_selectors || []).some(function (s) { if (q(s)) { out.block = 'selector:' + s; return true; } return false; }); }
if (!out.block && out.status && (p.block_statuses || []).indexOf(out.status) >= 0) { out.block = 'status:' + out.status; }
if (!out.block) {
  var frames = d.querySelectorAll('iframe');
  for (var i = 0; i < frames.length; i++) {
    var src = String(frames[i].getAttribute('src') || '').toLowerCase();
    if (src.indexOf('captcha') >= 0) { out.block = 'captcha_frame'; break; }
  }
}
out.no_results = !!q(p.no_results_selector) || (!!p.no_results_text && body.indexOf(p.no_results_text) >= 0);
var cards = [];
if (p.card) { try { cards = d.querySelectorAll(p.card); } catch (e) { cards = []; } }
out.card_count = cards.length;
if (p.read_cards) {
  out.cards = [];
  for (var j = 0; j < cards.length && j < p.max_cards; j++) {
    var c = cards[j];
    var link = pick(c, p.link);
    var href = link ? (link.href || link.getAttribute('href')) : null;
    if (!href) { var a = c.querySelector('a[href]'); href = a ? a.href : null; }
    out.cards.push({ title: txt(pick(c, p.title)), price: txt(pick(c, p.price)),
                     shipping: txt(pick(c, p.shipping)), seller: txt(pick(c, p.seller)),
                     link: href ? String(href) : null });
  }
}
return out;
"#;

/// What the probe script returns.
#[derive(Debug, Clone, Default, Deserialize)]
struct Probe {
    #[serde(default)]
    url: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    html_bytes: u64,
    #[serde(default)]
    status: u32,
    #[serde(default)]
    waited: bool,
    #[serde(default)]
    block: Option<String>,
    #[serde(default)]
    no_results: bool,
    #[serde(default)]
    card_count: u32,
    #[serde(default)]
    cards: Option<Vec<RawCard>>,
}

/// One result card as text, before parsing and judging.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct RawCard {
    pub title: Option<String>,
    pub price: Option<String>,
    pub shipping: Option<String>,
    pub seller: Option<String>,
    pub link: Option<String>,
}

/// The verdict on a loaded page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageRead {
    /// A block page; `marker` says what matched (`text:…`, `selector:…`, `status:403`,
    /// `captcha_frame`, `tiny_html`).
    Blocked { marker: String, html_bytes: u32 },
    /// The mall's no-results marker: a healthy page without results.
    NoResults,
    /// Result cards (at most `max_cards`), in page order.
    Cards(Vec<RawCard>),
    /// Chromium's own error page (the mall or the proxy could not be reached).
    ErrorPage { url: String },
    /// Neither cards, nor a marker, nor a block within the wait: not a verdict.
    Unreadable { reason: String, html_bytes: u32 },
}

/// The probe's argument for `profile`.
pub fn probe_args(profile: &pb::SiteProfile, read_cards: bool) -> serde_json::Value {
    let block = profile.block.clone().unwrap_or_default();
    let max_cards = if profile.max_cards == 0 {
        DEFAULT_MAX_CARDS
    } else {
        profile.max_cards
    };
    json!({
        "wait_for": profile.wait_for,
        "block_texts": block.texts,
        "block_selectors": block.selectors,
        "block_statuses": block.statuses,
        "no_results_selector": profile.no_results_selector,
        "no_results_text": profile.no_results_text,
        "card": profile.card_selector,
        "title": profile.title_selector,
        "price": profile.price_selector,
        "shipping": profile.shipping_selector,
        "seller": profile.seller_selector,
        "link": profile.link_selector,
        "max_cards": max_cards,
        "read_cards": read_cards,
    })
}

/// The profile's wait timeout.
pub fn wait_timeout(profile: &pb::SiteProfile) -> Duration {
    profile
        .wait_timeout
        .and_then(|d| duration_from_pb("wait_timeout", d).ok())
        .filter(|d| !d.is_zero())
        .unwrap_or(DEFAULT_WAIT_TIMEOUT)
}

/// Loads `url` and reads it with `profile` (see the module docs). Errors are the browser's
/// (navigation failures included); page verdicts are `Ok`.
#[instrument(name = "browser.page_load", skip_all, fields(url = %url), err(level = "warn"))]
pub async fn read_search_page(
    browser: &Browser,
    profile: &pb::SiteProfile,
    url: &str,
) -> Result<PageRead, BrowserError> {
    browser.goto(url).await?;
    let waiting = probe_args(profile, false);
    let deadline = Instant::now() + wait_timeout(profile);
    loop {
        let probe = probe(browser, &waiting).await?;
        let settled = probe.waited || probe.block.is_some() || is_error_page(&probe);
        if settled || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    let last = probe(browser, &probe_args(profile, true)).await?;
    let min_html = profile.block.as_ref().map_or(0, |b| b.min_html_bytes);
    Ok(classify(last, min_html, wait_timeout(profile)))
}

async fn probe(browser: &Browser, args: &serde_json::Value) -> Result<Probe, BrowserError> {
    let value = browser.script(PROBE_JS, vec![args.clone()]).await?;
    serde_json::from_value(value)
        .map_err(|e| BrowserError::WebDriver(format!("the page probe answered oddly: {e}")))
}

/// Chromium's own error page, or the relay's (`super::relay::ERROR_TITLE`).
fn is_error_page(probe: &Probe) -> bool {
    probe.url.starts_with("chrome-error://") || probe.title.starts_with(super::relay::ERROR_TITLE)
}

#[instrument(name = "browser.parse", skip_all, fields(cards = probe.card_count))]
fn classify(probe: Probe, min_html_bytes: u32, waited: Duration) -> PageRead {
    let html_bytes = u32::try_from(probe.html_bytes).unwrap_or(u32::MAX);
    debug!(
        url = %probe.url,
        status = probe.status,
        html_bytes,
        waited = probe.waited,
        block = ?probe.block,
        no_results = probe.no_results,
        cards = probe.card_count,
        "page probed"
    );
    if is_error_page(&probe) {
        return PageRead::ErrorPage { url: probe.url };
    }
    if let Some(marker) = probe.block {
        return PageRead::Blocked { marker, html_bytes };
    }
    if min_html_bytes > 0 && html_bytes < min_html_bytes {
        return PageRead::Blocked {
            marker: "tiny_html".to_owned(),
            html_bytes,
        };
    }
    if probe.no_results {
        return PageRead::NoResults;
    }
    match probe.cards {
        Some(cards) if !cards.is_empty() => PageRead::Cards(cards),
        _ => PageRead::Unreadable {
            reason: format!(
                "neither result cards nor the no-results marker within {waited:?} (wait_for matched: {})",
                probe.waited
            ),
            html_bytes,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(f: impl FnOnce(&mut Probe)) -> Probe {
        let mut p = Probe {
            url: "http://mall/search?q=x".into(),
            html_bytes: 5_000,
            status: 200,
            waited: true,
            ..Probe::default()
        };
        f(&mut p);
        p
    }

    #[test]
    fn blocks_come_first() {
        let t = Duration::from_secs(1);
        let card = RawCard {
            title: Some("t".into()),
            ..RawCard::default()
        };
        // A block marker wins over cards and over the no-results marker.
        let read = classify(
            probe(|p| {
                p.block = Some("selector:#captcha".into());
                p.no_results = true;
                p.cards = Some(vec![card.clone()]);
            }),
            200,
            t,
        );
        assert!(
            matches!(read, PageRead::Blocked { ref marker, .. } if marker == "selector:#captcha")
        );
        // Tiny HTML is a block even with a no-results marker.
        let read = classify(
            probe(|p| {
                p.html_bytes = 150;
                p.no_results = true;
            }),
            200,
            t,
        );
        assert!(
            matches!(read, PageRead::Blocked { ref marker, html_bytes: 150 } if marker == "tiny_html")
        );
        assert_eq!(
            classify(
                probe(|p| {
                    p.no_results = true;
                    p.cards = Some(vec![card.clone()]);
                }),
                200,
                t
            ),
            PageRead::NoResults
        );
        assert_eq!(
            classify(probe(|p| p.cards = Some(vec![card.clone()])), 200, t),
            PageRead::Cards(vec![card])
        );
        // Nothing at all is not "no results".
        assert!(matches!(
            classify(probe(|p| p.cards = Some(vec![])), 200, t),
            PageRead::Unreadable { .. }
        ));
        assert!(matches!(
            classify(
                probe(|p| p.url = "chrome-error://chromewebdata/".into()),
                200,
                t
            ),
            PageRead::ErrorPage { .. }
        ));
    }
}
