//! Judge tests on realistic Korean mall titles.

use super::{
    Lexicon, MIN_NAME_OVERLAP, Measure, ProductQuery, Quantity, Reason, judge, must_query, rounds,
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
            ("제주 삼다수 2L 6병 / 12병 택1", "assortment"),
            ("제주 삼다수 2L 24병", "quantity_mismatch"),
            ("제주 용암수 2L x 12", "other_name"),
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
            ("펩시 제로 500ml 24개", "other_brand"),
            ("코카콜라 제로 체리 500ml 24개", "variant_mismatch"),
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
            ("삼성 갤럭시 S24 울트라 SM-S928N 512GB", "quantity_mismatch"),
            (
                "삼성 갤럭시 S23 울트라 SM-S918N 256GB",
                "missing_model_token",
            ),
            // A colour/region suffix on the full code is the same phone.
            ("삼성 갤럭시 S24 울트라 SM-S928NZKE 256GB", "match"),
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
            ("농심 안성탕면 125g 5개입", "other_name"),
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
            // The query names the refill: the plain bottle is another form.
            ("다우니 섬유유연제 1.6L", "variant_mismatch"),
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
            ("제주 용암수 2L x 12", "other_name"),
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
                capacity: None,
            },
            found: Quantity {
                unit_size: Some(Measure::from_ml(500)),
                count: 20,
                capacity: None,
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
        match ProductQuery::new(title, Lexicon::builtin()) {
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

#[test]
fn spacing_of_compound_words() {
    let query = must_query("삼성 비스포크 그랑데 AI 라이트스탠다드 세탁기");
    check(
        &query,
        &[
            ("삼성 비스포크 그랑데 AI 라이트 스탠다드 세탁기", "match"),
            ("삼성 비스포크 그랑데AI 라이트스탠다드세탁기", "match"),
            ("삼성 비스포크 그랑데 AI 스탠다드 라이트 세탁기", "match"),
        ],
    );
    // A word found only in part still counts for that part (`삼다수` of `제주삼다수`).
    let glued = must_query("제주삼다수 2L x 6");
    check(
        &glued,
        &[
            ("삼다수 2L 6개", "match"),
            ("백산수 2L 6개", "low_token_overlap"),
        ],
    );
    // The product's own name holds no variant: `라이트` in `스프라이트`.
    let sprite = must_query("스프라이트 500ml x 24");
    check(
        &sprite,
        &[
            ("스프라이트 500ml 24개", "match"),
            ("스프라이트 제로 500ml 24개", "variant_mismatch"),
        ],
    );
}

#[test]
fn aliases_across_scripts() {
    check(
        &must_query("코카콜라 500ml x 24"),
        &[
            ("Coca-Cola 500ml 24PET", "match"),
            ("COKE 500ml x 24", "match"),
        ],
    );
    check(
        &must_query("크리넥스 데코앤소프트 30롤"),
        &[("Kleenex 데코앤소프트 30롤", "match")],
    );
    check(
        &must_query("애플 에어팟 프로 2세대 USB-C"),
        &[
            ("Apple AirPods Pro 2 USB-C", "match"),
            ("애플 에어팟 프로 2세대 C타입", "match"),
            ("애플 에어팟 프로 2세대 라이트닝", "variant_mismatch"),
            ("애플 에어팟 프로 1세대", "variant_mismatch"),
            ("애플 에어팟 프로", "variant_mismatch"),
        ],
    );
}

#[test]
fn variant_kinds_and_their_silent_rule() {
    // Flavour: another value is another product; a silent query wants the plain one.
    let mild = must_query("오뚜기 진라면 순한맛 120g 5개입");
    check(
        &mild,
        &[
            ("오뚜기 진라면 순한맛 5개입 120g", "match"),
            ("진라면순한맛 120g x 5", "match"),
            ("오뚜기 진라면 매운맛 120g 5개입", "variant_mismatch"),
            ("오뚜기 진라면 120g 5개입", "variant_mismatch"),
        ],
    );
    let plain = must_query("오뚜기 진라면 120g 5개입");
    check(&plain, &[("진라면 매운맛 120g 5개입", "variant_mismatch")]);
    // A value glued to a word: `레몬향` names 레몬.
    check(
        &must_query("아이깨끗해 핸드워시 레몬 250ml"),
        &[
            ("아이깨끗해 핸드워시 레몬향 250ml", "match"),
            ("아이깨끗해 핸드워시 청포도 250ml", "variant_mismatch"),
        ],
    );
    // Line: a related product of the same brand.
    check(
        &must_query("농심 신라면 120g 5개입"),
        &[
            ("농심 신라면 건면 5개입", "variant_mismatch"),
            ("농심 신라면 120g 5개입", "match"),
        ],
    );
    // Colour: any colour when the query names none, the one it names otherwise.
    check(
        &must_query("로지텍 MX Master 3S 마우스"),
        &[("로지텍 MX Master 3S 마우스 그래파이트", "match")],
    );
    check(
        &must_query("애플 아이폰 15 프로 256GB 블랙 티타늄"),
        &[
            ("애플 아이폰 15 프로 256GB 블랙 티타늄", "match"),
            ("아이폰15 프로 256GB 티타늄블랙", "match"),
            ("애플 아이폰 15 프로 256GB", "match"),
            (
                "애플 아이폰 15 프로 256GB 내추럴 티타늄",
                "variant_mismatch",
            ),
        ],
    );
    // Form: refill versus the plain bottle.
    check(
        &must_query("다우니 섬유유연제 2L"),
        &[
            ("다우니 섬유유연제 본품 2L", "match"),
            ("다우니 섬유유연제 리필 2L", "variant_mismatch"),
        ],
    );
    // A value glued to a known word (`액체세제`), or two values glued (`현미녹차`).
    check(
        &must_query("테크 액체 세제 3L"),
        &[
            ("LG생활건강 테크 액체세제 3L", "match"),
            ("LG생활건강 테크 분말세제 3L", "variant_mismatch"),
        ],
    );
    check(
        &must_query("오설록 제주 녹차 1.8g x 100T"),
        &[("오설록 제주 현미녹차 1.8g x 100T", "variant_mismatch")],
    );
    // Size letters are whole words, never a piece of a code.
    check(
        &must_query("유니클로 에어리즘 티셔츠 화이트 L"),
        &[
            ("유니클로 에어리즘 티셔츠 화이트 L", "match"),
            ("유니클로 에어리즘 티셔츠 화이트 XL", "variant_mismatch"),
        ],
    );
}

#[test]
fn model_codes_identify_alone() {
    let hinted = must_query("갤럭시 S24 울트라 256GB").with_model_code("SM-S928N");
    check(
        &hinted,
        &[
            ("삼성 SM-S928N 256GB 자급제", "match"),
            ("갤럭시 S24 울트라 256GB 자급제", "match"),
            ("삼성 SM-S921N 256GB", "missing_model_token"),
        ],
    );
    // A region after `/` is optional.
    let region = must_query("에어팟 프로 2세대").with_model_code("MTJV3KH/A");
    check(&region, &[("애플 에어팟 프로 2 MTJV3KH", "match")]);
    // A size stays required next to a code.
    let shoe = must_query("나이키 에어포스 1 07 화이트 CW2288-111 265");
    check(
        &shoe,
        &[
            ("나이키 에어포스 CW2288-111 265", "match"),
            ("나이키 에어포스 CW2288-111 270", "missing_model_token"),
        ],
    );
}

#[test]
fn gifts_assortments_and_bundles() {
    let phone = must_query("삼성 갤럭시 S24 울트라 256GB");
    check(
        &phone,
        &[
            ("갤럭시 S24 울트라 256GB + 강화유리 필름 증정", "match"),
            ("갤럭시 S24 울트라 256GB 정품 케이스 증정", "match"),
            ("[사은품증정] 갤럭시 S24 울트라 256GB", "match"),
            ("갤럭시 S24 울트라 256GB + 케이스 + 필름 증정", "match"),
            ("갤럭시 S24 울트라 256GB 케이스", "accessory"),
            ("갤럭시 S24 울트라 256GB KT 번호이동", "accessory"),
        ],
    );
    let water = must_query("제주 삼다수 2L x 12");
    check(
        &water,
        &[
            ("[골라담기] 제주삼다수 2L 12병 외 생수 모음", "assortment"),
            ("제주 삼다수 2L 12병 외 3종", "assortment"),
            ("제주삼다수 2L 12병 + 500ml 20병", "bundle"),
            ("제주삼다수 2L 12병 + 500ml 1병 증정", "match"),
            ("제주삼다수 2L 12병 택배 무료", "match"),
        ],
    );
    check(
        &must_query("듀라셀 알카라인 AA 20입"),
        &[
            ("듀라셀 알카라인 AA 20입 + 쇼핑백", "match"),
            ("듀라셀 알카라인 AA 20입 + AAA 20입", "bundle"),
        ],
    );
}

#[test]
fn brands_and_replaced_names() {
    let dumplings = must_query("비비고 왕교자 1.05kg").with_brand("CJ");
    check(
        &dumplings,
        &[
            ("CJ 비비고 왕교자 1.05kg", "match"),
            ("비비고 왕교자 1.05kg", "match"),
            ("풀무원 왕교자 1.05kg", "other_brand"),
        ],
    );
    // A maker left out does not count against the name.
    check(
        &must_query("농심 신라면 120g 5개입"),
        &[("신라면 멀티팩 120g 5입", "match")],
    );
    // Another line name where the query has one, or the line word left out.
    check(
        &must_query("크록스 클래식 클로그 블랙 260"),
        &[
            ("크록스 클래식 클로그 블랙 260", "match"),
            ("크록스 바야 클로그 블랙 260", "other_name"),
        ],
    );
    check(
        &must_query("질레트 퓨전5 프로글라이드 면도날 8입"),
        &[("질레트 퓨전5 면도날 8입", "other_name")],
    );
}

#[test]
fn only_wording_rejections_go_to_the_llm() {
    let query = must_query("Jeju Spring Water 2L x 12");
    let wording = judge(&query, "제주 삼다수 2L 12병");
    assert!(!wording.same && wording.wording_only, "{wording:?}");
    for vetoed in [
        "제주 삼다수 2L 6병",
        "제주 삼다수 2L 12병 케이스",
        "[골라담기] 제주 삼다수 2L 12병",
    ] {
        let v = judge(&query, vetoed);
        assert!(!v.same && !v.wording_only, "{vetoed:?}: {v:?}");
    }
    assert!(!judge(&query, "Jeju Spring Water 2L x 12").wording_only);
}

#[test]
fn a_profile_adds_words() {
    use lps_profiles::vocabulary::parse_additions;
    let table: toml::Value =
        toml::from_str("aliases = [[\"삼다수\", \"samdasoo\"]]\n[units]\ncount = [\"꾸러미\"]\n")
            .unwrap_or_else(|e| panic!("{e}"));
    let additions =
        parse_additions("p.toml", "vocabulary", table).unwrap_or_else(|e| panic!("{e}"));
    let lexicon = Lexicon::compile(&Lexicon::builtin_wire(), Some(&additions))
        .unwrap_or_else(|e| panic!("{e}"));
    let query = ProductQuery::new("제주 삼다수 2L 12꾸러미", std::sync::Arc::new(lexicon))
        .unwrap_or_else(|e| panic!("{e}"));
    check(
        &query,
        &[
            ("Jeju Samdasoo 2L x 12", "match"),
            ("제주 삼다수 2L 6꾸러미", "quantity_mismatch"),
        ],
    );
    // Without the mall's words, 꾸러미 is no unit and 12 no count.
    let plain = must_query("제주 삼다수 2L 12꾸러미");
    assert_eq!(plain.quantity().count, 1);
}

#[test]
fn a_gtin_on_both_sides_settles_the_wording() {
    use super::{PageCard, judge_page};
    let query = must_query("오뚜기 진라면 매운맛 120g 5개").with_gtin("8801234567893");
    let card = |title, gtin| PageCard {
        title,
        gtin: Some(gtin),
    };
    let verdicts = judge_page(
        &query,
        &[
            // Wording alone would reject these: the barcode names the item.
            card("OTTOGI Jin Ramen Hot 120g x 5", "8801234567893"),
            card("진라면 (매운) 5입 120g", "08801234567893"),
            // Another barcode is another product, however alike the words.
            card("오뚜기 진라면 매운맛 120g 5개", "8801234567886"),
            // Listing rules still hold: an option listing carries its main item's code.
            card("오뚜기 진라면 매운맛/순한맛 택1 120g 5개", "8801234567893"),
            // No barcode on the card (or none valid): the title rules decide.
            card("오뚜기 진라면 순한맛 120g 5개", "123"),
        ],
    );
    let reasons: Vec<&str> = verdicts.iter().map(|v| v.reason.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "match",
            "match",
            "other_gtin",
            "assortment",
            "variant_mismatch"
        ]
    );
}

/// Every spelling of a dimension, generated: separators, spacing and the unit's place.
fn dimension_spellings(a: &str, b: &str, unit: &str) -> Vec<String> {
    let mut out = Vec::new();
    for mark in ["x", "X", "*", "×", "✕"] {
        for space in ["", " "] {
            for unit_space in ["", " "] {
                out.push(format!("{a}{space}{mark}{space}{b}{unit_space}{unit}"));
            }
        }
    }
    out
}

#[test]
fn dimensions_match_in_every_spelling_and_never_as_counts() {
    for (a, b, unit) in [("30", "40", "cm"), ("1.2", "2", "m"), ("50", "90", "mm")] {
        let spellings = dimension_spellings(a, b, unit);
        for wanted in &spellings {
            let query = must_query(&format!("무지 면 수건 {wanted}"));
            assert!(
                query.quantity().is_unstated(),
                "{wanted:?} read as an amount: {}",
                query.quantity()
            );
            for found in &spellings {
                let title = format!("[무료배송] 무지 면 수건 {found} 호텔수건");
                let verdict = judge(&query, &title);
                assert!(verdict.same, "{wanted:?} vs {found:?}: {verdict:?}");
            }
            // The digits run together are the same size; another size, and the same
            // digits split another way, are other products. (A decimal's trailing zero
            // is no digit of it: `1.20` is `1.2`, so a decimal grows by a 5.)
            let together = judge(&query, &format!("무지 면 수건 {a}{b}{unit}"));
            assert!(together.same, "{wanted:?} run together: {together:?}");
            let grown = |n: &str| {
                if n.contains('.') {
                    format!("{n}5")
                } else {
                    format!("{n}0")
                }
            };
            for other in [
                format!("무지 면 수건 {b}x{}{unit}", grown(a)),
                format!("무지 면 수건 {a}x{}{unit}", grown(b)),
                format!("무지 면 수건 {}x{b}{unit}", grown(a)),
            ] {
                let verdict = judge(&query, &other);
                assert!(!verdict.same, "{wanted:?} vs {other:?}: {verdict:?}");
            }
        }
    }
}

fn page(query: &ProductQuery, titles: &[&str]) -> Vec<&'static str> {
    use super::{PageCard, judge_page};
    let cards: Vec<PageCard<'_>> = titles
        .iter()
        .map(|title| PageCard { title, gtin: None })
        .collect();
    judge_page(query, &cards)
        .into_iter()
        .map(|v| v.reason.as_str())
        .collect()
}

