//! Judge tests on realistic Korean mall titles.

use super::{
    MIN_NAME_OVERLAP, Measure, ProductQuery, Quantity, Reason, judge, must_query, rounds,
    same_quantity,
};

/// The expected outcome of one card, by reason label (see [`Reason::as_str`]).
type Case = (&'static str, &'static str);

fn check(query: &ProductQuery, cases: &[Case]) {
    for &(title, want) in cases {
        let verdict = judge(query, title);
        assert_eq!(
            verdict.reason.as_str(),
            want,
            "query {:?}, card {title:?}: {verdict:?}",
            query.name()
        );
        assert_eq!(verdict.same, want == "match", "card {title:?}");
        assert!(
            (0.0..=1.0).contains(&verdict.score),
            "card {title:?}: score {}",
            verdict.score
        );
    }
}

#[test]
fn bottled_water() {
    let query = must_query("제주 삼다수 2L x 12");
    check(
        &query,
        &[
            ("[무료배송] 제주삼다수 2L x 12병", "match"),
            ("삼다수 2리터 12입", "match"),
            ("제주 삼다수 2L 12개", "match"),
            ("제주삼다수 2L*12병 생수", "match"),
            ("(2L*12) 제주 삼다수 먹는샘물", "match"),
            ("제주삼다수 2000ml X 12", "match"),
            ("제주삼다수 2L 6병 x 2팩", "match"),
            ("제주 삼다수 2L 12병 (6병x2팩)", "match"),
            ("［공식］제주삼다수　２Ｌ×１２병", "match"),
            ("삼다수 그린 2L 12병 무라벨", "match"),
            ("제주삼다수 500ml x 20병", "quantity_mismatch"),
            ("제주 삼다수 2L x 6병", "quantity_mismatch"),
            ("제주 삼다수 2L", "quantity_mismatch"),
            ("[1+1] 제주 삼다수 2L x 12", "quantity_mismatch"),
            ("제주 삼다수 2L 6병 / 12병 택1", "quantity_mismatch"),
            ("제주 삼다수 2L 24병", "quantity_mismatch"),
            ("제주 용암수 2L x 12", "low_token_overlap"),
            ("아이시스 8.0 2L x 12병", "low_token_overlap"),
            ("백산수 2L 12병", "low_token_overlap"),
            ("삼다수 페트 공병 2L 12개", "accessory"),
        ],
    );
}

#[test]
fn soft_drink_variants() {
    let query = must_query("코카콜라 제로 500ml 24개");
    check(
        &query,
        &[
            ("코카콜라 제로 500ml x 24캔", "match"),
            ("코카콜라제로 500mlx24개", "match"),
            ("[코카콜라] 제로 콜라 500ml 24입", "match"),
            ("Coca-Cola 코카콜라 ZERO 500ML 24EA", "match"),
            ("코카콜라 500ml 24개", "variant_mismatch"),
            ("코카콜라 제로 라이트 500ml 24개", "variant_mismatch"),
            ("[1+1] 코카콜라 제로 500ml 24개", "quantity_mismatch"),
            ("코카콜라 제로 1.5L 12개", "quantity_mismatch"),
            ("코카콜라 제로 500ml 12개", "quantity_mismatch"),
            ("펩시 제로 500ml 24개", "low_token_overlap"),
        ],
    );
}

