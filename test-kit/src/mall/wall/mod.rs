//! The bot wall: an optional gate in front of every style's search pages that tells
//! automated browsers from people, modelled on what public open-source bot detectors
//! check (the well-known headless-detection lists, sannysoft- and CreepJS-style checks).
//! Plain headless Chromium driven by chromedriver with default options is caught: its
//! `User-Agent` says `HeadlessChrome` and its `Accept-Language` is not Korean, and once
//! those are fixed its `navigator.webdriver` is still `true`.
//!
//! # Flow (only while the wall is on; off by default)
//!
//! Order of decisions for `GET /search`: the exit-IP budget (counted as always; a
//! blocked exit IP gets the block page), then the wall, then the style's own page (gamma:
//! restriction, challenge, layout). The wall, for a request whose exit IP (the
//! [`EXIT_IP_HEADER`](crate::EXIT_IP_HEADER) value, see [`crate::mall`]) has no valid
//! clearance cookie:
//!
//! 1. **Headers** ([`HEADER_SIGNALS`]): any signal blocks that exit IP at once (as
//!    [`MallHandle::block_exit`](crate::mall::MallHandle::block_exit) does) and the block
//!    page is served.
//! 2. Otherwise the **wall page** (HTTP 200, small, `div#lps-wall` `접속 환경을 확인하고
//!    있습니다`, no web font) is served. Its script ([`WALL_SCRIPT`]) runs the client
//!    checks ([`CLIENT_SIGNALS`]), POSTs
//!    `{"nonce", "signals": {name: bool}, "details": {key: string}}` to
//!    [`WALL_VERDICT_PATH`] and reloads the page when the answer is 200.
//! 3. The mall evaluates the report: a signal that is `true` **or absent** flags it. Any
//!    flag blocks the exit IP (the reload then gets the block page); none sets the
//!    clearance cookie [`WALL_COOKIE`] (`HttpOnly; Path=/; SameSite=Lax`), bound to the
//!    exit IP the report came from, so the reload is served the normal page.
//!
//! A clearance cookie is valid only from the exit IP that earned it: the same cookie from
//! another exit IP gets the wall again. A report must carry the nonce of a wall page
//! served to the same exit IP, used once (otherwise HTTP 403 and nothing changes), so a
//! client cannot clear an exit IP without loading the wall. The wall page request counts
//! as a search page (like gamma's challenge) and is not delayed by `slow`; the report POST
//! counts only as a request. The JSON APIs are not walled. `reset` turns the wall off and
//! forgets reports, nonces and cookies; `unblock` lifts a wall's block like any other.
//!
//! # Header signals (server side; client hints may be absent — absence is no signal)
//!
//! | name | flagged when |
//! |---|---|
//! | `ua_headless` | `User-Agent` contains `Headless` (any case) |
//! | `accept_language` | `Accept-Language` is missing or does not start with `ko` |
//! | `ch_ua_headless` | `sec-ch-ua` names `HeadlessChrome` |
//! | `ch_ua_version` | `sec-ch-ua` has a `Chromium`/`Google Chrome` brand whose version is not the `User-Agent`'s `Chrome/NN` major (or the UA has no `Chrome/NN`) |
//! | `ch_ua_platform` | `sec-ch-ua-platform` names another platform than the `User-Agent` (unknown values on either side are not compared) |
//! | `ch_ua_mobile` | a `Chrome/NN` UA on a desktop platform sends `sec-ch-ua-mobile: ?1` |
//!
//! # Client signals (the wall script)
//!
//! Each check is isolated. "Error" is the verdict when the check throws; an API every
//! current browser has counts as flagged when it throws or is missing (someone removed
//! it), an API that real browsers may lack or lock down counts as not flagged.
//!
//! | name | flagged when | missing API / error |
//! |---|---|---|
//! | `webdriver` | `navigator.webdriver === true` | error: flagged |
//! | `webdriver_patched` | `webdriver` is an own property of `navigator`, or the `Navigator.prototype` getter is not native (`Function.prototype.toString`), or is a data property, or is missing on a `Chrome/NN` UA (stealth scripts delete it) | missing on other UAs: not flagged (old Safari); error: flagged |
//! | `native_tostring_patched` | `Function.prototype.toString` is not itself native, has a `prototype`, or does not throw a `TypeError` on a non-function | error: flagged |
//! | `driver_globals` | a `window`/`document` own property named `cdc_…`, `$cdc_…`, `$wdc_…`, `$chrome_asyncScriptInfo`, `__webdriver…`, `__selenium…`, `__driver…`, `__fxdriver…`, `_selenium…`, `calledSelenium`, `webdriver_…`, or a `webdriver`/`selenium`/`driver` attribute on `<html>` | error: flagged |
//! | `automation_globals` | `callPhantom`, `_phantom`, `__phantomas`, `__nightmare`, `domAutomation(Controller)`, `__playwright__binding__`, `__pwInitScripts`, `_WEBDRIVER_ELEM_CACHE`, `__lastWatir…`, `awesomium` or `Cypress` on `window` | error: flagged |
//! | `ua_headless` | `navigator.userAgent` contains `Headless` | error: flagged |
//! | `uad_brands` | `navigator.userAgentData.brands` names `Headless…`, or has no `Chromium`/`Google Chrome` brand whose version is the UA's `Chrome/NN` major (also when the UA has none) | no `userAgentData` (Firefox, Safari, insecure origins): not flagged; error: flagged |
//! | `uad_platform` | `userAgentData.platform` (`Windows`, `macOS`, `Linux`, `Chrome OS`, `Android`) disagrees with `navigator.platform` (`Win…`, `Mac…`, `Linux…`) | no `userAgentData` or another platform value: not flagged; error: flagged |
//! | `ua_platform` | the UA's OS (`Windows NT`, `iPhone`/`iPad`, `Android`, `Macintosh`, `X11`/`Linux`/`CrOS`) disagrees with `navigator.platform` | an OS the UA does not name: not flagged; error: flagged |
//! | `engine_mismatch` | a `Chrome/NN` UA whose `eval.toString().length` is not 33 (V8's), a Firefox UA with `window.chrome` or `userAgentData`, a Safari UA with `window.chrome` | error: flagged |
//! | `languages` | `navigator.languages` empty or its first entry not `ko…`, or `navigator.language` not `ko-KR` (any case) | error: flagged |
//! | `timezone` | `Intl.DateTimeFormat().resolvedOptions().timeZone` is not `Asia/Seoul`, or `Date#getTimezoneOffset()` is not -540 | missing `Intl`: flagged |
//! | `window_size` | `outerWidth`/`outerHeight`/`screen` size zero or missing, or (desktop UAs) the screen more than 16 px smaller than the outer window | the 16 px allow a maximized window's borders; mobile UAs skip the comparison (some report `outerWidth` in device pixels) |
//! | `device_pixel_ratio` | `devicePixelRatio` missing or not > 0 | — |
//! | `hardware_concurrency` | `navigator.hardwareConcurrency` missing or not > 0 | — |
//! | `no_chrome_object` | a `Chrome/NN` UA without `window.chrome` | other UAs: not flagged |
//! | `no_plugins` | `navigator.plugins.length === 0` (desktop UAs) | missing `plugins`: flagged; mobile UAs have none, not flagged |
//! | `no_mime_types` | `navigator.mimeTypes.length === 0` (desktop UAs) | as `no_plugins` |
//! | `notification_permission` | `Notification.permission === 'denied'` while `navigator.permissions.query({name:'notifications'})` says `prompt` | no `Notification`/`permissions`, a rejected query (old Safari) or no answer in 1.5 s: not flagged |
//! | `webgl_swiftshader` | the WebGL renderer (`UNMASKED_RENDERER_WEBGL` of `WEBGL_debug_renderer_info`, else `RENDERER`) contains `SwiftShader` | no WebGL (disabled, blocklisted GPU) or error: not flagged |
//! | `no_cjk_font` | `가` and `나` drawn at `16px sans-serif` give identical pixels (both the missing-glyph box) or no ink at all, while `A` gives ink | no 2D canvas, or `A` without ink (read-back blocked by a privacy mode), or error: not flagged |
//! | `iframe_webdriver` | a `srcdoc` iframe's `navigator.webdriver` is `true` | no access or no load in 1.5 s: not flagged |
//! | `iframe_inconsistent` | the iframe's `userAgent` or first language differs from the page's (a patch of the top window only) | as `iframe_webdriver` |
//! | `worker_webdriver` | a dedicated `Worker` (from a `Blob`) sees `navigator.webdriver === true` | no `Worker`/`Blob`/`URL.createObjectURL`, refused by CSP, or no answer in 1.5 s: not flagged |
//! | `worker_user_agent` | the worker's `userAgent` contains `Headless` or differs from the page's | as `worker_webdriver` |
//! | `worker_languages` | the worker's first language does not start with `ko` | as `worker_webdriver`; no `languages` in the worker: not flagged |
//! | `worker_timezone` | the worker's `Intl` time zone is not `Asia/Seoul` | as `worker_webdriver`; no `Intl` there: not flagged |
//! | `cdp_runtime` | an `Error` whose `stack` getter runs when it is passed to `console.debug`: a DevTools (CDP) Runtime client is attached and serializes console arguments | no `console.debug` or error: not flagged (an open DevTools window of a person also trips it, as on real sites) |
//!
//! `details` (at most [`MAX_DETAILS`] strings of [`MAX_DETAIL_CHARS`]) carry what the
//! checks saw — user agent, platform, languages, time zone, WebGL renderer, window and
//! screen sizes, a found driver global, check errors — for [`WallReports`] only; they
//! decide nothing.
//!
//! # State
//!
//! The wall's book lives inside the mall's one lock (the mall's `state` module); its
//! blocks are the mall's forced blocks. Nothing is persisted.