#[test]
fn a_page_contrasts_a_line_word_nobody_listed() {
    // `인텐시브` and `Ti` are in no vocabulary: the page shows the product without them,
    // and a second card of the name carries them too (another size, another seller).
    let cream = must_query("닥터지 레드 블레미쉬 수딩 크림 70ml");
    assert_eq!(
        page(
            &cream,
            &[
                "닥터지 레드 블레미쉬 수딩 크림 70ml",
                "[공식] 닥터지 레드 블레미쉬 수딩 크림 70ml 진정크림",
                "닥터지 레드 블레미쉬 인텐시브 수딩 크림 70ml",
                "닥터지 레드 블레미쉬 인텐시브 수딩 크림 50ml",
            ]
        ),
        ["match", "match", "line_word", "quantity_mismatch"]
    );
    let gpu = must_query("이엠텍 지포스 RTX 4060 STORM X Dual OC D6 8GB");
    assert_eq!(
        page(
            &gpu,
            &[
                "이엠텍 지포스 RTX 4060 STORM X Dual OC D6 8GB",
                "이엠텍 지포스 RTX 4060 Ti STORM X Dual OC D6 8GB",
                "[이엠텍] RTX 4060 STORM X Dual OC D6 8GB 그래픽카드 당일발송",
                "[이엠텍] 지포스 RTX 4060 Ti STORM X Dual OC D6 8GB",
                "이엠텍 지포스 RTX 4060 STORM X Dual OC D6 8GB 정품",
            ]
        ),
        // (`Ti` splits two query words: a Latin mark the cards are rejected for one by one.)
        ["match", "other_name", "match", "other_name", "match"]
    );
    // A word one card alone adds is that seller's wording, not a line.
    assert_eq!(
        page(
            &cream,
            &[
                "닥터지 레드 블레미쉬 수딩 크림 70ml",
                "닥터지 레드 블레미쉬 인텐시브 수딩 크림 70ml",
            ]
        ),
        ["match", "match"]
    );
    // Alone, a card has nothing to contrast: the vocabulary decides.
    assert_eq!(
        page(&cream, &["닥터지 레드 블레미쉬 인텐시브 수딩 크림 70ml"]),
        ["match"]
    );
    // Descriptions after the name, descriptors and words other products carry are no lines.
    let food = must_query("로얄캐닌 미니 어덜트 2kg");
    assert_eq!(
        page(
            &food,
            &[
                "로얄캐닌 미니 어덜트 2kg",
                "로얄캐닌 미니 어덜트 사료 2kg",
                "로얄캐닌 미니 어덜트 강아지 건식 사료 2kg",
                "로얄캐닌 미니 어덜트 2kg 소형견 성견용",
            ]
        ),
        ["match", "match", "match", "match"]
    );
}

