//! The built-in Naver and Coupang profiles against the page shapes those malls have served,
//! read the way a job reads them: real headless Chromium opens each fixture of
//! `tests/fixtures/real-pages/` (each file's header names where its shape comes from, its
//! date and what was trimmed), the page reader decides (block first, no results, cards from
//! the first source that yields one) and the cards go through the class policy and the
//! shipping rules. A design a profile cannot read fails here — every expected card, its
//! title, price, shipping and classes — not in a live job.

mod common;

use std::path::{Path, PathBuf};

use lps_crawler_node::chromium::{
    Browser, BrowserMode, ChromeDriver, LaunchOptions, PageRead, ProfileSlot,
    default_blocked_patterns, page::read_search_page,
};
use lps_profiles::{compiled::compile, extract::apply_classes, price::evaluate_facts};
use lps_proto::model::{
    CardClass::{self, Ad, Catalog, OptionListing, Overseas},
    ShippingStatus::{self, Free, Paid, Unknown},
};

/// One card the fixture shows, as a buyer reads it.
struct Want {
    title: &'static str,
    price: u64,
    shipping: (ShippingStatus, u64),
    classes: &'static [CardClass],
    /// A part of the card's link.
    link: &'static str,
}

const fn card(
    title: &'static str,
    price: u64,
    shipping: (ShippingStatus, u64),
    classes: &'static [CardClass],
    link: &'static str,
) -> Want {
    Want {
        title,
        price,
        shipping,
        classes,
        link,
    }
}

struct Fixture {
    file: &'static str,
    /// The built-in profile that reads it.
    profile: &'static str,
    /// The card source the page is read from.
    source: &'static str,
    /// The page is a self-clearing challenge first (waited out, then read).
    challenge: bool,
    cards: Vec<Want>,
}

fn fixtures() -> Vec<Fixture> {
    vec![
        Fixture {
            file: "naver-2026-composite-list.html",
            profile: "naver.toml",
            source: "next_data",
            challenge: false,
            cards: vec![
                card(
                    "든든닭 통살 닭가슴살 3종 20팩",
                    25_900,
                    (Free, 0),
                    &[Ad],
                    "/products/1000000001",
                ),
                // dlvryPrice (4,890) is price plus fee: the fee is 3,000.
                card(
                    "하루닭 수비드 닭가슴살 100g 1팩",
                    1_890,
                    (Paid, 3_000),
                    &[],
                    "/products/1000000002",
                ),
                card(
                    "바른닭 냉동 닭가슴살 1kg 5개",
                    48_000,
                    (Free, 0),
                    &[],
                    "/products/1000000003",
                ),
                // A price-comparison card: no mall URL, the click-redirect is its link.
                card(
                    "저염 닭가슴살 스테이크 100g, 10개",
                    16_800,
                    (Paid, 3_000),
                    &[Catalog],
                    "nvMid=90000000004",
                ),
                card(
                    "닭가슴살 39종 1팩 골라담기",
                    1_990,
                    (Paid, 3_000),
                    &[OptionListing],
                    "/products/1000000005",
                ),
                card(
                    "Kirkland Chicken Breast 1.36kg",
                    39_560,
                    (Paid, 5_000),
                    &[Overseas],
                    "/products/1000000006",
                ),
            ],
        },
        Fixture {
            file: "naver-2022-initial-state.html",
            profile: "naver.toml",
            source: "next_data_2021",
            challenge: false,
            cards: vec![
                card(
                    "삼다샘 생수 2L 24병",
                    15_900,
                    (Free, 0),
                    &[Ad],
                    "adcr.naver.com",
                ),
                card(
                    "맑은샘 생수 2L 12병",
                    8_900,
                    (Paid, 3_000),
                    &[],
                    "/malgeun/products/2000000002",
                ),
                card(
                    "백두수 생수 2L 6병",
                    4_900,
                    (Free, 0),
                    &[],
                    "/baekdu/products/2000000003",
                ),
            ],
        },
        Fixture {
            file: "naver-2023-basic-list-dom.html",
            profile: "naver.toml",
            source: "dom",
            challenge: false,
            cards: vec![
                card(
                    "한돈햄 클래식 200g x 20개",
                    49_900,
                    (Free, 0),
                    &[Ad],
                    "adcr.naver.com",
                ),
                card(
                    "마을햄 라이트 340g 3개",
                    15_480,
                    (Paid, 3_000),
                    &[],
                    "nvMid=70000000002",
                ),
                card(
                    "마을햄 클래식 200g 10개",
                    27_900,
                    (Free, 0),
                    &[],
                    "nvMid=70000000003",
                ),
            ],
        },
        Fixture {
            file: "naver-2026-product-item-dom.html",
            profile: "naver.toml",
            source: "dom",
            challenge: false,
            cards: vec![
                card(
                    "든든닭 통살 닭가슴살 3종 20팩",
                    25_900,
                    (Free, 0),
                    &[Ad],
                    "/products/1000000001",
                ),
                card(
                    "하루닭 수비드 닭가슴살 100g 1팩",
                    1_890,
                    (Paid, 3_000),
                    &[],
                    "nvMid=90000000002",
                ),
                card(
                    "바른닭 냉동 닭가슴살 1kg 5개",
                    48_000,
                    (Free, 0),
                    &[],
                    "nvMid=90000000003",
                ),
            ],
        },
        Fixture {
            file: "naver-ns-search-dom.html",
            profile: "naver.toml",
            source: "dom",
            challenge: false,
            cards: vec![
                card(
                    "든든닭 통살 닭가슴살 3종 20팩",
                    25_900,
                    (Free, 0),
                    &[Ad],
                    "/products/3000000001",
                ),
                card(
                    "하루닭 수비드 닭가슴살 100g 10팩",
                    18_900,
                    (Paid, 3_000),
                    &[],
                    "/products/3000000002",
                ),
                card(
                    "바른닭 냉동 닭가슴살 1kg 5개",
                    46_000,
                    (Free, 0),
                    &[],
                    "/products/3000000003",
                ),
            ],
        },
        Fixture {
            file: "coupang-2025-product-unit.html",
            profile: "coupang.toml",
            source: "dom",
            challenge: false,
            cards: coupang_2025_cards(),
        },
        // Akamai's challenge, waited out (clears_within), then the same result page.
        Fixture {
            file: "coupang-akamai-challenge.html",
            profile: "coupang.toml",
            source: "dom",
            challenge: true,
            cards: coupang_2025_cards(),
        },
        Fixture {
            file: "coupang-2023-search-product.html",
            profile: "coupang.toml",
            source: "dom",
            challenge: false,
            cards: vec![
                card(
                    "햇반 210g x 24개",
                    26_900,
                    (Unknown, 0),
                    &[Ad],
                    "/vp/products/4000001",
                ),
                card(
                    "햇반 210g x 12개",
                    14_980,
                    (Unknown, 0),
                    &[],
                    "/vp/products/4000002",
                ),
                card(
                    "햇반 작은공기 130g x 10개",
                    11_900,
                    (Unknown, 0),
                    &[],
                    "/vp/products/4000003",
                ),
            ],
        },
    ]
}

