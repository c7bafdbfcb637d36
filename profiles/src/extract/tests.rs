//! Extraction over realistic fixtures: a DOM result list with every class, a
//! `__NEXT_DATA__` blob, captured search responses, an API answer, and garbage.

use lps_proto::{model::CardClass, pb};
use serde_json::json;

use super::*;
use crate::compiled::{
    compile,
    tests::{captured_source, css, dom_source, embedded_source, json, json_fields, profile},
};

const PAGE: &str = "https://www.example.com/search?q=%ED%96%87%EB%B0%98";

fn attr(css: &str, attr: &str) -> pb::FieldRule {
    pb::FieldRule {
        css: css.into(),
        attr: attr.into(),
        ..Default::default()
    }
}

fn text_class(class: pb::CardClass, field: &str, regex: &str) -> pb::CardClassRule {
    pb::CardClassRule {
        class: class.into(),
        texts: vec![pb::TextPattern {
            field: field.into(),
            regex: regex.into(),
        }],
        ..Default::default()
    }
}

/// The DOM source of the doc's example profile, with a class of every kind.
fn dom_profile() -> CompiledProfile {
    let fields = pb::CardFields {
        title: vec![attr("a.name", "title"), css("a.name")],
        price: vec![css("div.price")],
        list_price: vec![css("div.price del")],
        shipping: vec![css("span.delivery")],
        link: vec![attr("a.name", "href")],
        seller: vec![css("span.seller")],
        ..Default::default()
    };
    let mut p = profile(vec![dom_source("li.product-card", fields)]);
    p.free_shipping_texts = vec!["무료배송".into()];
    p.classes = vec![
        pb::CardClassRule {
            class: pb::CardClass::Ad.into(),
            selectors: vec!["span.ad-badge".into()],
            ..Default::default()
        },
        pb::CardClassRule {
            class: pb::CardClass::OptionListing.into(),
            texts: vec![
                pb::TextPattern {
                    field: "title".into(),
                    regex: r"\[택1\]|골라담기|모음전".into(),
                },
                pb::TextPattern {
                    field: "price".into(),
                    regex: r"원\s*~".into(),
                },
            ],
            ..Default::default()
        },
        text_class(
            pb::CardClass::Overseas,
            "card",
            "해외직구|해외배송|구매대행",
        ),
        text_class(pb::CardClass::Used, "title", "중고|리퍼|전시상품"),
        text_class(
            pb::CardClass::SoldOut,
            "card",
            r"(^|\s)(품절|일시품절|판매종료)($|\s)",
        ),
        text_class(pb::CardClass::Catalog, "card", r"판매처\s*\d+"),
    ];
    compile(&p).expect("the dom profile compiles")
}

fn card_html(title_attr: Option<&str>, name: &str, price: &str, extra: &str) -> String {
    let title = title_attr
        .map(|t| format!(" title=\"{t}\""))
        .unwrap_or_default();
    format!(
        r#"<li class="product-card">
             <div class="thumb"><img src="/img/1.jpg"></div>
             <a class="name" href="/p/{n}"{title}>{name}</a>
             <div class="price">{price}</div>
             <span class="delivery">무료배송</span>
             <span class="seller">햇반공식몰</span>
             {extra}
           </li>"#,
        n = name.len(),
    )
}

fn dom_snapshot(cards: Vec<String>) -> PageSnapshot {
    PageSnapshot {
        url: PAGE.into(),
        dom: vec![cards],
        ..Default::default()
    }
}

#[test]
fn a_time_deal_card_reads_sale_and_list_price() {
    let profile = dom_profile();
    let html = card_html(
        Some("CJ 햇반 210g x 12개 1+1 기획"),
        "CJ 햇반 210g x 12개 1+...",
        "<del>39,800원</del> 29,900원",
        "",
    );
    let page = extract_page(&profile, &dom_snapshot(vec![html]));
    assert_eq!(page.chosen, Some(0));
    let source = page.chosen_source().unwrap();
    assert_eq!(
        (source.matched, source.placeholders, source.unparsed),
        (1, 0, 0)
    );
    assert_eq!(source.source_name, "dom");
    let card = &source.cards[0];
    assert_eq!(card.title, "CJ 햇반 210g x 12개 1+1 기획");
    assert_eq!(card.price, 29_900);
    assert_eq!(card.list_price, Some(39_800));
    assert_eq!(card.coupon_price, None);
    assert_eq!(card.shipping_text.as_deref(), Some("무료배송"));
    assert_eq!(card.seller.as_deref(), Some("햇반공식몰"));
    assert!(
        card.link.starts_with("https://www.example.com/p/"),
        "{}",
        card.link
    );
    assert!(card.classes.is_empty());
    assert!(
        card.text.contains("CJ 햇반 210g x 12개 1+..."),
        "{}",
        card.text
    );
    assert!(card.text.contains("39,800원 29,900원"), "{}", card.text);
    assert_eq!(card.price_to_pay(true), 29_900);
}

#[test]
fn a_shortened_title_falls_back_to_text() {
    let profile = dom_profile();
    let with_attr = card_html(
        Some("제주 삼다수 2L x 12병"),
        "제주 삼다수 2L...",
        "9,600원",
        "",
    );
    let without = card_html(None, "제주 삼다수 500ml x 20병", "8,900원", "");
    let empty_attr = card_html(Some(" "), "제주 삼다수 330ml", "7,900원", "");
    let page = extract_page(
        &profile,
        &dom_snapshot(vec![with_attr, without, empty_attr]),
    );
    let titles: Vec<&str> = page.per_source[0]
        .cards
        .iter()
        .map(|c| c.title.as_str())
        .collect();
    assert_eq!(
        titles,
        [
            "제주 삼다수 2L x 12병",
            "제주 삼다수 500ml x 20병",
            "제주 삼다수 330ml"
        ]
    );
}

#[test]
fn skeletons_are_placeholders_and_changed_markup_is_unparsed() {
    let profile = dom_profile();
    let skeleton = r#"<li class="product-card skeleton"><div class="ph-img"></div><div class="ph-line"> </div></li>"#;
    let changed = r#"<li class="product-card"><div class="tit">햇반 210g</div><b class="amount">12,900원</b></li>"#;
    let no_price = card_html(None, "햇반 210g", "가격문의", "");
    let zero_price = card_html(None, "햇반 210g", "0원", "");
    let page = extract_page(
        &profile,
        &dom_snapshot(vec![
            skeleton.into(),
            skeleton.into(),
            changed.into(),
            no_price,
            zero_price,
        ]),
    );
    let source = &page.per_source[0];
    assert!(source.cards.is_empty());
    assert_eq!(source.placeholders, 2);
    assert_eq!(source.unparsed, 3);
    assert_eq!(source.matched, 5);
    assert_eq!(page.chosen, None);
}

