//! Reading real result pages (site-profile format 2) with real headless Chromium against
//! the test kit's malls: every card source, the traps of the "gamma" mall (placeholders,
//! lazy loading, a second page, ads and option listings, time deals, conditional and
//! missing shipping, shortened titles), self-clearing challenges, restriction pages and a
//! changed layout. Browser tests run one at a time (two cores).

mod common;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use common::{
    Harness, TestEvents, TestProxies, beta_profile, expect_found, gamma_profile, job, profile_at,
    run,
};
use lps_crawler_node::{Outcome, proxy::SessionEndReason};
use lps_proto::{
    model::{CardClass, ErrorClass, Offer, RoundReport, ShippingStatus},
    pb,
};
use lps_test_kit::{
    MallStyle,
    catalog::{Listing, ListingKind, Product},
    stack::{Stack, StackConfig, StackHandle},
};

/// Beta's cards come from its page's own `fetch('/api/search')`: a profile that reads the
/// captured response finds the same offers as the DOM profile, named by its source.
#[tokio::test]
async fn captured_fetch_responses_are_a_card_source() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(1)).await.unwrap();
    let harness = Harness::direct("captured", true);
    let exec = harness.executor.clone();
    let dom = beta_profile(&stack.beta);
    let text = lps_profiles::format::builtin_text("testmall-beta.toml")
        .unwrap()
        .replace(
            "[[sources]]\nkind = \"dom\"",
            "[[sources]]\nkind = \"captured_json\"\nurl_pattern = \"/api/search\\\\?\"\nlist = \"$.items[*]\"\n[sources.fields]\ntitle = \"$.title\"\nprice = \"$.price\"\nshipping = \"$.shipping\"\nlink = \"$.url\"\nseller = \"$.seller\"\n\n[[sources]]\nkind = \"dom\"",
        );
    let captured = profile_at(&text, "beta-captured.toml", &stack.beta);
    let product = stack
        .beta
        .catalog()
        .products()
        .iter()
        .find(|p| {
            p.decoy_of.is_none() && p.listing(MallStyle::Beta).is_some_and(|l| l.shipping > 0)
        })
        .cloned()
        .expect("a beta listing with a shipping fee");
    let listing = product.listing(MallStyle::Beta).unwrap().clone();
    let check = async {
        let (dom_offers, dom_rounds, _) = expect_found(
            run(&exec, job(1, &product.name, dom.clone())).await,
            &product.name,
        );
        let (offers, rounds, _) = expect_found(
            run(&exec, job(2, &product.name, captured.clone())).await,
            &product.name,
        );
        assert_eq!(dom_rounds[0].source, "dom");
        assert_eq!(rounds[0].source, "captured_json", "{rounds:?}");
        let best = &offers[0];
        assert_eq!(best.title, listing.title);
        assert_eq!(best.price, i64::try_from(listing.price).unwrap());
        // A JSON number is a stated fee.
        assert_eq!(best.shipping, ShippingStatus::Paid);
        assert_eq!(best.shipping_fee, i64::try_from(listing.shipping).unwrap());
        assert!(best.url.ends_with(&listing.path), "{best:?}");
        assert_eq!(
            (best.price, best.shipping_fee, &best.url),
            (
                dom_offers[0].price,
                dom_offers[0].shipping_fee,
                &dom_offers[0].url
            )
        );
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}

/// The gamma profile with its sources cut to the DOM one: every card read from the
/// rendered page (placeholders, lazy loading, badges, struck prices, cut titles).
fn gamma_dom_text() -> String {
    let text = lps_profiles::format::builtin_text("testmall-gamma.toml").unwrap();
    let start = text.find("[[sources]]\nkind = \"embedded_json\"").unwrap();
    let end = start + text[start + 1..].find("[[sources]]").unwrap() + 1;
    format!("{}{}", &text[..start], &text[end..])
}