fn coupang_2025_cards() -> Vec<Want> {
    vec![
        // The bare-span price markup: after the <del> list price and the rate.
        card(
            "맑은샘 생수 2L x 12병",
            9_600,
            (Unknown, 0),
            &[Ad],
            "/vp/products/111?itemId=3001",
        ),
        card(
            "백두수 생수 2L x 6병",
            5_980,
            (Unknown, 0),
            &[],
            "/vp/products/112?itemId=3002",
        ),
        // The Price_priceValue markup.
        card(
            "삼다샘 생수 2L x 24병",
            15_900,
            (Unknown, 0),
            &[],
            "/vp/products/113?itemId=3003",
        ),
        card(
            "한라수 생수 2L x 12병",
            8_800,
            (Unknown, 0),
            &[Ad],
            "/vp/products/114?itemId=3004",
        ),
    ]
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real-pages")
}

/// Reads `fixture` with its built-in profile in `browser`; every mismatch, named.
async fn check(browser: &Browser, fixture: &Fixture) -> Vec<String> {
    let what = fixture.file;
    let text = lps_profiles::format::builtin_text(fixture.profile).expect("a built-in profile");
    let wire = lps_profiles::format::parse(fixture.profile, text)
        .expect("the built-in profile parses")
        .wire;
    let compiled = compile(&wire).expect("the built-in profile compiles");
    let path = fixture_dir().join(fixture.file);
    let url = format!("file://{}", path.display());
    let page = match read_search_page(browser, &wire, &compiled, &url).await {
        Ok(PageRead::Cards(page)) => page,
        other => return vec![format!("{what}: want cards, the page reads {other:?}")],
    };
    let mut wrong = Vec::new();
    if page.challenge_cleared != fixture.challenge {
        wrong.push(format!(
            "{what}: a challenge cleared: {}, want {}",
            page.challenge_cleared, fixture.challenge
        ));
    }
    if page.source != fixture.source {
        wrong.push(format!(
            "{what}: read from source {:?}, want {:?}",
            page.source, fixture.source
        ));
    }
    let titles: Vec<&str> = page.cards.iter().map(|c| c.title.as_str()).collect();
    let want_titles: Vec<&str> = fixture.cards.iter().map(|c| c.title).collect();
    if titles != want_titles {
        wrong.push(format!("{what}: cards {titles:?}, want {want_titles:?}"));
    }
    let classified = apply_classes(&compiled, page.cards.clone());
    for (card, want) in page.cards.iter().zip(&fixture.cards) {
        let at = format!("{what}: {:?}", card.title);
        if card.price != want.price {
            wrong.push(format!("{at}: price {}, want {}", card.price, want.price));
        }
        let price = card.price_to_pay(wire.accept_coupon_price);
        let shipping = evaluate_facts(&card.shipping_facts(), price, &wire.free_shipping_texts);
        if (shipping.status, shipping.fee) != want.shipping {
            wrong.push(format!(
                "{at}: shipping {:?} {} (text {:?}, fee {:?}, errors {:?}), want {:?}",
                shipping.status,
                shipping.fee,
                card.shipping_text,
                card.shipping_fee,
                card.read_errors,
                want.shipping
            ));
        }
        if card.classes != want.classes {
            wrong.push(format!(
                "{at}: classes {:?}, want {:?}",
                card.classes, want.classes
            ));
        }
        if !card.link.contains(want.link) {
            wrong.push(format!("{at}: link {}, want …{}…", card.link, want.link));
        }
        if !card.read_errors.is_empty() {
            wrong.push(format!("{at}: unreadable rules {:?}", card.read_errors));
        }
    }
    // The policy: ads and option listings out, overseas and catalog cards kept and flagged.
    let kept: Vec<&str> = classified
        .kept
        .iter()
        .map(|(c, _)| c.title.as_str())
        .collect();
    let want_kept: Vec<&str> = fixture
        .cards
        .iter()
        .filter(|w| !w.classes.iter().any(|c| matches!(c, Ad | OptionListing)))
        .map(|w| w.title)
        .collect();
    if kept != want_kept {
        wrong.push(format!("{what}: kept {kept:?}, want {want_kept:?}"));
    }
    wrong
}

