//! Leak pages through the node's own browser (DESIGN §5 "Browser identity"): real
//! Chromium launched exactly as a job's (the node's chromedriver copy, flags, identity,
//! CDP set-up) opens every leak page of the test kit, and no probe may see a leak, in
//! headless and headful mode. A stock chromedriver without the identity set-up shows the
//! DevTools-client and automation-globals probes do fire, and the node's browser without
//! its DevTools connection to workers shows the contexts probe does, so a pass means
//! something.

use std::{sync::Arc, time::Duration};

use lps_crawler_node::{
    chromium::{Browser, BrowserMode, ChromeDriver, Display, LaunchOptions, ProfileSlot},
    selfcheck::SelfCheck,
};
use lps_test_kit::leaks::{LeakPages, PROBES, Probe, detectors, probe};
use serde_json::Value;
use tokio::time::Instant;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// A probe that has not answered by then is broken (not a timing assertion: the probes
/// wait at most 1.5 s themselves).
const PROBE_DEADLINE: Duration = Duration::from_secs(20);

/// What the probe saw: (leaked, seen).
async fn run_probe(browser: &Browser, pages: &LeakPages, probe: &Probe) -> (bool, String) {
    read_verdict(browser, &pages.url(probe), probe.name).await
}

/// Opens `url` and waits for its `window.__leakProbe`.
async fn read_verdict(browser: &Browser, url: &str, name: &str) -> (bool, String) {
    browser.goto(url).await.expect("navigate");
    let deadline = Instant::now() + PROBE_DEADLINE;
    loop {
        let v = browser
            .script("return window.__leakProbe || null;", Vec::new())
            .await
            .expect("read the probe");
        if !v.is_null() {
            return (
                v["leaked"] != Value::Bool(false),
                v["seen"].as_str().unwrap_or_default().to_owned(),
            );
        }
        assert!(Instant::now() < deadline, "{name} never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs `probes` in one browser started through `driver`; returns (name, leaked, seen).
async fn probe_all(
    driver: &ChromeDriver,
    mode: BrowserMode,
    (stealth, contexts): (bool, bool),
    probes: &[&Probe],
) -> Vec<(&'static str, bool, String)> {
    let root = std::env::temp_dir().join(format!(
        "lps-leaks-test-{}-{}-{}",
        mode.as_str(),
        std::process::id(),
        fastrand::u32(..)
    ));
    std::fs::create_dir_all(&root).unwrap();
    let slot = ProfileSlot::acquire(&root).unwrap();
    let url = driver.url().await.expect("chromedriver");
    let options = LaunchOptions {
        stealth,
        contexts,
        ..LaunchOptions::new(CHROMIUM.into(), mode)
    };
    let pages = LeakPages::start().await.unwrap();
    let browser = Browser::launch(&url, &slot, &options)
        .await
        .expect("launch");
    let mut out = Vec::new();
    for p in probes {
        let (leaked, seen) = run_probe(&browser, &pages, p).await;
        out.push((p.name, leaked, seen));
    }
    browser.close().await;
    drop(slot);
    let _ = std::fs::remove_dir_all(&root);
    out
}

fn render(results: &[(&str, bool, String)]) -> String {
    results
        .iter()
        .map(|(name, leaked, seen)| {
            format!("{} {name}: {seen}", if *leaked { "LEAK" } else { "ok  " })
        })
        .collect::<Vec<_>>()
        .join("\n")
}

async fn nothing_leaks(mode: BrowserMode) {
    let mut driver = ChromeDriver::managed(CHROMEDRIVER);
    if mode == BrowserMode::Headful {
        driver = driver.with_display(Arc::new(Display::new("/usr/bin/Xvfb")));
    }
    let all: Vec<&Probe> = PROBES.iter().collect();
    let results = probe_all(&driver, mode, (true, true), &all).await;
    driver.stop().await;
    if let Some(display) = driver.display() {
        display.stop().await;
    }
    let shown = render(&results);
    eprintln!("{} mode:\n{shown}", mode.as_str());
    assert_eq!(results.len(), PROBES.len());
    assert!(
        results.iter().all(|(_, leaked, _)| !leaked),
        "{} mode:\n{shown}",
        mode.as_str()
    );
}

#[tokio::test]
async fn no_leak_page_sees_the_node_browser_headless() {
    nothing_leaks(BrowserMode::Headless).await;
}

#[tokio::test]
async fn no_leak_page_sees_the_node_browser_headful() {
    nothing_leaks(BrowserMode::Headful).await;
}

/// The stock chromedriver (not the node's copy) on a free port, once it listens.
async fn stock_chromedriver() -> (tokio::process::Child, u16) {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let stock = tokio::process::Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("stock chromedriver");
    let deadline = Instant::now() + PROBE_DEADLINE;
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "the stock chromedriver never listened"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (stock, port)
}

/// The launch through the stock chromedriver (not the node's copy), without the identity
/// set-up (`LPS_BROWSER_STEALTH=false`): the probes of what the copy and the set-up remove
/// must fire, or they prove nothing.
#[tokio::test]
async fn the_probes_see_a_stock_chromedriver() {
    let (mut stock, port) = stock_chromedriver().await;
    let driver = ChromeDriver::external(format!("http://127.0.0.1:{port}"));
    let probes = [
        probe("cdp-runtime").unwrap(),
        probe("automation-globals").unwrap(),
    ];
    let results = probe_all(&driver, BrowserMode::Headless, (false, false), &probes).await;
    let _ = stock.kill().await;
    let shown = render(&results);
    eprintln!("stock chromedriver:\n{shown}");
    assert!(
        results.iter().all(|(_, leaked, _)| *leaked),
        "stock chromedriver:\n{shown}"
    );
}

/// The node's browser without its own DevTools connection to workers and frames: the page
/// shows the identity, its workers do not, and the contexts probe must see that.
#[tokio::test]
async fn the_contexts_probe_sees_workers_left_out() {
    let driver = ChromeDriver::managed(CHROMEDRIVER);
    let results = probe_all(
        &driver,
        BrowserMode::Headless,
        (true, false),
        &[probe("contexts").unwrap()],
    )
    .await;
    driver.stop().await;
    let shown = render(&results);
    eprintln!("without the contexts connection:\n{shown}");
    assert!(results[0].1, "{shown}");
    assert!(results[0].2.contains("worker webgl"), "{shown}");
}

/// The node's self-check runs the same probes: with the DevTools client left visible (a
/// stock chromedriver) or the workers left out, it fails naming the probe.
#[tokio::test]
async fn the_self_check_names_each_protection_switched_off() {
    let (mut stock, port) = stock_chromedriver().await;
    let managed = ChromeDriver::managed(CHROMEDRIVER);
    let stock_driver = ChromeDriver::external(format!("http://127.0.0.1:{port}"));
    for (driver, contexts, expected) in [
        (&stock_driver, true, "leak page: DevTools client"),
        (&managed, false, "leak page: contexts"),
    ] {
        let root = std::env::temp_dir().join(format!(
            "lps-leaks-self-check-{}-{}",
            std::process::id(),
            fastrand::u32(..)
        ));
        let check = SelfCheck {
            chromium_path: CHROMIUM.into(),
            mode: BrowserMode::Headless,
            extra_args: Vec::new(),
            profile_root: root.clone(),
            contexts,
        };
        let report = check.run(driver).await.expect("self-check");
        let _ = std::fs::remove_dir_all(&root);
        let leaks: Vec<&str> = report.leaks().map(|i| i.name).collect();
        assert!(leaks.contains(&expected), "{}", report.render());
    }
    managed.stop().await;
    let _ = stock.kill().await;
}

/// The public detectors (npm, fetched at test time into `target/`): BotD says no bot and
/// fpscanner flags no signal, headless and headful. Without npm or the registry the test
/// is skipped, except under `CI=true`, where it fails.
#[tokio::test]
async fn the_public_detectors_see_no_bot_in_the_node_browser() {
    let cache = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/lps-detectors");
    let found = match detectors::fetch(&cache) {
        Ok(found) => found,
        Err(e) if detectors::required() => panic!("the public detectors (CI=true): {e}"),
        Err(e) => {
            eprintln!("skipped: the public detectors could not be fetched: {e}");
            return;
        }
    };
    for mode in [BrowserMode::Headless, BrowserMode::Headful] {
        let mut driver = ChromeDriver::managed(CHROMEDRIVER);
        if mode == BrowserMode::Headful {
            driver = driver.with_display(Arc::new(Display::new("/usr/bin/Xvfb")));
        }
        let root = std::env::temp_dir().join(format!(
            "lps-detectors-test-{}-{}",
            std::process::id(),
            fastrand::u32(..)
        ));
        std::fs::create_dir_all(&root).unwrap();
        let slot = ProfileSlot::acquire(&root).unwrap();
        let pages = LeakPages::start_with(Some(found.clone())).await.unwrap();
        let url = driver.url().await.expect("chromedriver");
        let options = LaunchOptions::new(CHROMIUM.into(), mode);
        let browser = Browser::launch(&url, &slot, &options)
            .await
            .expect("launch");
        let mut results = Vec::new();
        for name in ["botd", "fpscanner"] {
            let (leaked, seen) = read_verdict(&browser, &pages.detector_url(name), name).await;
            results.push((name, leaked, seen));
        }
        browser.close().await;
        driver.stop().await;
        if let Some(display) = driver.display() {
            display.stop().await;
        }
        drop(slot);
        let _ = std::fs::remove_dir_all(&root);
        let shown = render(&results);
        eprintln!("{} mode:\n{shown}", mode.as_str());
        assert!(
            results.iter().all(|(_, leaked, _)| !leaked),
            "{} mode:\n{shown}",
            mode.as_str()
        );
    }
}