#[test]
fn classes_by_selector_and_text() {
    let profile = dom_profile();
    let cards = vec![
        card_html(
            None,
            "햇반 210g 24개",
            "19,900원",
            r#"<span class="ad-badge">AD</span>"#,
        ),
        card_html(None, "[택1] 햇반 모음", "5,900원~", ""),
        card_html(None, "햇반 골라담기", "5,900원", ""),
        card_html(None, "햇반 미국판", "15,000원", "<em>해외직구</em>"),
        card_html(None, "햇반 리퍼 상품", "9,000원", ""),
        card_html(
            None,
            "햇반 210g",
            "12,000원",
            r#"<span class="state">일시품절</span>"#,
        ),
        card_html(
            None,
            "햇반 210g 36개",
            "29,000원",
            r#"<div class="sellers">판매처 12</div>"#,
        ),
        card_html(
            None,
            "햇반 해외직구 광고",
            "8,000원~",
            r#"<span class="ad-badge">광고</span>"#,
        ),
        card_html(None, "햇반 210g 12개", "12,900원", ""),
    ];
    let page = extract_page(&profile, &dom_snapshot(cards));
    let classes: Vec<Vec<CardClass>> = page.per_source[0]
        .cards
        .iter()
        .map(|c| c.classes.clone())
        .collect();
    use CardClass::{Ad, Catalog, OptionListing, Overseas, SoldOut, Used};
    assert_eq!(
        classes,
        vec![
            vec![Ad],
            vec![OptionListing],
            vec![OptionListing],
            vec![Overseas],
            vec![Used],
            vec![SoldOut],
            vec![Catalog],
            vec![Ad, OptionListing, Overseas],
            vec![],
        ]
    );

    let classified = apply_classes(&profile, page.per_source[0].cards.clone());
    let kept: Vec<(&str, &[CardClass])> = classified
        .kept
        .iter()
        .map(|(c, flags)| (c.title.as_str(), flags.as_slice()))
        .collect();
    assert_eq!(
        kept,
        vec![
            ("햇반 미국판", &[Overseas][..]),
            ("햇반 210g 36개", &[Catalog][..]),
            ("햇반 210g 12개", &[][..]),
        ]
    );
    let excluded: Vec<(&str, u32)> = classified
        .excluded
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    assert_eq!(
        excluded,
        vec![
            ("ad", 2),
            ("option_listing", 2),
            ("sold_out", 1),
            ("used", 1)
        ]
    );
}

#[test]
fn policies_come_from_the_profile() {
    let fields = crate::compiled::tests::dom_fields();
    let mut p = profile(vec![dom_source("li", fields)]);
    p.classes = vec![
        pb::CardClassRule {
            policy: pb::ClassPolicy::Flag.into(),
            ..text_class(pb::CardClass::Used, "title", "리퍼")
        },
        pb::CardClassRule {
            policy: pb::ClassPolicy::Exclude.into(),
            ..text_class(pb::CardClass::Catalog, "card", "판매처")
        },
    ];
    let profile = compile(&p).unwrap();
    let card = |title: &str, classes: Vec<CardClass>| Card {
        title: title.into(),
        price: 1_000,
        classes,
        ..Card::default()
    };
    let classified = apply_classes(
        &profile,
        vec![
            card("a", vec![CardClass::Used]),
            card("b", vec![CardClass::Catalog, CardClass::Used]),
            // Not in the profile: its default policy.
            card("c", vec![CardClass::Overseas, CardClass::Overseas]),
            card("d", vec![CardClass::SoldOut]),
        ],
    );
    assert_eq!(classified.kept.len(), 2);
    assert_eq!(classified.kept[0].1, vec![CardClass::Used]);
    assert_eq!(classified.kept[1].1, vec![CardClass::Overseas]);
    assert_eq!(classified.excluded.get("catalog"), Some(&1));
    assert_eq!(classified.excluded.get("sold_out"), Some(&1));
}

#[test]
fn rules_regex_constant_pick_own_text() {
    let fields = pb::CardFields {
        // The first rule's regex does not match, so the second is used.
        title: vec![
            pb::FieldRule {
                css: "div.name".into(),
                regex: r"\[브랜드\]\s*(.+)".into(),
                ..Default::default()
            },
            pb::FieldRule {
                css: "div.name".into(),
                own_text: true,
                ..Default::default()
            },
        ],
        price: vec![
            pb::FieldRule {
                css: "span.sale".into(),
                ..Default::default()
            },
            pb::FieldRule {
                css: "div.prices".into(),
                exclude: ".unit".into(),
                pick: pb::NumberPick::Min.into(),
                ..Default::default()
            },
        ],
        coupon_price: vec![pb::FieldRule {
            css: "div.coupon".into(),
            regex: r"쿠폰가\s*([\d,]+)".into(),
            ..Default::default()
        }],
        shipping: vec![pb::FieldRule {
            constant: "무료배송".into(),
            ..Default::default()
        }],
        link: vec![attr("", "data-href")],
        seller: vec![attr("img.logo", "alt")],
        ..Default::default()
    };
    let profile = compile(&profile(vec![dom_source("div.item", fields)])).unwrap();
    let html = r#"<div class="item" data-href="https://m.example.com/item/7">
        <div class="name">오뚜기 진라면 <span class="tag">NEW</span>매운맛 5입</div>
        <span class="sale">쿠폰할인</span>
        <div class="prices">4,480원 <span class="unit">(100g당 90원)</span> 4,200원</div>
        <div class="coupon">쿠폰가 3,900원</div>
        <img class="logo" alt="오뚜기몰" src="/logo.png">
    </div>"#;
    let page = extract_page(&profile, &dom_snapshot(vec![html.into()]));
    let card = &page.per_source[0].cards[0];
    assert_eq!(card.title, "오뚜기 진라면 매운맛 5입");
    assert_eq!(card.price, 4_200);
    assert_eq!(card.coupon_price, Some(3_900));
    assert_eq!(card.price_to_pay(false), 4_200);
    assert_eq!(card.price_to_pay(true), 3_900);
    assert_eq!(card.shipping_text.as_deref(), Some("무료배송"));
    assert_eq!(card.link, "https://m.example.com/item/7");
    assert_eq!(card.seller.as_deref(), Some("오뚜기몰"));
}