mod headers;
mod page;
mod routes;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use headers::header_signals;
pub(crate) use page::wall_page;
pub(crate) use routes::{gate, routes};

/// The endpoint the wall script POSTs its report to (not a `/_control` route).
pub const WALL_VERDICT_PATH: &str = "/_wall/verdict";

/// The clearance cookie (`HttpOnly; Path=/; SameSite=Lax`), valid from one exit IP.
pub const WALL_COOKIE: &str = "lps_wall";

/// The element of the wall page.
pub const WALL_MARKER: &str = "div#lps-wall";

/// The text of [`WALL_MARKER`].
pub const WALL_TEXT: &str = "접속 환경을 확인하고 있습니다";

/// The wall page's script, served verbatim (it reads its nonce and the verdict path from
/// [`WALL_MARKER`]'s `data-nonce` and `data-verdict`).
pub const WALL_SCRIPT: &str = include_str!("wall.js");

/// How long the clearance cookie lives in the browser, in seconds.
pub const WALL_COOKIE_MAX_AGE: u64 = 86_400;

/// Server-side signals, in the order they are checked (see the module doc).
pub const HEADER_SIGNALS: &[&str] = &[
    "ua_headless",
    "accept_language",
    "ch_ua_headless",
    "ch_ua_version",
    "ch_ua_platform",
    "ch_ua_mobile",
];

