//! A browser malls accept (DESIGN §5 "Browser identity"), with real Chromium: the
//! self-check finds nothing leaking in either mode, a new exit IP never presents the
//! cookies another one earned, page loads on one exit IP are paced (across slots and jobs:
//! no exit IP is ever seen loading two pages closer than the gap, and a slot moves to a
//! port that is free instead of sleeping through its own port's gap), and human navigation
//! reaches the result page through the home page's search box.

mod common;

use std::{sync::Arc, time::Duration};

use common::{
    Harness, LedgerProxies, TestProxies, alpha_profile, beta_profile, expect_found, gamma_profile,
    job, run,
};
use lps_crawler_node::Outcome;
use lps_crawler_node::{
    BrowserExecutor,
    chromium::{BrowserMode, ChromeDriver, Display},
    proxy::SessionEndReason,
    selfcheck::SelfCheck,
};
use lps_proto::{model::duration_to_pb, pb};
use lps_test_kit::{
    catalog::Catalog,
    mall::{arrivals_closer_than, closest_arrivals},
    stack::{Stack, StackConfig},
};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

async fn self_check(mode: BrowserMode) {
    let root = std::env::temp_dir().join(format!(
        "lps-self-check-test-{}-{}",
        mode.as_str(),
        std::process::id()
    ));
    let mut driver = ChromeDriver::managed(CHROMEDRIVER);
    if mode == BrowserMode::Headful {
        driver = driver.with_display(Arc::new(Display::new("/usr/bin/Xvfb")));
    }
    let check = SelfCheck {
        chromium_path: CHROMIUM.into(),
        mode,
        extra_args: Vec::new(),
        profile_root: root.clone(),
        contexts: true,
    };
    let report = check.run(&driver).await;
    driver.stop().await;
    if let Some(display) = driver.display() {
        display.stop().await;
    }
    let _ = std::fs::remove_dir_all(&root);
    let report = report.unwrap_or_else(|e| panic!("self-check ({}): {e:#}", mode.as_str()));
    assert!(report.items.len() >= 20, "{}", report.render());
    assert_eq!(report.leak_count(), 0, "{}", report.render());
}

#[tokio::test]
async fn the_self_check_finds_nothing_leaking_headless_and_headful() {
    let _serial = common::serial().await;
    self_check(BrowserMode::Headless).await;
    self_check(BrowserMode::Headful).await;
}

#[tokio::test]
async fn a_new_exit_ip_never_presents_the_cookies_another_earned() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(2)).await.unwrap();
    let ports: Vec<u16> = common::gateway_ports(&stack);
    let proxies = Arc::new(TestProxies::new(ports.clone(), None, 0));
    let harness = Harness::proxied("hygiene", true, proxies.clone(), Arc::default());
    let exec = harness.executor.clone();
    let mut profile = gamma_profile(&stack.gamma);
    // One search per exit IP: the second job runs on the other port.
    profile.ip_request_budget = 1;
    // The next two search pages without a clearance cookie get the interstitial, which
    // sets the cookie and reloads.
    stack.gamma.set_challenge(2, Duration::from_millis(300));
    let check = async {
        for (id, name) in [(1, "제주 삼다수 2L x 12"), (2, "신라면 120g 5개입")] {
            expect_found(run(&exec, job(id, name, profile.clone())).await, name);
        }
        let stats = stack.gamma.stats();
        assert!(
            stats.searches.get("exit-01").copied().unwrap_or(0) >= 1,
            "{stats:?}"
        );
        assert!(
            stats.searches.get("exit-02").copied().unwrap_or(0) >= 1,
            "{stats:?}"
        );
        // Exit 2 did not get exit 1's clearance cookie: it was challenged again.
        assert_eq!(stats.challenges_served, 2, "{stats:?}");
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}

