//! `crawler-node self-check`: what the node's browser reveals to a page (DESIGN §5
//! "Browser identity").
//!
//! Opens a page served by the node itself on loopback in a browser launched exactly as a
//! job's is (same flags, mode, chromedriver copy and identity; direct, no proxy), reads
//! every surface a bot detector reads — request headers, `navigator` in the page, an
//! iframe and a worker, screen, timezone, WebGL, fonts, automation globals, permission
//! states, CDP side effects — and compares each with the identity the node means to show;
//! then it opens the test kit's leak pages (a DevTools client, automation globals, an
//! identity that differs in iframes and workers: `PROBES`), the same probes the leak
//! tests run. Every difference and every probe that fires is a **leak**, named in the
//! report.
//!
//! The node runs it at start-up (the browser executor only): the number of leaks is the
//! gauge `lps_node_browser_leaks`, and a node whose browser leaks is not ready (`/readyz`)
//! unless `LPS_ALLOW_BROWSER_LEAKS=true`. The subcommand prints the same report and exits 1
//! when something leaks.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::Context as _;
use axum::{Router, http::HeaderMap, response::Html, routing::get};
use serde_json::Value;
use tokio::time::Instant;

use crate::chromium::{
    Browser, BrowserMode, ChromeDriver, Display, Identity, LaunchOptions, ProfileSlot,
    identity::{LANGUAGES, PLATFORM, SCREEN, TIMEZONE, WINDOW},
};

/// How long the page's checks may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(15);

/// One surface and what the browser showed on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// `navigator.webdriver`, `Accept-Language` …
    pub name: &'static str,
    /// What the page read.
    pub seen: String,
    /// Why it gives the browser away; `None` when it is as a person's browser shows it.
    pub leak: Option<String>,
}

/// The self-check's findings.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub items: Vec<Item>,
}

impl Report {
    /// The items that give the browser away.
    pub fn leaks(&self) -> impl Iterator<Item = &Item> {
        self.items.iter().filter(|i| i.leak.is_some())
    }

    /// How many items leak.
    pub fn leak_count(&self) -> usize {
        self.leaks().count()
    }

    /// The report as text: one line per item, then the leaks.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for item in &self.items {
            let mark = if item.leak.is_some() { "LEAK" } else { "ok" };
            out.push_str(&format!("{mark:<5} {:<28} {}\n", item.name, item.seen));
        }
        match self.leak_count() {
            0 => out.push_str("\nnothing leaks\n"),
            n => {
                out.push_str(&format!("\n{n} leak(s):\n"));
                for item in self.leaks() {
                    out.push_str(&format!(
                        "- {}: {}\n",
                        item.name,
                        item.leak.as_deref().unwrap_or_default()
                    ));
                }
            }
        }
        out
    }
}

/// Where and how the self-check's browser starts.
#[derive(Debug, Clone)]
pub struct SelfCheck {
    pub chromium_path: PathBuf,
    pub mode: BrowserMode,
    /// More Chromium flags (the node's `LPS_CHROMIUM_ARGS`).
    pub extra_args: Vec<String>,
    /// A directory for the check's own profile slot (never a job's).
    pub profile_root: PathBuf,
    /// Give workers and frames the identity, as a job's browser does
    /// ([`LaunchOptions::contexts`]); off only to show that the check sees it off.
    pub contexts: bool,
}

