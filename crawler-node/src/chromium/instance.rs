//! One Chromium: a WebDriver session on the node's chromedriver, with the slot's
//! user-data-dir, the quiet headless flags, the relay as its proxy and CDP resource
//! blocking.
//!
//! Invariants:
//! - A [`Browser`] is ended by [`Browser::close`] or [`Browser::kill`] (both `async`; `Drop`
//!   cannot await). `close` quits the WebDriver session within [`CLOSE_TIMEOUT`] and then makes sure
//!   no process of the slot directory is left; if quitting fails or hangs, it kills them.
//!   Either way the thirtyfour handle is marked quit (`leak`), so its blocking drop fallback
//!   never runs on a runtime thread.
//! - Every WebDriver call goes through [`Browser::call`], bounded by a timeout; its error is
//!   classified once: [`BrowserError::Gone`] (the WebDriver session or the browser is dead — replace
//!   it) or [`BrowserError::WebDriver`] (the call failed, the browser lives).
//! - Resource blocking (`Network.setBlockedURLs`) is applied on launch and again whenever a
//!   job's profile asks for other patterns; the browser uses one tab, so every page it
//!   loads is covered.
//!
//! Cancellation: dropping a call future abandons the HTTP request (chromedriver may still
//! finish the command). The caller then treats the browser as suspect (see
//! `executor/browser/`).

use std::{collections::HashSet, net::SocketAddr, path::PathBuf, time::Duration};

use serde_json::{Value, json};
use thirtyfour::{
    Capabilities, WebDriver,
    error::{WebDriverError, WebDriverErrorInner},
};
use tokio::time::Instant;
use tracing::{debug, info, instrument, warn};

use super::{
    BrowserError,
    contexts::{self, Contexts},
    http::WebDriverHttp,
    identity::{self, BrowserMode, Identity},
    process,
    profile::ProfileSlot,
};

/// Closing a browser (quit, then waiting for its processes to exit) takes at most this.
pub const CLOSE_TIMEOUT: Duration = Duration::from_secs(60);
/// Creating a WebDriver session (Chromium start) takes at most this.
pub const LAUNCH_TIMEOUT: Duration = Duration::from_secs(60);
/// Any single WebDriver call other than a navigation takes at most this.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Chromium's own page-load timeout (navigation returns at DOMContentLoaded: `eager`).
pub const PAGE_LOAD_TIMEOUT: Duration = Duration::from_secs(30);

/// The identifier of chromedriver's document-start script: the first script added on its
/// WebDriver session's page (identifiers count up per DevTools session from 1).
const CHROMEDRIVER_SCRIPT_ID: &str = "1";

/// Flags that keep Chromium quiet on a closed network (the identity's flags follow them:
/// [`identity::flags`]).
pub const QUIET_FLAGS: &[&str] = &[
    "--no-sandbox",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-default-browser-check",
    "--mute-audio",
];

/// Images, fonts and media: what is blocked when a profile names no patterns.
pub const DEFAULT_BLOCKED_EXTENSIONS: &[&str] = &[
    "jpg", "jpeg", "png", "gif", "webp", "avif", "svg", "ico", "bmp", "woff", "woff2", "ttf",
    "otf", "eot", "mp4", "webm", "m4v", "mov", "mp3", "ogg", "wav", "m3u8",
];

/// The default `Network.setBlockedURLs` patterns: each extension at the end of the URL or
/// before a query string.
pub fn default_blocked_patterns() -> Vec<String> {
    DEFAULT_BLOCKED_EXTENSIONS
        .iter()
        .flat_map(|ext| [format!("*.{ext}"), format!("*.{ext}?*")])
        .collect()
}

