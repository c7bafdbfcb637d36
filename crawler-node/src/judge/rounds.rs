//! Rule-based search strings for a job's query rounds (original → precise → broad).
//!
//! A job searches a mall with the next round only when the previous one found
//! no matching card on a healthy page, so each round is looser than the last:
//! - **original**: the product name as given (whitespace collapsed).
//! - **precise**: filler removed and the quantity in canonical form
//!   (`2L 12개`). With model tokens: the brand (hint, else the first name
//!   word), the model tokens, the quantity (`삼성 S24 SM-S928N 256GB`). Without: the
//!   brand hint and the name words after it in the name (words before the brand
//!   are usually a maker or region: `제주 삼다수` → `삼다수`), or all name words
//!   when there is no hint; then the quantity (`삼다수 2L 12개`).
//! - **broad**: brand + core name, no quantity or packaging words: the brand
//!   hint (when the name lacks it), the name words and the short model tokens
//!   (≤ 4 characters, such as `S24` or `15`), in name order
//!   (`갤럭시 S24 울트라`). Long codes are left to the judge, which still
//!   requires them in the card.
//!
//! A round whose string normalises to the same text as an earlier one, or to
//! nothing, is skipped, so there are one to three rounds.

use super::query::{ProductQuery, TokenKind};
use lps_profiles::normalize::normalize;

/// Model tokens up to this many characters (`s24`, `15`) stay in the broad round.
const SHORT_MODEL: usize = 4;

/// Which rule produced a search string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RoundKind {
    /// The product name as given.
    Original,
    /// Brand + model + canonical quantity.
    Precise,
    /// Brand + core name, without quantity or packaging words.
    Broad,
    /// A search string the LLM endpoint proposed after the rule-based rounds found
    /// nothing (never produced by [`rounds`]).
    Llm,
}

/// One search string to try on a mall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Round {
    /// The rule that produced it.
    pub kind: RoundKind,
    /// What to type into the mall's search box.
    pub query: String,
}

/// Up to three distinct search strings, in the order to try them (see the module docs).
#[must_use]
pub fn rounds(query: &ProductQuery) -> Vec<Round> {
    let mut out: Vec<Round> = Vec::with_capacity(3);
    let mut seen: Vec<String> = Vec::with_capacity(3);
    let candidates = [
        (RoundKind::Original, query.name().to_owned()),
        (RoundKind::Precise, precise(query)),
        (RoundKind::Broad, broad(query)),
    ];
    for (kind, text) in candidates {
        let key = normalize(&text);
        if key.is_empty() || seen.contains(&key) {
            continue;
        }
        seen.push(key);
        out.push(Round { kind, query: text });
    }
    out
}

fn precise(query: &ProductQuery) -> String {
    let mut parts: Vec<String> = Vec::new();
    let names: Vec<&str> = query
        .tokens_of(TokenKind::Name)
        .map(|t| t.display.as_str())
        .collect();
    let has_models = query.tokens_of(TokenKind::Model).next().is_some();
    match query.brand_hint() {
        Some(brand) => {
            parts.push(brand.display.clone());
            if !has_models {
                let after = query
                    .tokens_of(TokenKind::Name)
                    .position(|t| brand.keys.contains(&t.key))
                    .map_or(0, |i| i + 1);
                parts.extend(
                    query
                        .tokens_of(TokenKind::Name)
                        .skip(after)
                        .filter(|t| !brand.keys.contains(&t.key))
                        .map(|t| t.display.clone()),
                );
            }
        }
        None if has_models => parts.extend(names.first().map(|s| (*s).to_owned())),
        None => parts.extend(names.iter().map(|s| (*s).to_owned())),
    }
    parts.extend(query.tokens_of(TokenKind::Model).map(|t| t.display.clone()));
    let quantity = query.quantity();
    if !quantity.is_unstated() {
        parts.push(quantity.to_string());
    }
    parts.join(" ")
}

fn broad(query: &ProductQuery) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(brand) = query.brand_hint().filter(|b| !b.required) {
        parts.push(brand.display.clone());
    }
    parts.extend(
        query
            .tokens()
            .iter()
            .filter(|t| t.kind == TokenKind::Name || t.key.chars().count() <= SHORT_MODEL)
            .map(|t| t.display.clone()),
    );
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::super::must_query;
    use super::{Round, RoundKind, rounds};

    fn expect(kind: RoundKind, query: &str) -> Round {
        Round {
            kind,
            query: query.to_owned(),
        }
    }

    #[test]
    fn produces_distinct_rounds_in_order() {
        use RoundKind::{Broad, Original, Precise};
        // (name, brand hint, model-code hint, rounds)
        type Case = (
            &'static str,
            Option<&'static str>,
            Option<&'static str>,
            Vec<Round>,
        );
        let cases: [Case; 9] = [
            (
                "제주 삼다수 2L x 12",
                Some("삼다수"),
                None,
                vec![
                    expect(Original, "제주 삼다수 2L x 12"),
                    expect(Precise, "삼다수 2L 12개"),
                    expect(Broad, "제주 삼다수"),
                ],
            ),
            (
                "제주 삼다수 2L x 12",
                None,
                None,
                vec![
                    expect(Original, "제주 삼다수 2L x 12"),
                    expect(Precise, "제주 삼다수 2L 12개"),
                    expect(Broad, "제주 삼다수"),
                ],
            ),
            (
                "[무료배송]  제주삼다수 2리터 x 12병 ",
                None,
                None,
                vec![
                    expect(Original, "[무료배송] 제주삼다수 2리터 x 12병"),
                    expect(Precise, "제주삼다수 2L 12개"),
                    expect(Broad, "제주삼다수"),
                ],
            ),
            (
                "농심 신라면 120g 5개입",
                Some("농심"),
                None,
                vec![
                    expect(Original, "농심 신라면 120g 5개입"),
                    expect(Precise, "농심 신라면 120g 5개"),
                    expect(Broad, "농심 신라면"),
                ],
            ),
            (
                "삼성 갤럭시 S24 울트라 SM-S928N 256GB",
                Some("삼성"),
                None,
                vec![
                    expect(Original, "삼성 갤럭시 S24 울트라 SM-S928N 256GB"),
                    expect(Precise, "삼성 S24 SM-S928N 256GB"),
                    expect(Broad, "삼성 갤럭시 S24 울트라"),
                ],
            ),
            (
                "갤럭시 S24 울트라",
                Some("Samsung"),
                Some("SM-S928N"),
                vec![
                    expect(Original, "갤럭시 S24 울트라"),
                    expect(Precise, "Samsung S24 SM-S928N"),
                    expect(Broad, "Samsung 갤럭시 S24 울트라"),
                ],
            ),
            (
                "소니 WH-1000XM5",
                None,
                None,
                vec![expect(Original, "소니 WH-1000XM5"), expect(Broad, "소니")],
            ),
            // Nothing to clean: precise and broad repeat the original.
            (
                "제주 삼다수",
                None,
                None,
                vec![expect(Original, "제주 삼다수")],
            ),
            // Case and spacing differences are repeats too.
            (
                "코카콜라 제로 500ML",
                None,
                None,
                vec![
                    expect(Original, "코카콜라 제로 500ML"),
                    expect(Broad, "코카콜라 제로"),
                ],
            ),
        ];
        for (name, brand, code, want) in cases {
            let mut query = must_query(name);
            if let Some(brand) = brand {
                query = query.with_brand(brand);
            }
            if let Some(code) = code {
                query = query.with_model_code(code);
            }
            assert_eq!(rounds(&query), want, "name {name:?}");
        }
    }
}
