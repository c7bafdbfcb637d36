//! The browser executor with real headless Chromium (the node's own chromedriver) against
//! the test kit's two fixture malls and its proxy gateway (`lps_test_kit::Stack`).
//!
//! Site profiles are the built-in ones (`profiles/builtin/testmall-*.toml`), read here with
//! the real mall addresses substituted. Every test ends
//! with `BrowserExecutor::shutdown` and then checks that no process mentions its own
//! profile root (the `pgrep -f` of the field lesson). Browser tests run one at a time (two
//! cores).

mod common;

use std::{sync::Arc, time::Duration};

use common::{
    Harness, TestEvents, TestProxies, alpha_profile, beta_profile, expect_found, gamma_profile,
    job, run,
};
use lps_crawler_node::{Outcome, chromium::process, proxy::SessionEndReason};
use lps_proto::model::ErrorClass;
use lps_test_kit::{
    MallStyle,
    gateway::GatewayConfig,
    stack::{Stack, StackConfig},
};

#[tokio::test]
async fn finds_the_lowest_effective_price_over_both_malls() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(1)).await.unwrap();
    let harness = Harness::direct("lowest", true);
    let exec = harness.executor.clone();
    let catalog = stack.alpha.catalog().clone();
    let products: Vec<_> = catalog
        .products()
        .iter()
        .filter(|p| p.decoy_of.is_none())
        .take(5)
        .cloned()
        .collect();
    let profiles = [
        (MallStyle::Alpha, alpha_profile(&stack.alpha)),
        (MallStyle::Beta, beta_profile(&stack.beta)),
    ];
    let check = async {
        let mut job_id = 0;
        for product in &products {
            let mut best: Option<i64> = None;
            for (style, profile) in &profiles {
                job_id += 1;
                let outcome = run(&exec, job(job_id, &product.name, profile.clone())).await;
                let (offers, rounds, metrics) = expect_found(outcome, &product.name);
                let listing = product.listing(*style).expect("listed in both malls");
                // Exactly the product's own listing: no decoy, no related card.
                assert_eq!(offers.len(), 1, "{}: {offers:?}", product.name);
                let offer = &offers[0];
                assert!(
                    offer.url.ends_with(&listing.path),
                    "{offer:?} vs {listing:?}"
                );
                assert_eq!(offer.title, listing.title);
                assert_eq!(offer.seller, listing.seller);
                assert_eq!(offer.price, i64::try_from(listing.price).unwrap());
                assert_eq!(offer.shipping_fee, i64::try_from(listing.shipping).unwrap());
                assert_eq!(rounds[0].kind, "original");
                assert!(metrics.pages_loaded >= 1);
                assert_eq!(metrics.bytes(), 0, "direct mode meters nothing");
                let effective = offer.effective_price();
                best = Some(best.map_or(effective, |b| b.min(effective)));
            }
            let truth = product.lowest().unwrap().effective_price();
            assert_eq!(
                best,
                Some(i64::try_from(truth).unwrap()),
                "{}: lowest effective price",
                product.name
            );
        }
        // One browser served all ten searches.
        assert_eq!(exec.launches(), 1);
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}