/// How Chromium is started.
#[derive(Debug, Clone)]
pub struct LaunchOptions {
    pub chromium_path: PathBuf,
    /// More Chromium flags (after [`QUIET_FLAGS`]).
    pub extra_args: Vec<String>,
    /// The relay to use as proxy; `None`: no proxy at all (`--no-proxy-server`).
    pub proxy: Option<SocketAddr>,
    /// URL patterns to block; empty: block nothing.
    pub blocked: Vec<String>,
    /// Without a display, or in a window under the node's Xvfb.
    pub mode: BrowserMode,
    /// The identity to show (`None`: Chromium's own user agent, as when its version could
    /// not be read).
    pub identity: Option<Identity>,
    /// Apply the identity at all (flags, CDP overrides, document-start script). Off only
    /// to measure what it costs (`LPS_BROWSER_STEALTH=false`): the browser then shows
    /// itself as plain headless Chromium.
    pub stealth: bool,
    /// Give workers and out-of-process frames the identity too ([`Contexts`]; with
    /// `stealth` only). Off only to measure what it removes (the leak tests).
    pub contexts: bool,
}

impl LaunchOptions {
    /// Options for `chromium_path` with the node's identity of it, in `mode`, direct (no
    /// proxy), blocking nothing.
    pub fn new(chromium_path: PathBuf, mode: BrowserMode) -> Self {
        Self {
            identity: Identity::of(&chromium_path),
            chromium_path,
            extra_args: Vec::new(),
            proxy: None,
            blocked: Vec::new(),
            mode,
            stealth: true,
            contexts: true,
        }
    }
}

/// One browser: a running Chromium and its WebDriver session (see the module docs).
#[derive(Debug)]
pub struct Browser {
    driver: WebDriver,
    dir: PathBuf,
    blocked: Vec<String>,
    launched: Instant,
    /// The node's own DevTools connection (the identity in workers and frames); `None`
    /// without the identity set-up. Ends with the browser.
    contexts: Option<Contexts>,
    /// Malls whose warm-up page this browser has visited.
    pub warmed: HashSet<String>,
}

impl Browser {
    /// Starts Chromium through the WebDriver server at `driver_url`, in `slot`'s directory.
    #[instrument(name = "browser.launch", skip_all, fields(slot = slot.index() as i64), err(level = "warn"))]
    pub async fn launch(
        driver_url: &str,
        slot: &ProfileSlot,
        options: &LaunchOptions,
    ) -> Result<Self, BrowserError> {
        let dir = slot.dir().to_path_buf();
        // A browser of this slot that outlived its WebDriver session (killed node, lost chromedriver)
        // would fight the new one over the directory.
        let left = process::kill_browser(&dir).await;
        if !left.is_empty() {
            return Err(BrowserError::Launch(format!(
                "processes {left:?} still use {} and cannot be killed",
                dir.display()
            )));
        }
        slot.clear_stale_locks();
        let caps = capabilities(&dir, options);
        let connect = WebDriver::builder(driver_url, caps)
            .client(WebDriverHttp::new(LAUNCH_TIMEOUT))
            .request_timeout(LAUNCH_TIMEOUT)
            .connect();
        let driver = match tokio::time::timeout(LAUNCH_TIMEOUT, connect).await {
            Ok(Ok(driver)) => driver,
            Ok(Err(err)) => {
                process::kill_browser(&dir).await;
                return Err(BrowserError::Launch(err.to_string()));
            }
            Err(_) => {
                process::kill_browser(&dir).await;
                return Err(BrowserError::Launch(format!(
                    "no WebDriver session within {LAUNCH_TIMEOUT:?}"
                )));
            }
        };
        let mut browser = Self {
            driver,
            dir,
            blocked: Vec::new(),
            launched: Instant::now(),
            contexts: None,
            warmed: HashSet::new(),
        };
        if let Err(err) = browser.block_urls(&options.blocked).await {
            browser.kill().await;
            return Err(err);
        }
        // Before any page script runs, on every document of the browser: the identity
        // (client hints, languages, timezone, WebGL), and the recorder of what the page's
        // own fetch/XHR calls answer (for `captured_json` card sources).
        if options.stealth {
            if let Err(err) = browser.set_up_identity(options.identity.as_ref()).await {
                browser.kill().await;
                return Err(err);
            }
            // NB: a browser whose DevTools endpoint cannot be reached (a WebDriver server on
            // another host reports its own `localhost`) still works; its workers then show
            // the real WebGL renderer and brands, which the self-check reports.
            if options.contexts {
                match browser.watch_contexts(options.identity.as_ref()).await {
                    Ok(contexts) => browser.contexts = Some(contexts),
                    Err(err) => {
                        warn!(error = %err, "no devtools connection to the browser; workers keep their own identity");
                    }
                }
            }
        }
        if let Err(err) = browser
            .cdp(
                "Page.addScriptToEvaluateOnNewDocument",
                json!({ "source": super::scripts::CAPTURE_JS }),
            )
            .await
        {
            browser.kill().await;
            return Err(err);
        }
        info!(
            slot = slot.index(),
            mode = options.mode.as_str(),
            proxy = ?options.proxy,
            blocked_patterns = options.blocked.len(),
            "browser started"
        );
        Ok(browser)
    }