/// Client-side signals the wall script reports (see the module doc). A report lacking
/// one of them is flagged for it.
pub const CLIENT_SIGNALS: &[&str] = &[
    "webdriver",
    "webdriver_patched",
    "native_tostring_patched",
    "driver_globals",
    "automation_globals",
    "ua_headless",
    "uad_brands",
    "uad_platform",
    "ua_platform",
    "engine_mismatch",
    "languages",
    "timezone",
    "window_size",
    "device_pixel_ratio",
    "hardware_concurrency",
    "no_chrome_object",
    "no_plugins",
    "no_mime_types",
    "notification_permission",
    "webgl_swiftshader",
    "no_cjk_font",
    "iframe_webdriver",
    "iframe_inconsistent",
    "worker_webdriver",
    "worker_user_agent",
    "worker_languages",
    "worker_timezone",
    "cdp_runtime",
];

/// The most `details` kept from one report.
pub const MAX_DETAILS: usize = 48;

/// The longest `details` value kept, in characters.
pub const MAX_DETAIL_CHARS: usize = 300;

/// The most wall pages awaiting a report; the oldest nonce is dropped beyond it.
const MAX_PENDING: usize = 4096;

/// What the wall last decided for one exit IP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WallStatus {
    /// The wall page was served; no report has come back since.
    Walled,
    /// A clean report: a clearance cookie was set.
    Cleared,
    /// A header or client signal: the exit IP was blocked.
    Blocked,
}

/// The wall's record of one exit IP (the last decision, plus counts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitWall {
    /// The last decision.
    pub status: WallStatus,
    /// Header signals of the last header check that blocked (empty otherwise).
    pub header_signals: Vec<String>,
    /// Client signals flagged by the last report (empty before one, or when clean).
    pub client_signals: Vec<String>,
    /// Wall pages served.
    pub walls_served: u64,
    /// Reports received.
    pub reports: u64,
    /// Search pages that passed on a valid clearance cookie.
    pub passes: u64,
    /// `User-Agent` of the last request the wall checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// `details` of the last report.
    #[serde(default)]
    pub details: BTreeMap<String, String>,
}

impl ExitWall {
    fn new() -> ExitWall {
        ExitWall {
            status: WallStatus::Walled,
            header_signals: Vec::new(),
            client_signals: Vec::new(),
            walls_served: 0,
            reports: 0,
            passes: 0,
            user_agent: None,
            details: BTreeMap::new(),
        }
    }
}