impl SelfCheck {
    /// Runs the check through `driver` (started on demand; not stopped).
    ///
    /// # Errors
    /// The page server, the browser or the page's script failed.
    pub async fn run(&self, driver: &ChromeDriver) -> anyhow::Result<Report> {
        let seen: Arc<Mutex<Option<HeaderMap>>> = Arc::new(Mutex::new(None));
        let record = seen.clone();
        let app = Router::new()
            .route(
                "/",
                get(move |headers: HeaderMap| {
                    let record = record.clone();
                    async move {
                        *record.lock().unwrap_or_else(|e| e.into_inner()) = Some(headers);
                        Html("<!doctype html><html lang=\"ko\"><head><meta charset=\"utf-8\"><title>self-check</title></head><body><p>자가 점검</p></body></html>")
                    }
                }),
            )
            .route("/leak/{name}", get(probe_page))
            .route("/leak/collect.js", get(|| async { javascript(COLLECT_PROBE_JS) }))
            .route(
                "/leak/contexts-frame",
                get(|| async {
                    Html(format!(
                        "<!doctype html><html lang=\"ko\"><head><meta charset=\"utf-8\"><script>{CONTEXTS_FRAME_JS}</script></head><body></body></html>"
                    ))
                }),
            )
            .route(
                "/leak/contexts-sw.js",
                get(|| async { javascript(CONTEXTS_SW_JS) }),
            );
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .context("self-check page server")?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn(async move { axum::serve(listener, app).await });

        let url = driver.url().await.context("chromedriver")?;
        std::fs::create_dir_all(&self.profile_root)
            .with_context(|| format!("{}", self.profile_root.display()))?;
        let slot = ProfileSlot::acquire(&self.profile_root).context("self-check profile")?;
        let options = LaunchOptions {
            extra_args: self.extra_args.clone(),
            contexts: self.contexts,
            ..LaunchOptions::new(self.chromium_path.clone(), self.mode)
        };
        let browser = Browser::launch(&url, &slot, &options).await?;
        let result = check_page(&browser, &format!("http://{addr}/")).await;
        browser.close().await;
        server.abort();
        let page = result?;
        let headers = seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_default();
        Ok(evaluate(options.identity.as_ref(), &headers, &page))
    }
}

/// Loads the page and collects what its script reads, then every leak probe's page
/// (`page["probes"][name]`: the probe's `{leaked, seen}`).
async fn check_page(browser: &Browser, url: &str) -> anyhow::Result<Value> {
    browser.goto(url).await?;
    browser.script(COLLECT_JS, Vec::new()).await?;
    let mut page = wait_for(browser, "window.__lpsSelfCheck", "the self-check page").await?;
    let mut probes = serde_json::Map::new();
    for probe in PROBES {
        browser.goto(&format!("{url}leak/{}", probe.page)).await?;
        let seen = wait_for(browser, "window.__leakProbe", probe.name).await?;
        probes.insert(probe.page.to_owned(), seen);
    }
    page["probes"] = Value::Object(probes);
    Ok(page)
}

