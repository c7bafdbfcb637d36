//! The gamma mall over real loopback HTTP: the served page (placeholders, inline JSON, the
//! next-page link), card classes and shipping texts in the JSON, the ad redirect, the JSON
//! API and its key, the challenge, restriction and layout controls, exit-IP blocking and
//! the stack's three site profiles. What only a browser shows (rendering after load, lazy
//! loading, the challenge clearing itself) is in `chromium.rs`.

mod common;

use std::time::{Duration, Instant};

use common::{enc, get, post};
use lps_test_kit::EXIT_IP_HEADER;
use lps_test_kit::catalog::{Catalog, MallStyle};
use lps_test_kit::mall::gamma::{self, BATCH, PAGE_SIZE, SKELETONS};
use lps_test_kit::mall::{GAMMA_API_KEY, GAMMA_MARKUP, MallConfig, MallHandle, MallServer, markup};
use lps_test_kit::stack::{Stack, StackConfig};
use serde_json::Value;

const KEY_HEADER: &str = "x-gamma-key";

async fn gamma_mall() -> MallHandle {
    MallServer::start(MallConfig::new(MallStyle::Gamma))
        .await
        .expect("gamma starts")
}

fn page(q: &str) -> String {
    format!("/search?q={}", enc(q))
}

fn api(q: &str, start: usize, display: usize) -> String {
    format!(
        "{}?query={}&start={start}&display={display}",
        gamma::API_PATH,
        enc(q)
    )
}

/// The inline blob of a served page.
fn next_data(html: &str) -> Value {
    let open = r#"<script id="__NEXT_DATA__" type="application/json">"#;
    let start = html.find(open).unwrap_or_else(|| panic!("no blob: {html}")) + open.len();
    let len = html[start..].find("</script>").expect("blob ends");
    serde_json::from_str(&html[start..start + len]).expect("blob is JSON")
}

fn items(json: &Value) -> &Vec<Value> {
    json.pointer("/props/pageProps/items")
        .or_else(|| json.get("items"))
        .and_then(Value::as_array)
        .expect("items")
}

fn ids(json: &Value) -> Vec<String> {
    items(json)
        .iter()
        .map(|i| i["id"].as_str().expect("id").to_owned())
        .collect()
}

fn item<'a>(json: &'a Value, id: &str) -> &'a Value {
    items(json)
        .iter()
        .find(|i| i["id"] == id)
        .unwrap_or_else(|| panic!("{id} not in {:?}", ids(json)))
}