#[test]
fn relative_links_and_table_rows() {
    let fields = pb::CardFields {
        title: vec![css("td.name")],
        price: vec![css("td.price")],
        link: vec![attr("td.name a", "href")],
        ..Default::default()
    };
    let profile = compile(&profile(vec![dom_source("tr.goods", fields)])).unwrap();
    let rows = [
        ("/goods/1", "https://www.example.com/goods/1"),
        ("goods/2", "https://www.example.com/goods/2"),
        ("//m.example.com/goods/3", "https://m.example.com/goods/3"),
        ("https://other.test/4", "https://other.test/4"),
        ("?id=5", "https://www.example.com/search?id=5"),
    ];
    let cards = rows
        .iter()
        .map(|(href, _)| {
            format!(
                r#"<tr class="goods"><td class="name"><a href="{href}">햇반</a></td><td class="price">1,000원</td></tr>"#
            )
        })
        .collect();
    let page = extract_page(&profile, &dom_snapshot(cards));
    let links: Vec<&str> = page.per_source[0]
        .cards
        .iter()
        .map(|c| c.link.as_str())
        .collect();
    let want: Vec<&str> = rows.iter().map(|(_, want)| *want).collect();
    assert_eq!(links, want);
}

fn next_data_profile() -> CompiledProfile {
    let fields = pb::CardFields {
        title: vec![json("$.title")],
        price: vec![json("$.salePrice")],
        list_price: vec![json("$.listPrice")],
        shipping: vec![json("$.deliveryFee"), json("$.deliveryText")],
        link: vec![json("$.url")],
        seller: vec![json("$.mall.name")],
        ..Default::default()
    };
    let mut p = profile(vec![
        embedded_source(
            "script#__NEXT_DATA__",
            "$.props.pageProps.initialState.products.list[*].item",
            fields,
        ),
        dom_source("li.product-card", crate::compiled::tests::dom_fields()),
    ]);
    p.sources[0].name = "next_data".into();
    p.classes = vec![
        pb::CardClassRule {
            class: pb::CardClass::Ad.into(),
            json: vec![pb::JsonMatch {
                path: "$.adInfo.isAd".into(),
                equals: String::new(),
            }],
            ..Default::default()
        },
        pb::CardClassRule {
            class: pb::CardClass::Overseas.into(),
            json: vec![pb::JsonMatch {
                path: "$.deliveryType".into(),
                equals: "OVERSEAS".into(),
            }],
            ..Default::default()
        },
        text_class(pb::CardClass::SoldOut, "card", "품절"),
        pb::CardClassRule {
            class: pb::CardClass::Catalog.into(),
            selectors: vec!["div.sellers".into()],
            ..Default::default()
        },
    ];
    compile(&p).unwrap()
}

fn next_data() -> String {
    json!({
        "props": {"pageProps": {"initialState": {"products": {"list": [
            {"item": {
                "title": "CJ 햇반 210g x 24개", "salePrice": 21900, "listPrice": "25,900원",
                "deliveryFee": 0, "url": "/vp/products/111", "mall": {"name": "쿠팡"},
                "adInfo": {"isAd": false}, "deliveryType": "ROCKET"
            }},
            {"item": {
                "title": "햇반 <b>작은공기</b> 130g", "salePrice": "9,980", "deliveryText": "배송비 3,000원",
                "url": "https://www.example.com/vp/products/222", "adInfo": {"isAd": true}
            }},
            {"item": {
                "title": "Hetbahn 210g (US)", "salePrice": 30000.0, "deliveryFee": 5000,
                "url": "/vp/products/333", "deliveryType": "OVERSEAS"
            }},
            {"item": {"title": "햇반 210g", "salePrice": 12000, "url": "/vp/products/444", "badge": "일시품절"}},
            {"item": {"title": "햇반 흑미", "salePrice": null, "url": "/vp/products/555"}},
            {"item": {}},
            {"item": "not an object"},
            {"other": 1}
        ]}}}},
        "page": "/search"
    })
    .to_string()
}

#[test]
fn an_inline_next_data_blob() {
    let profile = next_data_profile();
    let snapshot = PageSnapshot {
        url: PAGE.into(),
        dom: vec![vec![], vec![]],
        scripts: vec![Some(next_data()), None],
        captured: vec![],
    };
    let page = extract_page(&profile, &snapshot);
    assert_eq!(page.chosen, Some(0));
    assert_eq!(page.per_source.len(), 2);
    let source = &page.per_source[0];
    assert_eq!(source.source_name, "next_data");
    assert_eq!(
        (source.matched, source.placeholders, source.unparsed),
        (6, 1, 1)
    );
    let cards = &source.cards;
    assert_eq!(cards.len(), 4);

    assert_eq!(cards[0].title, "CJ 햇반 210g x 24개");
    assert_eq!(cards[0].price, 21_900);
    assert_eq!(cards[0].list_price, Some(25_900));
    assert_eq!(cards[0].shipping_text.as_deref(), Some("0"));
    assert_eq!(cards[0].link, "https://www.example.com/vp/products/111");
    assert_eq!(cards[0].seller.as_deref(), Some("쿠팡"));
    assert!(cards[0].classes.is_empty());

    assert_eq!(cards[1].title, "햇반 작은공기 130g");
    assert_eq!(cards[1].price, 9_980);
    assert_eq!(cards[1].shipping_text.as_deref(), Some("배송비 3,000원"));
    assert_eq!(cards[1].seller, None);
    assert_eq!(cards[1].classes, vec![CardClass::Ad]);

    assert_eq!(cards[2].price, 30_000);
    assert_eq!(cards[2].shipping_text.as_deref(), Some("5000"));
    assert_eq!(cards[2].classes, vec![CardClass::Overseas]);
    assert!(cards[2].text.contains("Hetbahn 210g (US)"));

    // `card` texts of a JSON item are its strings; selectors never match JSON.
    assert_eq!(cards[3].classes, vec![CardClass::SoldOut]);
    assert!(cards[3].text.contains("일시품절"));
}

#[test]
fn a_source_that_yields_nothing_passes_to_the_next() {
    let profile = next_data_profile();
    let dom_card = r#"<li class="product-card"><a class="name" href="/p/1">햇반 210g</a><div class="price">1,200원</div></li>"#;
    for script in [
        None,
        Some("not json at all <html>".to_owned()),
        Some("{\"props\":{}}".to_owned()),
    ] {
        let snapshot = PageSnapshot {
            url: PAGE.into(),
            dom: vec![vec![], vec![dom_card.into()]],
            scripts: vec![script.clone(), None],
            captured: vec![],
        };
        let page = extract_page(&profile, &snapshot);
        assert_eq!(page.chosen, Some(1), "{script:?}");
        assert_eq!(page.per_source[0].matched, 0);
        assert_eq!(page.chosen_source().unwrap().cards[0].price, 1_200);
    }
}