    /// The identity's CDP part (see [`identity`]): user-agent override with client hints
    /// and languages, the timezone, and the document-start script.
    async fn set_up_identity(&self, identity: Option<&Identity>) -> Result<(), BrowserError> {
        // chromedriver's own document-start script, the first of its WebDriver session's,
        // copies builtins into page globals (`cdc_…_Array`, renamed in the node's copy but
        // still globals aliasing `Array`, `Promise`, …) for WebDriver's execute, which the
        // node does not use ([`Self::script`]). Absent (another WebDriver server), the
        // command fails and nothing is lost.
        if let Err(err) = self
            .cdp(
                "Page.removeScriptToEvaluateOnNewDocument",
                json!({ "identifier": CHROMEDRIVER_SCRIPT_ID }),
            )
            .await
        {
            if err.is_gone() {
                return Err(err);
            }
            debug!(error = %err, "no chromedriver document-start script to remove");
        }
        if let Some(identity) = identity {
            self.cdp(
                "Network.setUserAgentOverride",
                identity.user_agent_override(),
            )
            .await?;
        }
        self.cdp(
            "Emulation.setTimezoneOverride",
            json!({ "timezoneId": identity::TIMEZONE }),
        )
        .await?;
        // NB: the window's size set explicitly: a headless window can otherwise report
        // `outerWidth`/`outerHeight` 0 to a page that reads them early.
        let window = self.cdp("Browser.getWindowForTarget", json!({})).await?;
        if let Some(id) = window.get("windowId").and_then(Value::as_i64) {
            self.cdp(
                "Browser.setWindowBounds",
                json!({
                    "windowId": id,
                    "bounds": {
                        "left": 0, "top": 0,
                        "width": identity::WINDOW.0, "height": identity::WINDOW.1,
                        "windowState": "normal",
                    },
                }),
            )
            .await?;
        }
        self.cdp(
            "Page.addScriptToEvaluateOnNewDocument",
            json!({ "source": identity::stealth_script() }),
        )
        .await?;
        Ok(())
    }

    /// Starts the node's DevTools connection to this browser ([`Contexts`]): workers and
    /// out-of-process frames get the identity before they run.
    async fn watch_contexts(&self, identity: Option<&Identity>) -> Result<Contexts, BrowserError> {
        let caps = self.driver.capabilities();
        let address = contexts::debugger_address(caps).ok_or_else(|| {
            BrowserError::Launch("chromedriver reported no debuggerAddress".to_owned())
        })?;
        Contexts::start(&address, identity).await
    }