#[tokio::test]
async fn absent_products_are_not_found_and_decoys_never_match() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(1)).await.unwrap();
    let harness = Harness::direct("absent", true);
    let exec = harness.executor.clone();
    let alpha = alpha_profile(&stack.alpha);
    let beta = beta_profile(&stack.beta);
    let check = async {
        // Nothing like it: every round shows the no-results marker.
        match run(&exec, job(1, "존재하지않는상품", alpha.clone())).await {
            Outcome::NotFound { rounds, metrics } => {
                assert_eq!(rounds.len(), 1, "{rounds:?}");
                assert_eq!((rounds[0].cards_seen, rounds[0].matches), (0, 0));
                assert_eq!(metrics.pages_loaded, 1);
            }
            other => panic!("want not found, got {other:?}"),
        }
        // With a quantity the mall pads the page with related cards; none is the product,
        // in any round.
        match run(&exec, job(2, "존재하지않는상품 500ml 3개", beta.clone())).await {
            Outcome::NotFound { rounds, metrics } => {
                assert!(rounds.len() >= 2, "{rounds:?}");
                assert!(rounds[0].cards_seen > 0, "{rounds:?}");
                assert!(rounds.iter().all(|r| r.matches == 0), "{rounds:?}");
                assert_eq!(metrics.pages_loaded, u32::try_from(rounds.len()).unwrap());
            }
            other => panic!("want not found, got {other:?}"),
        }
        // A pack size neither mall sells: the cards shown (the 2L x 12 and 2L x 6 packs,
        // and the 500ml decoys) are all other quantities.
        match run(&exec, job(3, "제주 삼다수 2L x 24", beta.clone())).await {
            Outcome::NotFound { rounds, .. } => {
                assert!(
                    rounds.iter().any(|r| r.cards_seen > 0),
                    "cards were read and rejected: {rounds:?}"
                );
                assert!(rounds.iter().all(|r| r.matches == 0));
            }
            other => panic!("want not found, got {other:?}"),
        }
        // The decoys' own searches find the decoys, not the product they imitate.
        let (offers, _, _) = expect_found(
            run(&exec, job(4, "삼다수 2L x 6", alpha.clone())).await,
            "삼다수 2L x 6",
        );
        assert_eq!(offers.len(), 1, "{offers:?}");
        assert_eq!(offers[0].title, "제주 삼다수 2L x 6병");
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}

/// The answer is the lowest accepted price, so one cheap look-alike the word rules accept
/// would be it: alpha sells the cooker's gasket under the cooker's full name. The
/// price-outlier guard (DESIGN §5) leaves it out and the answer is the cooker's.
#[tokio::test]
async fn a_cheap_look_alike_on_the_page_is_not_the_lowest() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(1)).await.unwrap();
    let harness = Harness::direct("outlier", true);
    let exec = harness.executor.clone();
    let catalog = stack.alpha.catalog().clone();
    let find = |key: &str| {
        catalog
            .products()
            .iter()
            .find(|p| p.key == key)
            .cloned()
            .unwrap_or_else(|| panic!("{key} not in the catalog"))
    };
    let cooker = find("cuckoo-crp-hs0657f");
    let gasket = find("cuckoo-crp-hs0657f-gasket");
    let gasket = gasket.listing(MallStyle::Alpha).unwrap().clone();
    let truth = cooker.truth(MallStyle::Alpha).unwrap().lowest.unwrap();
    let alpha = alpha_profile(&stack.alpha);
    let check = async {
        let (offers, rounds, _) = expect_found(
            run(&exec, job(1, &cooker.name, alpha.clone())).await,
            &cooker.name,
        );
        // The cooker's three alpha listings are the offers; the gasket is read and judged
        // (its words are the cooker's) but is not one of them.
        assert_eq!(offers.len(), 3, "{offers:?}");
        assert!(
            offers.iter().all(|o| !o.url.ends_with(&gasket.path)),
            "{offers:?}"
        );
        assert_eq!(
            offers[0].effective_price(),
            i64::try_from(truth.effective_price).unwrap(),
            "{offers:?}"
        );
        assert!(offers[0].url.ends_with(&truth.listing.path), "{offers:?}");
        assert_eq!(
            (rounds[0].cards_seen, rounds[0].matches),
            (4, 3),
            "{rounds:?}"
        );
        // Searched for by its own name, the gasket is found: the judge accepts the cookers
        // too (they carry its model code), but the gasket matches better than all of them,
        // so its price is no reason to drop it.
        let (offers, _, _) = expect_found(
            run(&exec, job(2, "쿠쿠 CRP-HS0657F 고무패킹", alpha.clone())).await,
            "쿠쿠 CRP-HS0657F 고무패킹",
        );
        assert!(offers[0].url.ends_with(&gasket.path), "{offers:?}");
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}