/// The JSON of `GET /_control/wall` and [`MallHandle::wall_reports`](crate::mall::MallHandle::wall_reports).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WallReports {
    /// Whether the wall is on.
    pub on: bool,
    /// Per exit IP label, what the wall decided.
    pub exits: BTreeMap<String, ExitWall>,
}

/// A report as the wall script POSTs it.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct WallReport {
    pub(crate) nonce: String,
    pub(crate) signals: BTreeMap<String, bool>,
    #[serde(default)]
    pub(crate) details: BTreeMap<String, String>,
}

/// The client signals a report flags: every [`CLIENT_SIGNALS`] name that is `true` or
/// absent, in that order. Names the mall does not know are ignored.
pub(crate) fn flagged(signals: &BTreeMap<String, bool>) -> Vec<String> {
    CLIENT_SIGNALS
        .iter()
        .filter(|name| signals.get(**name) != Some(&false))
        .map(|name| (*name).to_owned())
        .collect()
}

/// What the wall decided for a search page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WallGate {
    /// Wall off, or a valid clearance cookie: serve the page.
    Pass,
    /// Header signals: the exit IP is now blocked; serve the block page.
    Block,
    /// Serve the wall page carrying this nonce.
    Wall { nonce: String },
}

/// What the wall decided for a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WallVerdict {
    /// Clean: set this clearance token as the cookie.
    Cleared { token: String },
    /// Flagged for these signals: the exit IP is now blocked.
    Blocked { signals: Vec<String> },
}

/// Why a report was refused (HTTP 403, nothing changes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum WallRefusal {
    /// The nonce was never issued, was already used, or was forgotten by `reset`.
    #[error("unknown or already used nonce")]
    UnknownNonce,
    /// The nonce was issued to a wall page served to another exit IP.
    #[error("nonce was issued to another exit IP")]
    OtherExit,
}

/// The wall's bookkeeping (guarded by the mall's lock, see [`crate::mall::state`]).
/// Whether the wall is on is [`MallStats::bot_wall`](crate::mall::MallStats::bot_wall).
#[derive(Debug, Default)]
pub(crate) struct WallBook {
    exits: BTreeMap<String, ExitWall>,
    /// Nonces of served wall pages → the exit IP they were served to.
    nonces: BTreeMap<String, String>,
    /// Issued clearance tokens → the exit IP that earned them.
    tokens: BTreeMap<String, String>,
    issued: u64,
}

impl WallBook {
    fn exit(&mut self, exit: &str) -> &mut ExitWall {
        self.exits
            .entry(exit.to_owned())
            .or_insert_with(ExitWall::new)
    }

    /// Whether `cookie` is a token earned on `exit`; counts a pass if so.
    pub(crate) fn pass(&mut self, exit: &str, cookie: Option<&str>) -> bool {
        let valid = cookie.is_some_and(|c| self.tokens.get(c).is_some_and(|e| e == exit));
        if valid {
            self.exit(exit).passes += 1;
        }
        valid
    }