#[test]
fn compatibility_words_qualify_what_they_attach_to() {
    let card = must_query("샌디스크 마이크로SD 256GB");
    check(
        &card,
        &[
            ("샌디스크 마이크로SD 256GB (닌텐도 스위치 호환)", "match"),
            ("샌디스크 마이크로SD 256GB 닌텐도스위치호환", "match"),
            ("샌디스크 마이크로SD 256GB 블랙박스 전용", "match"),
            ("샌디스크 마이크로SD 256GB 호환 케이스", "accessory"),
        ],
    );
    let switch = must_query("닌텐도 스위치 OLED");
    check(&switch, &[("닌텐도 스위치 OLED 호환 충전 독", "accessory")]);
    // A word the query asks for must be on the card: a genuine toner is no compatible one.
    let toner = must_query("삼성 MLT-D111S 호환 토너");
    check(
        &toner,
        &[
            ("삼성 MLT-D111S 호환 토너 재생", "match"),
            ("삼성전자 정품 토너 MLT-D111S", "missing_condition"),
        ],
    );
}

#[test]
fn grades_and_code_extensions_are_other_products() {
    let formula = must_query("앱솔루트 명작 2FL 2단계 800g");
    check(
        &formula,
        &[
            ("매일 앱솔루트 명작 2FL 2단계 800g", "match"),
            ("앱솔루트 명작 2FL 3단계 800g", "missing_model_token"),
        ],
    );
    let ball = must_query("타이틀리스트 PRO V1 골프공 1더즌");
    check(
        &ball,
        &[
            ("타이틀리스트 PRO V1 골프공 1더즌", "match"),
            ("타이틀리스트 PRO V1x 골프공 1더즌", "missing_model_token"),
        ],
    );
    let phone = must_query("아이폰 15 프로 256GB");
    check(&phone, &[("Apple iPhone 15Pro 256GB", "match")]);
}

