//! Amounts in a card's text, and what a shipping text means for an offer
//! (docs/site-profiles.md, "Prices and shipping").
//!
//! Pure functions that take any string without panicking. Text is read after NFKC
//! normalisation, so full-width digits (`１２,９００원`) and `￦` read like their ASCII forms.
//!
//! **An amount** is a run of ASCII digits with thousands separators — `,` or `.` followed by
//! exactly three digits (`12,900`, `1.234.000`) — an optional decimal part that is dropped
//! (`12.5` → 12), and optional Korean units written right after the digits: `만` (10,000)
//! and `천` (1,000), combined from large to small (`3만9천원`, `2만 5천원`, `1.5만 원`,
//! `1만5000원`). Not an amount:
//! - digits glued to an ASCII letter on either side: model numbers and quantities
//!   (`SM-S928N`, `x12`, `2L`, `500ml`, `100g당`);
//! - a number followed by `%` (a discount rate: `10% 12,900원` is one amount, 12,900);
//! - an amount that does not fit in a `u64`.
//!
//! `억` and other units are not read (a shopping card never shows them); `1억` reads as 1.
//!
//! **Shipping** is read against the offer's own price, see [`evaluate_shipping`].

use lps_proto::{model::ShippingStatus, pb::NumberPick};
use unicode_normalization::UnicodeNormalization as _;

/// Every amount in `text`, in order (see the module docs for what counts as one).
pub fn parse_amounts(text: &str) -> Vec<u64> {
    let chars: Vec<char> = text.nfkc().collect();
    scan(&chars).into_iter().map(|a| a.value).collect()
}

/// The first amount in `text`: the price of a price cell.
pub fn parse_price(text: &str) -> Option<u64> {
    parse_amounts(text).first().copied()
}

/// The amount `pick` chooses among the amounts in `text`.
pub fn pick_amount(text: &str, pick: NumberPick) -> Option<u64> {
    let amounts = parse_amounts(text);
    match pick {
        NumberPick::First => amounts.first().copied(),
        NumberPick::Last => amounts.last().copied(),
        NumberPick::Min => amounts.iter().min().copied(),
        NumberPick::Max => amounts.iter().max().copied(),
    }
}

/// How an offer's shipping was read: a status and, when it is known, the fee (0 otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShippingRead {
    pub status: ShippingStatus,
    pub fee: u64,
}

impl ShippingRead {
    const UNKNOWN: Self = Self {
        status: ShippingStatus::Unknown,
        fee: 0,
    };
    const FREE: Self = Self {
        status: ShippingStatus::Free,
        fee: 0,
    };

    fn paid(fee: u64) -> Self {
        Self {
            status: ShippingStatus::Paid,
            fee,
        }
    }
}