/// Polls `global` in the page until it is set, within [`CHECK_TIMEOUT`].
async fn wait_for(browser: &Browser, global: &str, what: &str) -> anyhow::Result<Value> {
    let deadline = Instant::now() + CHECK_TIMEOUT;
    let read = format!("return {global} || null;");
    loop {
        let value = browser.script(&read, Vec::new()).await?;
        if !value.is_null() {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            anyhow::bail!("{what} did not finish within {CHECK_TIMEOUT:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One leak probe of the test kit, as the self-check runs it.
struct SelfProbe {
    /// The report's item.
    name: &'static str,
    /// Its page, `/leak/<page>`.
    page: &'static str,
    /// The page's first script.
    script: &'static str,
}

/// The test kit's leak probes (`test-kit/src/leaks/`, DESIGN §5 "Browser identity"), the
/// same files its leak tests run: one home for each, so the self-check cannot fall behind
/// the tests. Each runs as its page's first script, as a mall's detector would.
const PROBES: &[SelfProbe] = &[
    SelfProbe {
        name: "leak page: DevTools client",
        page: "cdp-runtime",
        script: include_str!("../../test-kit/src/leaks/cdp_runtime.js"),
    },
    SelfProbe {
        name: "leak page: automation globals",
        page: "automation-globals",
        script: include_str!("../../test-kit/src/leaks/automation_globals.js"),
    },
    SelfProbe {
        name: "leak page: native functions",
        page: "native-functions",
        script: include_str!("../../test-kit/src/leaks/native_functions.js"),
    },
    SelfProbe {
        name: "leak page: contexts",
        page: "contexts",
        script: concat!(
            include_str!("../../test-kit/src/leaks/collect.js"),
            include_str!("../../test-kit/src/leaks/contexts.js")
        ),
    },
];
/// The contexts probe's `collect`, loaded by its workers.
const COLLECT_PROBE_JS: &str = include_str!("../../test-kit/src/leaks/collect.js");
/// The contexts probe's service worker.
const CONTEXTS_SW_JS: &str = include_str!("../../test-kit/src/leaks/contexts_sw.js");
/// The contexts probe's cross-site frame (served to `localhost`, another site).
const CONTEXTS_FRAME_JS: &str = concat!(
    include_str!("../../test-kit/src/leaks/collect.js"),
    include_str!("../../test-kit/src/leaks/contexts_frame.js")
);

async fn probe_page(
    axum::extract::Path(name): axum::extract::Path<String>,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    match PROBES.iter().find(|p| p.page == name) {
        Some(p) => Html(format!(
            "<!doctype html><html lang=\"ko\"><head><meta charset=\"utf-8\"><script>{}</script><title>{}</title></head><body><p>자가 점검</p></body></html>",
            p.script, p.page
        ))
        .into_response(),
        None => axum::http::StatusCode::NOT_FOUND.into_response(),
    }
}

fn javascript(source: &'static str) -> impl axum::response::IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/javascript; charset=utf-8",
        )],
        source,
    )
}

/// Starts the page's checks; the result lands in `window.__lpsSelfCheck`.
const COLLECT_JS: &str = r#"(async function () {
  var r = {}, n = navigator;
  function safe(f, fallback) { try { return f(); } catch (e) { return fallback === undefined ? 'error: ' + e : fallback; } }
  r.userAgent = n.userAgent;
  r.webdriver = n.webdriver;
  r.webdriverOwn = Object.getOwnPropertyDescriptor(n, 'webdriver') !== undefined;
  r.webdriverNative = safe(function () {
    var d = Object.getOwnPropertyDescriptor(Navigator.prototype, 'webdriver');
    return !d || !d.get || /\[native code\]/.test(Function.prototype.toString.call(d.get));
  });
  r.languages = safe(function () { return Array.prototype.slice.call(n.languages); });
  r.language = n.language;
  r.platform = n.platform;
  r.timezone = safe(function () { return Intl.DateTimeFormat().resolvedOptions().timeZone; });
  r.screen = [screen.width, screen.height, outerWidth, outerHeight, innerWidth, innerHeight];
  r.dpr = window.devicePixelRatio;
  r.chrome = typeof window.chrome === 'object' && window.chrome !== null;
  r.plugins = n.plugins ? n.plugins.length : -1;
  r.mimeTypes = n.mimeTypes ? n.mimeTypes.length : -1;
  r.hardwareConcurrency = n.hardwareConcurrency || 0;
  r.automationGlobals = safe(function () {
    var re = /^(\$?cdc_|\$wdc_|__webdriver|__selenium|__driver|__fxdriver|_Selenium|__nightmare|__puppeteer|__playwright|__pw|callPhantom|_phantom|domAutomation)/;
    var builtins = ['Array', 'Object', 'Promise', 'Proxy', 'Symbol', 'JSON', 'Window', 'Function', 'Reflect'];
    var found = Object.getOwnPropertyNames(window).concat(Object.getOwnPropertyNames(document)).filter(function (k) { return re.test(k); });
    // chromedriver's builtin copies, whatever they are named (the node's copy renames them).
    Object.getOwnPropertyNames(window).forEach(function (k) {
      var v; try { v = window[k]; } catch (e) { return; }
      builtins.forEach(function (b) { if (k !== b && v === window[b]) { found.push(k + '=' + b); } });
    });
    return found;
  }, []);
  r.brands = safe(function () { return n.userAgentData.brands.map(function (b) { return b.brand + '/' + b.version; }); }, null);
  r.uaDataPlatform = safe(function () { return n.userAgentData.platform; }, null);
  r.notification = typeof Notification === 'undefined' ? 'missing' : Notification.permission;
  r.notificationQuery = await safe(function () {
    return n.permissions.query({ name: 'notifications' }).then(function (p) { return p.state; }, function () { return 'error'; });
  }, 'missing');
  r.webgl = safe(function () {
    var gl = document.createElement('canvas').getContext('webgl');
    if (!gl) { return 'no context'; }
    var d = gl.getExtension('WEBGL_debug_renderer_info');
    return d ? gl.getParameter(d.UNMASKED_VENDOR_WEBGL) + ' | ' + gl.getParameter(d.UNMASKED_RENDERER_WEBGL) : 'no debug info';
  });
  r.webglNative = safe(function () {
    var f = WebGLRenderingContext.prototype.getParameter;
    return /\[native code\]/.test(Function.prototype.toString.call(f)) && !Object.prototype.hasOwnProperty.call(f, 'prototype');
  });
  r.toStringNative = safe(function () {
    var t = Function.prototype.toString, threw = false;
    try { t.call({}); } catch (e) { threw = e instanceof TypeError; }
    return /\[native code\]/.test(t.call(t)) && !Object.prototype.hasOwnProperty.call(t, 'prototype') && threw;
  });
  r.cjkFont = safe(function () {
    function glyph(ch) {
      var c = document.createElement('canvas'); c.width = 40; c.height = 40;
      var x = c.getContext('2d'); x.font = '32px sans-serif'; x.fillText(ch, 2, 32);
      return c.toDataURL();
    }
    return glyph('가') !== glyph('나');
  });
  // NB: a DevTools client with Runtime enabled is sent every console argument serialised;
  // serialising an Error formats its stack through Error.prepareStackTrace (fpscanner's
  // hasCDP). The older test, a `stack` getter on the error, no longer fires on Chromium 156.
  r.cdpRuntime = safe(function () {
    var hit = false, original = Error.prepareStackTrace;
    Error.prepareStackTrace = function (e, frames) { hit = true; return original ? original(e, frames) : String(e); };
    try { console.log(new Error('self-check')); } finally { Error.prepareStackTrace = original; }
    return hit;
  });
  r.iframe = await safe(function () {
    return new Promise(function (done) {
      var f = document.createElement('iframe');
      f.srcdoc = '<p>frame</p>';
      f.onload = function () {
        var w = f.contentWindow.navigator;
        done({ webdriver: w.webdriver, userAgent: w.userAgent, languages: Array.prototype.slice.call(w.languages) });
      };
      document.body.appendChild(f);
      setTimeout(function () { done(null); }, 3000);
    });
  }, null);
  r.worker = await safe(function () {
    return new Promise(function (done) {
      var src = 'postMessage({ webdriver: navigator.webdriver, userAgent: navigator.userAgent, languages: Array.prototype.slice.call(navigator.languages), timezone: Intl.DateTimeFormat().resolvedOptions().timeZone, brands: navigator.userAgentData ? navigator.userAgentData.brands.map(function (b) { return b.brand + "/" + b.version; }) : null });';
      var w = new Worker(URL.createObjectURL(new Blob([src], { type: 'text/javascript' })));
      w.onmessage = function (m) { done(m.data); };
      w.onerror = function () { done(null); };
      setTimeout(function () { done(null); }, 3000);
    });
  }, null);
  window.__lpsSelfCheck = r;
})(); return true;"#;