#[test]
fn a_description_after_the_amount_describes_the_product() {
    let cleaner = must_query("아스토니쉬 곰팡이 제거제 750ml");
    check(
        &cleaner,
        &[
            ("아스토니쉬 곰팡이 제거제 750ml 스프레이 욕실 세제", "match"),
            ("아스토니쉬 곰팡이 제거제 리필 750ml", "variant_mismatch"),
        ],
    );
    let shampoo = must_query("려 자양윤모 샴푸 400ml");
    check(
        &shampoo,
        &[("려 자양윤모 샴푸 400ml 리필", "variant_mismatch")],
    );
}

#[test]
fn names_are_found_across_scripts() {
    let food = must_query("오리젠 캣앤키튼 1.8kg");
    check(&food, &[("Orijen Cat & Kitten 1.8kg", "match")]);
    let latin = must_query("Royal Canin Indoor 2kg");
    check(&latin, &[("로얄캐닌 인도어 2kg", "match")]);
    let shave = must_query("필립스 원블레이드 QP2724");
    check(&shave, &[("PHILIPS OneBlade QP2724 면도기", "match")]);
    // An acronym Korean writes by its letters' names, alone or starting a word.
    let drone = must_query("DJI 미니4 프로 드론");
    check(&drone, &[("디제이아이 미니 4 프로 드론 정품", "match")]);
    // A word the sound rule cannot read (`휴`, one open syllable) spelled in the other
    // script between its neighbours is the word, not a replacement.
    let bulb = must_query("필립스 휴 화이트 앤 컬러 앰비언스 E26 전구");
    check(
        &bulb,
        &[(
            "Philips Hue White and Color Ambiance E26 스마트 전구 1개",
            "match",
        )],
    );
    // A word the query splits off a colour (`페이퍼화이트`) is found spelled whole.
    let reader = must_query("킨들 페이퍼화이트 16GB");
    check(&reader, &[("Amazon Kindle Paperwhite 16GB", "match")]);
    let tennis = must_query("윌슨 US오픈 테니스공 4개입");
    check(&tennis, &[("윌슨 유에스오픈 테니스공 4개입", "match")]);
}

#[test]
fn a_description_the_query_gives_may_be_left_out() {
    // `고소한` is an attributive form (a description): a title without it is the product;
    // another word in its place is still another line.
    let soy = must_query("곰곰 고소한 검은콩 칼슘 두유 190ml 24개");
    check(&soy, &[("곰곰 검은콩 칼슘 두유 190ml x 24팩", "match")]);
    let noodles = must_query("농심 얼큰한 너구리 120g 5개");
    check(&noodles, &[("농심 앵그리 너구리 120g 5개", "other_name")]);
}