/// Reads a card's shipping text against the offer's own `price`; `free_texts` are the
/// profile's `free_shipping_texts`. In this order:
///
/// 1. no text, or only white space → `UNKNOWN`;
/// 2. a threshold — an amount followed by `원 이상` (`2만원 이상 무료배송`, `30,000원 이상
///    구매 시 무료`, `무료배송 (2만원 이상 주문시)`) in a text that says free (`무료`, `무배`
///    or a free text): the price reaches it → `FREE_BY_THRESHOLD`; it does not → the fee
///    stated elsewhere in the text (`배송비 3,000원 (2만원 이상 무료)` → `PAID` 3,000), else
///    `UNKNOWN`. A free text inside the phrase never makes it `FREE`;
/// 3. `조건부` (conditional) or `착불` (paid on delivery) → `UNKNOWN`;
/// 4. a free text contained in the text, or a text that is just `무료` around the words
///    `배송`/`배송비` (`무료`, `무료배송`, `배송비: 무료`) → `FREE`; both compared after NFKC
///    with white space removed;
/// 5. the first amount that is not a condition (`N원 이상/미만/이하/초과`): 0 → `FREE`
///    (`0원`, the JSON number `0`), otherwise `PAID` with that fee;
/// 6. anything else (`배송비 별도`) → `UNKNOWN`.
pub fn evaluate_shipping(text: Option<&str>, price: u64, free_texts: &[String]) -> ShippingRead {
    let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
        return ShippingRead::UNKNOWN;
    };
    let chars: Vec<char> = text.nfkc().collect();
    let squeezed: String = chars.iter().filter(|c| !c.is_whitespace()).collect();
    let has_free_text = free_texts.iter().any(|free| {
        let free = squeeze(free);
        !free.is_empty() && squeezed.contains(&free)
    });
    let says_free = has_free_text || squeezed.contains("무료") || squeezed.contains("무배");

    let mut threshold = None;
    let mut fee = None;
    for amount in scan(&chars) {
        match condition_after(&chars, amount.end) {
            Some(Condition::AtLeast) => {
                threshold.get_or_insert(amount.value);
            }
            Some(Condition::Other) => {}
            None => {
                fee.get_or_insert(amount.value);
            }
        }
    }

    if let Some(threshold) = threshold.filter(|_| says_free) {
        return if price >= threshold {
            ShippingRead {
                status: ShippingStatus::FreeByThreshold,
                fee: 0,
            }
        } else {
            match fee {
                Some(fee) if fee > 0 => ShippingRead::paid(fee),
                _ => ShippingRead::UNKNOWN,
            }
        };
    }
    if squeezed.contains("조건부") || squeezed.contains("착불") {
        return ShippingRead::UNKNOWN;
    }
    if has_free_text || just_free(&squeezed) {
        return ShippingRead::FREE;
    }
    match fee {
        Some(0) => ShippingRead::FREE,
        Some(fee) => ShippingRead::paid(fee),
        None => ShippingRead::UNKNOWN,
    }
}

/// What a card says about its shipping: the text, and the structured parts a profile
/// reads from fields of their own (a JSON object's members, or separate elements).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShippingFacts<'a> {
    pub text: Option<&'a str>,
    /// What the card's type code means (`shipping_types`).
    pub kind: Option<ShippingStatus>,
    /// The fee; 0 is free shipping.
    pub fee: Option<u64>,
    /// The order amount from which shipping is free.
    pub threshold: Option<u64>,
}

/// Reads a card's shipping against the offer's own `price`. The structured parts win
/// where they speak; the text ([`evaluate_shipping`]) fills in what they leave open:
///
/// 1. type `FREE` → `FREE`; type `UNKNOWN` (paid on delivery, …) → `UNKNOWN`;
/// 2. a threshold above 0: the price reaches it → `FREE_BY_THRESHOLD`; it does not → the
///    fee when above 0 (`PAID`), else what the text says if that is `PAID`, else `UNKNOWN`;
/// 3. type `FREE_BY_THRESHOLD` without a threshold → the text's reading (it may state one);
/// 4. a fee: 0 → `FREE` (unless the type says `PAID`: then the text decides), above 0 →
///    `PAID`;
/// 5. otherwise the text's reading.
pub fn evaluate_facts(
    facts: &ShippingFacts<'_>,
    price: u64,
    free_texts: &[String],
) -> ShippingRead {
    let text = || evaluate_shipping(facts.text, price, free_texts);
    match facts.kind {
        Some(ShippingStatus::Free) => return ShippingRead::FREE,
        Some(ShippingStatus::Unknown) => return ShippingRead::UNKNOWN,
        Some(ShippingStatus::Paid | ShippingStatus::FreeByThreshold) | None => {}
    }
    if let Some(threshold) = facts.threshold.filter(|&t| t > 0) {
        if price >= threshold {
            return ShippingRead {
                status: ShippingStatus::FreeByThreshold,
                fee: 0,
            };
        }
        return match facts.fee {
            Some(fee) if fee > 0 => ShippingRead::paid(fee),
            _ => Some(text())
                .filter(|read| read.status == ShippingStatus::Paid)
                .unwrap_or(ShippingRead::UNKNOWN),
        };
    }
    if facts.kind == Some(ShippingStatus::FreeByThreshold) {
        return text();
    }
    match facts.fee {
        Some(0) if facts.kind == Some(ShippingStatus::Paid) => text(),
        Some(0) => ShippingRead::FREE,
        Some(fee) => ShippingRead::paid(fee),
        None => text(),
    }
}