#[tokio::test]
async fn page_loads_on_one_exit_ip_are_paced() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(1)).await.unwrap();
    let ports: Vec<u16> = common::gateway_ports(&stack);
    let proxies = Arc::new(TestProxies::new(ports, None, 0));
    const GAP: Duration = Duration::from_millis(1500);
    let harness = Harness::build("pacing", |mut settings| {
        settings.ip_page_gap = GAP;
        BrowserExecutor::new(settings).with_proxies(proxies.clone())
    });
    let exec = harness.executor.clone();
    let profile = alpha_profile(&stack.alpha);
    let check = async {
        expect_found(
            run(&exec, job(1, "제주 삼다수 2L x 12", profile.clone())).await,
            "first",
        );
        let second = tokio::time::Instant::now();
        let (_, _, metrics) = expect_found(
            run(&exec, job(2, "햇반 210g 12개", profile.clone())).await,
            "second",
        );
        // Same exit IP: the second page waited for the gap (a lower bound only).
        assert!(second.elapsed() >= GAP, "{:?}", second.elapsed());
        assert_eq!(metrics.pages_loaded, 1);
        // Each job released its IP session; the second was granted the same port.
        let releases = proxies.releases();
        assert_eq!(releases.len(), 2, "{releases:?}");
        assert!(
            releases
                .iter()
                .all(|(_, end)| end.reason == SessionEndReason::Idle)
        );
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}

#[tokio::test]
async fn no_exit_ip_sees_two_pages_closer_than_its_gap_with_slots_and_jobs_interleaved() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(3)).await.unwrap();
    let proxies = Arc::new(LedgerProxies::new(common::gateway_ports(&stack)));
    const GAP: Duration = Duration::from_millis(1000);
    let harness = Harness::build("pacing-slots", |mut settings| {
        settings.ip_page_gap = GAP;
        settings.slots = 3;
        BrowserExecutor::new(settings).with_proxies(proxies.clone())
    });
    let exec = harness.executor.clone();
    let (alpha, beta) = (alpha_profile(&stack.alpha), beta_profile(&stack.beta));
    let catalog = Catalog::builtin();
    let names: Vec<String> = catalog
        .products()
        .iter()
        .filter(|p| p.decoy_of.is_none() && p.listings.len() == 2)
        .take(5)
        .map(|p| p.name.clone())
        .collect();
    let check = async {
        // Three slots on three ports: 5 products on both malls and one absent product (more
        // than one page), all at once, so jobs and slots interleave on every port.
        let mut jobs = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let id = i64::try_from(i).unwrap() * 2 + 1;
            jobs.push(run(&exec, job(id, name, alpha.clone())));
            jobs.push(run(&exec, job(id + 1, name, beta.clone())));
        }
        jobs.push(run(
            &exec,
            job(99, "존재하지않는상품 500ml 3개", beta.clone()),
        ));
        let outcomes = futures::future::join_all(jobs).await;
        let (mut found, mut absent) = (0, 0);
        for outcome in outcomes {
            match outcome {
                Outcome::Found { .. } => found += 1,
                Outcome::NotFound { .. } => absent += 1,
                other => panic!("want found or not found, got {other:?}"),
            }
        }
        assert_eq!((found, absent), (10, 1));
        // What the malls saw: every exit IP's search pages on both malls together.
        let mut arrivals = stack.alpha.search_arrivals();
        arrivals.extend(stack.beta.search_arrivals());
        assert!(arrivals.len() >= 12, "{arrivals:?}");
        let closest = closest_arrivals(&arrivals);
        assert_eq!(closest.len(), 3, "every exit IP loaded pages: {closest:?}");
        assert_eq!(
            arrivals_closer_than(&arrivals, GAP),
            0,
            "closest two pages per exit IP: {closest:?}"
        );
        // Every IP session ended and gave its port back.
        assert_eq!(proxies.held(), 0);
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_slot_moves_to_a_free_port_instead_of_sleeping_through_its_gap() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(2)).await.unwrap();
    let proxies = Arc::new(LedgerProxies::new(common::gateway_ports(&stack)));
    const GAP: Duration = Duration::from_millis(1500);
    let harness = Harness::build("pacing-move", |mut settings| {
        settings.ip_page_gap = GAP;
        BrowserExecutor::new(settings).with_proxies(proxies.clone())
    });
    let exec = harness.executor.clone();
    let beta = beta_profile(&stack.beta);
    let check = async {
        // The first job's port (exit 1) rests past its gap; the second job is granted the
        // other port (exit 2) and needs more than one page.
        expect_found(
            run(&exec, job(1, "제주 삼다수 2L x 12", beta.clone())).await,
            "first",
        );
        tokio::time::sleep(GAP * 2).await;
        let before = proxies.releases().len();
        let rounds = match run(&exec, job(2, "존재하지않는상품 500ml 3개", beta.clone())).await
        {
            Outcome::NotFound { rounds, .. } => rounds,
            other => panic!("want not found, got {other:?}"),
        };
        assert!(rounds.len() >= 2, "{rounds:?}");
        // Its second page did not wait on exit 2's gap: the job moved to exit 1, free then,
        // ending its session on exit 2 as a rotation.
        let releases = proxies.releases();
        let moved = releases[before..]
            .iter()
            .filter(|(_, end)| end.reason == SessionEndReason::Rotate && end.stats.requests > 0)
            .count();
        assert!(moved >= 1, "{releases:?}");
        let stats = stack.beta.stats();
        assert!(
            stats.searches.get("exit-02").copied().unwrap_or(0) >= 1,
            "{stats:?}"
        );
        assert!(
            stats.searches.get("exit-01").copied().unwrap_or(0) >= 2,
            "{stats:?}"
        );
        assert_eq!(arrivals_closer_than(&stack.beta.search_arrivals(), GAP), 0);
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}