#[test]
fn phone_model_tokens() {
    let query = must_query("삼성 갤럭시 S24 울트라 SM-S928N 256GB");
    check(
        &query,
        &[
            ("삼성전자 갤럭시 S24 Ultra 자급제 SM-S928N 256GB", "match"),
            ("[삼성] 갤럭시S24울트라 SMS928N 256GB 티타늄 블랙", "match"),
            ("SM-S928N 갤럭시 S 24 울트라 256 GB", "match"),
            ("갤럭시 S24 울트라 케이스 SM-S928N 256GB 호환", "accessory"),
            (
                "갤럭시 S24 울트라 SM-S928N 256GB 강화유리 필름",
                "accessory",
            ),
            (
                "삼성 갤럭시 S24 울트라 SM-S928N 256GB 중고 A급",
                "accessory",
            ),
            ("삼성 갤럭시 S24 SM-S921N 256GB", "missing_model_token"),
            (
                "삼성 갤럭시 S24 울트라 SM-S928N 512GB",
                "missing_model_token",
            ),
            (
                "삼성 갤럭시 S23 울트라 SM-S918N 256GB",
                "missing_model_token",
            ),
            (
                "삼성 갤럭시 S24 울트라 SM-S928NZKE 256GB",
                "missing_model_token",
            ),
        ],
    );

    let base = must_query("갤럭시 S24 256GB");
    check(
        &base,
        &[
            ("삼성 갤럭시 S24 256GB 자급제", "match"),
            ("갤럭시 S24 울트라 256GB", "variant_mismatch"),
            ("갤럭시 S24+ 플러스 256GB", "variant_mismatch"),
        ],
    );

    let iphone = must_query("아이폰15 프로 256GB");
    check(
        &iphone,
        &[
            ("Apple 아이폰 15 Pro 256GB 자급제", "match"),
            ("아이폰 15 프로 맥스 256GB", "variant_mismatch"),
            ("아이폰 14 프로 256GB", "missing_model_token"),
            ("아이폰 15 프로 256GB 실리콘 케이스", "accessory"),
        ],
    );
}

#[test]
fn model_code_only_query() {
    let query = must_query("소니 WH-1000XM5");
    check(
        &query,
        &[
            ("SONY 소니 WH1000XM5 노이즈캔슬링 헤드폰", "match"),
            ("소니 WH-1000XM5 블랙 정품", "match"),
            ("WH-1000XM5 블랙", "match"),
            ("소니 WH-1000XM4", "missing_model_token"),
            ("WH-1000XM5 호환 이어패드", "accessory"),
        ],
    );

    // Short model tokens do not waive the name overlap.
    let short = must_query("갤럭시 S24 256GB");
    check(&short, &[("S24 256GB", "low_token_overlap")]);

    let code_only = must_query("WH-1000XM5");
    check(
        &code_only,
        &[
            ("소니 WH1000XM5 실버", "match"),
            ("소니 WH-1000XM4 실버", "missing_model_token"),
        ],
    );
}

#[test]
fn counts_and_weights() {
    let ramen = must_query("농심 신라면 120g 5개입");
    check(
        &ramen,
        &[
            ("농심 신라면 멀티팩 120g x 5봉", "match"),
            ("신라면 5개입 120g", "match"),
            ("농심 신라면 120g 5개 x 4팩", "quantity_mismatch"),
            ("농심 신라면 컵 65g 6개", "quantity_mismatch"),
            ("농심 안성탕면 125g 5개입", "low_token_overlap"),
        ],
    );

    let tissue = must_query("크리넥스 3겹 데코앤소프트 30롤");
    check(
        &tissue,
        &[
            ("크리넥스 데코앤소프트 3겹 30m 30롤", "match"),
            ("[크리넥스] 3겹 데코앤소프트 화장지 30롤 x 1팩", "match"),
            ("크리넥스 3겹 데코앤소프트 24롤", "quantity_mismatch"),
            ("크리넥스 2겹 데코앤소프트 30롤", "missing_model_token"),
        ],
    );

    let promo = must_query("비비고 왕교자 1.05kg 1+1");
    check(
        &promo,
        &[
            ("[1+1] CJ 비비고 왕교자 1050g", "match"),
            ("비비고 왕교자 1.05kg x 2봉", "match"),
            ("비비고 왕교자 1.05kg", "quantity_mismatch"),
        ],
    );
}

#[test]
fn decoys_allowed_when_the_query_has_them() {
    let query = must_query("아이폰 15 케이스");
    check(
        &query,
        &[
            ("아이폰15 투명 케이스", "match"),
            ("아이폰 15 호환 케이스", "accessory"),
            ("아이폰 14 케이스", "missing_model_token"),
        ],
    );

    let refill = must_query("다우니 리필 1.6L");
    check(
        &refill,
        &[
            ("다우니 섬유유연제 리필 1.6L", "match"),
            ("다우니 섬유유연제 1.6L", "match"),
        ],
    );
}

#[test]
fn brand_hint() {
    let hinted = must_query("제주 삼다수 2L x 12").with_brand("삼다수");
    check(
        &hinted,
        &[
            ("삼다수 2리터 12입", "match"),
            ("제주 용암수 2L x 12", "missing_brand"),
        ],
    );

    // A brand the name lacks is not required: titles often omit the maker.
    let absent = must_query("갤럭시 S24 256GB").with_brand("Samsung");
    check(&absent, &[("갤럭시 S24 256GB 자급제", "match")]);
}