/// NFKC with every white space removed: how shipping texts are compared.
fn squeeze(text: &str) -> String {
    text.nfkc().filter(|c| !c.is_whitespace()).collect()
}

/// `무료` and nothing else but the words around it in a shipping cell.
fn just_free(squeezed: &str) -> bool {
    let rest = squeezed
        .replace("배송비", "")
        .replace("배송", "")
        .replace([':', '·', '|', '-', '(', ')', '[', ']'], "");
    rest == "무료"
}

/// What follows an amount in a shipping text.
#[derive(Debug, PartialEq, Eq)]
enum Condition {
    /// `N원 이상`: a threshold.
    AtLeast,
    /// `미만`, `이하`, `초과`: a condition on the order, not a fee.
    Other,
}

fn condition_after(chars: &[char], end: usize) -> Option<Condition> {
    let mut i = skip_spaces(chars, end);
    if chars.get(i) == Some(&'원') {
        i = skip_spaces(chars, i + 1);
    }
    let next: String = chars.iter().skip(i).take(2).collect();
    match next.as_str() {
        "이상" => Some(Condition::AtLeast),
        "미만" | "이하" | "초과" => Some(Condition::Other),
        _ => None,
    }
}

/// One amount found in a (normalised) text: its value and where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Amount {
    value: u64,
    /// Index of the first digit.
    start: usize,
    /// Index just past the amount (its units included).
    end: usize,
}

const MAN: u128 = 10_000;
const CHEON: u128 = 1_000;

fn unit(c: Option<&char>) -> Option<u128> {
    match c {
        Some('만') => Some(MAN),
        Some('천') => Some(CHEON),
        _ => None,
    }
}

/// Every amount in `chars` (already NFKC-normalised).
fn scan(chars: &[char]) -> Vec<Amount> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        let (value, end) = read_amount(chars, start);
        i = end.max(start + 1);
        let glued_before = start > 0 && chars[start - 1].is_ascii_alphabetic();
        let glued_after = chars.get(end).is_some_and(char::is_ascii_alphabetic);
        let rate = chars.get(skip_spaces(chars, end)) == Some(&'%');
        if glued_before || glued_after || rate {
            continue;
        }
        if let Some(value) = value.and_then(|v| u64::try_from(v).ok()) {
            out.push(Amount { value, start, end });
        }
    }
    out
}

/// A number as written: the integer part (`None` on overflow) and the decimal digits.
#[derive(Debug, Clone, Copy)]
struct Number {
    int: Option<u128>,
    /// The decimal part as an integer and its number of digits (at most 18 are kept).
    frac: (u128, u32),
}

impl Number {
    /// This number times `unit`, decimals included (`1.5` × 만 = 15,000).
    fn times(self, unit: u128) -> Option<u128> {
        let whole = self.int?.checked_mul(unit)?;
        let (frac, digits) = self.frac;
        let part = frac.checked_mul(unit)? / 10u128.pow(digits);
        whole.checked_add(part)
    }
}

/// Reads the digits at `start` (an ASCII digit): `(int, decimals, index after)`.
fn read_number(chars: &[char], start: usize) -> (Number, usize) {
    let mut int = Some(0u128);
    let mut i = start;
    while i < chars.len() {
        let c = chars[i];
        if let Some(d) = c.to_digit(10) {
            int = int
                .and_then(|v| v.checked_mul(10))
                .and_then(|v| v.checked_add(u128::from(d)));
            i += 1;
            continue;
        }
        let group_of_three = chars.get(i + 1..i + 4).is_some_and(|next| {
            next.iter().all(char::is_ascii_digit)
                && !chars.get(i + 4).is_some_and(char::is_ascii_digit)
        });
        if matches!(c, ',' | '.') && group_of_three {
            i += 1;
            continue;
        }
        break;
    }
    let mut frac = (0u128, 0u32);
    if chars.get(i) == Some(&'.') && chars.get(i + 1).is_some_and(char::is_ascii_digit) {
        i += 1;
        while let Some(d) = chars.get(i).and_then(|c| c.to_digit(10)) {
            if frac.1 < 18 {
                frac = (frac.0 * 10 + u128::from(d), frac.1 + 1);
            }
            i += 1;
        }
    }
    (Number { int, frac }, i)
}