/// Compares what the page read with the identity (see the module docs).
pub fn evaluate(identity: Option<&Identity>, headers: &HeaderMap, page: &Value) -> Report {
    let mut items = Vec::new();
    let mut add = |name: &'static str, seen: String, leak: Option<String>| {
        items.push(Item { name, seen, leak });
    };
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => "(none)".to_owned(),
        other => other.to_string(),
    };
    let major = identity.map(|i| i.major.clone());
    let ua_ok = |ua: &str| -> Option<String> {
        if ua.contains("Headless") {
            return Some("names Headless".into());
        }
        match &major {
            Some(m) if !ua.contains(&format!("Chrome/{m}.")) => {
                Some(format!("is not Chrome {m}, the browser's version"))
            }
            _ => None,
        }
    };

    let ua = text(&page["userAgent"]);
    add("navigator.userAgent", ua.clone(), ua_ok(&ua));
    let ua_header = header("user-agent");
    let leak = ua_ok(&ua_header)
        .or_else(|| (ua_header != ua).then(|| "differs from navigator.userAgent".to_owned()));
    add("User-Agent header", ua_header, leak);

    let ch = header("sec-ch-ua");
    let leak = if ch.contains("Headless") {
        Some("names HeadlessChrome".to_owned())
    } else if let Some(m) = &major
        && !ch.is_empty()
        && !ch.contains(&format!("\"Google Chrome\";v=\"{m}\""))
    {
        Some(format!("lacks \"Google Chrome\" {m}"))
    } else {
        None
    };
    add(
        "Sec-CH-UA header",
        if ch.is_empty() {
            "(not sent)".into()
        } else {
            ch
        },
        leak,
    );

    let brands = text(&page["brands"]);
    let leak = if brands.contains("Headless") {
        Some("names HeadlessChrome".to_owned())
    } else if let Some(m) = &major
        && !brands.contains(&format!("Google Chrome/{m}"))
    {
        Some(format!(
            "lacks Google Chrome/{m} (a Chromium-only brand list is rare)"
        ))
    } else {
        None
    };
    add("navigator.userAgentData", brands, leak);

    let platform = text(&page["platform"]);
    let ua_data_platform = text(&page["uaDataPlatform"]);
    let leak = (platform != PLATFORM || ua_data_platform != "Linux").then(|| {
        format!("platform {platform:?} and userAgentData {ua_data_platform:?} are not {PLATFORM:?} and \"Linux\"")
    });
    add(
        "navigator.platform",
        format!("{platform} / {ua_data_platform}"),
        leak,
    );

    let accept = header("accept-language");
    let leak = (!accept.starts_with("ko-KR")).then(|| "does not start with ko-KR".to_owned());
    add("Accept-Language header", accept, leak);

    let languages: Vec<String> = page["languages"]
        .as_array()
        .map(|a| a.iter().map(text).collect())
        .unwrap_or_default();
    let leak = (languages != LANGUAGES).then(|| format!("is not {LANGUAGES:?}"));
    add("navigator.languages", languages.join(","), leak);

    let tz = text(&page["timezone"]);
    let leak = (tz != TIMEZONE).then(|| format!("is not {TIMEZONE}"));
    add("timezone", tz, leak);

    let dims: Vec<i64> = page["screen"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_i64().unwrap_or(0)).collect())
        .unwrap_or_default();
    let leak = match dims.as_slice() {
        [sw, sh, ow, oh, _, _] if *ow == 0 || *oh == 0 => {
            Some(format!("outer window {ow}x{oh} (sw {sw}x{sh})"))
        }
        [sw, sh, ow, oh, _, _] if sw < ow || sh < oh => Some(format!(
            "screen {sw}x{sh} is smaller than the window {ow}x{oh}"
        )),
        [sw, sh, ..] if (*sw, *sh) != (i64::from(SCREEN.0), i64::from(SCREEN.1)) => {
            Some(format!("screen {sw}x{sh}, not {}x{}", SCREEN.0, SCREEN.1))
        }
        [_, _, _, _, _, _] => None,
        _ => Some("unreadable".to_owned()),
    };
    add(
        "screen / window",
        format!("{dims:?} (window meant {}x{})", WINDOW.0, WINDOW.1),
        leak,
    );

    let dpr = page["dpr"].as_f64().unwrap_or(0.0);
    add(
        "devicePixelRatio",
        dpr.to_string(),
        (dpr < 1.0).then(|| "below 1".to_owned()),
    );

    let webdriver = &page["webdriver"];
    add(
        "navigator.webdriver",
        text(webdriver),
        (webdriver != &Value::Bool(false)).then(|| "is not false".to_owned()),
    );
    let patched =
        page["webdriverOwn"] == Value::Bool(true) || page["webdriverNative"] != Value::Bool(true);
    add(
        "navigator.webdriver getter",
        if patched { "patched" } else { "native" }.to_owned(),
        patched.then(|| "looks patched".to_owned()),
    );

    let iframe = &page["iframe"];
    let leak = if iframe.is_null() {
        Some("the iframe could not be read".to_owned())
    } else if iframe["webdriver"] != Value::Bool(false) {
        Some("navigator.webdriver is not false in an iframe".to_owned())
    } else if text(&iframe["userAgent"]) != ua {
        Some("the iframe's user agent differs".to_owned())
    } else {
        None
    };
    add("iframe navigator", text(iframe), leak);

    let worker = &page["worker"];
    let worker_languages: Vec<String> = worker["languages"]
        .as_array()
        .map(|a| a.iter().map(text).collect())
        .unwrap_or_default();
    let leak = if worker.is_null() {
        Some("the worker could not be read".to_owned())
    } else if worker["webdriver"] == Value::Bool(true) {
        Some("navigator.webdriver is true in a worker".to_owned())
    } else if text(&worker["userAgent"]) != ua {
        Some("the worker's user agent differs".to_owned())
    } else if worker_languages != LANGUAGES {
        Some("the worker's languages differ".to_owned())
    } else if text(&worker["timezone"]) != TIMEZONE {
        Some("the worker's timezone differs".to_owned())
    } else {
        None
    };
    add("worker navigator", text(worker), leak);

    let globals = text(&page["automationGlobals"]);
    let leak = (page["automationGlobals"]
        .as_array()
        .is_some_and(|a| !a.is_empty()))
    .then(|| "automation globals on window/document".to_owned());
    add("automation globals", globals, leak);

    let plugins = page["plugins"].as_i64().unwrap_or(-1);
    let mimes = page["mimeTypes"].as_i64().unwrap_or(-1);
    add(
        "plugins / mimeTypes",
        format!("{plugins} / {mimes}"),
        (plugins <= 0 || mimes <= 0).then(|| "empty".to_owned()),
    );
    add(
        "window.chrome",
        text(&page["chrome"]),
        (page["chrome"] != Value::Bool(true)).then(|| "missing".to_owned()),
    );

    let notification = text(&page["notification"]);
    let query = text(&page["notificationQuery"]);
    let consistent = matches!(
        (notification.as_str(), query.as_str()),
        ("default", "prompt") | ("granted", "granted") | ("denied", "denied")
    );
    add(
        "notification permission",
        format!("{notification} / {query}"),
        (!consistent).then(|| "Notification.permission and permissions.query disagree".to_owned()),
    );

    let webgl = text(&page["webgl"]);
    let leak = if webgl.contains("SwiftShader") || webgl.contains("llvmpipe") {
        Some("a software renderer".to_owned())
    } else if webgl == "no context" || webgl.starts_with("error") {
        Some("no WebGL".to_owned())
    } else if page["webglNative"] != Value::Bool(true) {
        Some("getParameter does not look native".to_owned())
    } else {
        None
    };
    add("WebGL renderer", webgl, leak);

    add(
        "Function.prototype.toString",
        text(&page["toStringNative"]),
        (page["toStringNative"] != Value::Bool(true)).then(|| "looks patched".to_owned()),
    );
    add(
        "CJK font",
        text(&page["cjkFont"]),
        (page["cjkFont"] != Value::Bool(true)).then(|| "Hangul renders as boxes".to_owned()),
    );
    add(
        "CDP Runtime side effect",
        text(&page["cdpRuntime"]),
        (page["cdpRuntime"] != Value::Bool(false))
            .then(|| "console serialises arguments (a DevTools Runtime client)".to_owned()),
    );
    for probe in PROBES {
        let seen = &page["probes"][probe.page];
        let leak = match seen.get("leaked") {
            Some(Value::Bool(false)) => None,
            Some(Value::Bool(true)) => Some(format!("the {} probe sees it", probe.page)),
            _ => Some(format!("the {} probe did not run", probe.page)),
        };
        add(probe.name, text(&seen["seen"]), leak);
    }
    let cores = page["hardwareConcurrency"].as_i64().unwrap_or(0);
    add(
        "hardwareConcurrency",
        cores.to_string(),
        (cores <= 0).then(|| "missing".to_owned()),
    );
    Report { items }
}