fn gamma_profiles(stack: &StackHandle) -> [(&'static str, pb::SiteProfile); 2] {
    [
        ("embedded_json", gamma_profile(&stack.gamma)),
        (
            "dom",
            profile_at(&gamma_dom_text(), "gamma-dom.toml", &stack.gamma),
        ),
    ]
}

/// The catalog listing an offer is (by its URL), for failure messages.
fn listing_of<'a>(product: &'a Product, offer: &Offer) -> Option<&'a Listing> {
    product
        .listings_in(MallStyle::Gamma)
        .find(|l| offer.url.ends_with(&l.path))
}

fn describe(product: &Product, offer: &Offer) -> String {
    match listing_of(product, offer) {
        Some(l) => format!(
            "{} ({:?}, {} + {:?}: {:?})",
            l.id, l.kind, l.price, offer.shipping, l.title
        ),
        None => format!("{offer:?}"),
    }
}

/// Every gamma product's reported lowest is the catalog's truth, read from the inline JSON
/// and, separately, from the rendered DOM; each trap has its own assertion.
#[tokio::test]
async fn gamma_answers_are_the_catalogs_truth_from_json_and_from_the_dom() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(1)).await.unwrap();
    let harness = Harness::direct("gamma", true);
    let exec = harness.executor.clone();
    let catalog = stack.gamma.catalog().clone();
    let products: Vec<Product> = catalog
        .products()
        .iter()
        .filter(|p| {
            p.truth(MallStyle::Gamma)
                .is_some_and(|t| t.lowest.is_some())
        })
        .cloned()
        .collect();
    assert!(
        products.len() >= 7,
        "gamma sells {} products",
        products.len()
    );
    let check = async {
        let mut id = 0;
        for (source, profile) in gamma_profiles(&stack) {
            for product in &products {
                id += 1;
                let what = format!("{} ({source})", product.name);
                let truth = product.truth(MallStyle::Gamma).unwrap();
                let want = truth.lowest.unwrap();
                let outcome = run(&exec, job(id, &product.name, profile.clone())).await;
                let (offers, rounds, _) = expect_found(outcome, &what);
                assert_eq!(rounds[0].source, source, "{what}: {rounds:?}");
                let best = &offers[0];
                assert!(
                    best.effective_price_known(),
                    "{what}: an offer with unknown shipping came first: {}",
                    describe(product, best)
                );
                assert!(
                    best.url.ends_with(&want.listing.path)
                        && best.effective_price() == i64::try_from(want.effective_price).unwrap(),
                    "{what}: reported {} for {}, the lowest is {} at {}",
                    describe(product, best),
                    best.effective_price(),
                    want.listing.id,
                    want.effective_price
                );
                assert_eq!(best.title, want.listing.title, "{what}: the full title");
                // No excluded kind is ever an offer; flagged kinds carry their flag.
                for offer in &offers {
                    let Some(l) = listing_of(product, offer) else {
                        continue;
                    };
                    match l.kind {
                        ListingKind::Ad
                        | ListingKind::OptionListing
                        | ListingKind::Used
                        | ListingKind::SoldOut => {
                            panic!(
                                "{what}: an excluded card is an offer: {}",
                                describe(product, offer)
                            )
                        }
                        ListingKind::Overseas => {
                            assert_eq!(offer.flags, [CardClass::Overseas], "{what}")
                        }
                        ListingKind::Catalog => {
                            assert_eq!(offer.flags, [CardClass::Catalog], "{what}")
                        }
                        ListingKind::Normal => assert!(offer.flags.is_empty(), "{what}: {offer:?}"),
                    }
                    if l.shipping_fee().is_none() {
                        assert_eq!(
                            offer.shipping,
                            ShippingStatus::Unknown,
                            "{what}: {} has no known shipping",
                            l.id
                        );
                    }
                }
                if let Some(lower) = truth.possibly_lower {
                    // Reported beside the answer, never as it.
                    let found = offers
                        .iter()
                        .find(|o| o.url.ends_with(&lower.listing.path))
                        .unwrap_or_else(|| {
                            panic!("{what}: {} is not among the offers", lower.listing.id)
                        });
                    assert_eq!(found.shipping, ShippingStatus::Unknown, "{what}");
                    assert!(found.price < best.effective_price(), "{what}");
                }
                let kinds: Vec<ListingKind> = product
                    .listings_in(MallStyle::Gamma)
                    .map(|l| l.kind)
                    .collect();
                if kinds.contains(&ListingKind::Ad) {
                    let excluded = excluded(&rounds);
                    for class in ["ad", "option_listing", "used", "sold_out"] {
                        assert!(
                            excluded.get(class).is_some_and(|&n| n > 0),
                            "{what}: {class} not excluded: {excluded:?}"
                        );
                    }
                }
                if let Some(list_price) = want.listing.list_price {
                    assert_eq!(
                        best.list_price,
                        i64::try_from(list_price).unwrap(),
                        "{what}: the struck list price is kept beside the sale price"
                    );
                }
                if want.listing.free_over.is_some() && want.listing.shipping_fee() == Some(0) {
                    assert_eq!(best.shipping, ShippingStatus::FreeByThreshold, "{what}");
                }
                let page_of_lowest = lps_test_kit::mall::gamma::results(&catalog, &product.name)
                    .iter()
                    .position(|l| l.id == want.listing.id)
                    .map(|i| i / lps_test_kit::mall::gamma::PAGE_SIZE + 1);
                if page_of_lowest == Some(2) {
                    assert_eq!(rounds[0].pages, 2, "{what}: the lowest is on page 2");
                }
            }
        }
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}