#[test]
fn captured_responses_by_url_pattern() {
    let fields = pb::CardFields {
        title: vec![json("$.productName")],
        price: vec![json("$.price.final"), json("$.price.sale")],
        shipping: vec![json("$.shipping.text")],
        link: vec![json("$.link")],
        ..Default::default()
    };
    let mut p = profile(vec![captured_source(
        r"/api/v\d/search\?",
        "$.data.items[*]",
        fields,
    )]);
    p.sources[0].name = "search_api".into();
    let profile = compile(&p).unwrap();
    let body = |items: serde_json::Value| json!({"data": {"items": items}}).to_string();
    let item = |name: &str, price: u64, link: &str| json!({"productName": name, "price": {"sale": price}, "link": link, "shipping": {"text": "무료배송"}});
    let snapshot = PageSnapshot {
        url: PAGE.into(),
        dom: vec![],
        scripts: vec![],
        captured: vec![
            CapturedResponse {
                url: "https://www.example.com/api/v2/search?q=햇반&page=1".into(),
                body: body(json!([
                    item("햇반 1", 1_000, "/p/1"),
                    item("햇반 2", 2_000, "/p/2")
                ])),
            },
            CapturedResponse {
                url: "https://www.example.com/api/v2/recommend?q=햇반".into(),
                body: body(json!([item("추천 상품", 500, "/p/9")])),
            },
            CapturedResponse {
                url: "https://www.example.com/api/v2/search?q=햇반&page=2".into(),
                body: "<html>502 Bad Gateway</html>".into(),
            },
            CapturedResponse {
                url: "https://www.example.com/api/v2/search?q=햇반&page=2".into(),
                body: format!(
                    ")]}}'\n{}",
                    body(json!([
                        item("햇반 2", 2_000, "/p/2"),
                        item("햇반 3", 3_000, "https://www.example.com/p/3"),
                        {"productName": "로딩중"},
                        {}
                    ]))
                ),
            },
        ],
    };
    let page = extract_page(&profile, &snapshot);
    let source = page.chosen_source().unwrap();
    assert_eq!(source.source_name, "search_api");
    let got: Vec<(&str, u64, &str)> = source
        .cards
        .iter()
        .map(|c| (c.title.as_str(), c.price, c.link.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("햇반 1", 1_000, "https://www.example.com/p/1"),
            ("햇반 2", 2_000, "https://www.example.com/p/2"),
            ("햇반 3", 3_000, "https://www.example.com/p/3"),
        ]
    );
    assert_eq!(
        (source.matched, source.placeholders, source.unparsed),
        (5, 1, 1)
    );
}