/// `crawler-node self-check` arguments: the browser settings of the node (same
/// environment variables), nothing else.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "crawler-node self-check",
    about = "Open a local page in the node's browser and print what it reveals"
)]
pub struct SelfCheckArgs {
    #[arg(long, env = "LPS_CHROMIUM_PATH", default_value = crate::config::DEFAULT_CHROMIUM_PATH)]
    pub chromium: PathBuf,
    #[arg(long, env = "LPS_CHROMEDRIVER_PATH", default_value = crate::config::DEFAULT_CHROMEDRIVER_PATH)]
    pub chromedriver: PathBuf,
    #[arg(long, env = "LPS_WEBDRIVER_URL")]
    pub webdriver_url: Option<String>,
    #[arg(long, env = "LPS_BROWSER_MODE", value_enum, default_value_t = BrowserMode::Headless)]
    pub mode: BrowserMode,
    #[arg(long, env = "LPS_XVFB_PATH", default_value = crate::config::DEFAULT_XVFB_PATH)]
    pub xvfb: PathBuf,
    #[arg(long, env = "LPS_PROFILE_ROOT", default_value_os_t = crate::config::default_profile_root())]
    pub profile_root: PathBuf,
    #[arg(
        long,
        env = "LPS_CHROMIUM_ARGS",
        value_delimiter = ' ',
        num_args = 1,
        allow_hyphen_values = true
    )]
    pub chromium_args: Vec<String>,
}

