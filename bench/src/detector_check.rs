//! Runs a public open-source bot detector against the node's browser and against plain
//! headless Chromium (issue: a browser real malls accept), and prints what it says.
//!
//! The detector is FingerprintJS BotD (MIT, npm `@fingerprintjs/botd`); its ES module is
//! read from `--botd` (`npm install @fingerprintjs/botd` puts it at
//! `node_modules/@fingerprintjs/botd/dist/botd.esm.js`) and served with a page that runs
//! `load()` then `detect()` on loopback. The node's browser is launched exactly as a job's
//! (`Browser::launch` with the node's identity, headless or `--headful`); the plain one is
//! Debian's chromedriver as shipped with `--headless=new --no-sandbox`.
//!
//! With `--fpscanner PATH` (npm `fpscanner`, MIT: `dist/fpScanner.es.js`) it also runs
//! fpscanner's `collectFingerprint` and prints the names of the signals it flags
//! (`fastBotDetectionDetails`), or `none`.
//!
//! Usage: `cargo run -p lps-bench --bin detector-check -- --botd PATH [--fpscanner PATH]
//! [--headful]`.
#![allow(clippy::print_stdout)]

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use anyhow::Context as _;
use clap::Parser;
use lps_crawler_node::chromium::{
    Browser, BrowserMode, ChromeDriver, Display, LaunchOptions, ProfileSlot, WebDriverHttp,
};
use serde_json::Value;
use thirtyfour::{Capabilities, WebDriver};

#[derive(Debug, Parser)]
#[command(about = "Runs FingerprintJS BotD against the node's browser and plain headless Chromium")]
struct Args {
    /// BotD's `botd.esm.js`.
    #[arg(long)]
    botd: PathBuf,
    /// fpscanner's `fpScanner.es.js`.
    #[arg(long)]
    fpscanner: Option<PathBuf>,
    /// The node's browser in headful mode (under Xvfb).
    #[arg(long)]
    headful: bool,
}

const PAGE: &str = r#"<!doctype html><html lang="ko"><head><meta charset="utf-8"><title>detector</title></head><body><p>검사</p>
<script type="module">
import { load } from '/botd.esm.js';
load().then(b => b.detect()).then(r => { window.__verdict = r; }, e => { window.__verdict = { error: String(e) }; });
</script></body></html>"#;

const FPSCANNER_PAGE: &str = r#"<!doctype html><html lang="ko"><head><meta charset="utf-8"><title>detector</title></head><body><p>검사</p>
<script type="module">
import FingerprintScanner from '/fpscanner.js';
new FingerprintScanner().collectFingerprint({ encrypt: false }).then(fp => {
  const d = fp.fastBotDetectionDetails || {};
  window.__verdict = Object.keys(d).filter(k => d[k] && d[k].detected).join(', ') || 'none';
}, e => { window.__verdict = { error: String(e) }; });
</script></body></html>"#;

const READ: &str = "return window.__verdict ? JSON.stringify(window.__verdict) : null;";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let script = std::fs::read_to_string(&args.botd)
        .with_context(|| format!("--botd {}", args.botd.display()))?;
    let fpscanner = match &args.fpscanner {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("--fpscanner {}", path.display()))?,
        ),
        None => None,
    };
    let addr = serve(script, fpscanner.clone()).await?;
    let mut pages = vec![("BotD", format!("http://{addr}/"))];
    if fpscanner.is_some() {
        pages.push(("fpscanner", format!("http://{addr}/fpscanner")));
    }

    for (name, url) in &pages {
        let plain = plain_headless(url).await?;
        println!("{name}: plain headless Chromium (chromedriver defaults): {plain}");
    }

    let mode = if args.headful {
        BrowserMode::Headful
    } else {
        BrowserMode::Headless
    };
    let mut driver = ChromeDriver::managed("/usr/bin/chromedriver");
    if mode == BrowserMode::Headful {
        driver = driver.with_display(Arc::new(Display::new("/usr/bin/Xvfb")));
    }
    let root = std::env::temp_dir().join(format!("lps-detector-{}", std::process::id()));
    std::fs::create_dir_all(&root)?;
    let slot = ProfileSlot::acquire(&root)?;
    let options = LaunchOptions::new("/usr/bin/chromium".into(), mode);
    let browser = Browser::launch(&driver.url().await?, &slot, &options).await?;
    let mut verdicts = Vec::new();
    for (name, url) in &pages {
        browser.goto(url).await?;
        let mut verdict = Value::Null;
        for _ in 0..100 {
            verdict = browser.script(READ, Vec::new()).await?;
            if !verdict.is_null() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        verdicts.push((name, verdict));
    }
    browser.close().await;
    driver.stop().await;
    if let Some(display) = driver.display() {
        display.stop().await;
    }
    let _ = std::fs::remove_dir_all(&root);
    for (name, verdict) in verdicts {
        println!(
            "{name}: the node's browser ({}): {}",
            mode.as_str(),
            text(&verdict)
        );
    }
    Ok(())
}

fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

async fn serve(script: String, fpscanner: Option<String>) -> anyhow::Result<SocketAddr> {
    use axum::{Router, http::header, response::Html, routing::get};
    let script = Arc::new(script);
    let fpscanner = Arc::new(fpscanner.unwrap_or_default());
    let app = Router::new()
        .route("/fpscanner", get(|| async { Html(FPSCANNER_PAGE) }))
        .route(
            "/fpscanner.js",
            get(move || {
                let script = fpscanner.clone();
                async move {
                    (
                        [(header::CONTENT_TYPE, "text/javascript")],
                        (*script).clone(),
                    )
                }
            }),
        )
        .route("/", get(|| async { Html(PAGE) }))
        .route(
            "/botd.esm.js",
            get(move || {
                let script = script.clone();
                async move {
                    (
                        [(header::CONTENT_TYPE, "text/javascript")],
                        (*script).clone(),
                    )
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(addr)
}

async fn plain_headless(url: &str) -> anyhow::Result<String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut child = tokio::process::Command::new("/usr/bin/chromedriver")
        .arg(format!("--port={port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let dir = std::env::temp_dir().join(format!("lps-detector-plain-{}", std::process::id()));
    let caps = serde_json::json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": ["--headless=new", "--no-sandbox", format!("--user-data-dir={}", dir.display())],
        },
    });
    let Value::Object(caps) = caps else {
        anyhow::bail!("capabilities");
    };
    let server = format!("http://127.0.0.1:{port}");
    let mut session = None;
    for _ in 0..50 {
        let connect = WebDriver::builder(&server, Capabilities::from(caps.clone()))
            .client(WebDriverHttp::new(Duration::from_secs(60)))
            .connect();
        if let Ok(s) = connect.await {
            session = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let session = session.context("a plain WebDriver session")?;
    session.goto(url).await?;
    let mut verdict = String::from("(no verdict)");
    for _ in 0..100 {
        let v = session.execute(READ, Vec::new()).await?;
        if let Some(s) = v.json().as_str() {
            verdict = s.to_owned();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = session.quit().await;
    let _ = child.kill().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(verdict)
}
