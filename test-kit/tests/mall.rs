//! The fixture mall over real loopback HTTP: search JSON and pages of both styles,
//! no-results, per-exit-IP blocking, forced blocks, slowness, assets, detail pages and
//! the control endpoints.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{enc, get, post};
use lps_test_kit::catalog::{Catalog, MallStyle};
use lps_test_kit::mall::{
    FONT_BYTES, IMAGE_BYTES, MallConfig, MallHandle, MallServer, MallStats, markup,
};
use lps_test_kit::{DIRECT_EXIT, EXIT_IP_HEADER};

async fn mall(style: MallStyle) -> MallHandle {
    MallServer::start(MallConfig::new(style))
        .await
        .expect("mall starts")
}

fn api(q: &str) -> String {
    format!("/api/search?q={}", enc(q))
}

fn page(q: &str) -> String {
    format!("/search?q={}", enc(q))
}

fn item_ids(json: &serde_json::Value) -> Vec<String> {
    json["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["id"].as_str().expect("id").to_owned())
        .collect()
}

#[tokio::test]
async fn alpha_api_returns_full_matches_then_related() {
    let mall = mall(MallStyle::Alpha).await;
    let reply = get(mall.addr(), &api("삼다수 2L x 12"), &[]).await;
    assert_eq!(reply.status, 200);
    let json = reply.json();
    assert_eq!(json["blocked"], false);
    let ids = item_ids(&json);
    assert_eq!(ids.first().map(String::as_str), Some("a101"), "{ids:?}");
    assert!(
        ids.contains(&"a151".to_owned()),
        "decoy shown as related: {ids:?}"
    );
    assert!(
        ids.iter().all(|id| id.starts_with('a')),
        "only alpha listings: {ids:?}"
    );
    let first = &json["items"][0];
    assert_eq!(first["price"], 12900);
    assert_eq!(first["shipping"], 0);
    assert_eq!(first["seller"], "알파마트");
    assert_eq!(first["url"], "/goods/a101");
    assert_eq!(first["image"], "/img/a101.jpg");
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn beta_api_serves_beta_listings() {
    let mall = mall(MallStyle::Beta).await;
    let json = get(mall.addr(), &api("코카콜라 500ml 24개"), &[])
        .await
        .json();
    let ids = item_ids(&json);
    assert_eq!(ids.first().map(String::as_str), Some("b202"), "{ids:?}");
    assert!(
        ids.contains(&"b253".to_owned()),
        "250ml decoy related: {ids:?}"
    );
    assert_eq!(json["items"][0]["price"], 22800);
    assert_eq!(json["items"][0]["shipping"], 0);
    assert_eq!(json["total"], ids.len());
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn search_page_is_a_shell_without_cards() {
    for style in MallStyle::SHELL {
        let mall = mall(style).await;
        let m = markup(style);
        let reply = get(mall.addr(), &page("삼다수 2L x 12"), &[]).await;
        assert_eq!(reply.status, 200);
        assert!(
            reply
                .header("content-type")
                .unwrap_or_default()
                .starts_with("text/html")
        );
        let html = reply.text();
        assert!(
            html.contains("fetch('/api/search' + location.search"),
            "{style}"
        );
        assert!(html.contains("/fonts/mall.woff2"));
        assert!(html.contains(m.mall_name));
        // Plain HTTP sees no rendered card and no price.
        let card_class = m.card.split('.').nth(1).expect("card class");
        assert!(
            !html.contains(&format!("class=\"{card_class}\"")),
            "{style}: {html}"
        );
        assert!(!html.contains("12,900"), "{style}");
        assert!(!html.contains("11,500"), "{style}");
        mall.shutdown().await.expect("shutdown");
    }
}

#[tokio::test]
async fn no_results_is_an_empty_api_answer() {
    for style in MallStyle::SHELL {
        let mall = mall(style).await;
        let json = get(mall.addr(), &api("존재하지않는상품 999"), &[])
            .await
            .json();
        assert_eq!(json["total"], 0, "{style}");
        assert!(item_ids(&json).is_empty());
        assert_eq!(json["blocked"], false);
        let html = get(mall.addr(), &page("존재하지않는상품 999"), &[])
            .await
            .text();
        assert!(
            html.contains(markup(style).no_result_text),
            "script carries the marker"
        );
        mall.shutdown().await.expect("shutdown");
    }
}

#[tokio::test]
async fn blocks_after_n_searches_per_exit_ip() {
    for style in MallStyle::SHELL {
        let mall = MallServer::start(MallConfig::new(style).with_block_after(Some(2)))
            .await
            .expect("mall");
        let m = markup(style);
        let exit1 = [(EXIT_IP_HEADER, "exit-01")];
        let exit2 = [(EXIT_IP_HEADER, "exit-02")];
        for _ in 0..2 {
            let html = get(mall.addr(), &page("신라면"), &exit1).await.text();
            assert!(
                !html.contains(m.block_text),
                "{style}: allowed within budget"
            );
            let json = get(mall.addr(), &api("신라면"), &exit1).await.json();
            assert_eq!(json["blocked"], false);
        }
        let blocked = get(mall.addr(), &page("신라면"), &exit1).await;
        assert_eq!(blocked.status, 200, "block pages are HTTP 200");
        let html = blocked.text();
        assert!(
            html.contains(&markup::block_marker_html(style)),
            "{style}: {html}"
        );
        assert!(html.len() < 1024, "block page is small");
        let json = get(mall.addr(), &api("신라면"), &exit1).await.json();
        assert_eq!(json["blocked"], true);
        assert!(json["items"].as_array().expect("items").is_empty());
        // Another exit IP and direct traffic are unaffected.
        let other = get(mall.addr(), &page("신라면"), &exit2).await.text();
        assert!(!other.contains(m.block_text));
        let direct = get(mall.addr(), &page("신라면"), &[]).await.text();
        assert!(!direct.contains(m.block_text));

        let stats = mall.stats();
        assert_eq!(stats.searches.get("exit-01"), Some(&3));
        assert_eq!(stats.searches.get("exit-02"), Some(&1));
        assert_eq!(stats.searches.get(DIRECT_EXIT), Some(&1));
        assert_eq!(stats.blocked, 2, "one page and one API answer");
        assert!(stats.blocked_exits.contains("exit-01"));
        assert!(!stats.blocked_exits.contains("exit-02"));
        mall.shutdown().await.expect("shutdown");
    }
}

#[tokio::test]
async fn control_endpoints_block_unblock_and_reset() {
    let mall = mall(MallStyle::Alpha).await;
    let exit5 = [(EXIT_IP_HEADER, "exit-05")];
    let stats: MallStats = serde_json::from_value(
        post(mall.addr(), "/_control/block?exit=exit-05")
            .await
            .json(),
    )
    .expect("stats json");
    assert!(stats.blocked_exits.contains("exit-05"));

    let html = get(mall.addr(), &page("햇반"), &exit5).await.text();
    assert!(html.contains("<div id=\"captcha\">비정상적인 접근이 감지되었습니다</div>"));
    let ok = get(mall.addr(), &page("햇반"), &[]).await.text();
    assert!(!ok.contains("captcha"));

    post(mall.addr(), "/_control/unblock?exit=exit-05").await;
    let html = get(mall.addr(), &page("햇반"), &exit5).await.text();
    assert!(!html.contains("captcha"));

    post(mall.addr(), "/_control/block-after?n=0").await;
    let html = get(mall.addr(), &page("햇반"), &exit5).await.text();
    assert!(html.contains("captcha"), "budget 0 blocks at once");

    let reset = post(mall.addr(), "/_control/reset").await.json();
    assert_eq!(reset["blocked"], 0);
    assert_eq!(reset["bytes_served"], 0);
    assert_eq!(reset["block_after"], 0, "reset keeps block_after");
    post(mall.addr(), "/_control/block-after").await;

    let stats = get(mall.addr(), "/_control/stats", &[]).await.json();
    assert_eq!(
        stats["requests"],
        serde_json::json!({}),
        "control calls are not counted"
    );
    assert_eq!(stats["block_after"], serde_json::Value::Null);
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_price_set_through_control_is_served_until_reset() {
    for (style, query) in [
        (MallStyle::Alpha, "삼다수 2L x 12"),
        (MallStyle::Beta, "코카콜라 500ml 24개"),
    ] {
        let mall = mall(style).await;
        let first =
            || async { get(mall.addr(), &api(query), &[]).await.json()["items"][0].clone() };
        let listing = first().await;
        let id = listing["id"].as_str().expect("id").to_owned();
        let path = listing["url"].as_str().expect("url").to_owned();
        let catalog_price = listing["price"].as_u64().expect("price");
        assert_ne!(catalog_price, 7_770);

        let bad = post(mall.addr(), "/_control/price?id=no-such&price=100").await;
        assert_eq!(bad.status, 400, "{style}: an id the mall does not list");
        let bad = post(mall.addr(), &format!("/_control/price?id={id}&price=0")).await;
        assert_eq!(bad.status, 400, "{style}: a price of 0");
        let set = post(mall.addr(), &format!("/_control/price?id={id}&price=7770")).await;
        assert_eq!(set.status, 200);
        assert_eq!(set.json()["price"], 7770);

        let now = first().await;
        assert_eq!(now["id"], id.as_str(), "{style}");
        assert_eq!(now["price"], 7770, "{style}: the API answers the new price");
        let detail = get(mall.addr(), &path, &[]).await.text();
        assert!(
            detail.contains("7,770"),
            "{style}: the detail page shows it: {detail}"
        );

        post(mall.addr(), "/_control/reset").await;
        assert_eq!(
            first().await["price"],
            catalog_price,
            "{style}: reset restores it"
        );
        mall.shutdown().await.expect("shutdown");
    }
}

#[tokio::test]
async fn slow_control_and_slow_param_delay_search() {
    let mall = mall(MallStyle::Beta).await;
    let started = Instant::now();
    get(mall.addr(), &page("스팸"), &[]).await;
    assert!(
        started.elapsed() < Duration::from_millis(300),
        "fast by default"
    );

    let stats = post(mall.addr(), "/_control/slow?ms=500").await.json();
    assert_eq!(stats["slow_page_ms"], 500);
    assert_eq!(stats["slow_api_ms"], 500);
    let started = Instant::now();
    get(mall.addr(), &page("스팸"), &[]).await;
    assert!(started.elapsed() >= Duration::from_millis(500));
    let started = Instant::now();
    get(mall.addr(), &api("스팸"), &[]).await;
    assert!(started.elapsed() >= Duration::from_millis(500));

    post(mall.addr(), "/_control/slow?ms=0").await;
    let started = Instant::now();
    get(mall.addr(), &format!("{}&slow_ms=400", api("스팸")), &[]).await;
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "per-request slow_ms"
    );

    let bad = post(mall.addr(), "/_control/slow").await;
    assert_eq!(bad.status, 400);
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn images_and_fonts_are_heavy_and_counted() {
    let mall = mall(MallStyle::Alpha).await;
    let img = get(mall.addr(), "/img/a101.jpg", &[]).await;
    assert_eq!(img.status, 200);
    assert_eq!(img.header("content-type"), Some("image/jpeg"));
    assert_eq!(img.header("cache-control"), Some("no-store"));
    assert_eq!(img.body.len(), IMAGE_BYTES);
    let font = get(mall.addr(), "/fonts/mall.woff2", &[]).await;
    assert_eq!(font.header("content-type"), Some("font/woff2"));
    assert_eq!(font.body.len(), FONT_BYTES);
    let other_mall = get(mall.addr(), "/img/b201.jpg", &[]).await;
    assert_eq!(other_mall.status, 404, "beta's image is not on alpha");

    let stats = mall.stats();
    assert_eq!(stats.image_requests, 2);
    assert_eq!(stats.font_requests, 1);
    let heavy = u64::try_from(IMAGE_BYTES + FONT_BYTES).expect("fits");
    assert!(stats.bytes_served > heavy, "{}", stats.bytes_served);
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn detail_pages_per_style() {
    let alpha = mall(MallStyle::Alpha).await;
    let html = get(alpha.addr(), "/goods/a102", &[]).await.text();
    assert!(html.contains(r#"<h1 class="goods-title">코카콜라 500ml x 24개 (PET)</h1>"#));
    assert!(html.contains(r#"<span class="goods-price">21,900원</span>"#));
    assert!(html.contains("배송비 3,000원"));
    assert_eq!(get(alpha.addr(), "/goods/nope", &[]).await.status, 404);
    assert_eq!(
        get(alpha.addr(), "/vp/products/b201", &[]).await.status,
        404
    );

    let beta = mall(MallStyle::Beta).await;
    let html = get(beta.addr(), "/vp/products/b201", &[]).await.text();
    assert!(html.contains(r#"<span class="prod-price">₩11,500</span>"#));
    assert!(html.contains("배송비 ₩3,000"));
    alpha.shutdown().await.expect("shutdown");
    beta.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn serves_a_catalog_from_a_file() {
    let dir = std::env::temp_dir().join(format!("lps-tk-catalog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("catalog.toml");
    std::fs::write(
        &path,
        r#"
        [[products]]
        key = "kimchi-1kg"
        brand = "종가"
        name = "종가 포기김치 1kg"
        [[products.listings]]
        id = "k1"
        mall = "beta"
        title = "종가 포기김치 1kg"
        price = 9900
        shipping = 0
        seller = "김치상회"
        path = "/vp/products/k1"
        "#,
    )
    .expect("write");
    let catalog = Arc::new(Catalog::load(&path).expect("catalog"));
    std::fs::remove_dir_all(&dir).expect("cleanup");
    let mall = MallServer::start(MallConfig::new(MallStyle::Beta).with_catalog(catalog))
        .await
        .expect("mall");
    let json = get(mall.addr(), &api("포기김치 1KG"), &[]).await.json();
    assert_eq!(item_ids(&json), ["k1"]);
    let none = get(mall.addr(), &api("삼다수"), &[]).await.json();
    assert_eq!(none["total"], 0);
    mall.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn shutdown_releases_the_port() {
    let mall = mall(MallStyle::Alpha).await;
    let addr = mall.addr();
    assert!(mall.base_url().starts_with("http://127.0.0.1:"));
    mall.shutdown().await.expect("shutdown");
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn home_page_has_a_search_form_a_person_can_use() {
    for style in MallStyle::ALL {
        let mall = mall(style).await;
        let m = markup(style);
        let html = get(mall.addr(), "/", &[]).await.text();
        let id = m
            .search_input
            .strip_prefix("input#")
            .expect("an id selector");
        assert!(
            html.contains(r#"<form "#) && html.contains(r#"action="/search" method="get""#),
            "{style}: {html}"
        );
        assert!(
            html.contains(&format!(r#"<input id="{id}""#)) && html.contains(r#"name="q""#),
            "{style}: {html}"
        );
        assert!(
            html.contains(r#"<button type="submit""#),
            "{style}: Enter submits"
        );
        // What the browser requests on Enter: `/search?q=…`, served as a search page.
        let reply = get(mall.addr(), &format!("/search?q={}", enc("삼다수")), &[]).await;
        assert_eq!(reply.status, 200);
        assert_eq!(mall.stats().searches.get(DIRECT_EXIT), Some(&1));
        mall.shutdown().await.expect("shutdown");
    }
}