#[test]
fn a_grade_is_its_number_and_its_marks() {
    // `1++` is not `1+`; a grade's counter (`등급`) is no line word of its own.
    let beef = must_query("횡성한우 1++ 등심 300g");
    check(
        &beef,
        &[
            ("[횡성축협] 횡성한우 1++등급 등심 구이용 300g", "match"),
            ("횡성한우 1+ 등급 등심 300g", "other_value"),
        ],
    );
    assert_eq!(
        page(
            &beef,
            &[
                "횡성한우 1++ 등심 300g",
                "[횡성축협] 횡성한우 1++등급 등심 구이용 300g",
                "횡성한우 1++등급 등심 300g 냉장",
                "횡성한우 1++ 등심 300g 구이용",
            ]
        ),
        ["match", "match", "match", "match"]
    );
}

#[test]
fn a_short_mark_spelled_in_hangul_after_its_neighbour() {
    // Letters by their names, digits as English says them, glued to the word before.
    let shoe = must_query("나이키 에어포스 1 07 화이트 270");
    check(&shoe, &[("나이키 에어포스원 07 화이트 270", "match")]);
    let drink = must_query("동아제약 박카스D 100ml x 10병");
    check(&drink, &[("동아제약 박카스디 100ml x 10병", "match")]);
    // Another digit's name is no spelling of it.
    check(
        &shoe,
        &[("나이키 에어포스투 07 화이트 270", "missing_model_token")],
    );
}

#[test]
fn one_letter_replaces_a_short_latin_mark() {
    // `F` in the place of `EF` is another nib; one letter is no replacement of a long word.
    let pen = must_query("라미 사파리 만년필 EF 차콜블랙");
    check(&pen, &[("라미 사파리 만년필 F 차콜블랙", "other_name")]);
}

#[test]
fn a_card_word_held_whole_by_one_query_word_is_no_part_of_another() {
    // `테트라` is the brand, held whole; it is no leading part of `테트라민` as well.
    let food = must_query("테트라 테트라민 플레이크 100ml");
    check(
        &food,
        &[
            ("테트라 테트라민 100ml 열대어사료 플레이크", "match"),
            ("테트라 베타 플레이크 100ml", "other_name"),
        ],
    );
}

#[test]
fn page_contrast_reads_the_name_phrase_only() {
    // A word repeated with a tag between, and a brand after the amount, do not stretch the
    // name: `이마트` and `요구르트` are no line words; `하루한병` inside the name is.
    let yogurt = must_query("남양 불가리스 플레인 150ml");
    assert_eq!(
        page(
            &yogurt,
            &[
                "남양 불가리스 플레인 150ml",
                "불가리스 이마트 남양 불가리스 플레인 150ml",
                "불가리스 플레인 150ml 요구르트 남양",
                "남양 불가리스 하루한병 플레인 150ml",
                "남양 불가리스 하루한병 플레인 150ml x 8",
            ]
        ),
        ["match", "match", "match", "line_word", "quantity_mismatch"]
    );
    // A word that ends the title after the whole name describes it; one the card puts in
    // place of a query word it lacks is another product.
    let desk = must_query("한샘 샘 책상 그레이스");
    assert_eq!(
        page(
            &desk,
            &[
                "한샘 샘 책상 그레이스",
                "한샘 샘 책상 그레이스 조립식",
                "한샘 샘 책상 모던",
            ]
        ),
        ["match", "match", "other_name"]
    );
    let chair = must_query("코베아 캠핑 체어 블랙");
    assert_eq!(
        page(
            &chair,
            &[
                "코베아 캠핑 체어 블랙",
                "코베아 캠핑 체어 블랙 경량",
                "코베아 캠핑 체어 올리브드랍",
                "[코베아] 캠핑 체어 올리브드랍 2개",
            ]
        ),
        // (A colour closing the title in place of the query's is caught card by card.)
        ["match", "match", "other_name", "other_name"]
    );
    // A word in the other script may spell a query word the card lacks (`티`, too short to
    // compare by sound); a mark after a code of the card's own (`SPF50 PA`) is the code's.
    let perfume = must_query("엘리자베스아덴 그린 티 오드뚜왈렛 100ml");
    assert_eq!(
        page(
            &perfume,
            &[
                "엘리자베스아덴 그린 티 오드뚜왈렛 100ml",
                "엘리자베스아덴 그린 Tea 오드뚜왈렛 100ml",
                "엘리자베스아덴 그린 티 허니서클 오드뚜왈렛 100ml",
                "엘리자베스아덴 그린 티 허니서클 오드뚜왈렛 50ml",
            ]
        ),
        ["match", "match", "line_word", "quantity_mismatch"]
    );
    let sun = must_query("니베아 선 프로텍트 로션 200ml");
    assert_eq!(
        page(
            &sun,
            &[
                "니베아 선 프로텍트 로션 200ml",
                "니베아 선 프로텍트 SPF50 PA++ 로션 200ml",
                "니베아 선 프로텍트 로션 200ml 대용량",
            ]
        ),
        ["match", "match", "match"]
    );
    // An item made to fit another product has no line to contrast.
    let case = must_query("아이폰 15 호환 실리콘 케이스");
    assert_eq!(
        page(
            &case,
            &[
                "아이폰 15 호환 실리콘 케이스",
                "아이폰 15 호환 말랑 실리콘 케이스",
                "아이폰15 호환 실리콘 케이스 네이비",
            ]
        ),
        ["match", "match", "match"]
    );
}

#[test]
fn names_across_scripts_join_their_parts() {
    let lenses = must_query("바슈롬 바이오트루 원데이 30p");
    check(&lenses, &[("Bausch+Lomb Biotrue 원데이 30p", "match")]);
    let juice = must_query("카프리썬 사과 200ml");
    check(&juice, &[("Capri-Sun 사과 200ml", "match")]);
    // Letters joined by `+` with a count or a short word are two products.
    let battery = must_query("듀라셀 AA 건전지 20개입");
    check(&battery, &[("듀라셀 AA+AAA 건전지 20개입", "bundle")]);
}