/// A DOM whose titles are cut and which reads no shipping, joined per card with the page's
/// inline JSON by product id: the answer is the JSON's full title and the stated shipping,
/// where the DOM alone gives the cut title and an unknown shipping.
#[tokio::test]
async fn a_dom_source_joined_with_the_json_per_card() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(1)).await.unwrap();
    let harness = Harness::direct("gamma-join", true);
    let exec = harness.executor.clone();
    let text = lps_profiles::format::builtin_text("testmall-gamma.toml").unwrap();
    let json_start = text.find("[[sources]]\nkind = \"embedded_json\"").unwrap();
    let dom_start = json_start + text[json_start + 1..].find("[[sources]]").unwrap() + 1;
    let classes = text.find("[classes.ad]").unwrap();
    let json_source = text[json_start..dom_start].replace(
        "kind = \"embedded_json\"",
        "kind = \"embedded_json\"\nname = \"next_data\"",
    ) + "key = \"$.id\"\n\n";
    // The card's text only (cut titles), no shipping rule, keyed by data-gid.
    let dom_source = "[[sources]]\nkind = \"dom\"\ncards = \"li.g-card\"\njoin = { source = \"next_data\", take = [\"title\", \"shipping\"] }\n[sources.fields]\ntitle = \"p.g-title\"\nprice = { css = \"div.g-price\", exclude = \"del\" }\nlink = { css = \"a.g-link\", attr = \"href\" }\nseller = \"span.g-shop\"\nkey = { css = \"\", attr = \"data-gid\" }\n\n";
    let joined = format!(
        "{}{dom_source}{json_source}{}",
        &text[..json_start],
        &text[classes..]
    );
    let joined = profile_at(&joined, "gamma-joined.toml", &stack.gamma);
    assert_eq!(
        lps_crawler_node::chromium::page::source_kind(&joined.sources[0]),
        "dom"
    );
    let catalog = stack.gamma.catalog().clone();
    let (product, want) = catalog
        .products()
        .iter()
        .find_map(|p| {
            let lowest = p.truth(MallStyle::Gamma)?.lowest?;
            (lowest.listing.title_cut.is_some() && lowest.listing.shipping_fee().is_some())
                .then(|| (p.clone(), lowest.listing.clone()))
        })
        .expect("a gamma product whose lowest listing shows a cut title and a stated shipping");
    let check = async {
        let (offers, rounds, _) = expect_found(
            run(&exec, job(1, &product.name, joined.clone())).await,
            &product.name,
        );
        assert_eq!(rounds[0].source, "dom", "{rounds:?}");
        let best = &offers[0];
        assert!(
            best.url.ends_with(&want.path),
            "{}",
            describe(&product, best)
        );
        assert_eq!(best.title, want.title, "the full title, from the JSON");
        assert!(
            best.shipping.is_known(),
            "the shipping, from the JSON: {best:?}"
        );
        assert!(
            offers.iter().all(|o| !o.title.ends_with('…')),
            "every joined card has its full title: {offers:?}"
        );
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}