/// Runs `crawler-node self-check`: prints the report; `Ok(false)` when something leaks.
///
/// # Errors
/// The check could not run.
pub async fn run_command(
    args: &SelfCheckArgs,
    out: &mut impl std::io::Write,
) -> anyhow::Result<bool> {
    let mut config = crate::config::Config::new("http://127.0.0.1:1", "-");
    config.chromium_path = args.chromium.clone();
    config.chromedriver_path = args.chromedriver.clone();
    config.webdriver_url = args.webdriver_url.clone();
    config.browser_mode = args.mode;
    config.xvfb_path = args.xvfb.clone();
    config.profile_root = args.profile_root.clone();
    config.chromium_args = args.chromium_args.clone();
    let driver = driver_for_config(&config);
    let check = for_config(&config);
    let report = check.run(&driver).await;
    driver.stop().await;
    if let Some(display) = driver.display() {
        display.stop().await;
    }
    let report = report?;
    writeln!(out, "browser self-check ({} mode)", args.mode.as_str())?;
    write!(out, "{}", report.render())?;
    Ok(report.leak_count() == 0)
}

/// The self-check of a node config: its Chromium, mode and flags, a profile directory
/// inside the job slots' root (never one of them).
pub fn for_config(config: &crate::config::Config) -> SelfCheck {
    SelfCheck {
        chromium_path: config.chromium_path.clone(),
        mode: config.browser_mode,
        extra_args: config
            .chromium_args
            .iter()
            .filter(|a| !a.trim().is_empty())
            .cloned()
            .collect(),
        profile_root: self_check_root(&config.profile_root),
        contexts: true,
    }
}