#[test]
fn an_api_answer() {
    let fields = pb::CardFields {
        title: vec![json("$.title")],
        price: vec![json("$.lprice")],
        link: vec![json("$.link")],
        seller: vec![json("$.mallName")],
        shipping: vec![pb::FieldRule {
            constant: "무료배송".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let source = pb::CardSource {
        name: String::new(),
        kind: Some(pb::card_source::Kind::HttpApi(pb::HttpApiSource {
            url_template:
                "https://openapi.example.com/v1/search/shop.json?query={query}&start={start}".into(),
            headers: Default::default(),
            list_path: "$.items[*]".into(),
        })),
        fields: Some(fields),
        join: None,
    };
    let profile = compile(&profile(vec![source])).unwrap();
    let body = json!({
        "total": 2, "items": [
            {"title": "<b>햇반</b> 210g x 12 &amp; 기획", "lprice": "12900", "link": "https://shop.test/p/1", "mallName": "네이버"},
            {"title": "<b>햇반</b> 흑미", "lprice": "", "link": "https://shop.test/p/2"}
        ]
    });
    let cards = extract_json(&profile, 0, &body, "https://openapi.example.com/");
    assert_eq!(cards.source_name, "http_api");
    assert_eq!((cards.matched, cards.unparsed), (2, 1));
    assert_eq!(cards.cards[0].title, "햇반 210g x 12 & 기획");
    assert_eq!(cards.cards[0].price, 12_900);
    assert_eq!(cards.cards[0].seller.as_deref(), Some("네이버"));
    assert_eq!(cards.cards[0].shipping_text.as_deref(), Some("무료배송"));
    // An empty answer is healthy and empty; a wrong index reads nothing.
    assert_eq!(
        extract_json(&profile, 0, &json!({"items": []}), "").matched,
        0
    );
    assert_eq!(extract_json(&profile, 3, &body, "").matched, 0);
    // In a page snapshot, an http_api source reads nothing.
    let page = extract_page(&profile, &PageSnapshot::default());
    assert_eq!(page.per_source[0].matched, 0);
    assert_eq!(page.chosen, None);
}

#[test]
fn snapshots_from_json_and_html() {
    let snapshot: PageSnapshot = serde_json::from_str(r#"{"url": "https://x.test/s"}"#).unwrap();
    assert_eq!(snapshot.url, "https://x.test/s");
    assert!(snapshot.dom.is_empty() && snapshot.scripts.is_empty() && snapshot.captured.is_empty());
    let snapshot: PageSnapshot = serde_json::from_str(
        r#"{"dom": [[], ["<li>x</li>"]], "scripts": [null, "{}"], "captured": [{"url": "u"}]}"#,
    )
    .unwrap();
    assert_eq!(snapshot.dom[1], vec!["<li>x</li>".to_owned()]);
    assert_eq!(snapshot.scripts, vec![None, Some("{}".to_owned())]);
    assert_eq!(snapshot.captured[0].body, "");

    let profile = next_data_profile();
    let html = format!(
        r#"<!doctype html><html><head><script id="__NEXT_DATA__" type="application/json">{}</script></head>
        <body><ul><li class="product-card"><a class="name" href="/p/1">햇반</a><div class="price">1,000원</div></li>
        <li class="product-card"><a class="name" href="/p/2">햇반 2</a><div class="price">2,000원</div></li></ul></body></html>"#,
        next_data()
    );
    let snapshot = PageSnapshot::from_html(&profile, PAGE, &html);
    assert_eq!(snapshot.url, PAGE);
    assert_eq!(snapshot.dom.len(), 2);
    assert!(snapshot.dom[0].is_empty());
    assert_eq!(snapshot.dom[1].len(), 2);
    assert!(
        snapshot.scripts[0]
            .as_deref()
            .unwrap()
            .contains("salePrice")
    );
    let page = extract_page(&profile, &snapshot);
    assert_eq!(page.per_source[0].cards.len(), 4);
    assert_eq!(page.per_source[1].cards.len(), 2);
    assert_eq!(
        page.per_source[1].cards[1].link,
        "https://www.example.com/p/2"
    );
}

#[test]
fn card_text_is_clipped() {
    let profile = dom_profile();
    let long = "가".repeat(1_000);
    let html = card_html(None, "햇반", "1,000원", &format!("<p>{long}</p>"));
    let page = extract_page(&profile, &dom_snapshot(vec![html]));
    let text = &page.per_source[0].cards[0].text;
    assert_eq!(text.chars().count(), CARD_TEXT_CHARS + 1);
    assert!(text.ends_with('…'));
    assert_eq!(clip("abc", 3), "abc");
    assert_eq!(clip("abcd", 3), "abc…");
}

#[test]
fn garbage_never_panics() {
    let profiles = [dom_profile(), next_data_profile()];
    let garbage_html = [
        "",
        "<",
        "<<<>>>",
        "</li>",
        "<li",
        "<li class=\"product-card\"><a class=name href=",
        "<li><a href=\"javascript:alert(1)\">x</a><div class=price>9</div></li>",
        "<table><tr><td>",
        "<tr><td><tr>",
        "\u{0}\u{1}<li>\u{FEFF}</li>",
        "<svg><li><math><td>",
        "<li><script>document.write('<li>')</script></li>",
        "<!-- <li> -->",
        "<li class=\"product-card\"><a class=\"name\" title=\"&#0;&#xD800;&amp\" href=\"//\"></a><div class=\"price\">99999999999999999999999999원</div></li>",
    ];
    let garbage_json = [
        "",
        "null",
        "[]",
        "{}",
        "{{{{",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
        "\"string\"",
        "{\"props\":{\"pageProps\":{\"initialState\":{\"products\":{\"list\":[1,null,[],{\"item\":[]}]}}}}}",
        "{\"props\":{\"pageProps\":{\"initialState\":{\"products\":{\"list\":[{\"item\":{\"title\":[\"a\"],\"salePrice\":{\"v\":1},\"url\":null}}]}}}}}",
        "{\"props\":{\"pageProps\":{\"initialState\":{\"products\":{\"list\":[{\"item\":{\"title\":\"t\",\"salePrice\":-1e308,\"url\":7}}]}}}}}",
    ];
    for profile in &profiles {
        for html in garbage_html {
            for json in garbage_json {
                let snapshot = PageSnapshot {
                    url: "not a url".into(),
                    // More entries than sources, of the wrong kinds: ignored.
                    dom: vec![vec![html.into()]; 3],
                    scripts: vec![Some(json.into()); 3],
                    captured: vec![CapturedResponse {
                        url: html.into(),
                        body: json.into(),
                    }],
                };
                let page = extract_page(profile, &snapshot);
                for source in &page.per_source {
                    assert_eq!(
                        source.matched,
                        source.cards.len() as u32 + source.placeholders + source.unparsed
                    );
                }
                let _ = apply_classes(
                    profile,
                    page.per_source.into_iter().flat_map(|s| s.cards).collect(),
                );
                if let Ok(value) = serde_json::from_str::<serde_json::Value>(json) {
                    let _ = extract_json(profile, 0, &value, html);
                }
            }
        }
    }
    // Fewer snapshot entries than sources: nothing to read, no panic.
    let page = extract_page(&profiles[1], &PageSnapshot::default());
    assert_eq!(page.per_source.len(), 2);
    assert_eq!(page.chosen, None);
}

#[test]
fn json_fields_helper_compiles_for_every_json_kind() {
    for source in [
        embedded_source("script#d", "$.items[*]", json_fields()),
        captured_source("search", "$..items[*]", json_fields()),
    ] {
        compile(&profile(vec![source])).unwrap();
    }
}

/// A DOM profile with the default card classes of `profiles/classes.toml`, as a profile
/// without `[classes]` gets them (through the file format).
fn default_classes_profile(extra_classes: &str) -> CompiledProfile {
    let text = format!(
        r#"format = 2
id = "examplemall"
display_name = "예시몰"
search_url_template = "https://www.example.com/search?q={{query}}"
no_results_text = "검색결과가 없습니다"
[[sources]]
kind = "dom"
cards = "li.product-card"
[sources.fields]
title = "a.name"
price = "div.price"
shipping = "span.delivery"
link = {{ css = "a.name", attr = "href" }}
seller = "span.seller"
{extra_classes}"#
    );
    let p = crate::format::parse("example.toml", &text).unwrap_or_else(|e| panic!("{e}"));
    compile(&p.wire).unwrap()
}

fn classes_of(
    profile: &CompiledProfile,
    name_html: &str,
    price: &str,
    extra: &str,
) -> Vec<CardClass> {
    let page = extract_page(
        profile,
        &dom_snapshot(vec![card_html(None, name_html, price, extra)]),
    );
    let source = page.chosen_source().expect("a card");
    source.cards[0].classes.clone()
}

#[test]
fn monthly_prices_are_rental_cards_excluded_by_default() {
    let profile = default_classes_profile("");
    assert_eq!(profile.policy(CardClass::Rental), Policy::Exclude);
    for (name, price) in [
        ("코웨이 정수기 렌탈 CHP-264L", "월 29,900원"),
        ("LG 퓨리케어 정수기", "월 12,900원"),
        ("LG 퓨리케어 정수기 (월납)", "12,900원"),
        ("쿠쿠 공기청정기", "12,900원/월"),
        ("SK매직 비데", "매월 9,900원"),
        ("청호나이스 얼음정수기 렌털", "39,900원"),
    ] {
        assert_eq!(
            classes_of(&profile, name, price, ""),
            [CardClass::Rental],
            "{name} {price}"
        );
    }
    for (name, price) in [
        ("종근당 락토핏 6개월분", "29,900원"),
        ("햇반 210g 12개 월요일 배송", "12,900원"),
        ("코웨이 정수기 필터 6개월 12,900원 세트", "12,900원"),
    ] {
        assert!(
            classes_of(&profile, name, price, "").is_empty(),
            "{name} {price}"
        );
    }
}

#[test]
fn a_badge_joined_to_the_title_is_an_ad() {
    let profile = default_classes_profile("");
    // The title reads "광고제주삼다수 2L" / "제주삼다수 2L광고": inline text is joined.
    for name in [
        "<span class=\"b\">광고</span>제주삼다수 2L",
        "제주삼다수 2L<span class=\"b\">광고</span>",
        "<em>AD</em>제주삼다수 2L",
    ] {
        let page = extract_page(
            &profile,
            &dom_snapshot(vec![card_html(None, name, "12,900원", "")]),
        );
        let card = &page.chosen_source().unwrap().cards[0];
        assert!(
            !card.title.contains(' ') || card.title.contains("2L"),
            "{}",
            card.title
        );
        assert!(
            !card.title.contains("광고 ") && !card.title.contains(" 광고"),
            "joined: {}",
            card.title
        );
        assert_eq!(card.classes, [CardClass::Ad], "{name}");
    }
    for name in ["광고용 풍선 100개", "ADIDAS 운동화", "제주삼다수 2L"] {
        assert!(
            classes_of(&profile, name, "12,900원", "").is_empty(),
            "{name}"
        );
    }
}

#[test]
fn refurbished_and_returned_wording_is_used_goods() {
    let profile = default_classes_profile("");
    for name in [
        "[리퍼] 애플 에어팟 프로 2",
        "애플 에어팟 프로 2 리퍼",
        "애플 에어팟 프로 2 리퍼비시",
        "애플 에어팟 프로 2 리퍼브",
        "갤럭시 S24 반품",
        "갤럭시 S24 반품상품",
        "갤럭시 S24 재포장",
        "갤럭시 S24 전시상품",
        "LG 그램 B급",
        "LG 그램 S급 중고",
        "LG 그램 개봉상품",
        "LG 그램 단순개봉 상품",
        "[반품] LG 그램",
        "Apple iPad refurbished",
    ] {
        assert_eq!(
            classes_of(&profile, name, "12,900원", ""),
            [CardClass::Used],
            "{name}"
        );
    }
    for (name, extra) in [
        ("LG 그램 미개봉 새상품", ""),
        ("중고생 참고서 세트", ""),
        ("갤럭시 S24 자급제", "<span>교환/반품 불가</span>"),
        ("리퍼블릭 티셔츠", ""),
    ] {
        assert!(
            classes_of(&profile, name, "12,900원", extra).is_empty(),
            "{name}"
        );
    }
}

#[test]
fn a_class_table_with_extend_adds_to_the_defaults() {
    let profile = default_classes_profile(
        "[classes.used]\nextend = true\nselectors = [\"span.grade\"]\ntexts = [{ field = \"title\", regex = \"알뜰구매\" }]\n",
    );
    // The profile's own matchers …
    assert_eq!(
        classes_of(&profile, "LG 그램 알뜰구매", "12,900원", ""),
        [CardClass::Used]
    );
    assert_eq!(
        classes_of(
            &profile,
            "LG 그램",
            "12,900원",
            "<span class=\"grade\">A</span>"
        ),
        [CardClass::Used]
    );
    // … and the defaults, without copying them.
    assert_eq!(
        classes_of(&profile, "LG 그램 리퍼", "12,900원", ""),
        [CardClass::Used]
    );
    assert_eq!(profile.policy(CardClass::Used), Policy::Exclude);
    // Without `extend` the table replaces the defaults.
    let replaced = default_classes_profile(
        "[classes.used]\ntexts = [{ field = \"title\", regex = \"알뜰구매\" }]\n",
    );
    assert!(classes_of(&replaced, "LG 그램 리퍼", "12,900원", "").is_empty());
    // Errors name the profile's own index.
    let text = "[classes.used]\nextend = true\ntexts = [{ field = \"title\", regex = \"(\" }]\n";
    let base = r#"format = 2
id = "examplemall"
display_name = "예시몰"
search_url_template = "https://www.example.com/search?q={query}"
no_results_text = "없음"
[[sources]]
kind = "dom"
cards = "li"
[sources.fields]
title = "a"
price = "b"
link = "a"
"#;
    let e = crate::format::parse("x.toml", &format!("{base}{text}")).unwrap_err();
    assert_eq!(e.field, "classes.used.texts[0].regex", "{e}");
}

/// A JSON design whose shipping is an object (`type`/`fee`/`freeFrom`), another with the
/// fee and the threshold in two members of their own, a list of delivery options read with
/// a filter, and a text-only item: every one reads through its field's rules in order.
fn structured_shipping_profile() -> CompiledProfile {
    let fields = pb::CardFields {
        title: vec![json("$.title")],
        price: vec![json("$.price")],
        // The first path lands on an object on some items: noted, and the next is tried.
        shipping: vec![json("$.delivery"), json("$.deliveryText")],
        shipping_type: vec![json("$.delivery.type")],
        shipping_fee: vec![
            json("$.delivery.fee"),
            json("$.deliveryFee"),
            json("$.options[?(@.kind=='fee')].amount"),
        ],
        shipping_threshold: vec![
            json("$.delivery.freeFrom"),
            json("$.freeDeliveryFrom"),
            json("$.options[?(@.kind=='free_from')].amount"),
        ],
        link: vec![json("$.url")],
        ..Default::default()
    };
    let mut p = profile(vec![embedded_source(
        "script#__NEXT_DATA__",
        "$.items[*]",
        fields,
    )]);
    p.shipping_types = [
        ("FREE", pb::ShippingStatus::Free),
        ("PAID", pb::ShippingStatus::Paid),
        ("conditional_free", pb::ShippingStatus::FreeByThreshold),
        ("COD", pb::ShippingStatus::Unknown),
    ]
    .into_iter()
    .map(|(code, status)| (code.to_owned(), status as i32))
    .collect();
    compile(&p).unwrap()
}

#[test]
fn structured_shipping_from_objects_members_and_filters() {
    use lps_proto::model::ShippingStatus::{Free, FreeByThreshold, Paid, Unknown};
    let profile = structured_shipping_profile();
    let blob = json!({"items": [
        {"title": "a", "price": 27900, "url": "/a",
         "delivery": {"type": "CONDITIONAL_FREE", "fee": 3000, "freeFrom": 20000}},
        {"title": "b", "price": 4200, "url": "/b",
         "delivery": {"type": "CONDITIONAL_FREE", "fee": 3000, "freeFrom": 20000}},
        {"title": "c", "price": 9900, "url": "/c", "delivery": {"type": "free"}},
        {"title": "d", "price": 9900, "url": "/d", "delivery": {"type": "PAID", "fee": 2500}},
        {"title": "e", "price": 9900, "url": "/e", "delivery": {"type": "COD", "fee": 0}},
        // Fee and threshold in two members of the item, no type.
        {"title": "f", "price": 31000, "url": "/f", "deliveryFee": 3500, "freeDeliveryFrom": 30000},
        {"title": "g", "price": 12000, "url": "/g", "deliveryFee": 3500, "freeDeliveryFrom": 30000},
        {"title": "h", "price": 12000, "url": "/h", "deliveryFee": 0},
        // A list of delivery options, read with filters.
        {"title": "i", "price": 15000, "url": "/i",
         "options": [{"kind": "fee", "amount": 2500}, {"kind": "free_from", "amount": 10000}]},
        // Text only; then nothing at all.
        {"title": "j", "price": 15000, "url": "/j", "deliveryText": "배송비 3,000원"},
        {"title": "k", "price": 15000, "url": "/k"},
        // A type code the profile does not know: the fee still speaks.
        {"title": "l", "price": 15000, "url": "/l", "delivery": {"type": "QUICK", "fee": 4000}}
    ]});
    let snapshot = PageSnapshot {
        url: PAGE.into(),
        scripts: vec![Some(blob.to_string())],
        ..Default::default()
    };
    let page = extract_page(&profile, &snapshot);
    let cards = &page.per_source[0].cards;
    let read: Vec<(&str, ShippingStatus, u64)> = cards
        .iter()
        .map(|card| {
            let shipping = card.shipping(&profile, card.price);
            (card.title.as_str(), shipping.status, shipping.fee)
        })
        .collect();
    assert_eq!(
        read,
        vec![
            ("a", FreeByThreshold, 0),
            ("b", Paid, 3000),
            ("c", Free, 0),
            ("d", Paid, 2500),
            ("e", Unknown, 0),
            ("f", FreeByThreshold, 0),
            ("g", Paid, 3500),
            ("h", Free, 0),
            ("i", FreeByThreshold, 0),
            ("j", Paid, 3000),
            ("k", Unknown, 0),
            ("l", Paid, 4000),
        ]
    );
    // `$.delivery` is an object on a..e and l: a reading error each, never a silent "".
    assert_eq!(
        cards[0].read_errors,
        vec!["shipping[0]: $.delivery lands on an object, not a value".to_owned()]
    );
    assert_eq!(cards[0].shipping_text, None);
    assert_eq!(cards[9].shipping_text.as_deref(), Some("배송비 3,000원"));
    assert!(
        cards[9].read_errors.is_empty(),
        "{:?}",
        cards[9].read_errors
    );
    assert_eq!(
        cards[0].shipping_type,
        Some(("CONDITIONAL_FREE".to_owned(), Some(FreeByThreshold)))
    );
    assert!(
        cards[11]
            .read_errors
            .iter()
            .any(|e| e.contains("\"QUICK\" is not one of the profile's shipping_types")),
        "{:?}",
        cards[11].read_errors
    );
}

#[test]
fn dom_shipping_fee_and_threshold_in_two_elements() {
    use lps_proto::model::ShippingStatus::{FreeByThreshold, Paid};
    let fields = pb::CardFields {
        title: vec![css("a.name")],
        price: vec![css("div.price")],
        shipping_fee: vec![css("span.fee")],
        shipping_threshold: vec![css("span.free-from")],
        link: vec![attr("a.name", "href")],
        ..Default::default()
    };
    let profile = compile(&profile(vec![dom_source("li.card", fields)])).unwrap();
    let card = |name: &str, price: &str| {
        format!(
            r#"<li class="card"><a class="name" href="/p/{name}">{name}</a><div class="price">{price}</div><span class="fee">배송비 2,500원</span><span class="free-from">3만원 이상 구매 시</span></li>"#
        )
    };
    let page = extract_page(
        &profile,
        &dom_snapshot(vec![card("x", "32,000원"), card("y", "12,000원")]),
    );
    let cards = &page.per_source[0].cards;
    assert_eq!(cards[0].shipping_threshold, Some(30_000));
    let x = cards[0].shipping(&profile, cards[0].price);
    let y = cards[1].shipping(&profile, cards[1].price);
    assert_eq!((x.status, x.fee), (FreeByThreshold, 0));
    assert_eq!((y.status, y.fee), (Paid, 2_500));
}

/// A DOM whose titles are cut and which shows no shipping, joined per card with a captured
/// JSON that has the full title and the shipping, by product id or by link.
#[test]
fn sources_joined_per_card_by_a_key() {
    use lps_proto::model::ShippingStatus::{Free, Paid, Unknown};
    for (dom_key, json_key) in [
        (attr("", "data-id"), json("$.id")),
        (attr("a.name", "href"), json("$.url")),
    ] {
        let dom_fields = pb::CardFields {
            title: vec![css("a.name")],
            price: vec![css("div.price")],
            link: vec![attr("a.name", "href")],
            key: vec![dom_key.clone()],
            ..Default::default()
        };
        let json_fields = pb::CardFields {
            title: vec![json("$.title")],
            price: vec![json("$.price")],
            shipping: vec![json("$.delivery")],
            link: vec![json("$.url")],
            key: vec![json_key.clone()],
            ..Default::default()
        };
        let mut dom = dom_source("li.card", dom_fields);
        dom.join = Some(pb::SourceJoin {
            source: "api".into(),
            take: vec!["title".into(), "shipping".into()],
        });
        let mut api = captured_source(r"/api/search", "$.items[*]", json_fields);
        api.name = "api".into();
        let profile = compile(&profile(vec![dom, api])).unwrap();
        let li = |id: &str, name: &str, price: &str| {
            format!(
                r#"<li class="card" data-id="{id}"><a class="name" href="/p/{id}">{name}</a><div class="price">{price}</div></li>"#
            )
        };
        let snapshot = PageSnapshot {
            url: PAGE.into(),
            dom: vec![
                vec![
                    li("11", "CJ 햇반 210g x…", "21,900원"),
                    li("12", "오뚜기밥 210g…", "18,900원"),
                    li("13", "농협 햅쌀밥 210g 24개", "19,900원"),
                ],
                vec![],
            ],
            scripts: vec![None, None],
            captured: vec![CapturedResponse {
                url: "https://www.example.com/api/search?q=%ED%96%87%EB%B0%98".into(),
                body: json!({"items": [
                    {"id": "12", "title": "오뚜기밥 210g x 24개 골라담기", "price": 18900, "url": "/p/12", "delivery": "배송비 3,000원"},
                    {"id": "11", "title": "CJ 햇반 210g x 24개", "price": 21900, "url": "/p/11", "delivery": "무료배송"}
                ]})
                .to_string(),
            }],
        };
        let page = extract_page(&profile, &snapshot);
        assert_eq!(page.chosen, Some(0), "the joining source is the one read");
        let cards = &page.per_source[0].cards;
        let read: Vec<(&str, ShippingStatus)> = cards
            .iter()
            .map(|c| (c.title.as_str(), c.shipping(&profile, c.price).status))
            .collect();
        assert_eq!(
            read,
            vec![
                ("CJ 햇반 210g x 24개", Free),
                ("오뚜기밥 210g x 24개 골라담기", Paid),
                // No partner: kept as the DOM shows it.
                ("농협 햅쌀밥 210g 24개", Unknown),
            ],
            "{dom_key:?}"
        );
        // The DOM's own price and link stay; the joined card's classes are added.
        assert_eq!(cards[1].price, 18_900);
        assert_eq!(cards[1].link, "https://www.example.com/p/12");
        // Which card it was joined with, and what it took from it (for the probe).
        let joined = cards[0].joined.as_ref().expect("joined");
        assert_eq!(joined.source, 1);
        assert_eq!(joined.took, [Field::Title, Field::Shipping]);
        assert!(cards[2].joined.is_none());
    }
}

#[test]
fn a_join_names_a_source_with_a_key_and_fields_to_take() {
    let fields = |key: bool| pb::CardFields {
        title: vec![css("a")],
        price: vec![css("b")],
        link: vec![attr("a", "href")],
        key: if key {
            vec![attr("", "data-id")]
        } else {
            vec![]
        },
        ..Default::default()
    };
    let json_fields = |key: bool| pb::CardFields {
        title: vec![json("$.t")],
        price: vec![json("$.p")],
        link: vec![json("$.u")],
        key: if key { vec![json("$.id")] } else { vec![] },
        ..Default::default()
    };
    let case = |join: pb::SourceJoin, dom_key: bool, api_key: bool| {
        let mut dom = dom_source("li", fields(dom_key));
        dom.join = Some(join);
        let mut api = captured_source("/api", "$.items[*]", json_fields(api_key));
        api.name = "api".into();
        compile(&profile(vec![dom, api])).map(|_| ())
    };
    let join = |source: &str, take: &[&str]| pb::SourceJoin {
        source: source.into(),
        take: take.iter().map(|s| (*s).to_owned()).collect(),
    };
    assert!(case(join("api", &["title"]), true, true).is_ok());
    for (j, dom_key, api_key, field, says) in [
        (
            join("apii", &["title"]),
            true,
            true,
            "sources[0].join.source",
            "not the name of a source",
        ),
        (
            join("dom", &["title"]),
            true,
            true,
            "sources[0].join.source",
            "cannot join itself",
        ),
        (
            join("api", &["title"]),
            false,
            true,
            "sources[0].join.source",
            "needs a `key`",
        ),
        (
            join("api", &["title"]),
            true,
            false,
            "sources[0].join.source",
            "needs a `key`",
        ),
        (
            join("api", &[]),
            true,
            true,
            "sources[0].join.take",
            "name the fields",
        ),
        (
            join("api", &["colour"]),
            true,
            true,
            "sources[0].join.take[0]",
            "not a field",
        ),
    ] {
        let err = case(j, dom_key, api_key).unwrap_err();
        assert_eq!(err.field, field, "{err}");
        assert!(err.reason.contains(says), "{err}");
    }
}

/// `(field[index], outcome kind, detail)` of every rule report of `rules`.
fn reports(rules: &[RuleReport]) -> Vec<(String, &'static str, String)> {
    rules
        .iter()
        .map(|r| {
            (
                format!("{}[{}]", r.field.as_str(), r.index),
                r.outcome.kind(),
                r.outcome.detail().to_owned(),
            )
        })
        .collect()
}

#[test]
fn an_explaining_profile_reports_every_rule_and_why_it_read_nothing() {
    let fields = pb::CardFields {
        title: vec![attr("a.name", "title"), css("a.name")],
        price: vec![
            css("div.missing"),
            pb::FieldRule {
                css: "div.price".into(),
                regex: r"할인가 (\S+)".into(),
                ..Default::default()
            },
            css("span.soldout"),
            css("div.price"),
        ],
        link: vec![attr("a.name", "href")],
        ..Default::default()
    };
    let p = profile(vec![dom_source("li.product-card", fields)]);
    let html = r#"<li class="product-card"><a class="name" href="/p/1">햇반 210g</a>
        <div class="price">29,900원</div><span class="soldout">품절</span></li>"#;
    let plain = compile(&p).unwrap();
    let card = &extract_page(&plain, &dom_snapshot(vec![html.into()])).per_source[0].cards[0];
    assert!(card.rules.is_empty(), "a job's reading has no reports");
    let explaining = compile(&p).unwrap().explaining();
    let page = extract_page(&explaining, &dom_snapshot(vec![html.into()]));
    let card = &page.per_source[0].cards[0];
    assert_eq!(card.price, 29_900);
    let at = |s: &str| s.to_owned();
    assert_eq!(
        reports(&card.rules),
        [
            (at("title[0]"), "empty", at("attribute \"title\" missing")),
            (at("title[1]"), "used", at("햇반 210g")),
            (at("price[0]"), "empty", at("selector matched nothing")),
            (
                at("price[1]"),
                "empty",
                at("regex matched nothing in \"29,900원\"")
            ),
            (at("price[2]"), "unused", at("품절 (no amount that counts)")),
            (at("price[3]"), "used", at("29,900원")),
            (at("link[0]"), "used", at("https://www.example.com/p/1")),
        ]
    );
    // An item with text but no price: why, kept for the probe.
    let broken = r#"<li class="product-card"><a class="name" href="/p/2">햇반</a></li>"#;
    let page = extract_page(&explaining, &dom_snapshot(vec![broken.into()]));
    let source = &page.per_source[0];
    assert_eq!((source.cards.len(), source.unparsed), (0, 1));
    let rules = reports(&source.unparsed_rules[0]);
    assert!(
        rules.contains(&(at("price[3]"), "empty", at("selector matched nothing"))),
        "{rules:?}"
    );
}

#[test]
fn json_rule_reports_say_what_a_path_found() {
    let fields = pb::CardFields {
        title: vec![json("$.title")],
        price: vec![json("$.price")],
        link: vec![json("$.url")],
        shipping: vec![json("$.delivery"), json("$.deliveryText")],
        ..Default::default()
    };
    let p = profile(vec![embedded_source("script#data", "$.items[*]", fields)]);
    let explaining = compile(&p).unwrap().explaining();
    let blob = json!({"items": [{
        "title": "햇반", "price": 9900, "url": "/p/1",
        "delivery": {"type": "fee", "fee": 3000}
    }]});
    let snapshot = PageSnapshot {
        url: PAGE.into(),
        scripts: vec![Some(blob.to_string())],
        ..Default::default()
    };
    let page = extract_page(&explaining, &snapshot);
    let card = &page.per_source[0].cards[0];
    let rules = reports(&card.rules);
    let at = |s: &str| s.to_owned();
    assert!(
        rules.contains(&(
            at("shipping[0]"),
            "unreadable",
            at("$.delivery lands on an object, not a value")
        )),
        "{rules:?}"
    );
    assert!(
        rules.contains(&(
            at("shipping[1]"),
            "empty",
            at("$.deliveryText found nothing")
        )),
        "{rules:?}"
    );
    assert!(
        rules.contains(&(at("price[0]"), "used", at("9900"))),
        "{rules:?}"
    );
}
