//! The mall's mutable state: counters per exit IP, the block policy, the slow setting and
//! gamma's page states (challenge, restriction, redesigned layout).
//!
//! One `std::sync::Mutex` guards everything; it is never held across an `.await`. The
//! block decision and the counter update happen under the same lock, so the N+1th search
//! from an exit IP is blocked exactly once the Nth has been counted, however requests race.
//!
//! Policy: a search **page** request counts toward its exit IP's budget. An exit IP is
//! blocked when it was forced (`block_exit`) or when `block_after = Some(n)` and it has
//! made more than `n` search page requests. A blocked exit IP stays blocked until
//! `unblock_exit` or `reset`. The JSON API does not count toward the budget but is refused
//! for a blocked exit IP, so a page that was allowed always gets its results. Gamma's JSON
//! API (`/openapi/…`) is a search of its own and counts like a page.
//!
//! Gamma's gate ([`Counters::gamma_gate`], after the budget): a restriction answers every
//! search page; an armed challenge answers the next N pages that carry no clearance token
//! the mall issued, issuing one each time; a request with an issued token passes.
//!
//! The bot wall's book ([`WallBook`], decisions documented in [`crate::mall::wall`]) is
//! under the same lock; a wall block is a forced block, exactly as `block_exit` makes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use crate::mall::gamma::CHALLENGE_CLEARS_AFTER;
use crate::mall::wall::{WallBook, WallGate, WallRefusal, WallReport, WallReports, WallVerdict};

use serde::{Deserialize, Serialize};

/// What the mall decided for one search request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Serve,
    Block,
}

/// What gamma serves a search page request that passed the budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Gate {
    /// The restriction page (HTTP 418).
    Restricted,
    /// The interstitial; its script sets `token` as the clearance cookie after `after`.
    Challenge { token: String, after: Duration },
    /// The results, in the redesigned layout or not.
    Results { redesigned: bool },
}

/// The kinds of request the mall counts separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestKind {
    SearchPage,
    SearchApi,
    Image,
    Font,
    Other,
}

/// A snapshot of the mall's counters (also the JSON of `GET /_control/stats`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MallStats {
    /// Search page requests (`/search`; gamma: also API searches) per exit IP label
    /// (`direct` without the header).
    pub searches: BTreeMap<String, u64>,
    /// All requests except `/_control/*`, per exit IP label.
    pub requests: BTreeMap<String, u64>,
    /// `/api/search` requests (gamma: `/openapi/v1/search.json` requests).
    pub api_requests: u64,
    /// Image requests.
    pub image_requests: u64,
    /// Font requests.
    pub font_requests: u64,
    /// Responses that were a block page (or a blocked API answer).
    pub blocked: u64,
    /// Response body bytes served, excluding `/_control/*` (headers not counted).
    pub bytes_served: u64,
    /// Exit IPs currently blocked (forced or over budget).
    pub blocked_exits: BTreeSet<String>,
    /// Current `block_after` setting.
    pub block_after: Option<u32>,
    /// Current extra delay of search pages, in milliseconds.
    pub slow_page_ms: u64,
    /// Current extra delay of the search JSON API, in milliseconds.
    pub slow_api_ms: u64,
    /// Gamma: search pages still to be challenged (those without a clearance cookie).
    #[serde(default)]
    pub challenge_pages: u32,
    /// Gamma: the interstitial's delay before it sets its cookie and reloads, in ms.
    #[serde(default)]
    pub challenge_after_ms: u64,
    /// Gamma: interstitials served.
    #[serde(default)]
    pub challenges_served: u64,
    /// Gamma: search pages that carried a clearance token the mall issued.
    #[serde(default)]
    pub challenges_cleared: u64,
    /// Gamma: whether search pages answer with the restriction page (HTTP 418).
    #[serde(default)]
    pub restricted: bool,
    /// Gamma: restriction pages served.
    #[serde(default)]
    pub restricted_served: u64,
    /// Gamma: whether search pages use the redesigned layout.
    #[serde(default)]
    pub layout_changed: bool,
    /// Gamma: the next this many result pages fail when scrolled (their next batch's
    /// request answers 429 and the page shows its error box).
    #[serde(default)]
    pub scroll_failures: u32,
    /// Gamma: result page number `page_failure.0` answers HTTP `page_failure.1` with the
    /// error box, the next `page_failure.2` times it is asked for.
    #[serde(default)]
    pub page_failure: Option<(usize, u16, u32)>,
    /// Gamma: pages served that failed (on scrolling or outright).
    #[serde(default)]
    pub failures_served: u64,
    /// Gamma: API requests refused for a missing or wrong key.
    #[serde(default)]
    pub api_unauthorized: u64,
    /// Gamma: ad click redirects followed.
    #[serde(default)]
    pub ad_clicks: u64,
    /// Whether the bot wall guards search pages (every style; see [`crate::mall::wall`]).
    #[serde(default)]
    pub bot_wall: bool,
}