#[tokio::test]
async fn human_navigation_types_the_query_into_the_home_pages_search_box() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(1)).await.unwrap();
    let harness = Harness::direct("human", true);
    let exec = harness.executor.clone();
    let direct = alpha_profile(&stack.alpha);
    let mut human = direct.clone();
    let ms = |n| Some(duration_to_pb(Duration::from_millis(n)));
    human.navigation = Some(pb::Navigation {
        human: true,
        home_url: format!("{}/", stack.alpha.base_url()),
        search_input_selector: HOME_SEARCH_INPUT.into(),
        key_delay_min: ms(5),
        key_delay_max: ms(20),
        dwell_min: ms(10),
        dwell_max: ms(30),
    });
    let check = async {
        let before = stack.alpha.stats();
        let (offers, rounds, _) = expect_found(
            run(&exec, job(1, "제주 삼다수 2L x 12", human.clone())).await,
            "human",
        );
        let after = stack.alpha.stats();
        assert!(!offers.is_empty());
        // The typed query (Hangul, digits, latin) reached the mall as the search.
        assert_eq!(rounds[0].query, "제주 삼다수 2L x 12");
        let requests = |s: &lps_test_kit::MallStats| s.requests.values().sum::<u64>();
        let searches = |s: &lps_test_kit::MallStats| s.searches.values().sum::<u64>();
        assert_eq!(searches(&after) - searches(&before), 1, "{after:?}");
        // The home page came first: more requests than the search page and its API.
        let human_requests = requests(&after) - requests(&before);

        let before = stack.alpha.stats();
        expect_found(
            run(&exec, job(2, "제주 삼다수 2L x 12", direct.clone())).await,
            "direct",
        );
        let direct_requests = requests(&stack.alpha.stats()) - requests(&before);
        assert!(
            human_requests > direct_requests,
            "human {human_requests} requests, direct {direct_requests}"
        );
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}

/// The fixture malls' home-page search box.
const HOME_SEARCH_INPUT: &str = "form input[name=q]";