/// Reads one amount at `start`, units included: `(value, index after)`; the value is
/// `None` on overflow.
fn read_amount(chars: &[char], start: usize) -> (Option<u128>, usize) {
    let (number, mut i) = read_number(chars, start);
    let Some(first_unit) = unit(chars.get(i)) else {
        return (number.int, i);
    };
    let mut total = number.times(first_unit);
    let mut last_unit = first_unit;
    i += 1;
    loop {
        // After a unit: a smaller unit's number (`3만9천`, `2만 5천`), or plain digits
        // glued to it (`1만5000`).
        let k = skip_spaces(chars, i);
        if !chars.get(k).is_some_and(char::is_ascii_digit) {
            break;
        }
        let (next, after) = read_number(chars, k);
        match unit(chars.get(after)) {
            Some(u) if u < last_unit => {
                total = total.zip(next.times(u)).and_then(|(a, b)| a.checked_add(b));
                last_unit = u;
                i = after + 1;
            }
            None if k == i && next.frac.1 == 0 && next.int.is_some_and(|n| n < last_unit) => {
                total = total.zip(next.int).and_then(|(a, b)| a.checked_add(b));
                i = after;
                break;
            }
            _ => break,
        }
    }
    (total, i)
}

fn skip_spaces(chars: &[char], mut i: usize) -> usize {
    while chars.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts() {
        let cases: &[(&str, &[u64])] = &[
            ("12,900원", &[12_900]),
            ("₩12,900", &[12_900]),
            ("￦12,900", &[12_900]),
            ("12,900", &[12_900]),
            (" 4,480 원 ", &[4_480]),
            ("１２,９００원", &[12_900]),
            ("1.234.000원", &[1_234_000]),
            ("12.5", &[12]),
            ("12,900원 3,000원", &[12_900, 3_000]),
            ("2만원", &[20_000]),
            ("1.5만 원", &[15_000]),
            ("3만9천원", &[39_000]),
            ("2만 5천원", &[25_000]),
            ("5천원", &[5_000]),
            ("1만5000원", &[15_000]),
            ("2만원 이상 3,000원", &[20_000, 3_000]),
            ("5천 2만", &[5_000, 20_000]),
            ("최저 9,900원~", &[9_900]),
            ("10% 39,800원 35,820원", &[39_800, 35_820]),
            ("할인 15 % 1,000", &[1_000]),
            ("갤럭시 SM-S928N 1,250,000원", &[1_250_000]),
            ("삼다수 2L x12 9,600원", &[9_600]),
            ("500ml 24개", &[24]),
            ("(100g당 522원)", &[522]),
            ("1,", &[1]),
            ("1,2345", &[1, 2_345]),
            ("0원", &[0]),
            ("가격문의", &[]),
            ("", &[]),
            ("99999999999999999999999", &[]),
            ("99999999999999999999999 1,000원", &[1_000]),
            ("9999999999999999999999999999999999999999999만", &[]),
        ];
        for (text, want) in cases {
            assert_eq!(parse_amounts(text), *want, "{text:?}");
        }
    }

    #[test]
    fn prices_and_picks() {
        assert_eq!(parse_price("12,900원 3,000원"), Some(12_900));
        assert_eq!(parse_price("가격문의"), None);
        let text = "39,800원 29,900원 31,000원";
        assert_eq!(pick_amount(text, NumberPick::First), Some(39_800));
        assert_eq!(pick_amount(text, NumberPick::Last), Some(31_000));
        assert_eq!(pick_amount(text, NumberPick::Min), Some(29_900));
        assert_eq!(pick_amount(text, NumberPick::Max), Some(39_800));
        assert_eq!(pick_amount("품절", NumberPick::Max), None);
    }

    #[test]
    fn structured_shipping_wins_where_it_speaks() {
        use ShippingStatus::{Free, FreeByThreshold, Paid, Unknown};
        let facts = |text, kind, fee, threshold| ShippingFacts {
            text,
            kind,
            fee,
            threshold,
        };
        let cases: &[(ShippingFacts<'_>, u64, ShippingStatus, u64)] = &[
            (facts(None, Some(Free), Some(3000), None), 9_000, Free, 0),
            (
                facts(Some("무료배송"), Some(Unknown), None, None),
                9_000,
                Unknown,
                0,
            ),
            (
                facts(None, None, Some(3000), Some(20_000)),
                27_900,
                FreeByThreshold,
                0,
            ),
            (
                facts(None, None, Some(3000), Some(20_000)),
                4_200,
                Paid,
                3000,
            ),
            // Below the threshold without a fee: the text's fee, else unknown.
            (
                facts(Some("배송비 2,500원"), None, None, Some(20_000)),
                4_200,
                Paid,
                2500,
            ),
            (
                facts(Some("무료배송"), None, None, Some(20_000)),
                4_200,
                Unknown,
                0,
            ),
            (
                facts(None, Some(FreeByThreshold), Some(3000), None),
                4_200,
                Unknown,
                0,
            ),
            (
                facts(
                    Some("2만원 이상 무료배송"),
                    Some(FreeByThreshold),
                    None,
                    None,
                ),
                27_900,
                FreeByThreshold,
                0,
            ),
            (facts(None, None, Some(0), None), 4_200, Free, 0),
            (
                facts(Some("배송비 3,000원"), Some(Paid), Some(0), None),
                4_200,
                Paid,
                3000,
            ),
            (facts(None, Some(Paid), Some(0), None), 4_200, Unknown, 0),
            (facts(None, Some(Paid), Some(2500), None), 4_200, Paid, 2500),
            // The structured fee wins over the text; the text fills in the rest.
            (
                facts(Some("무료배송"), None, Some(2500), None),
                4_200,
                Paid,
                2500,
            ),
            (facts(Some("무료배송"), None, None, None), 4_200, Free, 0),
            (facts(None, None, None, Some(0)), 4_200, Unknown, 0),
            (ShippingFacts::default(), 4_200, Unknown, 0),
        ];
        for (facts, price, status, fee) in cases {
            let read = evaluate_facts(facts, *price, &[]);
            assert_eq!(
                (read.status, read.fee),
                (*status, *fee),
                "{facts:?} at {price}"
            );
        }
    }

    #[test]
    fn shipping() {
        use ShippingStatus::{Free, FreeByThreshold, Paid, Unknown};
        let free = vec!["무료배송".to_owned(), "배송비 무료".to_owned()];
        let none: Vec<String> = Vec::new();
        /// (text, price, free texts, status, fee)
        type Case<'a> = (Option<&'a str>, u64, &'a [String], ShippingStatus, u64);
        #[rustfmt::skip]
        let cases: &[Case] = &[
            // The doc's table, row by row.
            (Some("무료배송"), 9_000, &free, Free, 0),
            (Some("무료"), 9_000, &none, Free, 0),
            (Some("0원"), 9_000, &none, Free, 0),
            (Some("0"), 9_000, &none, Free, 0),
            (Some("배송비 3,000원"), 9_000, &free, Paid, 3_000),
            (Some("3,000원"), 9_000, &free, Paid, 3_000),
            (Some("3000"), 9_000, &none, Paid, 3_000),
            (Some("2만원 이상 무료배송"), 20_000, &free, FreeByThreshold, 0),
            (Some("2만원 이상 무료배송"), 25_000, &free, FreeByThreshold, 0),
            (Some("2만원 이상 무료배송"), 19_999, &free, Unknown, 0),
            (Some("배송비 3,000원 (2만원 이상 무료)"), 27_900, &free, FreeByThreshold, 0),
            (Some("배송비 3,000원 (2만원 이상 무료)"), 4_200, &free, Paid, 3_000),
            (None, 9_000, &free, Unknown, 0),
            (Some(""), 9_000, &free, Unknown, 0),
            (Some("   "), 9_000, &free, Unknown, 0),
            (Some("착불"), 9_000, &free, Unknown, 0),
            (Some("조건부"), 9_000, &free, Unknown, 0),
            // Free texts: NFKC and white space do not matter; the built-in `무료`.
            (Some("배송비무료"), 9_000, &free, Free, 0),
            (Some("무료 배송"), 9_000, &free, Free, 0),
            (Some("ｍｙ무료배송"), 9_000, &free, Free, 0),
            (Some("무료배송 · 내일 도착"), 9_000, &free, Free, 0),
            (Some("배송비: 무료"), 9_000, &none, Free, 0),
            (Some("무료배송"), 9_000, &none, Free, 0),
            (Some("배송비 0원"), 9_000, &free, Free, 0),
            (Some("배송비 ₩2,500"), 9_000, &free, Paid, 2_500),
            (Some("배송비 ２,５００원"), 9_000, &free, Paid, 2_500),
            // A free word that is not about shipping does not make it free.
            (Some("배송비 3,000원 · 무료반품"), 9_000, &none, Paid, 3_000),
            // Threshold phrases.
            (Some("30,000원 이상 구매 시 무료"), 30_000, &free, FreeByThreshold, 0),
            (Some("30,000원 이상 구매 시 무료"), 29_000, &free, Unknown, 0),
            (Some("30000원 이상 주문시 무료배송"), 31_000, &free, FreeByThreshold, 0),
            (Some("3만원 이상 무료"), 12_000, &none, Unknown, 0),
            (Some("2만 5천원 이상 무료배송"), 25_000, &free, FreeByThreshold, 0),
            (Some("1.5만원이상 무료배송"), 14_999, &free, Unknown, 0),
            (Some("무료배송 (2만원 이상 구매시)"), 21_000, &free, FreeByThreshold, 0),
            (Some("무료배송 (2만원 이상 구매시)"), 2_100, &free, Unknown, 0),
            (Some("2,500원 (5만원 이상 무배)"), 1_000, &none, Paid, 2_500),
            (Some("조건부 무료배송 (2만원 이상)"), 30_000, &free, FreeByThreshold, 0),
            // Unreadable.
            (Some("조건부 무료배송"), 30_000, &free, Unknown, 0),
            (Some("배송비 별도"), 9_000, &free, Unknown, 0),
            (Some("착불 3,000원"), 9_000, &free, Unknown, 0),
            (Some("2만원 이상"), 30_000, &free, Unknown, 0),
            (Some("로켓배송"), 9_000, &free, Unknown, 0),
            // A condition is never the fee.
            (Some("배송비 3,000원 (2만원 미만)"), 9_000, &free, Paid, 3_000),
            (Some("2만원 미만 3,000원"), 9_000, &free, Paid, 3_000),
        ];
        for (text, price, free_texts, status, fee) in cases {
            let read = evaluate_shipping(*text, *price, free_texts);
            assert_eq!(
                read,
                ShippingRead {
                    status: *status,
                    fee: *fee
                },
                "{text:?} at price {price}"
            );
        }
    }

    #[test]
    fn never_panics() {
        let texts = [
            "..,,..,.",
            "1.",
            "1..000",
            ".5만",
            "만천",
            "1만천",
            "9만9만9만",
            "1,000,",
            "1.2.3.4",
            "\u{0}\u{FFFF}",
            "１.５만",
            "2만 ",
            "만원 이상 무료",
            "이상",
            "0원 이상 무료",
        ];
        for text in texts {
            let _ = parse_amounts(text);
            let _ = evaluate_shipping(Some(text), 0, &[String::new()]);
            let _ = evaluate_shipping(Some(text), u64::MAX, &[]);
        }
        assert_eq!(parse_amounts("1..000"), vec![1, 0]);
        assert_eq!(
            evaluate_shipping(Some("0원 이상 무료"), 0, &[]).status,
            ShippingStatus::FreeByThreshold
        );
    }
}