#[tokio::test]
async fn blocking_resources_cuts_bytes_per_search() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(2)).await.unwrap();
    let query = "제주 삼다수 2L x 12";
    let mut measured = Vec::new();
    for (blocking, exit) in [(true, "exit-01"), (false, "exit-02")] {
        let port = stack.gateway.port(exit).unwrap().addr.port();
        let proxies = Arc::new(TestProxies::new(vec![port], None, 10));
        let harness = Harness::proxied("bytes", blocking, proxies.clone(), Arc::default());
        let exec = harness.executor.clone();
        let profile = alpha_profile(&stack.alpha);
        stack.alpha.reset();
        let mut metrics = None;
        harness
            .finish(async {
                let (offers, _, m) = expect_found(run(&exec, job(1, query, profile)).await, query);
                assert_eq!(offers[0].price, 12_900);
                metrics = Some(m);
            })
            .await;
        let metrics = metrics.unwrap();
        let mall = stack.alpha.stats();
        measured.push((
            blocking,
            metrics.bytes(),
            mall.bytes_served,
            mall.image_requests,
            mall.font_requests,
        ));
    }
    for (blocking, relay, mall, images, fonts) in &measured {
        eprintln!(
            "resource blocking {blocking}: relay {relay} B (both ways), mall served {mall} B, {images} images, {fonts} fonts"
        );
    }
    let (_, relay_on, mall_on, images_on, fonts_on) = measured[0];
    let (_, relay_off, mall_off, images_off, _) = measured[1];
    assert_eq!((images_on, fonts_on), (0, 0), "nothing heavy was fetched");
    assert!(images_off >= 3, "without blocking the card images load");
    assert!(
        relay_on * 10 <= relay_off * 3,
        "relay bytes: {relay_on} with blocking vs {relay_off} without"
    );
    assert!(
        mall_on * 10 <= mall_off * 3,
        "mall bytes: {mall_on} with blocking vs {mall_off} without"
    );
    stack.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_killed_browser_is_replaced() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(1)).await.unwrap();
    let harness = Harness::direct("killed", true);
    let exec = harness.executor.clone();
    let profile = alpha_profile(&stack.alpha);
    let mall = &stack.alpha;
    let check = async {
        expect_found(
            run(&exec, job(1, "신라면 120g 5개입", profile.clone())).await,
            "warm",
        );
        let dirs = exec.profile_dirs().await;
        assert_eq!(dirs.len(), 1);
        // Slow pages keep the next job inside a page load while its browser is killed.
        mall.set_slow(Duration::from_millis(1_500));
        let running = tokio::spawn({
            let exec = exec.clone();
            let job = job(2, "햇반 210g 12개", profile.clone());
            async move { run(&exec, job).await }
        });
        tokio::time::sleep(Duration::from_millis(800)).await;
        let pids = process::browser_pids(&dirs[0]);
        assert!(!pids.is_empty(), "the browser runs");
        process::kill_pids(&pids).await;
        match running.await.unwrap() {
            // Recovered within the job on a new browser…
            Outcome::Found { offers, .. } => assert_eq!(offers[0].price, 13_900),
            // …or a retryable browser failure.
            Outcome::Failed { class, .. } => {
                assert_eq!(class, ErrorClass::Browser);
                assert!(class.is_retryable());
            }
            other @ (Outcome::NotFound { .. } | Outcome::Deferred { .. }) => {
                panic!("a killed browser is neither not-found nor a wait for a port: {other:?}")
            }
        }
        mall.set_slow(Duration::ZERO);
        // The next job works, on a fresh browser.
        expect_found(
            run(&exec, job(3, "서울우유 1L 2개", profile.clone())).await,
            "after",
        );
        assert!(exec.launches() >= 2, "the browser was replaced");
        assert!(!process::browser_pids(&dirs[0]).is_empty());
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_blocked_ip_is_reported_and_rotated_and_the_job_still_done() {
    let _serial = common::serial().await;
    let mut config = StackConfig::new(3);
    config.gateway = GatewayConfig::new(3).with_credentials("lps-node", "gw-s3cr3t-pw");
    config.block_after = Some(2);
    let stack = Stack::start(config).await.unwrap();
    let ports: Vec<u16> = common::gateway_ports(&stack);
    // The ledger grants exit-01 to each of the three jobs (each released it at its end),
    // then exit-02 after the block.
    let proxies = Arc::new(TestProxies::new(
        vec![ports[0], ports[0], ports[0], ports[1]],
        Some(("lps-node", "gw-s3cr3t-pw")),
        5,
    ));
    let events = Arc::new(TestEvents::default());
    let harness = Harness::proxied("rotate", true, proxies.clone(), events.clone());
    let exec = harness.executor.clone();
    let profile = alpha_profile(&stack.alpha);
    let root = harness.root.clone();
    let check = async {
        for (id, name, price) in [
            (1, "삼다수 2L x 12", 12_900),
            (2, "코카콜라 500ml 24개", 21_900),
            (3, "신라면 120g 5개입", 4_480),
        ] {
            let (offers, _, metrics) =
                expect_found(run(&exec, job(id, name, profile.clone())).await, name);
            assert_eq!(offers[0].price, price);
            assert!(metrics.bytes_in > 0, "bytes are metered through the relay");
            assert!(metrics.cost_usd > 0.0, "and priced");
            if id == 3 {
                assert_eq!(
                    metrics.ports_used, 2,
                    "its own port, then a new one after the block"
                );
            }
            // Credentials never reach a command line.
            for pid in process::pids_mentioning(&root.display().to_string()) {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                assert!(!String::from_utf8_lossy(&cmdline).contains("gw-s3cr3t-pw"));
            }
        }
        // The third search on exit-01 was blocked, reported, and the port released.
        let blocks = events.blocks();
        assert_eq!(blocks.len(), 1, "{blocks:?}");
        assert_eq!(blocks[0].port, Some(ports[0]));
        assert_eq!(
            blocks[0].ip_request_no, 1,
            "the first search of job 3's IP session"
        );
        assert_eq!(blocks[0].job_id, Some(3));
        assert!(blocks[0].marker.contains("captcha") || blocks[0].marker.starts_with("text:"));
        // Every job released its IP session at its end; job 3's first one for the block.
        let releases = proxies.releases();
        let ends: Vec<_> = releases
            .iter()
            .map(|(port, end)| {
                (
                    *port,
                    end.reason,
                    end.stats.job_id,
                    (end.stats.requests, end.stats.ok, end.stats.blocked),
                )
            })
            .collect();
        assert_eq!(
            ends,
            [
                (ports[0], SessionEndReason::Idle, Some(1), (1, 1, 0)),
                (ports[0], SessionEndReason::Idle, Some(2), (1, 1, 0)),
                (ports[0], SessionEndReason::Block, Some(3), (1, 0, 1)),
                (ports[1], SessionEndReason::Idle, Some(3), (1, 1, 0)),
            ]
        );
        let stats = stack.alpha.stats();
        assert_eq!(stats.searches.get("exit-01"), Some(&3));
        assert_eq!(stats.searches.get("exit-02"), Some(&1));
        assert!(
            !stats.requests.contains_key("direct"),
            "nothing bypassed the proxy"
        );
    };
    harness.finish(check).await;
    // Nothing was left for shutdown to release.
    assert_eq!(proxies.releases().len(), 4);
    stack.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_profiles_ip_budget_rotates_mid_job_and_no_ip_session_outlives_its_job() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(3)).await.unwrap();
    let ports: Vec<u16> = common::gateway_ports(&stack);
    // The grant names no budget: the profile's applies (a ledger's grant carries it).
    let proxies = Arc::new(TestProxies::new(ports.clone(), None, 0));
    let harness = Harness::proxied("budget", true, proxies.clone(), Arc::default());
    let exec = harness.executor.clone();
    let mut profile = gamma_profile(&stack.gamma);
    // One result page per exit IP; the job limits' budget (3) is not the mall's.
    profile.ip_request_budget = 1;
    profile.warmup_url = format!("{}/", stack.gamma.base_url());
    // A product whose results fill two pages (gamma reads `max_pages = 2`).
    let catalog = stack.gamma.catalog().clone();
    let two_pages = catalog
        .products()
        .iter()
        .map(|p| p.name.clone())
        .find(|name| {
            lps_test_kit::mall::gamma::results(&catalog, name).len()
                > lps_test_kit::mall::gamma::PAGE_SIZE
        })
        .expect("a gamma product with two result pages");
    let check = async {
        let (_, rounds, metrics) = expect_found(
            run(&exec, job(1, &two_pages, profile.clone())).await,
            &two_pages,
        );
        assert_eq!(rounds[0].pages, 2, "{rounds:?}");
        assert_eq!(metrics.pages_loaded, 3, "warm-up + two result pages");
        // Page 1 used up exit-01's budget: page 2 went out on exit-02, and the job's end
        // released that one too.
        let releases = proxies.releases();
        let ends: Vec<_> = releases
            .iter()
            .map(|(port, end)| (*port, end.reason, end.stats.requests, end.stats.job_id))
            .collect();
        assert_eq!(
            ends,
            [
                (ports[0], SessionEndReason::Budget, 1, Some(1)),
                (ports[1], SessionEndReason::Budget, 1, Some(1)),
            ],
            "{releases:?}"
        );
        assert_eq!(metrics.ports_used, 2);
        // A second job opens its own IP session, warms it up and releases it at its end,
        // even with budget left.
        profile.ip_request_budget = 5;
        let (_, _, metrics) = expect_found(
            run(&exec, job(2, "신라면 120g 5개입", profile.clone())).await,
            "second",
        );
        assert!(metrics.pages_loaded >= 2, "warmed up again: {metrics:?}");
        let releases = proxies.releases();
        let last = releases.last().unwrap();
        assert_eq!(
            (last.0, last.1.reason, last.1.stats.job_id),
            (ports[2], SessionEndReason::Idle, Some(2)),
            "{releases:?}"
        );
        assert_eq!(releases.len(), 3);
    };
    harness.finish(check).await;
    // Nothing was left for shutdown to release.
    assert_eq!(proxies.releases().len(), 3);
    stack.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_dead_chromedriver_is_restarted() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(1)).await.unwrap();
    let harness = Harness::direct("driver", true);
    let exec = harness.executor.clone();
    let profile = beta_profile(&stack.beta);
    let check = async {
        expect_found(
            run(&exec, job(1, "페리오 치약 100g 3개", profile.clone())).await,
            "first",
        );
        let first = exec.chromedriver_pid().expect("a managed chromedriver");
        process::kill_pids(&[first]).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        // The browser's WebDriver session died with its chromedriver: the next job replaces both.
        let (offers, _, _) = expect_found(
            run(&exec, job(2, "페리오 치약 100g 3개", profile.clone())).await,
            "after the kill",
        );
        assert_eq!(offers[0].price, 5_900);
        let second = exec.chromedriver_pid().expect("a new chromedriver");
        assert_ne!(first, second);
        assert_eq!(exec.launches(), 2);
        let metrics = exec.metrics();
        assert_eq!(metrics.chromedriver_restarts.get(), 1);
        assert_eq!(metrics.chromedriver_up.get(), 1);
        assert_eq!(metrics.browser_launches.get(), 2);
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}