/// The self-check's own profile root: a directory inside `LPS_PROFILE_ROOT`, beside the
/// job slots (`slot-N`, `slot-N.lock`) and never one of them.
///
/// NB: inside, not next to it: with a read-only root filesystem (the Helm chart's pods)
/// the profile root's volume is the only writable place there, and a sibling directory
/// fails with EROFS, so the node never became ready.
pub fn self_check_root(profile_root: &Path) -> PathBuf {
    profile_root.join(SELF_CHECK_DIR)
}

/// [`self_check_root`]'s name in the profile root.
const SELF_CHECK_DIR: &str = "self-check";

/// The chromedriver of a node config (managed, or external), with Xvfb in headful mode.
pub fn driver_for_config(config: &crate::config::Config) -> ChromeDriver {
    let driver = match &config.webdriver_url {
        Some(url) => ChromeDriver::external(url.clone()),
        None => ChromeDriver::managed(config.chromedriver_path.clone()),
    };
    match config.browser_mode {
        BrowserMode::Headful => {
            driver.with_display(Arc::new(Display::new(config.xvfb_path.clone())))
        }
        BrowserMode::Headless => driver,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The self-check runs every leak probe of the test kit, each with the test's own script:
    /// a probe added there and forgotten here fails this test.
    #[test]
    fn the_self_check_runs_the_test_kits_probes() {
        let own: Vec<(&str, &str)> = PROBES.iter().map(|p| (p.page, p.script)).collect();
        let kit: Vec<(&str, &str)> = lps_test_kit::leaks::PROBES
            .iter()
            .map(|p| (p.name, p.script))
            .collect();
        assert_eq!(own, kit);
    }

    #[test]
    fn the_self_check_profile_lives_inside_the_profile_root_and_is_no_job_slot() {
        let root = Path::new("/var/lib/lps/profiles");
        let own = self_check_root(root);
        assert!(own.starts_with(root), "{own:?}");
        let name = own.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.starts_with("slot-"), "{name}");
    }

    fn clean_page(major: &str) -> Value {
        let ua = format!(
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{major}.0.0.0 Safari/537.36"
        );
        json!({
            "userAgent": ua, "webdriver": false, "webdriverOwn": false, "webdriverNative": true,
            "languages": ["ko-KR", "ko", "en-US", "en"], "language": "ko-KR", "platform": "Linux x86_64",
            "timezone": "Asia/Seoul", "screen": [1920, 1080, 1366, 900, 1366, 813], "dpr": 1,
            "chrome": true, "plugins": 5, "mimeTypes": 2, "hardwareConcurrency": 2, "automationGlobals": [],
            "brands": ["Not)A;Brand/8", format!("Chromium/{major}"), format!("Google Chrome/{major}")],
            "uaDataPlatform": "Linux", "notification": "default", "notificationQuery": "prompt",
            "webgl": "Google Inc. (Intel) | ANGLE (Intel, Mesa)", "webglNative": true, "cjkFont": true,
            "toStringNative": true,
            "cdpRuntime": false,
            "iframe": { "webdriver": false, "userAgent": ua, "languages": ["ko-KR"] },
            "worker": { "webdriver": null, "userAgent": ua, "languages": ["ko-KR", "ko", "en-US", "en"], "timezone": "Asia/Seoul" },
            "probes": {
                "cdp-runtime": { "leaked": false, "seen": "prepareStackTrace ran 0 time(s)" },
                "automation-globals": { "leaked": false, "seen": "none" },
                "native-functions": { "leaked": false, "seen": "all native" },
                "contexts": { "leaked": false, "seen": "all contexts agree" },
            },
        })
    }

    fn headers(ua: &str, accept: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("user-agent", ua.parse().unwrap());
        h.insert("accept-language", accept.parse().unwrap());
        h
    }

    #[test]
    fn a_consistent_browser_leaks_nothing_and_each_tell_is_named() {
        let id = Identity::from_version("156.0.8078.114");
        let page = clean_page("156");
        let ua = page["userAgent"].as_str().unwrap().to_owned();
        let ok = evaluate(
            Some(&id),
            &headers(&ua, "ko-KR,ko;q=0.9,en-US;q=0.8,en;q=0.7"),
            &page,
        );
        assert_eq!(ok.leak_count(), 0, "{}", ok.render());

        let tells: [(&str, Value, &str); 6] = [
            ("webdriver", json!(true), "navigator.webdriver"),
            ("timezone", json!("UTC"), "timezone"),
            (
                "webgl",
                json!("Google Inc. (Google) | ANGLE (SwiftShader)"),
                "WebGL renderer",
            ),
            (
                "automationGlobals",
                json!(["cdc_adoQpoasnfa76pfcZLmcfl_Array"]),
                "automation globals",
            ),
            (
                "screen",
                json!([800, 600, 1366, 900, 1366, 900]),
                "screen / window",
            ),
            (
                "brands",
                json!(["HeadlessChrome/156"]),
                "navigator.userAgentData",
            ),
        ];
        for (key, value, item) in tells {
            let mut bad = page.clone();
            bad[key] = value;
            let report = evaluate(Some(&id), &headers(&ua, "ko-KR,ko"), &bad);
            let leaks: Vec<&str> = report.leaks().map(|i| i.name).collect();
            assert_eq!(leaks, [item], "{key}: {}", report.render());
        }
        let mut bad = page.clone();
        bad["probes"]["contexts"] =
            json!({ "leaked": true, "seen": "dedicated worker webgl \"SwiftShader\"" });
        let report = evaluate(Some(&id), &headers(&ua, "ko-KR"), &bad);
        assert_eq!(
            report.leaks().map(|i| i.name).collect::<Vec<_>>(),
            ["leak page: contexts"]
        );
        let mut bad = page.clone();
        bad["probes"] = json!({});
        let report = evaluate(Some(&id), &headers(&ua, "ko-KR"), &bad);
        assert_eq!(report.leak_count(), PROBES.len(), "{}", report.render());
        let report = evaluate(Some(&id), &headers(&ua, "en-US,en;q=0.9"), &page);
        assert_eq!(
            report.leaks().map(|i| i.name).collect::<Vec<_>>(),
            ["Accept-Language header"]
        );
        let headless = ua.replace("Chrome/", "HeadlessChrome/");
        let report = evaluate(Some(&id), &headers(&headless, "ko-KR"), &page);
        assert_eq!(
            report.leaks().map(|i| i.name).collect::<Vec<_>>(),
            ["User-Agent header"]
        );
    }
}