#[derive(Debug, Default)]
struct Inner {
    stats: MallStats,
    forced: BTreeSet<String>,
    /// Clearance tokens issued by interstitials.
    clearances: BTreeSet<String>,
    issued: u64,
    wall: WallBook,
    /// Prices set at run time (`/_control/price`) by listing id, in place of the catalog's.
    prices: BTreeMap<String, u64>,
    /// When each search page request arrived, with its exit IP label, in arrival order.
    arrivals: Vec<(String, std::time::Instant)>,
}

/// Shared, lock-protected mall state.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    inner: Mutex<Inner>,
}

impl Counters {
    pub(crate) fn new(block_after: Option<u32>) -> Counters {
        let counters = Counters::default();
        counters.with(|inner| {
            inner.stats.block_after = block_after;
            inner.stats.challenge_after_ms = duration_ms(CHALLENGE_CLEARS_AFTER);
        });
        counters
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        // NB: a panic while holding the lock cannot leave the counters inconsistent in a
        // way that matters to a test fixture, so a poisoned lock is simply reused.
        let mut guard = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut guard)
    }

    /// Counts a served request (any route but `/_control`).
    pub(crate) fn record(&self, exit: &str, kind: RequestKind, body_bytes: u64) {
        self.with(|inner| {
            let s = &mut inner.stats;
            *s.requests.entry(exit.to_owned()).or_default() += 1;
            s.bytes_served += body_bytes;
            match kind {
                RequestKind::SearchApi => s.api_requests += 1,
                RequestKind::Image => s.image_requests += 1,
                RequestKind::Font => s.font_requests += 1,
                RequestKind::SearchPage | RequestKind::Other => {}
            }
        });
    }

    /// Counts a search page request against `exit`'s budget and decides.
    pub(crate) fn search_page(&self, exit: &str) -> Verdict {
        self.with(|inner| {
            inner
                .arrivals
                .push((exit.to_owned(), std::time::Instant::now()));
            let count = inner.stats.searches.entry(exit.to_owned()).or_default();
            *count += 1;
            let count = *count;
            decide(inner, exit, count)
        })
    }

    /// When each search page request arrived, with its exit IP label, in arrival order.
    pub(crate) fn arrivals(&self) -> Vec<(String, std::time::Instant)> {
        self.with(|inner| inner.arrivals.clone())
    }

    /// Decides for a JSON API request (not counted toward the budget).
    pub(crate) fn search_api(&self, exit: &str) -> Verdict {
        self.with(|inner| {
            let count = inner.stats.searches.get(exit).copied().unwrap_or(0);
            decide(inner, exit, count)
        })
    }

    pub(crate) fn block_exit(&self, exit: &str) {
        self.with(|inner| force_block(inner, exit));
    }

    pub(crate) fn unblock_exit(&self, exit: &str) {
        self.with(|inner| {
            inner.forced.remove(exit);
            inner.stats.blocked_exits.remove(exit);
            inner.stats.searches.remove(exit);
        });
    }

    pub(crate) fn set_block_after(&self, block_after: Option<u32>) {
        self.with(|inner| inner.stats.block_after = block_after);
    }

    pub(crate) fn set_slow(&self, page: Option<Duration>, api: Option<Duration>) {
        self.with(|inner| {
            if let Some(page) = page {
                inner.stats.slow_page_ms = duration_ms(page);
            }
            if let Some(api) = api {
                inner.stats.slow_api_ms = duration_ms(api);
            }
        });
    }

    pub(crate) fn slow(&self) -> (Duration, Duration) {
        self.with(|inner| {
            (
                Duration::from_millis(inner.stats.slow_page_ms),
                Duration::from_millis(inner.stats.slow_api_ms),
            )
        })
    }

    /// Arms the challenge for the next `pages` uncleared search pages (0 = off).
    pub(crate) fn set_challenge(&self, pages: u32, after: Duration) {
        self.with(|inner| {
            inner.stats.challenge_pages = pages;
            inner.stats.challenge_after_ms = duration_ms(after);
        });
    }

    pub(crate) fn set_restricted(&self, on: bool) {
        self.with(|inner| inner.stats.restricted = on);
    }

    pub(crate) fn set_layout_changed(&self, on: bool) {
        self.with(|inner| inner.stats.layout_changed = on);
    }

    pub(crate) fn set_scroll_failures(&self, pages: u32) {
        self.with(|inner| inner.stats.scroll_failures = pages);
    }

    pub(crate) fn set_page_failure(&self, page: usize, status: u16, times: u32) {
        self.with(|inner| inner.stats.page_failure = (times > 0).then_some((page, status, times)));
    }

    /// Gamma: whether result page `page` fails outright now (its status), counting it.
    pub(crate) fn take_page_failure(&self, page: usize) -> Option<u16> {
        self.with(|inner| {
            let s = &mut inner.stats;
            let (at, status, times) = s.page_failure?;
            if at != page {
                return None;
            }
            s.page_failure = (times > 1).then_some((at, status, times - 1));
            s.failures_served += 1;
            Some(status)
        })
    }

    /// Gamma: whether the result page being served fails when scrolled, counting it.
    pub(crate) fn take_scroll_failure(&self) -> bool {
        self.with(|inner| {
            let s = &mut inner.stats;
            if s.scroll_failures == 0 {
                return false;
            }
            s.scroll_failures -= 1;
            s.failures_served += 1;
            true
        })
    }

    pub(crate) fn api_unauthorized(&self) {
        self.with(|inner| inner.stats.api_unauthorized += 1);
    }

    pub(crate) fn ad_click(&self) {
        self.with(|inner| inner.stats.ad_clicks += 1);
    }

    /// Gamma's decision for a search page that passed the budget (see the module doc).
    pub(crate) fn gamma_gate(&self, clearance: Option<&str>) -> Gate {
        self.with(|inner| {
            let s = &mut inner.stats;
            if s.restricted {
                s.restricted_served += 1;
                return Gate::Restricted;
            }
            let cleared = clearance.is_some_and(|c| inner.clearances.contains(c));
            if cleared {
                s.challenges_cleared += 1;
            } else if s.challenge_pages > 0 {
                s.challenge_pages -= 1;
                s.challenges_served += 1;
                inner.issued += 1;
                let token = format!("c{}-{:x}", inner.issued, token_noise(inner.issued));
                inner.clearances.insert(token.clone());
                return Gate::Challenge {
                    token,
                    after: Duration::from_millis(s.challenge_after_ms),
                };
            }
            Gate::Results {
                redesigned: s.layout_changed,
            }
        })
    }

    pub(crate) fn set_bot_wall(&self, on: bool) {
        self.with(|inner| inner.stats.bot_wall = on);
    }

    pub(crate) fn bot_wall(&self) -> bool {
        self.with(|inner| inner.stats.bot_wall)
    }

    /// The wall's decision for a search page from `exit` that passed the budget (see
    /// [`crate::mall::wall`]): pass on a clearance cookie earned on `exit`, else block on
    /// header signals, else serve the wall.
    pub(crate) fn wall_gate(
        &self,
        exit: &str,
        cookie: Option<&str>,
        header_signals: &[&'static str],
        user_agent: Option<&str>,
    ) -> WallGate {
        self.with(|inner| {
            if !inner.stats.bot_wall || inner.wall.pass(exit, cookie) {
                return WallGate::Pass;
            }
            if header_signals.is_empty() {
                let nonce = inner.wall.serve(exit, user_agent);
                return WallGate::Wall { nonce };
            }
            inner.wall.header_block(exit, header_signals, user_agent);
            force_block(inner, exit);
            inner.stats.blocked += 1;
            WallGate::Block
        })
    }

    /// Judges a wall report from `exit`; a flagged one blocks `exit`.
    pub(crate) fn wall_verdict(
        &self,
        exit: &str,
        report: WallReport,
    ) -> Result<WallVerdict, WallRefusal> {
        self.with(|inner| {
            inner.wall.take_nonce(exit, &report.nonce)?;
            let verdict = inner.wall.judge(exit, report);
            if matches!(verdict, WallVerdict::Blocked { .. }) {
                force_block(inner, exit);
            }
            Ok(verdict)
        })
    }

    pub(crate) fn wall_reports(&self) -> WallReports {
        self.with(|inner| inner.wall.reports(inner.stats.bot_wall))
    }

    /// Clears counters, forced blocks, the slow setting, gamma's states (challenge,
    /// issued tokens, restriction, layout) and the bot wall (off, reports, nonces and
    /// cookies forgotten); keeps `block_after`.
    /// Serves listing `id` at `price` from now on (until `reset`).
    pub(crate) fn set_price(&self, id: &str, price: u64) {
        self.with(|inner| inner.prices.insert(id.to_owned(), price));
    }

    /// The price listing `id` is served at: one set at run time, else `catalog_price`.
    pub(crate) fn price(&self, id: &str, catalog_price: u64) -> u64 {
        self.with(|inner| inner.prices.get(id).copied().unwrap_or(catalog_price))
    }

    pub(crate) fn reset(&self) {
        self.with(|inner| {
            let block_after = inner.stats.block_after;
            *inner = Inner::default();
            inner.stats.block_after = block_after;
            inner.stats.challenge_after_ms = duration_ms(CHALLENGE_CLEARS_AFTER);
        });
    }

    pub(crate) fn snapshot(&self) -> MallStats {
        self.with(|inner| inner.stats.clone())
    }
}