    /// Records a block by header signals.
    pub(crate) fn header_block(
        &mut self,
        exit: &str,
        signals: &[&'static str],
        user_agent: Option<&str>,
    ) {
        let record = self.exit(exit);
        record.status = WallStatus::Blocked;
        record.header_signals = signals.iter().map(|s| (*s).to_owned()).collect();
        record.client_signals.clear();
        record.user_agent = user_agent.map(clip);
    }

    /// Records a served wall page and returns its nonce.
    pub(crate) fn serve(&mut self, exit: &str, user_agent: Option<&str>) -> String {
        self.issued += 1;
        let nonce = format!("n{:08x}{:08x}", self.issued, noise(self.issued));
        self.nonces.insert(nonce.clone(), exit.to_owned());
        while self.nonces.len() > MAX_PENDING {
            self.nonces.pop_first();
        }
        let record = self.exit(exit);
        record.status = WallStatus::Walled;
        record.header_signals.clear();
        record.walls_served += 1;
        record.user_agent = user_agent.map(clip);
        nonce
    }

    /// Consumes the nonce of a report from `exit`.
    pub(crate) fn take_nonce(&mut self, exit: &str, nonce: &str) -> Result<(), WallRefusal> {
        match self.nonces.get(nonce) {
            None => Err(WallRefusal::UnknownNonce),
            Some(owner) if owner != exit => Err(WallRefusal::OtherExit),
            Some(_) => {
                self.nonces.remove(nonce);
                Ok(())
            }
        }
    }

    /// Records a report (its nonce already taken) and decides.
    pub(crate) fn judge(&mut self, exit: &str, report: WallReport) -> WallVerdict {
        let flags = flagged(&report.signals);
        let details = report
            .details
            .into_iter()
            .take(MAX_DETAILS)
            .map(|(k, v)| (clip(&k), clip(&v)))
            .collect();
        let verdict = if flags.is_empty() {
            self.issued += 1;
            let token = format!("w{:08x}{:08x}", self.issued, noise(self.issued));
            self.tokens.insert(token.clone(), exit.to_owned());
            WallVerdict::Cleared { token }
        } else {
            WallVerdict::Blocked {
                signals: flags.clone(),
            }
        };
        let record = self.exit(exit);
        record.reports += 1;
        record.client_signals = flags;
        record.details = details;
        record.status = match verdict {
            WallVerdict::Cleared { .. } => WallStatus::Cleared,
            WallVerdict::Blocked { .. } => WallStatus::Blocked,
        };
        verdict
    }

    pub(crate) fn reports(&self, on: bool) -> WallReports {
        WallReports {
            on,
            exits: self.exits.clone(),
        }
    }
}

/// At most [`MAX_DETAIL_CHARS`] characters of `text`.
fn clip(text: &str) -> String {
    text.chars().take(MAX_DETAIL_CHARS).collect()
}

/// Makes nonces and tokens not simply countable (a fixture, not security).
fn noise(n: u64) -> u32 {
    let mixed = n.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(23);
    // NB: the low 32 bits are enough for a fixture.
    u32::try_from(mixed & 0xFFFF_FFFF).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean() -> BTreeMap<String, bool> {
        CLIENT_SIGNALS
            .iter()
            .map(|n| ((*n).to_owned(), false))
            .collect()
    }

    fn report(nonce: &str, signals: BTreeMap<String, bool>) -> WallReport {
        WallReport {
            nonce: nonce.to_owned(),
            signals,
            details: BTreeMap::new(),
        }
    }

    #[test]
    fn true_or_absent_signals_are_flagged() {
        assert!(flagged(&clean()).is_empty());
        let mut one = clean();
        one.insert("webdriver".to_owned(), true);
        one.insert("something_new".to_owned(), true);
        assert_eq!(flagged(&one), ["webdriver"]);
        let mut partial = clean();
        partial.remove("cdp_runtime");
        assert_eq!(flagged(&partial), ["cdp_runtime"]);
        assert_eq!(flagged(&BTreeMap::new()).len(), CLIENT_SIGNALS.len());
    }

    #[test]
    fn signal_names_are_unique() {
        let mut names = CLIENT_SIGNALS.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CLIENT_SIGNALS.len());
    }

    #[test]
    fn nonces_are_single_use_and_bound_to_their_exit() {
        let mut book = WallBook::default();
        let nonce = book.serve("exit-01", Some("ua"));
        assert_eq!(
            book.take_nonce("exit-02", &nonce),
            Err(WallRefusal::OtherExit)
        );
        assert_eq!(book.take_nonce("exit-01", &nonce), Ok(()));
        assert_eq!(
            book.take_nonce("exit-01", &nonce),
            Err(WallRefusal::UnknownNonce)
        );
    }

    #[test]
    fn a_clean_report_earns_a_token_for_its_exit_only() {
        let mut book = WallBook::default();
        let nonce = book.serve("exit-01", None);
        let WallVerdict::Cleared { token } = book.judge("exit-01", report(&nonce, clean())) else {
            panic!("cleared");
        };
        assert!(book.pass("exit-01", Some(&token)));
        assert!(!book.pass("exit-02", Some(&token)));
        assert!(!book.pass("exit-01", Some("w0000000100000000")));
        assert!(!book.pass("exit-01", None));
        let r = book.reports(true);
        let e = &r.exits["exit-01"];
        assert_eq!(e.status, WallStatus::Cleared);
        assert_eq!((e.walls_served, e.reports, e.passes), (1, 1, 1));
    }

    #[test]
    fn details_are_clipped() {
        let mut book = WallBook::default();
        let nonce = book.serve("x", None);
        let mut r = report(&nonce, clean());
        for i in 0..100 {
            r.details.insert(format!("k{i:03}"), "가".repeat(1000));
        }
        book.judge("x", r);
        let d = &book.reports(false).exits["x"].details;
        assert_eq!(d.len(), MAX_DETAILS);
        assert!(d.values().all(|v| v.chars().count() == MAX_DETAIL_CHARS));
    }

    #[test]
    fn pending_nonces_are_bounded() {
        let mut book = WallBook::default();
        let first = book.serve("x", None);
        for _ in 0..MAX_PENDING {
            book.serve("x", None);
        }
        assert_eq!(book.nonces.len(), MAX_PENDING);
        assert_eq!(book.take_nonce("x", &first), Err(WallRefusal::UnknownNonce));
    }
}