#[tokio::test]
async fn kill_now_leaves_no_browser_behind() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(1)).await.unwrap();
    let harness = Harness::direct("kill-now", true);
    let exec = harness.executor.clone();
    let needle = harness.root.display().to_string();
    let profile = alpha_profile(&stack.alpha);
    let check = async {
        expect_found(
            run(&exec, job(1, "스팸 클래식 200g 10개", profile)).await,
            "spam",
        );
        assert!(!process::pids_mentioning(&needle).is_empty());
        // What the binary does on a second SIGTERM, just before exiting.
        exec.kill_now();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !process::pids_mentioning(&needle).is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "browsers survived kill_now"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_failing_gateway_port_is_released_and_another_one_used() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(1)).await.unwrap();
    // A port nobody listens on, then the gateway's real one.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let good = stack.gateway.ports()[0].addr.port();
    let proxies = Arc::new(TestProxies::new(vec![dead, good], None, 5));
    let harness = Harness::proxied("gateway", true, proxies.clone(), Arc::default());
    let exec = harness.executor.clone();
    let profile = alpha_profile(&stack.alpha);
    let check = async {
        let (offers, _, metrics) = expect_found(
            run(&exec, job(1, "바나나맛우유 240ml 8개", profile)).await,
            "banana",
        );
        assert_eq!(offers[0].price, 9_600);
        assert_eq!(metrics.ports_used, 2);
        let releases = proxies.releases();
        let ends: Vec<_> = releases.iter().map(|(p, end)| (*p, end.reason)).collect();
        assert_eq!(
            ends,
            [
                (dead, SessionEndReason::ProxyError),
                (good, SessionEndReason::Idle)
            ],
            "the good port released at the job's end"
        );
        assert_eq!(stack.alpha.stats().searches.get("exit-01"), Some(&1));
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_host_the_gateway_refuses_is_a_config_error_naming_it_not_a_block() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(2)).await.unwrap();
    let ports: Vec<u16> = common::gateway_ports(&stack);
    let proxies = Arc::new(TestProxies::new(ports.clone(), None, 5));
    let events = Arc::new(TestEvents::default());
    let harness = Harness::proxied("refused", true, proxies.clone(), events.clone());
    let exec = harness.executor.clone();
    // The profile points at a host the gateway does not serve (a misconfiguration).
    let text = lps_profiles::format::builtin_text("testmall-alpha.toml").unwrap();
    let wrong = text.replace("http://127.0.0.1:18081", "http://shop.lps.invalid:18081");
    let profile = lps_profiles::format::parse("testmall-alpha.toml", &wrong)
        .unwrap()
        .wire;
    let check = async {
        match run(&exec, job(1, "삼다수 2L x 12", profile)).await {
            Outcome::Failed { class, message, .. } => {
                assert_eq!(class, ErrorClass::Config, "{message}");
                assert!(
                    message.contains("shop.lps.invalid"),
                    "names the host: {message}"
                );
                assert!(
                    message.contains("403"),
                    "says what the gateway said: {message}"
                );
            }
            other => panic!("want a config failure, got {other:?}"),
        }
        assert!(
            events.blocks().is_empty(),
            "not a bot block: {:?}",
            events.blocks()
        );
        assert!(
            proxies
                .releases()
                .iter()
                .all(|(_, end)| end.reason != SessionEndReason::Block && end.stats.blocked == 0),
            "no exit IP is blamed: {:?}",
            proxies.releases()
        );
        assert!(stack.gateway.stats().iter().any(|p| p.refused > 0));
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}