#[test]
fn codes_sets_and_colour_letters() {
    // A code that shares the query code's start and ends otherwise is another model.
    let camera = must_query("리코 GR3X");
    check(
        &camera,
        &[
            ("리코 GR3X 블랙", "match"),
            ("리코 GR3 블랙", "missing_model_token"),
        ],
    );
    let camera = must_query("소니 ZV-E10M2");
    check(&camera, &[("소니 ZV-E10 블랙", "missing_model_token")]);
    // Letters glued to a short code that abbreviate the colour the query names are the
    // colour's; other letters make another model.
    let kettle = must_query("드롱기 KBOV2001 블랙");
    check(&kettle, &[("드롱기 KBOV2001-BK 블랙 전기포트", "match")]);
    let piano = must_query("카시오 PX-S1 블랙");
    check(
        &piano,
        &[
            ("카시오 PX-S1B 디지털피아노", "match"),
            ("카시오 PX-S1W 디지털피아노", "missing_model_token"),
        ],
    );
    // A set the query names (`본체+리필`) needs both parts on the card.
    let set = must_query("페브리즈 차량용 방향제 본체+리필");
    check(
        &set,
        &[
            ("페브리즈 차량용 방향제 본체+리필 세트", "match"),
            ("페브리즈 차량용 방향제 리필", "missing_condition"),
        ],
    );
}

#[test]
fn a_card_word_in_place_of_a_compound_words_lead_is_another_maker() {
    // Only the trailing part of `칠성사이다` is on the card, after a word of the card's own:
    // another maker's cider. Without such a word it is the product (`삼다수` of `제주삼다수`).
    let cider = must_query("칠성사이다 210ml 30개");
    check(
        &cider,
        &[
            ("쿠팡 브랜드 - 탐사 사이다, 210ml, 30개", "other_name"),
            ("칠성사이다 210ml x 30캔", "match"),
        ],
    );
    let water = must_query("제주삼다수 2L 6개");
    check(
        &water,
        &[
            ("삼다수 2L 6개", "match"),
            ("[광동] 삼다수 2L 6개", "match"),
        ],
    );
}

/// A two-syllable word one syllable away from the query's is another value (`적축` for
/// `갈축`), unless only a final consonant differs (`린넨`/`리넨`: a spelling).
#[test]
fn a_short_word_one_syllable_away_is_another_word() {
    let keyboard = must_query("키크론 K8 Pro RGB 알루미늄 갈축");
    check(
        &keyboard,
        &[
            ("키크론 K8 PRO 알루미늄 RGB 블루투스 키보드 (갈축)", "match"),
            ("키크론 K8 Pro RGB 알루미늄 적축", "other_name"),
            ("키크론 K8 Pro RGB 알루미늄 청축", "other_name"),
        ],
    );
    let cushion = must_query("클리오 킬커버 쿠션 리필 03 리넨");
    check(&cushion, &[("클리오 킬커버 쿠션 리필 03 린넨", "match")]);
}

/// A number with a unit the query states (`2채널`, `50mm`) stated with another number is
/// another product, even when the card holds the full model code.
#[test]
fn the_same_attribute_with_another_number_is_another_product() {
    let dashcam = must_query("파인뷰 GX1000 2채널 블랙박스 64GB");
    check(
        &dashcam,
        &[
            ("FINEVU GX1000 전후방 QHD 2채널 블랙박스 64GB", "match"),
            ("파인뷰 GX1000 1채널 블랙박스 64GB", "other_value"),
            ("파인뷰 GX1000 3채널 블랙박스 64GB 실내 추가", "other_value"),
        ],
    );
    let glasses = must_query("레이밴 웨이페어러 RB2140 901 50mm");
    check(
        &glasses,
        &[
            ("레이밴 RB2140 901 50mm 웨이페어러", "match"),
            ("레이밴 RB2140 901 54mm 웨이페어러", "other_value"),
        ],
    );
}

/// A size written as numbers joined by `x` (`700x25C`) is shared by many makers' products:
/// no model code that identifies a card alone.
#[test]
fn a_joined_size_is_no_model_code() {
    let tyre = must_query("슈발베 마라톤 700x25C 타이어");
    assert!(judge(&tyre, "슈발베 마라톤 700x25C 타이어 1개").same);
    assert!(!judge(&tyre, "컨티넨탈 그랑프리 5000 700x25C").same);
    assert!(!judge(&tyre, "슈발베 마라톤 700x28C 타이어").same);
}

/// A value the query names is on a card that holds it the way the query does, inside
/// the name included: a query matches its own title.
#[test]
fn a_value_held_as_the_query_holds_it_is_on_the_card() {
    for name in [
        "경북 부사 사과 5kg 16-18과",
        "쌤소나이트 C-LITE 스피너 69cm 블랙",
    ] {
        let query = must_query(name);
        let verdict = judge(&query, name);
        assert!(verdict.same, "{name}: {verdict:?}");
    }
    let apples = must_query("경북 부사 사과 5kg 16-18과");
    assert!(judge(&apples, "[산지직송] 경북 부사사과 5kg 16-18과").same);
}