/// A "more" button instead of lazy loading: clicked until the cards are all there.
#[tokio::test]
async fn a_more_button_is_clicked_until_every_card_shows() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(1)).await.unwrap();
    let harness = Harness::direct("gamma-more", true);
    let exec = harness.executor.clone();
    let text = gamma_dom_text()
        .replace("/search?q={query}\"", "/search?q={query}&more=button\"")
        .replace(
            "scroll = { until_cards = 0, max_scrolls = 6, settle = \"1500ms\" }",
            "more_button = \"button.g-more\"\nmax_clicks = 3",
        );
    assert!(text.contains("more_button"), "{text}");
    let profile = profile_at(&text, "gamma-more.toml", &stack.gamma);
    let catalog = stack.gamma.catalog().clone();
    let product = catalog.product("samdasoo-2l-12").unwrap();
    let want = product.truth(MallStyle::Gamma).unwrap().lowest.unwrap();
    let check = async {
        let (offers, rounds, _) = expect_found(
            run(&exec, job(1, &product.name, profile.clone())).await,
            &product.name,
        );
        // The lowest is card 13: behind the button.
        assert!(
            offers[0].url.ends_with(&want.listing.path),
            "{}, the lowest is {}",
            describe(product, &offers[0]),
            want.listing.id
        );
        assert!(rounds[0].cards_seen > 10, "{rounds:?}");
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}

/// A page that fails half-way is no short answer. Scrolled, the page's request for its
/// next batch gets 429 and the error box shows; or page 2 answers 503 with the error box.
/// Either way the round is a suspect block: the IP is released as blocked, the round starts
/// over on another one, and the answer is the lowest over every card — never page 1's or
/// the first batch's cheapest.
#[tokio::test]
async fn a_round_that_fails_after_its_first_cards_is_a_suspect_block() {
    use lps_test_kit::mall::gamma::{GAMMA_ERROR_TEXT, PAGE_SIZE, results};
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(3)).await.unwrap();
    let (harness, proxies, events) = proxied(&stack, "gamma-half-way");
    let exec = harness.executor.clone();
    let catalog = stack.gamma.catalog().clone();
    // The error box as a block marker, as a profile author writes it for a mall.
    let with_box = profile_at(
        &gamma_dom_text().replace(
            "texts = [\"자동 접속이",
            &format!(
                "texts = [\"{}\", \"자동 접속이",
                GAMMA_ERROR_TEXT.split('.').next().unwrap()
            ),
        ),
        "gamma-error-box.toml",
        &stack.gamma,
    );
    assert!(
        with_box.block.as_ref().is_some_and(|b| b
            .texts
            .iter()
            .any(|t| GAMMA_ERROR_TEXT.starts_with(t.as_str()))),
        "{with_box:?}"
    );
    let dom = profile_at(&gamma_dom_text(), "gamma-dom.toml", &stack.gamma);
    let behind_scroll = catalog.product("samdasoo-2l-12").unwrap();
    let on_page_2 = catalog
        .products()
        .iter()
        .find(|p| {
            p.truth(MallStyle::Gamma)
                .and_then(|t| t.lowest)
                .and_then(|want| {
                    results(&catalog, &p.name)
                        .iter()
                        .position(|l| l.id == want.listing.id)
                })
                .is_some_and(|i| i / PAGE_SIZE == 1)
        })
        .expect("a gamma product whose lowest is on page 2")
        .clone();
    let check = async {
        let cases = [
            (1, behind_scroll, &with_box, "text:"),
            (2, behind_scroll, &dom, "xhr_status:429"),
            (3, &on_page_2, &dom, "page_2:network"),
        ];
        for (id, product, profile, marker) in cases {
            let want = product.truth(MallStyle::Gamma).unwrap().lowest.unwrap();
            let served = stack.gamma.stats().failures_served;
            let blocks = events.blocks().len();
            if id == 3 {
                // Not a block status of the profile: a failed later page is suspect anyway.
                stack.gamma.set_page_failure(2, 503, 1);
            } else {
                stack.gamma.set_scroll_failures(1);
            }
            let (offers, rounds, _) = expect_found(
                run(&exec, job(id, &product.name, (*profile).clone())).await,
                &product.name,
            );
            assert_eq!(
                stack.gamma.stats().failures_served,
                served + 1,
                "case {id}: the failure was served"
            );
            let new_blocks = &events.blocks()[blocks..];
            assert!(
                new_blocks.iter().any(|b| b.marker.starts_with(marker)),
                "case {id}: want a block {marker}…, got {new_blocks:?}"
            );
            assert!(
                offers[0].url.ends_with(&want.listing.path),
                "case {id}: {}, the lowest is {}",
                describe(product, &offers[0]),
                want.listing.id
            );
            if id == 3 {
                assert_eq!(rounds[0].pages, 2, "{rounds:?}");
            } else {
                assert!(rounds[0].cards_seen > 10, "{rounds:?}");
            }
        }
        let burned = proxies
            .releases()
            .iter()
            .filter(|(_, end)| end.reason == SessionEndReason::Block)
            .count();
        assert!(burned >= 3, "{:?}", proxies.releases());
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}