    /// Clears every cookie and the storage of `origins` (an identity bound to another
    /// exit IP: DESIGN §5 "Exit-IP hygiene").
    pub async fn clear_site_data(&self, origins: &[String]) -> Result<(), BrowserError> {
        self.cdp("Network.clearBrowserCookies", json!({})).await?;
        for origin in origins {
            self.cdp(
                "Storage.clearDataForOrigin",
                json!({ "origin": origin, "storageTypes": "all" }),
            )
            .await?;
        }
        Ok(())
    }

    /// How long this browser has lived.
    pub fn age(&self) -> Duration {
        self.launched.elapsed()
    }

    /// The user-data-dir.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Runs one WebDriver call under `timeout`, classifying its failure.
    pub async fn call<T>(
        &self,
        what: &'static str,
        timeout: Duration,
        call: impl Future<Output = Result<T, WebDriverError>>,
    ) -> Result<T, BrowserError> {
        match tokio::time::timeout(timeout, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => Err(classify(what, &err)),
            Err(_) => Err(BrowserError::Timeout {
                what,
                after: timeout,
            }),
        }
    }

    /// Blocks requests whose URL matches `patterns` (CDP `Network.setBlockedURLs`; empty:
    /// nothing). No call when the patterns are those already applied.
    pub async fn block_urls(&mut self, patterns: &[String]) -> Result<(), BrowserError> {
        if self.blocked == patterns {
            return Ok(());
        }
        let cdp = self.driver.cdp();
        self.call(
            "cdp Network.enable",
            CALL_TIMEOUT,
            cdp.send_raw("Network.enable", json!({})),
        )
        .await?;
        self.call(
            "cdp Network.setBlockedURLs",
            CALL_TIMEOUT,
            cdp.send_raw("Network.setBlockedURLs", json!({ "urls": patterns })),
        )
        .await?;
        debug!(patterns = patterns.len(), "blocked URL patterns set");
        self.blocked = patterns.to_vec();
        Ok(())
    }

    /// Sends one CDP command (through chromedriver) and returns its answer.
    pub async fn cdp(&self, method: &'static str, params: Value) -> Result<Value, BrowserError> {
        self.cdp_as(method, method, params, CALL_TIMEOUT).await
    }

    /// [`Self::cdp`] named `what` in errors, under `timeout`.
    async fn cdp_as(
        &self,
        what: &'static str,
        method: &'static str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, BrowserError> {
        let cdp = self.driver.cdp();
        self.call(what, timeout, cdp.send_raw(method, params)).await
    }

    /// A wheel turn of `delta_y` pixels at (`x`, `y`) of the viewport: a trusted input
    /// event, as a person's scrolling is (CDP `Input.dispatchMouseEvent`).
    pub async fn wheel(&self, x: f64, y: f64, delta_y: f64) -> Result<(), BrowserError> {
        self.cdp(
            "Input.dispatchMouseEvent",
            json!({ "type": "mouseWheel", "x": x, "y": y, "deltaX": 0, "deltaY": delta_y }),
        )
        .await
        .map(drop)
    }