#[test]
fn scores_and_reasons_carry_detail() {
    let query = must_query("제주 삼다수 2L x 12");

    let full = judge(&query, "[무료배송] 제주삼다수 2L x 12병");
    assert!((full.score - 1.0).abs() < f32::EPSILON, "{full:?}");

    // 삼다수 (3 of 5 characters) is found, 제주 is not.
    let partial = judge(&query, "삼다수 2리터 12입");
    assert!((partial.score - 0.6).abs() < 1e-6, "{partial:?}");
    assert!(partial.score >= MIN_NAME_OVERLAP);

    let wrong = judge(&query, "제주삼다수 500ml x 20병");
    assert_eq!(
        wrong.reason,
        Reason::QuantityMismatch {
            wanted: Quantity {
                unit_size: Some(Measure::from_ml(2000)),
                count: 12,
            },
            found: Quantity {
                unit_size: Some(Measure::from_ml(500)),
                count: 20,
            },
        }
    );
    assert_eq!(
        wrong.reason.to_string(),
        "quantity mismatch: wanted 2L 12개, found 500ml 20개"
    );
    assert!((wrong.score - 1.0).abs() < f32::EPSILON, "{wrong:?}");

    let missing = judge(&must_query("소니 WH-1000XM5"), "소니 WH-1000XM4");
    assert_eq!(
        missing.reason,
        Reason::MissingModelToken {
            token: "WH-1000XM5".to_owned()
        }
    );
    assert_eq!(
        missing.reason.to_string(),
        "missing model token \"WH-1000XM5\""
    );

    let empty = judge(&query, "");
    assert_eq!(empty.reason, Reason::EmptyTitle);
    assert!(empty.score.abs() < f32::EPSILON);
}

#[test]
fn odd_inputs_never_panic() {
    let odd: Vec<String> = [
        "",
        " ",
        "\u{0}\u{1}\u{7f}",
        "😀🔥💧",
        "👨‍👩‍👧‍👦 2L",
        "99999999999ml",
        "99999999999999999999999999999999ml x 99999999999999999999",
        "4294967295개 x 4294967295개 1+1",
        "ｘｘｘ",
        "x",
        "+",
        "-",
        "...",
        "1.",
        ".5l",
        "2L x",
        "총",
        "ㅋㅋㅋ",
        "مرحبا بالعالم",
        "e\u{301}\u{301}\u{301}",
        "\u{200b}\u{feff}",
        "İİİ",
        "ß",
        "-a-b-c-1-2-3-",
        "1+1+1+1+1",
        "x12x12x12x12",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain([
        "삼다수 2L x 12 ".repeat(500),
        "9".repeat(10_000),
        "-1".repeat(5_000),
    ])
    .collect();

    let query = must_query("제주 삼다수 2L x 12");
    for title in &odd {
        let verdict = judge(&query, title);
        assert!(
            (0.0..=1.0).contains(&verdict.score),
            "{title:?}: {verdict:?}"
        );
        if super::normalize(title).is_empty() {
            assert_eq!(verdict.reason, Reason::EmptyTitle, "{title:?}");
        }
        let _ = Quantity::parse(title);
        // As a product name: either rejected with an error or usable.
        match ProductQuery::new(title) {
            Ok(q) => {
                assert!(!rounds(&q).is_empty(), "{title:?}");
                let _ = judge(&q, title);
            }
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
    // A valid name judged against itself with a repeated quantity agrees.
    assert!(judge(&query, &odd[odd.len() - 3]).same);
}

#[test]
fn the_quantity_veto_ignores_wording() {
    // A name the rules cannot match to the mall's wording: only the amount is checked.
    let query = must_query("Jeju Samdasoo 2L x 12");
    for (title, same) in [
        ("제주 삼다수 2L x 12병", true),
        ("삼다수 2리터 12개입", true),
        ("제주 삼다수 12병", true),
        ("제주 삼다수 2L x 6병", false),
        ("제주 삼다수 500ml x 20병", false),
        ("제주 삼다수 2L", false),
    ] {
        assert_eq!(same_quantity(&query, title), same, "{title:?}");
    }
}