/// A challenge that clears by itself is waited out (no block, no port burned); Naver-style
/// 418 restriction pages are blocks; a redesigned page is a layout change, at once; a page
/// of placeholders only is unreadable, never "not found".
#[tokio::test]
async fn gamma_challenges_restrictions_placeholders_and_layout_changes() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(3)).await.unwrap();
    let (harness, proxies, events) = proxied(&stack, "gamma-pages");
    let exec = harness.executor.clone();
    let profile = gamma_profile(&stack.gamma);
    let name = "햇반 210g 12개";
    let check = async {
        stack.gamma.set_challenge(1, Duration::from_secs(3));
        let (_, rounds, _) = expect_found(run(&exec, job(1, name, profile.clone())).await, name);
        assert_eq!(rounds.len(), 1, "{rounds:?}");
        assert!(
            stack.gamma.stats().challenges_cleared >= 1,
            "{:?}",
            stack.gamma.stats()
        );
        assert!(
            events.blocks().is_empty(),
            "a cleared challenge is no block: {:?}",
            events.blocks()
        );
        assert!(
            proxies
                .releases()
                .iter()
                .all(|(_, end)| end.reason != SessionEndReason::Block),
            "{:?}",
            proxies.releases()
        );

        // 418 alone (a profile that knows neither the page's text nor its element).
        stack.gamma.set_restricted(true);
        let by_status = profile_at(
            &lps_profiles::format::builtin_text("testmall-gamma.toml")
                .unwrap()
                .replace(", \"쇼핑 서비스 접속이 일시적으로 제한되었습니다\"", "")
                .replace(", \"#g-restricted\"", ""),
            "gamma-418.toml",
            &stack.gamma,
        );
        let outcome = run(&exec, job(2, name, by_status)).await;
        assert_eq!(
            failed_class(&outcome),
            Some(ErrorClass::PageBlocked),
            "{outcome:?}"
        );
        assert!(
            events.blocks().iter().any(|b| b.marker == "status:418"),
            "{:?}",
            events.blocks()
        );
        stack.gamma.set_restricted(false);

        // Placeholders only (the renderer takes longer than this profile waits).
        let impatient = profile_at(
            &gamma_dom_text().replace("wait_timeout = \"10s\"", "wait_timeout = \"400ms\""),
            "gamma-impatient.toml",
            &stack.gamma,
        );
        let outcome = run(&exec, job(4, name, impatient)).await;
        assert_eq!(
            failed_class(&outcome),
            Some(ErrorClass::Parse),
            "{outcome:?}"
        );
    };
    harness.finish(check).await;

    // Straight to the mall (no gateway in between to fail): one page, one verdict.
    let events: Arc<TestEvents> = Arc::default();
    let sink = events.clone();
    let harness = Harness::build("gamma-layout", |settings| {
        lps_crawler_node::BrowserExecutor::new(settings).with_events(sink)
    });
    let exec = harness.executor.clone();
    let check = async {
        // The redesign: no source finds a card; the job fails `layout` on its first page.
        stack.gamma.set_layout_changed(true);
        let before = events.blocks().len();
        let outcome = run(&exec, job(5, name, profile.clone())).await;
        match &outcome {
            Outcome::Failed {
                class,
                metrics,
                evidence,
                ..
            } => {
                assert_eq!(*class, ErrorClass::Layout, "{outcome:?}");
                assert_eq!(metrics.pages_loaded, 1, "{outcome:?}");
                // What the page looked like is kept for the operator, within its caps.
                let evidence = evidence.as_ref().expect("the layout page is kept");
                assert_eq!(evidence.marker, "layout");
                assert!(evidence.url.contains("/search"), "{}", evidence.url);
                assert!(evidence.html.contains("<html"), "{}", evidence.html);
                assert!(evidence.html.len() <= 32 * 1024);
                assert!(
                    evidence.screenshot_jpeg.starts_with(&[0xFF, 0xD8]),
                    "a JPEG screenshot"
                );
            }
            other => panic!("want a layout failure, got {other:?}"),
        }
        assert_eq!(events.blocks().len(), before, "a layout change is no block");
        stack.gamma.set_layout_changed(false);

        // A small block page that names no marker the profile knows is a block as soon as
        // it has loaded, not after `wait_timeout` (60 s here; the job has 20 s).
        stack.gamma.block_exit("direct");
        let unmarked = profile_at(
            &lps_profiles::format::builtin_text("testmall-gamma.toml")
                .unwrap()
                .replace("\"자동 접속이 감지되어 확인이 필요합니다\", ", "")
                .replace("\"#g-captcha\", ", "")
                .replace("min_html_bytes = 200", "min_html_bytes = 2000")
                .replace("wait_timeout = \"10s\"", "wait_timeout = \"60s\""),
            "gamma-unmarked.toml",
            &stack.gamma,
        );
        let mut quick = job(6, name, unmarked);
        quick.deadline = chrono::Utc::now() + chrono::Duration::seconds(20);
        let outcome = run(&exec, quick).await;
        assert_eq!(
            failed_class(&outcome),
            Some(ErrorClass::Blocked),
            "{outcome:?}"
        );
        assert!(
            events.blocks().iter().any(|b| b.marker == "tiny_html"),
            "{:?}",
            events.blocks()
        );
        stack.gamma.unblock_exit("direct");
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}