/// A plain WebDriver session: Debian's chromedriver as shipped, headless Chromium with
/// only the flags a container needs — what a scraper gets by default.
async fn plain_headless_visit(url: &str) -> String {
    use thirtyfour::{Capabilities, WebDriver};
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut driver_process = tokio::process::Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("lps-plain-{}", std::process::id()));
    let caps = serde_json::json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": CHROMIUM,
            "args": ["--headless=new", "--no-sandbox", format!("--user-data-dir={}", dir.display())],
        },
    });
    let caps = match caps {
        serde_json::Value::Object(map) => Capabilities::from(map),
        _ => unreachable!(),
    };
    let server = format!("http://127.0.0.1:{port}");
    let mut session = None;
    for _ in 0..50 {
        let connect = WebDriver::builder(&server, caps.clone())
            .client(lps_crawler_node::chromium::WebDriverHttp::new(
                Duration::from_secs(60),
            ))
            .connect();
        if let Ok(s) = connect.await {
            session = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let session = session.expect("a plain WebDriver session");
    session.goto(url).await.unwrap();
    // The wall page reports and reloads; give it time to decide.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let html = session.source().await.unwrap_or_default();
    let _ = session.quit().await;
    let _ = driver_process.kill().await;
    let _ = std::fs::remove_dir_all(&dir);
    html
}

#[tokio::test]
async fn the_bot_wall_stops_plain_headless_chromium() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(1)).await.unwrap();
    stack.alpha.set_bot_wall(true);
    let url = format!(
        "{}/search?q=%EC%82%BC%EB%8B%A4%EC%88%98",
        stack.alpha.base_url()
    );
    let html = plain_headless_visit(&url).await;
    let reports = stack.alpha.wall_reports();
    let exit = reports
        .exits
        .values()
        .next()
        .expect("the wall saw the browser");
    assert_eq!(
        exit.status,
        lps_test_kit::mall::WallStatus::Blocked,
        "{reports:?}"
    );
    assert!(
        !exit.header_signals.is_empty() || !exit.client_signals.is_empty(),
        "{reports:?}"
    );
    assert!(!html.contains("삼다수 2L"), "a card got through: {html}");
    stack.shutdown().await.unwrap();
}

async fn passes_the_wall(mode: BrowserMode) {
    let stack = Stack::start(StackConfig::new(1)).await.unwrap();
    stack.alpha.set_bot_wall(true);
    stack.gamma.set_bot_wall(true);
    let harness = Harness::build(&format!("wall-{}", mode.as_str()), |mut settings| {
        settings.mode = mode;
        BrowserExecutor::new(settings)
    });
    let exec = harness.executor.clone();
    let check = async {
        for (id, profile, name) in [
            (1, alpha_profile(&stack.alpha), "제주 삼다수 2L x 12"),
            (2, gamma_profile(&stack.gamma), "제주 삼다수 2L x 12"),
        ] {
            let outcome = run(&exec, job(id, name, profile)).await;
            let reports = (stack.alpha.wall_reports(), stack.gamma.wall_reports());
            let (offers, _, _) = expect_found(outcome, &format!("{name} ({reports:?})"));
            assert!(!offers.is_empty(), "{name}");
        }
        for mall in [&stack.alpha, &stack.gamma] {
            let reports = mall.wall_reports();
            let exit = reports
                .exits
                .values()
                .next()
                .expect("the wall saw the browser");
            assert_eq!(
                exit.status,
                lps_test_kit::mall::WallStatus::Cleared,
                "{} mode: {reports:?}",
                mode.as_str()
            );
            assert!(exit.client_signals.is_empty() && exit.header_signals.is_empty());
            assert!(exit.walls_served >= 1, "{reports:?}");
        }
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_nodes_browser_passes_the_bot_wall_headless() {
    let _serial = common::serial().await;
    passes_the_wall(BrowserMode::Headless).await;
}

#[tokio::test]
async fn the_nodes_browser_passes_the_bot_wall_headful() {
    let _serial = common::serial().await;
    passes_the_wall(BrowserMode::Headful).await;
}