#[tokio::test]
async fn search_page_is_placeholders_plus_inline_json() {
    let mall = gamma_mall().await;
    let reply = get(mall.addr(), &page("삼다수 2L x 12"), &[]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    let html = reply.text();
    assert_eq!(
        html.matches(r#"<li class="g-card g-skeleton"><div class="g-badges"></div><a class="g-link"><span class="g-thumb"></span><p class="g-title"></p></a><div class="g-price"></div><div class="g-ship"></div><span class="g-shop"></span></li>"#).count(),
        SKELETONS,
        "{html}"
    );
    assert!(
        !html.contains("data-gid=\""),
        "no real card before the script runs"
    );
    assert!(!html.contains("13,200"), "no price text in the served HTML");
    assert!(!html.contains(GAMMA_MARKUP.next_page.trim_start_matches("a.")));
    assert!(html.contains("/fonts/mall.woff2"));
    assert!(!html.contains(markup(MallStyle::Gamma).no_result_text));

    let blob = next_data(&html);
    let props = &blob["props"]["pageProps"];
    assert_eq!(props["query"], "삼다수 2L x 12");
    assert_eq!(
        (props["page"].as_u64(), props["pages"].as_u64()),
        (Some(1), Some(1))
    );
    let ids = ids(&blob);
    assert_eq!(props["total"], ids.len());
    assert!(ids.len() > BATCH, "more than one batch: {ids:?}");
    assert_eq!(ids[12], "g113", "the true lowest is card 13");
    let first = item(&blob, "g101");
    assert_eq!(first["link"], format!("{}/p/g101", mall.base_url()));
    assert_eq!(first["image"], "/img/g101.jpg");
    assert_eq!(first["mallName"], "감마마트");
    assert_eq!(first["delivery"], "무료배송");
    assert_eq!(item(&blob, "g103")["delivery"], "배송비 3,000원");
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn results_span_two_pages_with_a_next_link() {
    let mall = gamma_mall().await;
    let q = "신라면 120g 5개입";
    let html = get(mall.addr(), &page(q), &[]).await.text();
    let first = next_data(&html);
    assert_eq!(items(&first).len(), PAGE_SIZE);
    assert_eq!(first["props"]["pageProps"]["pages"], 2);
    let next = format!(
        r#"<a class="g-next" href="/search?q={}&amp;page=2">"#,
        enc_plus(q)
    );
    assert!(html.contains(&next), "{html}");
    assert!(!ids(&first).contains(&"g225".to_owned()));

    let html = get(mall.addr(), &format!("{}&page=2", page(q)), &[])
        .await
        .text();
    let second = next_data(&html);
    assert_eq!(second["props"]["pageProps"]["page"], 2);
    assert_eq!(ids(&second)[0], "g225", "the true lowest opens page 2");
    assert!(!html.contains("class=\"g-next\""), "no third page");
    let total = second["props"]["pageProps"]["total"]
        .as_u64()
        .expect("total");
    assert_eq!(
        usize::try_from(total).expect("fits"),
        PAGE_SIZE + items(&second).len()
    );

    let past = get(mall.addr(), &format!("{}&page=3", page(q)), &[])
        .await
        .text();
    assert!(items(&next_data(&past)).is_empty());
    assert!(past.contains(markup(MallStyle::Gamma).no_result_text));
    mall.shutdown().await.expect("shutdown");
}

/// The mall's own query encoding (spaces as `+`).
fn enc_plus(q: &str) -> String {
    enc(q).replace("%20", "+")
}

#[tokio::test]
async fn card_classes_and_shipping_texts_are_in_the_json() {
    let mall = gamma_mall().await;
    let base = mall.base_url();
    let blob = next_data(&get(mall.addr(), &page("햇반 210g 12개"), &[]).await.text());
    assert_eq!(ids(&blob)[0], "g301", "the ad comes first");
    let ad = item(&blob, "g301");
    assert_eq!(ad["ad"], true);
    assert!(
        ad["link"]
            .as_str()
            .expect("link")
            .starts_with(&format!("{base}/adcr?u=%2Fp%2Fg301&q=")),
        "{ad}"
    );
    for (id, flag) in [
        ("g302", "priceFrom"),
        ("g303", "used"),
        ("g304", "soldOut"),
        ("g305", "overseas"),
        ("g306", "catalog"),
    ] {
        assert_eq!(item(&blob, id)[flag], true, "{id}.{flag}");
        assert_eq!(item(&blob, id)["ad"], false, "{id}");
    }
    assert_eq!(item(&blob, "g306")["sellerCount"], 12);
    let normal = item(&blob, "g307");
    for flag in ["ad", "priceFrom", "used", "soldOut", "overseas", "catalog"] {
        assert_eq!(normal[flag], false, "{flag}");
    }
    assert!(normal.get("sellerCount").is_none() && normal.get("listPrice").is_none());

    let deal = next_data(
        &get(mall.addr(), &page("코카콜라 500ml 24개"), &[])
            .await
            .text(),
    );
    let g402 = item(&deal, "g402");
    assert_eq!(
        (g402["price"].as_u64(), g402["listPrice"].as_u64()),
        (Some(23500), Some(31800))
    );

    let ship = next_data(
        &get(mall.addr(), &page("진라면 순한맛 120g 5개입"), &[])
            .await
            .text(),
    );
    assert_eq!(item(&ship, "g601")["delivery"], "2만원 이상 무료배송");
    assert!(
        item(&ship, "g602").get("delivery").is_none(),
        "no shipping at all"
    );
    assert_eq!(
        item(&ship, "g605")["delivery"],
        "배송비 3,000원 (2만원 이상 무료)"
    );

    let cut = next_data(
        &get(mall.addr(), &page("스팸 클래식 200g 10개"), &[])
            .await
            .text(),
    );
    let g701 = item(&cut, "g701");
    assert_eq!(
        g701["title"],
        "CJ 스팸 클래식 200g x 10개 선물세트 (쇼핑백 포함)"
    );
    assert_eq!(g701["displayTitle"], "CJ 스팸 클래식 200g x 1…");
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn ad_clicks_redirect_to_the_listing() {
    let mall = gamma_mall().await;
    let reply = get(mall.addr(), "/adcr?u=%2Fp%2Fg301&q=x", &[]).await;
    assert_eq!(reply.status, 302);
    assert_eq!(reply.header("location"), Some("/p/g301"));
    assert_eq!(
        get(mall.addr(), "/adcr?u=%2Fgoods%2Fa101", &[])
            .await
            .status,
        404
    );
    assert_eq!(get(mall.addr(), "/adcr", &[]).await.status, 404);
    assert_eq!(mall.stats().ad_clicks, 1);
    let detail = get(mall.addr(), "/p/g301", &[]).await.text();
    assert!(detail.contains(r#"<h1 class="g-detail-title">CJ 햇반 210g x 12개 기획전</h1>"#));
    assert!(detail.contains(r#"<div class="g-detail-price">12,500원</div>"#));
    let unknown = get(mall.addr(), "/p/g602", &[]).await.text();
    assert!(unknown.contains("배송비는 판매자에게 문의하세요"));
    assert_eq!(
        get(mall.addr(), "/api/search?q=x", &[]).await.status,
        404,
        "alpha/beta's API"
    );
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn no_results_page() {
    let mall = gamma_mall().await;
    let html = get(mall.addr(), &page("존재하지않는상품 999"), &[])
        .await
        .text();
    let blob = next_data(&html);
    assert!(items(&blob).is_empty());
    assert_eq!(blob["props"]["pageProps"]["total"], 0);
    assert!(html.contains(&format!("'{}'", markup(MallStyle::Gamma).no_result_text)));
    assert_eq!(
        html.matches(r#"class="g-card g-skeleton""#).count(),
        SKELETONS,
        "placeholders all the same"
    );
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn api_needs_the_key_and_omits_ads() {
    let mall = gamma_mall().await;
    let target = api("햇반 210g 12개", 1, 100);
    for headers in [vec![], vec![(KEY_HEADER, "wrong")]] {
        let reply = get(mall.addr(), &target, &headers).await;
        assert_eq!(reply.status, 401);
        assert_eq!(reply.json()["errorCode"], "AUTH_FAILED");
    }
    assert_eq!(mall.stats().api_unauthorized, 2);
    assert!(
        mall.stats().searches.is_empty(),
        "refused calls are no searches"
    );

    let key = [(KEY_HEADER, GAMMA_API_KEY)];
    let json = get(mall.addr(), &target, &key).await.json();
    let page_ids = ids(&next_data(
        &get(mall.addr(), &page("햇반 210g 12개"), &[]).await.text(),
    ));
    let organic: Vec<String> = page_ids.into_iter().filter(|id| id != "g301").collect();
    assert_eq!(ids(&json), organic, "the page's order, without the ad");
    assert_eq!(json["total"], organic.len());
    assert_eq!(
        (json["start"].as_u64(), json["display"].as_u64()),
        (Some(1), Some(organic.len() as u64))
    );
    let g302 = item(&json, "g302");
    assert_eq!(g302["priceFrom"], true);
    assert_eq!(g302["link"], format!("{}/p/g302", mall.base_url()));
    assert_eq!(g302["mallName"], "감마푸드");

    let shin = get(mall.addr(), &api("신라면 120g 5개입", 25, 2), &key)
        .await
        .json();
    assert_eq!(ids(&shin), ["g225", "g226"], "start is 1-based");
    assert_eq!(shin["display"], 2);
    let default = get(
        mall.addr(),
        &format!("{}?query={}", gamma::API_PATH, enc("신라면 120g 5개입")),
        &key,
    )
    .await
    .json();
    assert_eq!(items(&default).len(), 10, "display defaults to 10");
    let none = get(mall.addr(), &api("존재하지않는상품", 1, 10), &key)
        .await
        .json();
    assert_eq!(none["total"], 0);

    for bad in [
        api("", 1, 10),
        api("햇반", 0, 10),
        api("햇반", 1, 101),
        format!("{}?query=x&start=abc", gamma::API_PATH),
    ] {
        let reply = get(mall.addr(), &bad, &key).await;
        assert_eq!(reply.status, 400, "{bad}");
        assert_eq!(reply.json()["errorCode"], "BAD_PARAM");
    }
    assert!(mall.stats().api_requests >= 9);
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn api_key_is_configurable_and_blocking_applies() {
    let config = MallConfig::new(MallStyle::Gamma)
        .with_api_key("other-key")
        .with_block_after(Some(1));
    let mall = MallServer::start(config).await.expect("mall");
    assert_eq!(mall.api_key(), "other-key");
    let target = api("햇반", 1, 10);
    let exit = (EXIT_IP_HEADER, "exit-01");
    let old = [(KEY_HEADER, GAMMA_API_KEY), exit];
    assert_eq!(get(mall.addr(), &target, &old).await.status, 401);
    let key = [(KEY_HEADER, "other-key"), exit];
    assert_eq!(get(mall.addr(), &target, &key).await.status, 200);
    let blocked = get(mall.addr(), &target, &key).await;
    assert_eq!(
        blocked.status, 429,
        "the second search from exit-01 is over budget"
    );
    assert_eq!(blocked.json()["errorCode"], "RATE_LIMITED");
    let html = get(mall.addr(), &page("햇반"), &[exit]).await.text();
    assert!(
        html.contains(&markup::block_marker_html(MallStyle::Gamma)),
        "{html}"
    );
    let stats = mall.stats();
    assert_eq!(stats.searches.get("exit-01"), Some(&3));
    assert_eq!(stats.blocked, 2);
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn exit_ip_blocks_reset_and_slowness_work_as_for_alpha_and_beta() {
    let mall = gamma_mall().await;
    let exit = [(EXIT_IP_HEADER, "exit-03")];
    post(mall.addr(), "/_control/block?exit=exit-03").await;
    let blocked = get(mall.addr(), &page("햇반"), &exit).await;
    assert_eq!(blocked.status, 200, "block pages are HTTP 200");
    let html = blocked.text();
    assert!(html.contains(
        r#"<div id="g-captcha" class="g-captcha">자동 접속이 감지되어 확인이 필요합니다</div>"#
    ));
    assert!(html.len() < 1024);
    assert!(
        !get(mall.addr(), &page("햇반"), &[])
            .await
            .text()
            .contains("g-captcha")
    );
    post(mall.addr(), "/_control/unblock?exit=exit-03").await;
    assert!(
        !get(mall.addr(), &page("햇반"), &exit)
            .await
            .text()
            .contains("g-captcha")
    );

    post(mall.addr(), "/_control/slow?page_ms=400").await;
    let started = Instant::now();
    get(mall.addr(), &page("햇반"), &[]).await;
    assert!(started.elapsed() >= Duration::from_millis(400));
    let started = Instant::now();
    let key = [(KEY_HEADER, GAMMA_API_KEY)];
    get(
        mall.addr(),
        &format!("{}&slow_ms=300", api("햇반", 1, 10)),
        &key,
    )
    .await;
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "per-request slow_ms"
    );

    post(mall.addr(), "/_control/restrict").await;
    post(mall.addr(), "/_control/layout?changed=true").await;
    post(mall.addr(), "/_control/challenge?pages=3").await;
    let reset = post(mall.addr(), "/_control/reset").await.json();
    assert_eq!(reset["restricted"], false);
    assert_eq!(reset["layout_changed"], false);
    assert_eq!(reset["challenge_pages"], 0);
    assert_eq!(reset["slow_page_ms"], 0);
    let html = get(mall.addr(), &page("햇반"), &[]).await.text();
    assert!(html.contains("__NEXT_DATA__"));
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn challenge_serves_an_interstitial_until_the_cookie_is_back() {
    let mall = gamma_mall().await;
    let stats = post(mall.addr(), "/_control/challenge?pages=2&after_ms=1500")
        .await
        .json();
    assert_eq!(
        (
            stats["challenge_pages"].as_u64(),
            stats["challenge_after_ms"].as_u64()
        ),
        (Some(2), Some(1500))
    );
    let reply = get(mall.addr(), &page("햇반 210g 12개"), &[]).await;
    assert_eq!(reply.status, 200);
    let html = reply.text();
    assert!(
        html.contains(r#"<div id="g-challenge" class="g-challenge">"#),
        "{html}"
    );
    assert!(html.contains(GAMMA_MARKUP.challenge_text));
    assert!(!html.contains("__NEXT_DATA__"), "no results behind it");
    assert!(html.contains("}, 1500);"));
    let token = html
        .split("g_clear=")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .expect("token")
        .to_owned();

    let cookie = format!("theme=dark; g_clear={token}");
    let cleared = get(mall.addr(), &page("햇반 210g 12개"), &[("cookie", &cookie)])
        .await
        .text();
    assert!(cleared.contains("__NEXT_DATA__"), "the cookie clears it");
    let forged = get(mall.addr(), &page("햇반"), &[("cookie", "g_clear=c1-0")])
        .await
        .text();
    assert!(forged.contains("g-challenge"), "only issued tokens clear");
    let after = get(mall.addr(), &page("햇반"), &[]).await.text();
    assert!(
        after.contains("__NEXT_DATA__"),
        "two pages were challenged, no more"
    );
    let stats = mall.stats();
    assert_eq!((stats.challenges_served, stats.challenges_cleared), (2, 1));
    assert_eq!(stats.challenge_pages, 0);

    mall.set_challenge(1, Duration::from_secs(1));
    let again = get(mall.addr(), &page("햇반"), &[("cookie", &cookie)])
        .await
        .text();
    assert!(
        again.contains("__NEXT_DATA__"),
        "a cleared browser stays cleared"
    );
    let bad = post(mall.addr(), "/_control/challenge?after_ms=61000").await;
    assert_eq!(bad.status, 400);
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn restriction_is_http_418_for_search_pages() {
    let mall = gamma_mall().await;
    let stats = post(mall.addr(), "/_control/restrict?on=true").await.json();
    assert_eq!(stats["restricted"], true);
    let reply = get(mall.addr(), &page("햇반"), &[]).await;
    assert_eq!(reply.status, 418);
    let html = reply.text();
    assert!(html.contains(r#"<div id="g-restricted" class="g-restricted"><h1>쇼핑 서비스 접속이 일시적으로 제한되었습니다</h1>"#), "{html}");
    assert!(html.len() > 200, "above the profile's min_html_bytes");
    let key = [(KEY_HEADER, GAMMA_API_KEY)];
    assert_eq!(
        get(mall.addr(), &api("햇반", 1, 10), &key).await.status,
        200,
        "the API is not restricted"
    );
    post(mall.addr(), "/_control/restrict?on=false").await;
    assert_eq!(get(mall.addr(), &page("햇반"), &[]).await.status, 200);
    assert_eq!(mall.stats().restricted_served, 1);
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn changed_layout_has_cards_but_no_blob_and_no_gamma_classes() {
    let mall = gamma_mall().await;
    let stats = post(mall.addr(), "/_control/layout?changed=true")
        .await
        .json();
    assert_eq!(stats["layout_changed"], true);
    let q = "코카콜라 500ml 24개";
    let html = get(mall.addr(), &page(q), &[]).await.text();
    assert!(!html.contains("__NEXT_DATA__"));
    assert!(!html.contains("class=\"g-"), "{html}");
    assert!(!html.contains("<script"), "server-rendered");
    assert_eq!(
        html.matches(r#"<article class="pc-item""#).count(),
        gamma::results(&Catalog::builtin(), q).len()
    );
    assert!(html.contains(r#"<span class="pc-amount"><s>31,800원</s> 23,500원</span>"#));
    assert!(html.contains(&format!(
        r#"<a class="pc-go" href="{}/p/g402">"#,
        mall.base_url()
    )));
    let none = get(mall.addr(), &page("존재하지않는상품"), &[])
        .await
        .text();
    assert!(none.contains(r#"<p class="pc-none">"#));
    assert!(
        !none.contains(markup(MallStyle::Gamma).no_result_text),
        "not gamma's marker"
    );
    let shin = get(mall.addr(), &page("신라면 120g 5개입"), &[])
        .await
        .text();
    assert_eq!(shin.matches("<article").count(), PAGE_SIZE);
    assert!(shin.contains(r#"<a class="pc-more" href="/search?q="#));
    mall.set_layout_changed(false);
    assert!(
        get(mall.addr(), &page("햇반"), &[])
            .await
            .text()
            .contains("__NEXT_DATA__")
    );
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn gamma_controls_are_refused_elsewhere() {
    let alpha = MallServer::start(MallConfig::new(MallStyle::Alpha))
        .await
        .expect("alpha");
    for control in ["challenge", "restrict", "layout"] {
        let reply = post(alpha.addr(), &format!("/_control/{control}")).await;
        assert_eq!(reply.status, 400, "{control}");
        assert!(
            reply.json()["error"]
                .as_str()
                .expect("error")
                .contains("gamma")
        );
    }
    assert_eq!(
        get(alpha.addr(), &api("삼다수", 1, 10), &[]).await.status,
        404
    );
    alpha.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn stack_serves_three_malls_and_writes_their_profiles() {
    let stack = Stack::start(StackConfig::new(1)).await.expect("stack");
    let addresses = stack.addresses();
    assert_eq!(addresses.malls.len(), 3);
    assert_eq!(
        addresses.malls.get(&MallStyle::Gamma),
        Some(&stack.gamma.base_url())
    );
    assert_eq!(stack.mall(MallStyle::Gamma).style(), MallStyle::Gamma);

    let dir = std::env::temp_dir().join(format!("lps-tk-profiles-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    stack.write_site_profiles(&dir).expect("profiles");
    let text = std::fs::read_to_string(dir.join("testmall-gamma.toml")).expect("gamma profile");
    for file in ["testmall-alpha.toml", "testmall-beta.toml"] {
        assert!(dir.join(file).exists(), "{file}");
    }
    std::fs::remove_dir_all(&dir).expect("cleanup");
    assert!(!text.contains("18083"), "{text}");
    let profile: toml::Table = toml::from_str(&text).expect("TOML");
    assert_eq!(profile["format"].as_integer(), Some(2));
    assert_eq!(profile["id"].as_str(), Some("testmall-gamma"));
    assert_eq!(
        profile["search_url_template"].as_str(),
        Some(format!("{}/search?q={{query}}", stack.gamma.base_url()).as_str())
    );
    let sources = profile["sources"].as_array().expect("sources");
    let kinds: Vec<_> = sources.iter().map(|s| s["kind"].as_str()).collect();
    assert_eq!(kinds, [Some("embedded_json"), Some("dom")]);
    assert_eq!(sources[0]["script"].as_str(), Some(GAMMA_MARKUP.next_data));
    assert_eq!(
        sources[0]["list"].as_str(),
        Some(GAMMA_MARKUP.next_data_items)
    );
    assert_eq!(
        sources[1]["cards"].as_str(),
        Some(markup(MallStyle::Gamma).card)
    );
    assert_eq!(
        profile["no_results_text"].as_str(),
        Some(markup(MallStyle::Gamma).no_result_text)
    );
    let block = profile["block"].as_table().expect("block");
    assert!(
        block["statuses"]
            .as_array()
            .expect("statuses")
            .contains(&toml::Value::Integer(418))
    );
    let challenge = &block["challenges"][0];
    assert_eq!(
        challenge["text"].as_str(),
        Some(GAMMA_MARKUP.challenge_text)
    );
    assert_eq!(challenge["clears_within"].as_str(), Some("8s"));
    assert_eq!(
        profile["more"]["next_page"]["max_pages"].as_integer(),
        Some(2)
    );

    // Gamma is reached through the gateway like the others.
    let port = stack.gateway.port("exit-01").expect("port").addr;
    let reply = get(
        port,
        &format!("{}{}", stack.gamma.base_url(), page("햇반")),
        &[],
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(stack.gamma.stats().searches.get("exit-01"), Some(&1));
    stack.shutdown().await.expect("shutdown");
}

#[test]
fn catalog_truth_matches_what_gamma_serves() {
    let catalog = Catalog::builtin();
    let truth = catalog
        .truth(MallStyle::Gamma, "jin-ramen-mild-120g-5")
        .expect("truth");
    assert_eq!(truth.lowest.map(|l| l.listing.id.as_str()), Some("g603"));
    assert_eq!(
        truth.possibly_lower.map(|l| l.listing.id.as_str()),
        Some("g602")
    );
    let list = gamma::results(&catalog, "진라면 순한맛 120g 5개입");
    assert!(list.iter().any(|l| l.id == "g603") && list.iter().any(|l| l.id == "g602"));
}