/// A ledger with no free port, which knows when one frees (too late for the job).
struct NoPorts;

#[async_trait::async_trait]
impl lps_crawler_node::proxy::ProxySource for NoPorts {
    async fn acquire(
        &self,
        _mall: &lps_proto::model::MallId,
        _job_id: i64,
    ) -> lps_crawler_node::proxy::Acquired {
        lps_crawler_node::proxy::Acquired::Unavailable {
            retry_at: Some(chrono::Utc::now() + chrono::Duration::seconds(45)),
        }
    }

    fn release(
        &self,
        _grant: &lps_crawler_node::proxy::Grant,
        _session: lps_crawler_node::proxy::SessionEnd,
    ) {
        panic!("nothing was granted");
    }
}

/// Waiting for a port is not a failed attempt: the job is handed back until the ledger's
/// next free port, without waiting past what the job can spend on it.
#[tokio::test]
async fn no_free_proxy_port_hands_the_job_back_until_one_frees_without_failing_it() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(1)).await.unwrap();
    let harness = Harness::build("noports", |settings| {
        lps_crawler_node::BrowserExecutor::new(settings).with_proxies(Arc::new(NoPorts))
    });
    let exec = harness.executor.clone();
    let mut job = job(1, "삼다수 2L x 12", alpha_profile(&stack.alpha));
    job.deadline = chrono::Utc::now() + chrono::Duration::seconds(20);
    let check = async {
        let started = std::time::Instant::now();
        match run(&exec, job).await {
            Outcome::Deferred {
                reason, not_before, ..
            } => {
                assert!(reason.contains("no proxy port free"), "{reason}");
                let at = not_before.expect("the ledger said when a port frees");
                let left = (at - chrono::Utc::now()).num_seconds();
                assert!(
                    (30..=45).contains(&left),
                    "not before the ledger's next free port: {left}s"
                );
            }
            other => panic!("want the job handed back until a port frees, got {other:?}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "it did not wait in vain"
        );
        assert!(
            stack.alpha.stats().requests.is_empty(),
            "no request left without a proxy"
        );
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}
