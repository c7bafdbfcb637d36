//! A browser malls accept (DESIGN §5 "Browser identity"), with real Chromium: the
//! self-check finds nothing leaking in either mode, a new exit IP never presents the
//! cookies another one earned, page loads on one exit IP are paced, and human navigation
//! reaches the result page through the home page's search box.

mod common;

use std::{sync::Arc, time::Duration};

use common::{Harness, TestProxies, alpha_profile, expect_found, gamma_profile, job, run};
use lps_crawler_node::{
    BrowserExecutor,
    browser::{BrowserMode, ChromeDriver, Display},
    selfcheck::SelfCheck,
};
use lps_proto::{model::duration_to_pb, pb};
use lps_test_kit::stack::{Stack, StackConfig};

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
    let ports: Vec<u16> = stack
        .gateway
        .ports()
        .iter()
        .map(|p| p.addr.port())
        .collect();
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
    let ports: Vec<u16> = stack
        .gateway
        .ports()
        .iter()
        .map(|p| p.addr.port())
        .collect();
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
        assert_eq!(proxies.releases().len(), 0, "one IP session for both");
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