#[tokio::test]
async fn the_built_in_profiles_read_every_design_on_record() {
    let _serial = common::serial().await;
    let root = std::env::temp_dir().join(format!("lps-real-pages-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let driver = ChromeDriver::managed(common::CHROMEDRIVER);
    let driver_url = driver.url().await.expect("chromedriver starts");
    let slot = ProfileSlot::acquire(&root).unwrap();
    let options = LaunchOptions {
        blocked: default_blocked_patterns(),
        ..LaunchOptions::new(common::CHROMIUM.into(), BrowserMode::Headless)
    };
    let browser = Browser::launch(&driver_url, &slot, &options)
        .await
        .expect("chromium starts");
    let mut wrong = Vec::new();
    for fixture in fixtures() {
        wrong.extend(check(&browser, &fixture).await);
    }
    browser.close().await;
    driver.stop().await;
    let _ = std::fs::remove_dir_all(&root);
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

/// Every fixture names its source and date in its header, and is big enough not to read as
/// a challenge page by size alone.
#[test]
fn every_fixture_says_where_its_shape_comes_from() {
    let listed: Vec<&str> = fixtures().iter().map(|f| f.file).collect();
    let mut on_disk: Vec<String> = std::fs::read_dir(fixture_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".html"))
        .collect();
    on_disk.sort();
    let mut listed_sorted: Vec<String> = listed.iter().map(|s| (*s).to_owned()).collect();
    listed_sorted.sort();
    assert_eq!(on_disk, listed_sorted, "every fixture is read by the test");
    for fixture in fixtures() {
        let name = fixture.file;
        let text = std::fs::read_to_string(fixture_dir().join(name)).unwrap();
        let header = text.split("-->").next().unwrap_or_default();
        let wire = lps_profiles::format::parse(
            fixture.profile,
            lps_profiles::format::builtin_text(fixture.profile).unwrap(),
        )
        .unwrap()
        .wire;
        let min_html = wire.block.map_or(0, |b| b.min_html_bytes) as usize;
        assert!(
            fixture.challenge || text.len() - header.len() > min_html + 200,
            "{name}: the page (without its header) is bigger than {min_html} bytes, as a result page is"
        );
        assert!(
            header.contains("github.com/") || header.contains("search index's file"),
            "{name}: the header names where the shape comes from"
        );
        assert!(
            (2014..=2026).any(|year| header.contains(&year.to_string())),
            "{name}: the header dates the shape"
        );
    }
}

/// The probe on a saved page shows each card's structured shipping parts and, for a rule
/// whose JSON path lands on an array, the reading error instead of a silent empty value.
#[tokio::test]
async fn the_probe_shows_shipping_parts_and_unreadable_rules() {
    let _serial = common::serial().await;
    let dir = std::env::temp_dir().join(format!("lps-real-pages-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = lps_profiles::format::builtin_text("naver.toml")
        .unwrap()
        .replacen(
            "shipping_fee = [",
            "shipping = \"$.lowMallList\"\nshipping_fee = [",
            1,
        );
    assert!(text.contains("shipping = \"$.lowMallList\""));
    let profile = dir.join("naver-probe.toml");
    std::fs::write(&profile, text).unwrap();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_crawler-node"))
        .args(["probe", "--profile"])
        .arg(&profile)
        .args(["--query", "닭가슴살 100g", "--html"])
        .arg(fixture_dir().join("naver-2026-composite-list.html"))
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
    for line in [
        "source #0 \"next_data\" (embedded_json) [chosen]",
        "shipping parts: fee 3000",
        "-> paid 3000",
        "-> free 0",
        // Only the price-comparison card has a lowMallList (an array).
        "unreadable rule shipping[0]: $.lowMallList lands on an array, not a value",
    ] {
        assert!(out.contains(line), "{line:?} missing:\n{out}");
    }
    assert_eq!(
        out.matches("unreadable rule").count(),
        1,
        "one card has the array:\n{out}"
    );
}