    /// A left click at (`x`, `y`) of the viewport (CDP mouse events: pressed, released).
    pub async fn click_at(&self, x: f64, y: f64) -> Result<(), BrowserError> {
        for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
            self.cdp(
                "Input.dispatchMouseEvent",
                json!({ "type": kind, "x": x, "y": y, "button": "left", "clickCount": 1 }),
            )
            .await?;
        }
        Ok(())
    }

    /// Navigates and waits for DOMContentLoaded.
    pub async fn goto(&self, url: &str) -> Result<(), BrowserError> {
        self.call(
            "navigate",
            PAGE_LOAD_TIMEOUT + Duration::from_secs(10),
            self.driver.goto(url),
        )
        .await
    }

    /// Runs a synchronous script body (WebDriver style: `arguments[0]`, `return …`) with
    /// `args` in the page's main world and returns its JSON value.
    ///
    /// NB: through CDP `Runtime.evaluate`, not WebDriver's execute: chromedriver's execute
    /// needs the `Runtime` domain enabled, and a page sees an enabled `Runtime` (DESIGN §5
    /// "Browser identity"; the node's chromedriver copy never enables it). `Runtime.evaluate`
    /// needs no enabled domain and leaves nothing in the page.
    pub async fn script(&self, script: &str, args: Vec<Value>) -> Result<Value, BrowserError> {
        let expression = format!(
            "(function () {{\n{script}\n}}).apply(null, {});",
            Value::Array(args)
        );
        let answer = self
            .cdp_as(
                "execute script",
                "Runtime.evaluate",
                json!({ "expression": expression, "returnByValue": true, "awaitPromise": false }),
                CALL_TIMEOUT,
            )
            .await?;
        evaluated(answer)
    }

    /// Forgets the cookies of the current site (a burned identity): the cookies CDP
    /// `Network.getCookies` lists for the page's URLs, each deleted by name, domain and path.
    pub async fn delete_cookies(&self) -> Result<(), BrowserError> {
        let answer = self.cdp("Network.getCookies", json!({})).await?;
        let cookies = answer
            .get("cookies")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for cookie in cookies {
            self.cdp(
                "Network.deleteCookies",
                json!({
                    "name": cookie.get("name").cloned().unwrap_or(Value::Null),
                    "domain": cookie.get("domain").cloned().unwrap_or(Value::Null),
                    "path": cookie.get("path").cloned().unwrap_or(Value::Null),
                }),
            )
            .await?;
        }
        Ok(())
    }

    /// A cheap call that proves the WebDriver session and the page's renderer answer.
    pub async fn ping(&self) -> Result<(), BrowserError> {
        self.cdp_as(
            "ping",
            "Runtime.evaluate",
            json!({ "expression": "1", "returnByValue": true }),
            Duration::from_secs(10),
        )
        .await
        .map(drop)
    }

    /// Quits the WebDriver session within [`CLOSE_TIMEOUT`]; kills the browser if that fails. No
    /// process of the slot directory is left afterwards.
    #[instrument(name = "browser.close", skip_all, fields(dir = %self.dir.display()))]
    pub async fn close(self) {
        let Self { driver, dir, .. } = self;
        let started = Instant::now();
        let keep = driver.clone();
        let quit = tokio::time::timeout(CLOSE_TIMEOUT, async {
            driver.quit().await.map_err(|e| e.to_string())?;
            // Chromium exits shortly after its WebDriver session ends.
            loop {
                if process::browser_pids(&dir).is_empty() {
                    return Ok::<_, String>(());
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
        // NB: marks the handle quit, so dropping it never runs thirtyfour's blocking
        // fallback (a synchronous DELETE on a runtime thread).
        let _ = keep.leak();
        match quit {
            Ok(Ok(())) => debug!(elapsed = ?started.elapsed(), "browser closed"),
            Ok(Err(err)) => {
                warn!(error = %err, "browser quit failed; killing it");
                process::kill_browser(&dir).await;
            }
            Err(_) => {
                warn!(timeout = ?CLOSE_TIMEOUT, "browser close timed out; killing it");
                process::kill_browser(&dir).await;
            }
        }
    }

    /// Kills the browser's processes and ends its WebDriver session without asking it.
    #[instrument(name = "browser.kill", skip_all, fields(dir = %self.dir.display()))]
    pub async fn kill(self) {
        let Self { driver, dir, .. } = self;
        let left = process::kill_browser(&dir).await;
        if !left.is_empty() {
            warn!(pids = ?left, "browser processes survived SIGKILL");
        }
        // The WebDriver session is dead; tell chromedriver briefly, then forget it either way.
        let keep = driver.clone();
        let _ = tokio::time::timeout(Duration::from_secs(5), driver.quit()).await;
        let _ = keep.leak();
    }
}

fn capabilities(dir: &std::path::Path, options: &LaunchOptions) -> Capabilities {
    let mut args: Vec<String> = QUIET_FLAGS.iter().map(|s| (*s).to_owned()).collect();
    if options.stealth {
        args.extend(identity::flags(options.identity.as_ref(), options.mode));
    } else {
        if options.mode == BrowserMode::Headless {
            args.push("--headless=new".to_owned());
        }
        args.push("--lang=ko-KR".to_owned());
    }
    args.push(format!("--user-data-dir={}", dir.display()));
    match options.proxy {
        Some(relay) => {
            args.push(format!("--proxy-server=http://{relay}"));
            // NB: without this Chromium sends loopback traffic around the proxy.
            args.push("--proxy-bypass-list=<-loopback>".to_owned());
        }
        None => args.push("--no-proxy-server".to_owned()),
    }
    args.extend(options.extra_args.iter().cloned());
    let page_load_ms = u64::try_from(PAGE_LOAD_TIMEOUT.as_millis()).unwrap_or(u64::MAX);
    let script_ms = u64::try_from(CALL_TIMEOUT.as_millis()).unwrap_or(u64::MAX);
    let caps = json!({
        "browserName": "chrome",
        "pageLoadStrategy": "eager",
        "timeouts": { "pageLoad": page_load_ms, "script": script_ms, "implicit": 0 },
        "goog:chromeOptions": {
            "binary": options.chromium_path.display().to_string(),
            "args": args,
            // NB: `enable-automation` shows the automation infobar and flags the browser.
            "excludeSwitches": ["enable-automation"],
            "useAutomationExtension": false,
            "prefs": { "intl.accept_languages": identity::LANGUAGES.join(",") },
        },
    });
    match caps {
        Value::Object(map) => Capabilities::from(map),
        _ => Capabilities::new(),
    }
}

/// The value of a `Runtime.evaluate` answer (`returnByValue`), or the script's exception.
fn evaluated(answer: Value) -> Result<Value, BrowserError> {
    if let Some(details) = answer.get("exceptionDetails") {
        let shown = details
            .pointer("/exception/description")
            .and_then(Value::as_str)
            .or_else(|| details.get("text").and_then(Value::as_str))
            .unwrap_or("an exception");
        let short: String = shown
            .lines()
            .next()
            .unwrap_or_default()
            .chars()
            .take(300)
            .collect();
        return Err(BrowserError::WebDriver(format!(
            "execute script: javascript error: {short}"
        )));
    }
    Ok(answer
        .pointer("/result/value")
        .cloned()
        .unwrap_or(Value::Null))
}

/// Sorts a WebDriver failure: does it mean the browser or its WebDriver session is gone?
pub fn classify(what: &'static str, err: &WebDriverError) -> BrowserError {
    const GONE_HINTS: &[&str] = &[
        "chrome not reachable",
        "disconnected",
        "session deleted",
        "not connected to devtools",
        "target window already closed",
        "tab crashed",
        "no such session",
        "invalid session id",
        "cannot connect",
    ];
    let message = err.to_string();
    let lower = message.to_lowercase();
    let gone = match &**err {
        WebDriverErrorInner::InvalidSessionId(_)
        | WebDriverErrorInner::NoSuchWindow(_)
        | WebDriverErrorInner::RequestFailed(_)
        | WebDriverErrorInner::IoError(_)
        | WebDriverErrorInner::FatalError(_)
        | WebDriverErrorInner::CommandRecvError(_)
        | WebDriverErrorInner::CommandSendError(_) => true,
        _ => GONE_HINTS.iter().any(|hint| lower.contains(hint)),
    };
    // NB: WebDriver messages are long (stack traces): keep what comes before them.
    let head = message.split("Stacktrace").next().unwrap_or_default();
    let short: String = head
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(300)
        .collect();
    if gone {
        BrowserError::Gone(format!("{what}: {short}"))
    } else {
        BrowserError::WebDriver(format!("{what}: {short}"))
    }
}