/// A mall's JSON API is a card source without a browser: the node never starts one, and
/// the requests go through the IP session's port like a page's (metered, released).
#[tokio::test]
async fn an_http_api_source_needs_no_browser() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(2)).await.unwrap();
    let (harness, _proxies, _events) = proxied(&stack, "gamma-api");
    let exec = harness.executor.clone();
    let api = |key: &str| {
        format!(
            r#"format = 2
id = "testmall-gamma"
display_name = "감마마켓 API"
search_url_template = "http://127.0.0.1:18083/search?q={{query}}"
[[sources]]
kind = "http_api"
name = "gamma-openapi"
url = "http://127.0.0.1:18083/openapi/v1/search.json?query={{query}}&start={{start}}&display=24"
headers = {{ "X-Gamma-Key" = "{key}" }}
list = "$.items[*]"
[sources.fields]
title = "$.title"
price = "$.price"
list_price = "$.listPrice"
shipping = "$.delivery"
link = "$.link"
seller = "$.mallName"
[classes.option_listing]
json = [{{ path = "$.priceFrom" }}]
[classes.overseas]
json = [{{ path = "$.overseas" }}]
[classes.used]
json = [{{ path = "$.used" }}]
[classes.sold_out]
json = [{{ path = "$.soldOut" }}]
[classes.catalog]
json = [{{ path = "$.catalog" }}]
[more]
next_page = {{ url_template = "http://127.0.0.1:18083/openapi/v1/search.json?query={{query}}&start={{start}}&display=24", max_pages = 2 }}
"#
        )
    };
    let good = profile_at(&api(stack.gamma.api_key()), "gamma-api.toml", &stack.gamma);
    let unset = profile_at(
        &api("${env:LPS_TEST_UNSET_GAMMA_KEY}"),
        "gamma-api-unset.toml",
        &stack.gamma,
    );
    let wrong = profile_at(&api("not-the-key"), "gamma-api-wrong.toml", &stack.gamma);
    let catalog = stack.gamma.catalog().clone();
    let check = async {
        for (id, key) in [(1, "shin-ramyun-120g-5"), (2, "hetbahn-210g-12")] {
            let Some(product) = catalog.product(key) else {
                continue;
            };
            let want = product.truth(MallStyle::Gamma).unwrap().lowest.unwrap();
            let (offers, rounds, metrics) = expect_found(
                run(&exec, job(id, &product.name, good.clone())).await,
                &product.name,
            );
            assert_eq!(rounds[0].source, "gamma-openapi");
            assert!(
                metrics.bytes_in > 0 && metrics.ports_used >= 1,
                "{metrics:?}"
            );
            assert!(
                offers[0].url.ends_with(&want.listing.path),
                "{}: {:?}",
                product.name,
                offers[0]
            );
        }
        assert_eq!(exec.launches(), 0, "no browser for an API source");
        let requests = stack.gamma.stats().requests;
        assert!(requests.values().sum::<u64>() >= 2, "{requests:?}");
        assert!(
            !requests.contains_key("direct"),
            "every request went through a gateway port: {requests:?}"
        );
        let outcome = run(&exec, job(3, "햇반 210g 12개", unset)).await;
        match &outcome {
            Outcome::Failed { class, message, .. } => {
                assert_eq!(*class, ErrorClass::Permanent);
                assert!(message.contains("LPS_TEST_UNSET_GAMMA_KEY"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        let outcome = run(&exec, job(4, "햇반 210g 12개", wrong)).await;
        assert_eq!(
            failed_class(&outcome),
            Some(ErrorClass::Permanent),
            "{outcome:?}"
        );
    };
    harness.finish(check).await;
    stack.shutdown().await.unwrap();
}

/// `crawler-node probe` on gamma lists every card of every source with its fields, classes
/// and verdict.
#[tokio::test]
async fn the_probe_lists_every_card_with_its_class_and_fields() {
    let _serial = common::serial().await;
    let stack = Stack::start(StackConfig::new(1)).await.unwrap();
    let dir = std::env::temp_dir().join(format!("lps-probe-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    stack.write_site_profiles(&dir).unwrap();
    let name = "햇반 210g 12개";
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_crawler-node"))
        .args(["probe", "--profile"])
        .arg(dir.join("testmall-gamma.toml"))
        .args(["--query", name])
        .output()
        .await
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        out.contains("source #0 \"embedded_json\" (embedded_json) [chosen]"),
        "{out}"
    );
    let product = stack
        .gamma
        .catalog()
        .products()
        .iter()
        .find(|p| p.name == name)
        .cloned()
        .unwrap();
    for listing in product.listings_in(MallStyle::Gamma) {
        assert!(
            out.contains(&listing.title),
            "{} missing:\n{out}",
            listing.id
        );
    }
    for line in [
        "-> excluded",
        "classes [ad] -> excluded",
        "classes [option_listing] -> excluded",
        "flagged overseas",
        "flagged catalog",
        "judge: same product",
    ] {
        assert!(out.contains(line), "{line:?} missing:\n{out}");
    }
    stack.shutdown().await.unwrap();
}

/// The test kit's gateway, one port per job here: block events and releases are visible.
fn proxied(stack: &StackHandle, name: &str) -> (Harness, Arc<TestProxies>, Arc<TestEvents>) {
    let ports = common::gateway_ports(stack);
    let proxies = Arc::new(TestProxies::new(ports, None, 3));
    let events = Arc::new(TestEvents::default());
    let harness = Harness::proxied(name, true, proxies.clone(), events.clone());
    (harness, proxies, events)
}

fn excluded(rounds: &[RoundReport]) -> BTreeMap<String, u32> {
    let mut all = BTreeMap::new();
    for r in rounds {
        for (k, v) in &r.excluded {
            *all.entry(k.clone()).or_insert(0) += v;
        }
    }
    all
}

fn failed_class(outcome: &Outcome) -> Option<ErrorClass> {
    match outcome {
        Outcome::Failed { class, .. } => Some(*class),
        _ => None,
    }
}