/// A colour the query names, left out by a card whose title closes with a word of its
/// own right where the colour would be, is another colour the vocabulary does not list.
#[test]
fn an_unlisted_value_closing_the_title_replaces_the_querys() {
    let chair = must_query("헬리녹스 체어원 블랙");
    check(
        &chair,
        &[
            ("헬리녹스 체어원 블랙 캠핑의자", "match"),
            ("헬리녹스 체어원 코요테탄", "other_name"),
        ],
    );
    let mat = must_query("만두카 PRO 요가매트 6mm 블랙");
    check(&mat, &[("만두카 PRO 요가매트 6mm 미드나잇", "other_name")]);
    // Between both its neighbours too.
    let notebook = must_query("몰스킨 클래식 노트 라지 룰드 하드커버 블랙");
    check(
        &notebook,
        &[
            ("몰스킨 클래식 노트 라지 룰드 하드커버 블랙", "match"),
            ("몰스킨 클래식 노트 포켓 룰드 하드 블랙", "other_name"),
        ],
    );
}

/// A variant value the card writes as a query word in the other script (`OLED` for the
/// query's `올레드`) is the query's word, not a value the query is silent on.
#[test]
fn a_value_spelling_a_query_word_is_the_querys_word() {
    let tv = must_query("LG전자 올레드 evo C4 65인치 TV");
    assert!(
        judge(
            &tv,
            "[LG전자] OLED evo C4 65인치 4K 스마트TV OLED65C4KNA 스탠드"
        )
        .same
    );
    assert!(!judge(&tv, "LG 올레드 evo C4 55인치 OLED55C4KNA 스탠드형").same);
}

/// A Latin mark of the card's own splitting two query words the card writes as the query
/// does (`4060 Ti STORM`) is another model; a Hangul word or a run of words there is the
/// seller's description.
#[test]
fn a_latin_mark_splitting_the_name_is_another_model() {
    let gpu = must_query("이엠텍 지포스 RTX 4060 STORM X Dual OC D6 8GB");
    check(
        &gpu,
        &[
            ("이엠텍 지포스 RTX 4060 STORM X Dual OC D6 8GB", "match"),
            (
                "이엠텍 지포스 RTX 4060 Ti STORM X Dual OC D6 8GB",
                "other_name",
            ),
        ],
    );
    let tyre = must_query("한국타이어 벤투스 S1 evo3 245/45R18");
    check(
        &tyre,
        &[("한국타이어 벤투스 S1 evo3 EV 245/45R18", "other_name")],
    );
    let shoe = must_query("나이키 페가수스 41 블랙 270");
    check(
        &shoe,
        &[("나이키 페가수스 41 GORE-TEX 블랙 270", "other_name")],
    );
    let console = must_query("닌텐도 스위치 OLED 화이트");
    check(
        &console,
        &[("닌텐도 스위치 OLED 모델 화이트 정품", "match")],
    );
}

/// An English ordinal suffix (`12th`, `2nd`) is the number's own, not a code's letters.
#[test]
fn an_english_ordinal_is_its_number() {
    let buds = must_query("갤럭시 버즈 2 프로");
    assert!(judge(&buds, "갤럭시 버즈 2nd 프로").same);
    assert!(!judge(&buds, "갤럭시 버즈 2st 프로").same);
    assert!(super::english_ordinal("12", "th") && super::english_ordinal("21", "st"));
    assert!(!super::english_ordinal("11", "st") && !super::english_ordinal("3", "th"));
}

/// A size in inches is the card's in centimetres within a few per cent (a screen's
/// visible diagonal) or as `형`, never another size.
#[test]
fn inches_match_their_centimetres() {
    let tv = must_query("LG 올레드 evo 65인치 스탠드형");
    assert!(judge(&tv, "LG전자 올레드 evo 163cm 스탠드형").same);
    assert!(judge(&tv, "LG 올레드 evo 65형 스탠드형").same);
    assert!(!judge(&tv, "LG전자 올레드 evo 139cm 스탠드형").same);
}

/// Numbers joined by `x` without a unit whose product passes a thousand (`77x147`) are a
/// size, glued or spaced; small ones stay a count (`6x4`).
#[test]
fn a_product_too_large_for_a_count_is_a_size() {
    let shelf = must_query("이케아 KALLAX 칼락스 선반유닛 77x147 화이트");
    assert!(judge(&shelf, "IKEA 칼락스 선반유닛 화이트 77x147cm").same);
    assert!(judge(&shelf, "이케아 KALLAX 선반 유닛 77*147 화이트").same);
    assert!(!judge(&shelf, "이케아 칼락스 선반유닛 77x77 화이트").same);
    let cola = must_query("코카콜라 355ml 24개");
    assert!(judge(&cola, "코카콜라 355ml 6x4").same);
}

/// German `schw` is said with a `v` (`Schwalbe`, `슈발베`; `Schwarzkopf`, `슈바르츠코프`).
#[test]
fn german_schw_is_said_with_a_v() {
    assert!(super::same_name_across_scripts("슈발베", "Schwalbe"));
    assert!(super::same_name_across_scripts(
        "슈바르츠코프",
        "Schwarzkopf"
    ));
    assert!(!super::same_name_across_scripts("슈발베", "Schwinn"));
    // Or with a `w`, as English says it.
    assert!(super::same_name_across_scripts("슈웹스", "Schweppes"));
    // A closing `re` after a vowel is said `-er`.
    assert!(super::same_name_across_scripts("슈어", "Shure"));
}

/// A short number the card's word continues with another group of digits is another code
/// or edition (`2025-26` for `2025`: an 18-month diary).
#[test]
fn a_number_continued_with_digits_is_another_code() {
    let diary = must_query("몰스킨 2025 클래식 위클리 다이어리 소프트커버 엑스라지 블랙");
    assert!(
        judge(
            &diary,
            "[몰스킨] 2025 클래식 위클리 다이어리 소프트커버 블랙 엑스라지"
        )
        .same
    );
    assert!(
        !judge(
            &diary,
            "[몰스킨] 2025-26년 클래식 위클리 다이어리 소프트커버 블랙 엑스라지"
        )
        .same
    );
}