fn force_block(inner: &mut Inner, exit: &str) {
    inner.forced.insert(exit.to_owned());
    inner.stats.blocked_exits.insert(exit.to_owned());
}

fn decide(inner: &mut Inner, exit: &str, searches: u64) -> Verdict {
    let over_budget = inner
        .stats
        .block_after
        .is_some_and(|n| searches > u64::from(n));
    let blocked = inner.forced.contains(exit) || over_budget;
    if !blocked {
        return Verdict::Serve;
    }
    inner.stats.blocked += 1;
    inner.stats.blocked_exits.insert(exit.to_owned());
    Verdict::Block
}

/// Makes tokens not simply countable (a fixture, not security).
fn token_noise(n: u64) -> u64 {
    n.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17) & 0xFFFF_FFFF
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_after_budget_per_exit() {
        let c = Counters::new(Some(2));
        assert_eq!(c.search_page("exit-01"), Verdict::Serve);
        assert_eq!(c.search_api("exit-01"), Verdict::Serve);
        assert_eq!(c.search_page("exit-01"), Verdict::Serve);
        assert_eq!(c.search_api("exit-01"), Verdict::Serve);
        assert_eq!(c.search_page("exit-01"), Verdict::Block);
        assert_eq!(c.search_api("exit-01"), Verdict::Block);
        assert_eq!(c.search_page("exit-02"), Verdict::Serve);
        let s = c.snapshot();
        assert_eq!(s.searches.get("exit-01"), Some(&3));
        assert_eq!(s.blocked, 2);
        assert!(s.blocked_exits.contains("exit-01"));
        assert!(!s.blocked_exits.contains("exit-02"));
    }

    #[test]
    fn forced_block_and_unblock() {
        let c = Counters::new(None);
        c.block_exit("exit-03");
        assert_eq!(c.search_page("exit-03"), Verdict::Block);
        assert_eq!(c.search_page("direct"), Verdict::Serve);
        c.unblock_exit("exit-03");
        assert_eq!(c.search_page("exit-03"), Verdict::Serve);
    }

    #[test]
    fn a_price_set_at_run_time_replaces_the_catalogs_until_reset() {
        let c = Counters::new(None);
        assert_eq!(c.price("a101", 12_000), 12_000);
        c.set_price("a101", 9_900);
        assert_eq!(c.price("a101", 12_000), 9_900);
        assert_eq!(c.price("a102", 5_000), 5_000, "other listings keep theirs");
        c.reset();
        assert_eq!(c.price("a101", 12_000), 12_000);
    }

    #[test]
    fn reset_keeps_block_after() {
        let c = Counters::new(Some(1));
        c.search_page("a");
        c.search_page("a");
        c.set_slow(Some(Duration::from_millis(5)), None);
        c.reset();
        let s = c.snapshot();
        assert_eq!(s.block_after, Some(1));
        assert_eq!(s.blocked, 0);
        assert!(s.searches.is_empty());
        assert_eq!(c.slow(), (Duration::ZERO, Duration::ZERO));
    }

    #[test]
    fn challenge_clears_with_an_issued_token() {
        let c = Counters::new(None);
        assert_eq!(c.gamma_gate(None), Gate::Results { redesigned: false });
        c.set_challenge(2, Duration::from_millis(10));
        let Gate::Challenge { token, after } = c.gamma_gate(None) else {
            panic!("challenged");
        };
        assert_eq!(after, Duration::from_millis(10));
        assert!(matches!(
            c.gamma_gate(Some("forged")),
            Gate::Challenge { .. }
        ));
        assert_eq!(
            c.gamma_gate(Some(&token)),
            Gate::Results { redesigned: false }
        );
        assert_eq!(
            c.gamma_gate(None),
            Gate::Results { redesigned: false },
            "used up"
        );
        let s = c.snapshot();
        assert_eq!((s.challenges_served, s.challenges_cleared), (2, 1));
        c.set_challenge(1, Duration::ZERO);
        assert_eq!(
            c.gamma_gate(Some(&token)),
            Gate::Results { redesigned: false },
            "a cleared browser stays cleared"
        );
        c.reset();
        assert!(matches!(c.gamma_gate(Some(&token)), Gate::Results { .. }));
        c.set_challenge(1, Duration::ZERO);
        assert!(
            matches!(c.gamma_gate(Some(&token)), Gate::Challenge { .. }),
            "reset forgets tokens"
        );
    }

    #[test]
    fn restriction_comes_before_the_challenge() {
        let c = Counters::new(None);
        c.set_challenge(1, Duration::ZERO);
        c.set_restricted(true);
        c.set_layout_changed(true);
        assert_eq!(c.gamma_gate(None), Gate::Restricted);
        c.set_restricted(false);
        assert!(matches!(c.gamma_gate(None), Gate::Challenge { .. }));
        assert_eq!(c.gamma_gate(None), Gate::Results { redesigned: true });
        assert_eq!(c.snapshot().restricted_served, 1);
    }
}