/// The node's query of an assigned job: every hint the caller sent reaches the judge.
#[test]
fn a_callers_hints_reach_the_query() {
    use lps_proto::model::ProductHints;
    let hints = ProductHints::new("Samsung", "SM-S928N", "8801234567893").unwrap();
    let query = must_query("갤럭시 S24 울트라 256GB").with_hints(&hints);
    assert_eq!(query.gtin().map(|g| g.as_str()), Some("08801234567893"));
    assert_eq!(query.brand(), Some("Samsung"));
    // The model code is a required token: another model is not the product.
    assert!(judge(&query, "삼성 갤럭시 S24 울트라 SM-S928N 256GB 자급제").same);
    assert!(!judge(&query, "삼성 갤럭시 S24 울트라 SM-S926N 256GB 자급제").same);
    // No hints: the query is the name's alone.
    let plain = must_query("갤럭시 S24 울트라 256GB").with_hints(&ProductHints::default());
    assert!(plain.gtin().is_none() && plain.brand().is_none());
}

/// SHA-256 of the judge's rules as [`judge_sources_digest`] reads them, when
/// `lps_proto::model::JUDGE_VERSION` was last set.
const JUDGE_SOURCES_SHA256: &str =
    "d2f58489aae7e1bf1fa9cfd31cfd24d52fbca59610997554ac340454bfa355d0";

/// The judge's sources (`src/judge/*.rs` but this file, each without its unit tests, line
/// ends normalised), in name order, as one SHA-256.
fn judge_sources_digest() -> String {
    use sha2::{Digest as _, Sha256};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/judge");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs") && !p.ends_with("tests.rs"))
        .collect();
    files.sort();
    let mut hash = Sha256::new();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .unwrap()
            .replace("\r\n", "\n");
        let rules = text
            .find("#[cfg(test)]\nmod tests {")
            .map_or(text.as_str(), |at| &text[..at]);
        hash.update(file.file_name().unwrap().to_string_lossy().as_bytes());
        hash.update(rules.as_bytes());
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A remembered not-found answers only while the judge that decided it is the one in use
/// (DESIGN §2 "Negative cache"), which holds only if its version changes with its rules.
#[test]
fn the_judge_version_follows_the_rules() {
    let digest = judge_sources_digest();
    assert_eq!(
        digest,
        JUDGE_SOURCES_SHA256,
        "the judge's rules changed: if a verdict can change, bump \
         lps_proto::model::JUDGE_VERSION (now {}); then set JUDGE_SOURCES_SHA256 in \
         crawler-node/src/judge/tests.rs to {digest}",
        lps_proto::model::JUDGE_VERSION
    );
}

/// A word with other spellings (`익스트림`/`extreme`) in the place of a name word the card
/// lacks is another line like any other word; a card word whose other spelling the query
/// writes (`microSDXC` for `마이크로SD`) is that word's spelling.
#[test]
fn a_spelling_with_aliases_replaces_a_name_word() {
    check(
        &must_query("할리갈리 디럭스"),
        &[
            ("할리갈리 디럭스 보드게임", "match"),
            ("할리갈리 익스트림", "other_name"),
        ],
    );
    check(
        &must_query("몽블랑 마이스터스튁 카드지갑 6cc"),
        &[("몽블랑 익스트림 3.0 카드지갑 6cc", "other_name")],
    );
    check(
        &must_query("샌디스크 익스트림 마이크로SD 256GB"),
        &[("SanDisk Extreme microSDXC 256GB", "match")],
    );
}

/// Set words (`트리오`, `콤보`, `듀얼팩`) make a listing several items, unless the query
/// names the set; a gift box of the very count is the product (`선물세트` is no set word).
#[test]
fn set_words_are_no_single_item() {
    check(
        &must_query("록시땅 시어 버터 핸드크림 30ml"),
        &[
            ("록시땅 시어버터 핸드크림 30ml 정품", "match"),
            ("록시땅 시어 버터 핸드크림 30ml 트리오 세트", "assortment"),
        ],
    );
    check(
        &must_query("스팸 클래식 200g 10개"),
        &[("CJ 스팸 클래식 200g x 10개 선물세트 (쇼핑백 포함)", "match")],
    );
    check(
        &must_query("DJI 오즈모 포켓3"),
        &[
            ("DJI 오즈모 포켓3 짐벌 카메라", "match"),
            ("DJI 오즈모 포켓3 크리에이터 콤보", "assortment"),
        ],
    );
    check(
        &must_query("오랄비 iO9 전동칫솔 듀얼팩"),
        &[("오랄비 iO9 전동칫솔 듀얼팩 블랙", "match")],
    );
}

/// A region's edition is another line when the query names none.
#[test]
fn region_editions_are_lines() {
    check(
        &must_query("포켓몬카드 크림슨헤이즈 확장팩 박스"),
        &[
            ("포켓몬카드 크림슨헤이즈 확장팩 박스 미개봉", "match"),
            (
                "포켓몬카드 크림슨헤이즈 확장팩 박스 일본판",
                "variant_mismatch",
            ),
        ],
    );
}

/// Parts sold alone (`뚜껑만`: the lid only, `펜촉`, `이어패드`, `노즐`) are accessories.
#[test]
fn parts_sold_alone_are_accessories() {
    check(
        &must_query("락앤락 비스프리 직사각 1.0L"),
        &[
            ("락앤락 비스프리 직사각 1.0L 밀폐용기", "match"),
            ("락앤락 비스프리 직사각 1.0L 뚜껑만", "accessory"),
        ],
    );
    check(
        &must_query("소니 WH-1000XM5 블랙"),
        &[("소니 WH-1000XM5 블랙 이어패드 1쌍", "accessory")],
    );
}
