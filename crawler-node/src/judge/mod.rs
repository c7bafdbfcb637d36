//! Matching: is a search-result card the same product as the one asked for?
//!
//! Owns the rule-based half of DESIGN §5 "Matching": quantity parsing, name, model and
//! variant words, the [`judge`], the query [`rounds`](rounds()). Pure logic: no I/O, no
//! async, no state between calls; every function takes any string without panicking.
//! Every word list is data: a [`Lexicon`] compiled from the vocabulary the coordinator
//! sends (`profiles/vocabulary.toml`, `docs/vocabulary.md`) plus the mall profile's
//! additions, carried by the [`ProductQuery`]. (The optional LLM keyword generation and
//! judging of §5 live elsewhere and run only when these rules found nothing; they may
//! overrule only a [`Verdict::wording_only`] rejection.)
//!
//! NB: a change here that can change a verdict bumps `lps_proto::model::JUDGE_VERSION`:
//! remembered not-founds of the older rules then stop answering (DESIGN §2).
//!
//! # Flow
//! A job builds one [`ProductQuery`] from the product name (plus the caller's optional
//! brand, model-code and GTIN hints, [`ProductQuery::with_hints`]) and the mall's lexicon, searches each of its [`rounds`](rounds()) in
//! order until a round yields a match, and calls [`judge`] on every card title (the
//! executor prices the cards judged the same and orders them best first).
//!
//! # Finding the name
//! Each query word is looked for in the card, spaces and hyphens ignored (Hangul as a
//! substring of the space-free title: `라이트스탠다드` = `라이트 스탠다드`; codes as whole
//! pieces: `s24` is not in `s245`), through its aliases (`코카콜라` = `Coca-Cola`), a
//! Hangul word also as two halves apart (`스탠다드 라이트`) or, for part of its weight,
//! by its longest leading or trailing part that begins a card word (`삼다수` of
//! `제주삼다수`). A full model code also matches with a colour/region suffix
//! (`SM-S928NZKEKOO`). The spans found are the card's own name: vocabulary words
//! (variants, accessories, assortments) are looked for only in what is left, so `라이트`
//! in `스프라이트` is no variant when the query is `스프라이트`. Words of a gift phrase
//! (`+ 정품 케이스 증정`, `케이스 포함`) count for the name only.
//!
//! # The judge's rules
//! A card is the same product only when **all** of these hold, checked in this order
//! (the first failure is the [`Reason`]):
//! 1. the title is not empty after normalisation ([`Reason::EmptyTitle`]);
//! 2. it holds no accessory/condition word (`케이스`, `호환`, `중고`, `번호이동` …) the
//!    query lacks ([`Reason::Accessory`]);
//! 3. it is no assortment or choose-one listing (`골라담기`, `택1`, `모음`, `외 3종`)
//!    unless the query is ([`Reason::Assortment`]);
//! 4. it sells no second product joined by `+` that states an amount, a model number or
//!    a variant (`… + AAA 20입`, `본품+리필`; `+ 쇼핑백` is what comes in the box)
//!    ([`Reason::Bundle`]);
//! 5. every model token of the query (`S24`, `15`, a one-letter line mark `D` of
//!    `박카스D`) is in it ([`Reason::MissingModelToken`]). A full model code (six or more
//!    letters and digits, or the model-code hint) may be missing from a title that names
//!    no code at all — titles often leave it out — never replaced by another; when the
//!    card holds the full code, the other tokens are optional except sizes (pure numbers
//!    of three or more digits: `265`);
//! 6. when the query names a brand of the vocabulary (or the brand hint is one), the card
//!    names none of the vocabulary's other brands only ([`Reason::OtherBrand`]:
//!    `풀무원 왕교자` for `비비고 왕교자`);
//! 7. it agrees on every variant kind of the vocabulary ([`Reason::VariantMismatch`]): a
//!    card naming a value the query does not name is another product, unless the query
//!    names no value of that kind and the kind's rule is `any` (colour, size, connector);
//!    a value the query names must be in the card for a `plain` kind (flavour, line,
//!    form, generation: `코카콜라` ≠ `코카콜라 제로`, `진라면 순한맛` ≠ `진라면`), and
//!    for an `any` kind unless the card names none of the kind. A numbered value
//!    (`2세대`) is also named by its bare number (`에어팟 프로 2`); a card holding the
//!    full model code is not required to name the values (the code settles them);
//!    and no number with a unit the query states (`2채널`, `50mm`) is on the card only
//!    with another number (`1채널`, `54mm`), code or not ([`Reason::OtherValue`]);
//! 8. no query name word is replaced ([`Reason::OtherName`]): where the query has a word
//!    the card lacks, between the card words holding its neighbours the card has an
//!    ordinary word of its own in the same script (`크록스 바야 클로그` for
//!    `크록스 클래식 클로그`), or the card runs straight from one neighbour to the other
//!    and the word has three or more characters (`퓨전5 면도날` for
//!    `퓨전5 프로글라이드 면도날`), or a Hangul word is there only by its trailing part
//!    right after a word of the card's own (`탐사 사이다` for `칠성사이다`); a variant
//!    value the query names and the card leaves out is replaced by the card's own word
//!    closing the title in its place or between both its neighbours (`체어원 코요테탄`
//!    for `체어원 블랙`), and a Latin mark of the card's own splits two query words the
//!    card writes as the query does (`4060 Ti STORM` for `4060 STORM`);
//! 9. it holds at least [`MIN_NAME_OVERLAP`] of the query's name words, weighted by
//!    length ([`Reason::LowTokenOverlap`]). A brand word the card leaves out does not
//!    count when a substantive word (three or more characters) of the name was found:
//!    titles often drop the maker. Waived when the card holds the full model code;
//! 10. its quantity agrees with the query's ([`Reason::QuantityMismatch`]): unit sizes
//!     equal when both state one (`2L == 2000ml`, or a box by its total: `468g 12개입` =
//!     `39g x 12`), unit counts equal (no count meaning 1), and the storage capacity
//!     equal when the query states one (`256GB`, `256기가`). So `500ml` ≠ `2L`, `x6` ≠
//!     `x12`, `1+1` ≠ a single item. The parsing rules are in the `quantity.rs` module
//!     docs.
//!
//! Rules 2–8 and 10 are **vetoes**: a card any of them rejects is never the product,
//! whatever an LLM judge says. A card rejected only by rule 9 is [`Verdict::wording_only`]
//! (the LLM judge may read it). [`Verdict::score`] is the length-weighted share of query
//! tokens found in the card, reported for every verdict to rank and debug cards; `same`
//! alone decides.
//!
//! # Prices
//! The judge reads titles only. [`price_outliers`] (`price.rs`) is the one rule over the
//! accepted cards' prices, which the executor applies after [`judge_page`]: a card far
//! under the page's median price is a look-alike, not the product
//! ([`Reason::PriceOutlier`]).
//!
//! See `quantity.rs`, `tokens.rs` (words, pieces, gifts), `variants.rs` (values and
//! brands), `price.rs`, `query.rs` and `rounds.rs` for the rules of each step.

mod contrast;
mod gtin;
mod numbers;
mod price;
mod quantity;
mod query;
mod rounds;
mod tokens;
mod translit;
mod variants;

#[cfg(test)]
mod tests;

use std::{fmt, sync::Arc};

pub use gtin::Gtin;
pub use lps_profiles::normalize::normalize;
pub use lps_profiles::vocabulary::Lexicon;
use lps_profiles::vocabulary::Silent;
pub use price::{PriceGuard, PricedCard, price_outliers};
pub use quantity::{Dimension, Measure, Quantity};
pub use query::{ProductQuery, QueryError};
pub use rounds::{Round, RoundKind, rounds};

use query::{QueryToken, TokenKind, is_full_code};
use tokens::{Fragment, Span, Text, find_form, weight};

/// Least share of the query's name tokens (weighted by length) a card must hold.
pub const MIN_NAME_OVERLAP: f32 = 0.5;

/// Least syllables of each part when a Hangul name word is found split in two.
const MIN_PART: usize = 2;

/// Weight (characters) of a found name word that identifies on its own, so that a brand
/// the card leaves out does not count against it.
const SUBSTANTIVE: u32 = 3;

/// The judge's answer for one card.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The card is the same product (same amount) as the query.
    pub same: bool,
    /// Length-weighted share of query tokens found in the card, `0.0..=1.0`.
    pub score: f32,
    /// Why: [`Reason::Match`] when `same`, else the first rule that failed.
    pub reason: Reason,
    /// Every veto (accessory, assortment, bundle, brand, model token, variant, quantity)
    /// held: the card was rejected only on its wording (too little of the name), which an
    /// LLM judge may overrule. False when `same`.
    pub wording_only: bool,
}

/// Why a card was or was not judged the same product.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// Every rule held.
    Match,
    /// Nothing left of the title after normalisation.
    EmptyTitle,
    /// The card holds an accessory/condition word the query lacks.
    Accessory {
        /// The decoy word found.
        word: String,
    },
    /// The query asks for an accessory or condition word (`호환`, `리필`) the card lacks.
    MissingCondition {
        /// The query's word.
        word: String,
    },
    /// The card is an assortment or choose-one listing the query is not.
    Assortment {
        /// The marker found (`골라담기`, `택1`, `3종`).
        word: String,
    },
    /// A model token of the query is not in the card.
    MissingModelToken {
        /// The token as the query wrote it (`SM-S928N`).
        token: String,
    },
    /// The card names another maker's brand and none of the query's.
    OtherBrand {
        /// The card's brand.
        brand: String,
    },
    /// The card sells a second product with it (`… + AAA 20입`).
    Bundle {
        /// The first word of the second product.
        part: String,
    },
    /// The card and the query differ on a variant.
    VariantMismatch {
        /// The kind (`flavour`, `line`, `colour` …).
        kind: String,
        /// The value the query names (`순한맛`), or `plain` for the plain product.
        wanted: String,
        /// The value the card names (`매운맛`), or `plain` when it names none.
        found: String,
    },
    /// Too few of the query's name tokens are in the card.
    LowTokenOverlap,
    /// Where the query has a name word the card lacks, the card has another
    /// (`크록스 클래식 클로그` → `크록스 바야 클로그`): another line of the same maker.
    OtherName {
        /// The query's word.
        wanted: String,
        /// The card's word in its place.
        found: String,
    },
    /// The query states an attribute with a number (`2채널`, `50mm`) that the card states
    /// with another (`1채널`, `54mm`) and never with the query's.
    OtherValue {
        /// The query's attribute as written.
        wanted: String,
        /// The card's.
        found: String,
    },
    /// Among the page's cards that hold the whole name, this one adds a word next to the
    /// name that others do not: another line, formula or edition of the product.
    LineWord {
        /// The word the card adds.
        word: String,
        /// The page positions (0-based) of the cards that hold the name without it.
        cards: Vec<usize>,
    },
    /// The card's GTIN is another than the query's.
    OtherGtin {
        /// The card's GTIN (14 digits).
        gtin: String,
    },
    /// The card's item price is under the guard's share of the median of the page's
    /// accepted cards (`price.rs`): a cheaper look-alike, not the product.
    PriceOutlier {
        /// The card's item price.
        price: u64,
        /// The median item price of the page's accepted cards.
        median: u64,
        /// How many accepted cards the median was taken over.
        cards: usize,
        /// The guard's share (percent) of the median the price is under.
        percent: u64,
    },
    /// Same product words, different amount.
    QuantityMismatch {
        /// The query's quantity.
        wanted: Quantity,
        /// The card's quantity.
        found: Quantity,
    },
}

impl Reason {
    /// A stable `snake_case` label, for metrics and logs.
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Match => "match",
            Self::EmptyTitle => "empty_title",
            Self::Accessory { .. } => "accessory",
            Self::MissingCondition { .. } => "missing_condition",
            Self::Assortment { .. } => "assortment",
            Self::MissingModelToken { .. } => "missing_model_token",
            Self::OtherBrand { .. } => "other_brand",
            Self::Bundle { .. } => "bundle",
            Self::VariantMismatch { .. } => "variant_mismatch",
            Self::LowTokenOverlap => "low_token_overlap",
            Self::OtherName { .. } => "other_name",
            Self::OtherValue { .. } => "other_value",
            Self::LineWord { .. } => "line_word",
            Self::OtherGtin { .. } => "other_gtin",
            Self::PriceOutlier { .. } => "price_outlier",
            Self::QuantityMismatch { .. } => "quantity_mismatch",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Match | Self::EmptyTitle | Self::LowTokenOverlap => f.write_str(self.as_str()),
            Self::Accessory { word } => write!(f, "accessory word {word:?}"),
            Self::MissingCondition { word } => write!(f, "without the query's {word:?}"),
            Self::Assortment { word } => write!(f, "assortment listing ({word:?})"),
            Self::MissingModelToken { token } => write!(f, "missing model token {token:?}"),
            Self::OtherBrand { brand } => write!(f, "another brand {brand:?}"),
            Self::Bundle { part } => write!(f, "bundled with {part:?}"),
            Self::OtherGtin { gtin } => write!(f, "another GTIN {gtin}"),
            Self::LineWord { word, cards } => {
                let cards: Vec<String> = cards.iter().map(|c| format!("#{}", c + 1)).collect();
                write!(f, "line word {word:?} that cards {} lack", cards.join(", "))
            }
            Self::OtherName { wanted, found } => {
                write!(f, "{found:?} where the name has {wanted:?}")
            }
            Self::OtherValue { wanted, found } => {
                write!(f, "{found:?} where the query has {wanted:?}")
            }
            Self::VariantMismatch {
                kind,
                wanted,
                found,
            } => write!(f, "{kind}: wanted {wanted}, found {found}"),
            Self::PriceOutlier {
                price,
                median,
                cards,
                percent,
            } => write!(
                f,
                "price {price} under {percent}% of the median {median} of {cards} accepted cards"
            ),
            Self::QuantityMismatch { wanted, found } => {
                write!(f, "quantity mismatch: wanted {wanted}, found {found}")
            }
        }
    }
}

/// Where one query token was found in a card.
struct Hit {
    /// The share of the token's weight found: all of it for the word or an alias, a
    /// part for a Hangul word only partly there (`삼다수` of `제주삼다수`).
    weight: u32,
    spans: Vec<Span>,
}

/// Finds a query token in a card: the word itself, an alias of it, or (a Hangul name
/// word) its two halves apart (`바나나우유` in `바나나맛 우유`) or, for part of its weight,
/// its longest leading or trailing part of at least [`MIN_PART`] syllables; a full model
/// code also with a letter suffix (`SM-S928NZKEKOO`).
fn find_token(query: &ProductQuery, card: &Text, token: &QueryToken) -> Hit {
    let lexicon = query.lexicon();
    let full = weight(&token.key);
    let mut spans = card.spans_of(&token.key);
    for alias in lexicon.aliases(&token.key) {
        if alias != &token.key {
            spans.extend(card.spans_of(alias));
        }
    }
    if spans.is_empty() && token.kind == TokenKind::Model && is_full_code(&token.key) {
        spans = card.code_with_suffix(&token.key);
    }
    // A short code the card continues with letters of its own (`V1x` for `V1`, `945XL`
    // for `945`, `4060Ti` for `4060`) is another model; letters the query has (`15Pro`
    // for `15 프로`) are its own words.
    if token.kind == TokenKind::Model && !is_full_code(&token.key) {
        // A short number the card's word continues with another group of digits
        // (`901/58` for `901`, `2025-26` for `2025`) is another code.
        spans.retain(|&span| {
            !(token.key.chars().all(|c| c.is_ascii_digit()) && card.digits_after(span))
        });
        spans.retain(|&span| {
            card.letters_after(span).is_none_or(|more| {
                // A unit closing a size (`270mm`) is no letter of a code.
                quantity::LENGTH_UNITS.contains(&more)
                    || lexicon.unit(more).is_some()
                    || std::iter::once(more)
                        .chain(lexicon.aliases(more).iter().map(String::as_str))
                        .any(|m| query.text().contains_key(m))
                    || abbreviates_named_value(query, more)
                    || english_ordinal(&token.key, more)
            })
        });
    }
    let hangul_name = token.kind == TokenKind::Name && !tokens::is_latin(&token.key);
    if spans.is_empty() && hangul_name {
        spans = split_halves(card, &token.key);
    }
    // Spelled in the other script (`필립스` as `Philips`, `royal canin` as `로얄캐닌`).
    if spans.is_empty() && token.kind == TokenKind::Name && !token.variant {
        spans = if hangul_name {
            translit::latin_spans(card, &token.key)
        } else {
            translit::hangul_spans(card, &token.key)
        };
    }
    // A word the query split (`페이퍼화이트` into `페이퍼` and the colour `화이트`), spelled
    // whole in the other script (`Paperwhite`).
    if spans.is_empty()
        && token.kind == TokenKind::Name
        && translit::is_hangul_word(&token.key)
        && let Some(word) = query
            .text()
            .words
            .iter()
            .find(|w| w.len() > token.key.len() && w.contains(token.key.as_str()))
            .filter(|w| translit::is_hangul_word(w))
    {
        spans = translit::latin_spans(card, word);
    }
    if spans.is_empty()
        && hangul_name
        && let Some((part, part_spans)) = longest_part(card, &token.key)
    {
        return Hit {
            weight: part,
            spans: part_spans,
        };
    }
    Hit {
        weight: if spans.is_empty() { 0 } else { full },
        spans,
    }
}

/// Whether the card glues to one of the query's model tokens letters that abbreviate a
/// variant value the query names (`B` of `PX-S1B` for `… 블랙`).
fn value_in_code(query: &ProductQuery, card: &Text) -> bool {
    query.tokens_of(TokenKind::Model).any(|token| {
        card.spans_of(&token.key).into_iter().any(|span| {
            card.letters_after(span)
                .is_some_and(|more| abbreviates_named_value(query, more))
        })
    })
}

/// Whether letters after a number are its English ordinal suffix (`12th`, `2nd`, `1st`,
/// `3rd`): the number itself, as `12세대` is.
fn english_ordinal(number: &str, more: &str) -> bool {
    if !number.chars().all(|c| c.is_ascii_digit()) {
        return false;
    }
    let teen = number.len() >= 2 && number[number.len() - 2..].starts_with('1');
    let suffix = match number.chars().last() {
        Some('1') if !teen => "st",
        Some('2') if !teen => "nd",
        Some('3') if !teen => "rd",
        Some(_) => "th",
        None => return false,
    };
    more == suffix
}

/// Whether letters a card glues to a short code (`B` of `P-145B`, `BK` of `K05A-BK`)
/// abbreviate a variant value the query names (`블랙`, spelled `black`): its Latin spelling's
/// first letter and then others of it in order, at most three.
fn abbreviates_named_value(query: &ProductQuery, more: &str) -> bool {
    let in_order = |short: &str, long: &str| {
        let mut long = long.chars();
        short.chars().all(|c| long.any(|l| l == c))
    };
    (1..=3).contains(&more.len())
        && more.chars().all(|c| c.is_ascii_lowercase())
        && query.lexicon().kinds.iter().any(|kind| {
            kind.values.iter().any(|value| {
                value
                    .forms
                    .iter()
                    .any(|f| query.text().contains_key(&f.key))
                    && value
                        .forms
                        .iter()
                        .any(|f| f.latin && f.key.starts_with(&more[..1]) && in_order(more, &f.key))
            })
        })
}

/// A Hangul name word found only by its trailing part, right after a card word of the
/// card's own (`곰곰 신선한 우유` for `매일우유`, `탐사 사이다` for `칠성사이다`): the card
/// put its own word where the query's leading part (a maker, a line) was — the query's word
/// and the card's. A trailing part the title begins with (`삼다수 2L` for `제주삼다수`) or
/// that follows a bracket, filler, a brand or another query word is the word itself.
fn replaced_lead(
    query: &ProductQuery,
    card: &Text,
    token: &QueryToken,
    hit: &Hit,
) -> Option<(String, String)> {
    let lexicon = query.lexicon();
    let &(start, end) = hit.spans.first()?;
    let found = card.compact().get(start..end)?;
    if !token.key.ends_with(found) || token.key.starts_with(found) {
        return None;
    }
    let at = card.word_spans().iter().position(|&(s, _)| s == start)?;
    let before = card.words.get(at.checked_sub(1)?)?;
    let flag = |list: &[bool]| list.get(at - 1).copied().unwrap_or(false);
    let own = card.roles.get(at - 1) == Some(&quantity::WordRole::Other)
        && !flag(&card.bracketed)
        && !flag(&card.gift)
        && translit::is_hangul_word(before)
        && before.chars().count() >= 2
        && !vocabulary_word(lexicon, before)
        && !lexicon.is_descriptor(before)
        && !query.text().contains_key(before)
        && !spells_query_word(query, before);
    own.then(|| (token.display.clone(), before.clone()))
}

/// The spans of a Hangul word's two halves, each at least [`MIN_PART`] syllables, when
/// both are in the card (`라이트스탠다드` as `스탠다드 라이트`).
fn split_halves(card: &Text, key: &str) -> Vec<Span> {
    let chars: Vec<(usize, char)> = key.char_indices().collect();
    if chars.len() < 2 * MIN_PART {
        return Vec::new();
    }
    for cut in MIN_PART..=chars.len() - MIN_PART {
        let at = chars.get(cut).map_or(key.len(), |&(i, _)| i);
        let (left, right) = key.split_at(at);
        let (l, r) = (card.spans_of(left), card.spans_of(right));
        if !l.is_empty() && !r.is_empty() {
            return l.into_iter().chain(r).collect();
        }
    }
    Vec::new()
}

/// The longest leading or trailing part (at least [`MIN_PART`] syllables, shorter than
/// the word) of a Hangul word found in the card: its weight and spans.
fn longest_part(card: &Text, key: &str) -> Option<(u32, Vec<Span>)> {
    let chars: Vec<(usize, char)> = key.char_indices().collect();
    let n = chars.len();
    for len in (MIN_PART..n).rev() {
        let lead_end = chars.get(len).map_or(key.len(), |&(i, _)| i);
        let trail_start = chars.get(n - len).map_or(0, |&(i, _)| i);
        for part in [&key[..lead_end], &key[trail_start..]] {
            // The part must begin a word of the card (`삼다수 2L`, `바나나우유`), not end one
            // (`한향` of `은은한향`).
            let starts: Vec<usize> = card.word_spans().iter().map(|s| s.0).collect();
            let spans: Vec<Span> = card
                .spans_of(part)
                .into_iter()
                .filter(|s| starts.contains(&s.0))
                .collect();
            if !spans.is_empty() {
                return Some((u32::try_from(len).unwrap_or(u32::MAX), spans));
            }
        }
    }
    None
}

/// One card of a result page as the judge reads it.
#[derive(Debug, Clone, Copy, Default)]
pub struct PageCard<'a> {
    /// The card's title as the mall writes it.
    pub title: &'a str,
    /// The card's GTIN (barcode), when the page's data gives one.
    pub gtin: Option<&'a str>,
}

/// Judges every card of one result page against `query` (rules in the module docs): one
/// verdict per card, in order.
#[must_use]
pub fn judge_page(query: &ProductQuery, cards: &[PageCard<'_>]) -> Vec<Verdict> {
    let seen: Vec<Seen> = cards.iter().map(|card| judge_card(query, card)).collect();
    let line_words = contrast::line_words(&seen);
    seen.into_iter()
        .zip(line_words)
        .map(|(seen, line)| match line {
            Some((word, cards)) => Verdict {
                same: false,
                score: seen.verdict.score,
                reason: Reason::LineWord { word, cards },
                wording_only: false,
            },
            None => seen.verdict,
        })
        .collect()
}

/// Whether a Hangul spelling and a Latin one name the same word by sound (`필립스`,
/// `Philips`): the judge's cross-script rule for a query word without an alias (the
/// algorithm is in `translit.rs`). Spaces and marks are ignored on both sides.
#[must_use]
pub fn same_name_across_scripts(hangul: &str, latin: &str) -> bool {
    translit::same_name(hangul, latin)
}

/// Judges whether `card_title` is the same product as `query` (rules in the module docs),
/// as one card seen alone.
#[must_use]
pub fn judge(query: &ProductQuery, card_title: &str) -> Verdict {
    judge_card(
        query,
        &PageCard {
            title: card_title,
            gtin: None,
        },
    )
    .verdict
}

/// One card's verdict (rules in the module docs), with what page contrast needs of it.
fn judge_card(query: &ProductQuery, page_card: &PageCard<'_>) -> Seen {
    let lexicon: Arc<Lexicon> = query.lexicon().clone();
    let card = Text::new(page_card.title, &lexicon);
    let alone = |verdict: Verdict| Seen {
        verdict,
        added: Vec::new(),
        text: None,
    };
    if card.is_empty() {
        return alone(Verdict {
            same: false,
            score: 0.0,
            reason: Reason::EmptyTitle,
            wording_only: false,
        });
    }
    // Both barcodes known: they settle the wording rules (see `gtin.rs`).
    let card_gtin = page_card.gtin.and_then(Gtin::parse);
    let gtin_same = match (query.gtin(), &card_gtin) {
        (Some(wanted), Some(found)) if wanted != found => {
            return alone(Verdict {
                same: false,
                score: 0.0,
                reason: Reason::OtherGtin {
                    gtin: found.as_str().to_owned(),
                },
                wording_only: false,
            });
        }
        (Some(_), Some(_)) => true,
        _ => false,
    };

    // Find every query word; the spans found are the card's own name, where no
    // vocabulary entry is looked for.
    let mut covered: Vec<Span> = Vec::new();
    let (mut found, mut total, mut name_found, mut name_total) = (0u32, 0u32, 0u32, 0u32);
    let mut missing: Vec<&QueryToken> = Vec::new();
    let mut missing_names: Vec<&QueryToken> = Vec::new();
    let (mut missing_brands, mut substantive) = (0u32, false);
    let mut code_found = false;
    let mut missing_condition: Option<String> = None;
    let mut lead_replaced: Option<(String, String)> = None;
    let hits: Vec<Hit> = query
        .tokens()
        .iter()
        .map(|token| find_token(query, &card, token))
        .collect();
    // The card words other query words hold whole: a part of a word found only there
    // (`테트라` of `테트라민`, where the brand `테트라` is that card word) is no sign of it.
    let held_whole: Vec<Span> = query
        .tokens()
        .iter()
        .zip(&hits)
        .filter(|(t, h)| !t.variant && h.weight >= weight(&t.key))
        .flat_map(|(_, h)| h.spans.iter().copied())
        .collect();
    for (token, mut hit) in query.tokens().iter().zip(hits) {
        let w = weight(&token.key);
        if hit.weight > 0
            && hit.weight < w
            && hit
                .spans
                .iter()
                .all(|&(s, e)| held_whole.iter().any(|&(hs, he)| hs <= s && e <= he))
        {
            hit = Hit {
                weight: 0,
                spans: Vec::new(),
            };
        }
        if !token.variant {
            covered.extend(hit.spans.iter().copied());
        }
        total = total.saturating_add(w);
        found = found.saturating_add(hit.weight);
        match token.kind {
            TokenKind::Name
                if !token.variant && hit.weight == 0 && is_brand(&lexicon, &token.key) =>
            {
                missing_brands = missing_brands.saturating_add(w);
                missing_names.push(token);
            }
            // An accessory or condition word the query asks for (`호환 토너`, `리퍼`):
            // a card without it is the other kind of item (a genuine toner, a new unit).
            TokenKind::Name
                if hit.weight == 0 && lexicon.accessories.iter().any(|f| f.key == token.key) =>
            {
                missing_condition.get_or_insert_with(|| token.display.clone());
            }
            TokenKind::Name if !token.variant => {
                name_total = name_total.saturating_add(w);
                name_found = name_found.saturating_add(hit.weight);
                if hit.weight == 0 {
                    missing_names.push(token);
                } else if hit.weight < w && lead_replaced.is_none() {
                    lead_replaced = replaced_lead(query, &card, token, &hit);
                }
                if hit.weight >= SUBSTANTIVE {
                    substantive = true;
                }
            }
            // A plain-product word (`클래식`) the card lacks may have been replaced, and so
            // may a variant value (a colour the card does not name: `코요테탄` for `블랙`).
            TokenKind::Name
                if hit.weight == 0 && (query.is_plain_word(&token.key) || token.variant) =>
            {
                missing_names.push(token);
            }
            TokenKind::Model if !token.variant => {
                if hit.weight > 0 && is_full_code(&token.key) {
                    code_found = true;
                }
                if hit.weight == 0 {
                    missing.push(token);
                }
            }
            _ => {}
        }
    }
    // A query that is a set of two (`본품+리필`) asks for both parts: a card without one
    // sells the other alone.
    if missing_condition.is_none() {
        missing_condition = set_part_missing(query, &card);
    }
    // A brand the card leaves out counts for nothing when a substantive word of the name
    // was found (`신라면 멀티팩` for `농심 신라면`): titles often drop the maker. When the
    // brand is the distinctive word (`제주 삼다수` → `제주 용암수`) it counts.
    if !substantive {
        name_total = name_total.saturating_add(missing_brands);
    }
    // A number written in another shape (`245/45R18` as `245 45 18` or `2454518`).
    missing.retain(|t| {
        !numbers::shape_found(query, &card, &t.key)
            && !numbers::inches_found(query, &card, &t.key)
            && !spelled_after_neighbour(query, &card, t)
    });
    let score = if gtin_same { 1.0 } else { ratio(found, total) };
    let missing_model = if gtin_same {
        None
    } else {
        missing_model_token(query, &card, &missing, code_found)
    };
    // A full model code in the card identifies the product alone: titles often drop the
    // line name or the brand before a code (`SM-S928N 256GB`); so does an equal GTIN.
    let code_identifies = (code_found && query.has_full_code()) || gtin_same;
    let name_overlap = if name_total == 0 || code_identifies {
        1.0
    } else {
        ratio(name_found, name_total)
    };

    // What the card says its item works with (`… (닌텐도 스위치 호환)`) is another
    // product's name: no word of it is this card's accessory, variant or line word.
    let covered_name = covered.clone();
    covered.extend(compatibility_phrases(query, &card, &covered_name));
    let fragments = card.fragments(&covered, true);
    let substituted = if code_identifies {
        None
    } else {
        lead_replaced
            .or_else(|| substitution(query, &card, &covered_name, &missing_names))
            .or_else(|| inserted_mark(query, &card, &covered_name))
    };
    let query_fragments = query.text().fragments(&[], false);
    let in_query =
        |f: &lps_profiles::vocabulary::Form| find_form(&query_fragments, f, true).is_some();
    let accessory = lexicon
        .accessories
        .iter()
        .find(|f| find_form(&fragments, f, true).is_some() && !in_query(f))
        .map(|f| f.key.clone());
    let assortment = lexicon
        .assortments
        .iter()
        .find(|f| find_form(&fragments, f, true).is_some() && !in_query(f))
        .map(|f| f.key.clone())
        .or_else(|| {
            kinds_counted(&card, &lexicon).filter(|w| !query.text().compact().contains(w.as_str()))
        });
    let bundle = bundled_part(query, &card);
    let other_brand = if gtin_same {
        None
    } else {
        other_brand(query, &card)
    };
    let variant = if gtin_same {
        None
    } else {
        variant_mismatch(
            query,
            &card,
            &fragments,
            code_identifies,
            description_tail(&card, &covered_name),
        )
    };
    let quantity_agrees = query.quantity().agrees_with(&card.quantity);
    let other_value = if gtin_same {
        None
    } else {
        numbers::other_value(query, &card)
    };

    let vetoed = accessory.is_some()
        || missing_condition.is_some()
        || assortment.is_some()
        || bundle.is_some()
        || other_brand.is_some()
        || missing_model.is_some()
        || variant.is_some()
        || substituted.is_some()
        || other_value.is_some()
        || !quantity_agrees;
    let reason = if let Some(word) = accessory {
        Reason::Accessory { word }
    } else if let Some(word) = missing_condition {
        Reason::MissingCondition { word }
    } else if let Some(word) = assortment {
        Reason::Assortment { word }
    } else if let Some(part) = bundle {
        Reason::Bundle { part }
    } else if let Some(token) = missing_model {
        Reason::MissingModelToken {
            token: token.display.clone(),
        }
    } else if let Some(brand) = other_brand {
        Reason::OtherBrand { brand }
    } else if let Some(reason) = variant {
        reason
    } else if let Some((wanted, found)) = other_value {
        Reason::OtherValue { wanted, found }
    } else if let Some((wanted, found)) = substituted {
        Reason::OtherName { wanted, found }
    } else if name_overlap < MIN_NAME_OVERLAP {
        Reason::LowTokenOverlap
    } else if !quantity_agrees {
        Reason::QuantityMismatch {
            wanted: query.quantity(),
            found: card.quantity,
        }
    } else {
        Reason::Match
    };
    let same = reason == Reason::Match;
    // An equal GTIN settles the name: no page contrast for it.
    let added = if same && !gtin_same && !code_identifies {
        contrast::added_words(query, &card, &covered, &missing_names)
    } else {
        Vec::new()
    };
    Seen {
        verdict: Verdict {
            same,
            score,
            wording_only: !same && !vetoed,
            reason,
        },
        added,
        text: Some(card),
    }
}

/// A card's verdict and what page contrast needs of it.
struct Seen {
    verdict: Verdict,
    /// Ordinary words the card adds next to the product's name (see `contrast.rs`).
    added: Vec<String>,
    /// The card's words (none for a card rejected before they were read).
    text: Option<Text>,
}

/// The most words between a missing name word's neighbours, all in the other script, read
/// as its spelling (see [`substitution`]).
const MAX_SPELLED_RUN: usize = 3;

/// Characters from which a name word left out between its neighbours marks another line
/// (see [`substitution`]).
const OMITTED_NAME: usize = 3;

/// A name word left out between its neighbours marks another line only when it carries at
/// least a quarter of the name's weight: a family word among many (`지포스` of `이엠텍
/// 지포스 RTX 4060 STORM X Dual OC`) is what titles drop, a distinctive one
/// (`프로글라이드` of `퓨전5 프로글라이드 면도날`) is the line.
const OMITTED_SHARE_DENOMINATOR: u32 = 4;

/// Pure numbers of this many digits (`265`, `100`: a shoe or clothing size) stay required
/// when a full model code identified the card; longer ones (`2280`) are specifications the
/// code settles.
const SIZE_DIGITS: usize = 3;

/// The first model token the card lacks that it must hold (rules in the module docs):
/// - a full model code may be left out of a title that names no code at all (titles
///   often omit it), never replaced by another code;
/// - when a full model code was found, the other tokens may be left out too (the code
///   names the product), except sizes (pure numbers of [`SIZE_DIGITS`] digits).
fn missing_model_token<'q>(
    query: &ProductQuery,
    card: &Text,
    missing: &[&'q QueryToken],
    code_found: bool,
) -> Option<&'q QueryToken> {
    // A code of the card's own, not one the query names too.
    let card_has_code = card.words.iter().any(|w| {
        let key = w.replace('-', "");
        is_full_code(&key) && !query.tokens().iter().any(|t| t.key == key)
    });
    // A code of the same family in the card (`SN770` where the query has `SN850X`, `X100V`
    // where it has `X100VI`): the same leading letters, or the same leading three or more
    // characters with a digit among them.
    let sibling_of = |code: &str| {
        let letters: String = code.chars().take_while(char::is_ascii_alphabetic).collect();
        let same_start = |key: &str| {
            let common: String = key
                .chars()
                .zip(code.chars())
                .take_while(|(a, b)| a == b)
                .map(|(a, _)| a)
                .collect();
            (letters.len() >= 2 && key.starts_with(&letters))
                || (common.chars().count() >= 3 && common.chars().any(|c| c.is_ascii_digit()))
        };
        card.words.iter().enumerate().any(|(i, w)| {
            let key = w.replace('-', "");
            key.len() >= 4
                && same_start(&key)
                && key.chars().any(|c| c.is_ascii_alphabetic())
                && key.chars().any(|c| c.is_ascii_digit())
                && card
                    .roles
                    .get(i)
                    .is_some_and(|r| *r == quantity::WordRole::Other)
                && !query.tokens().iter().any(|t| t.key == key)
        })
    };
    missing.iter().copied().find(|t| {
        let pure_number = t.key.chars().all(|c| c.is_ascii_digit());
        if is_full_code(&t.key) {
            return card_has_code || sibling_of(&t.key);
        }
        if code_found && query.has_full_code() {
            return pure_number && t.key.len() == SIZE_DIGITS;
        }
        true
    })
}

/// Whether the card spells a short mark of the query (`D`, `1`, `V1`) in Hangul right
/// after the query word before it, inside one card word (`박카스디` for `박카스D`,
/// `에어포스원` for `에어포스 1`, `프로브이원` for `PRO V1`).
fn spelled_after_neighbour(query: &ProductQuery, card: &Text, token: &QueryToken) -> bool {
    let spellings = translit::spelled_mark(&token.key);
    if spellings.is_empty() {
        return false;
    }
    let tokens = query.tokens();
    let Some(at) = tokens.iter().position(|t| t.key == token.key) else {
        return false;
    };
    let Some(before) = at.checked_sub(1).and_then(|i| tokens.get(i)) else {
        return false;
    };
    let compact = card.compact();
    let word_spans = card.word_spans();
    find_token(query, card, before)
        .spans
        .iter()
        .any(|&(_, end)| {
            // The spelling must close the card word the neighbour's span ends in.
            let Some(&(_, word_end)) = word_spans.iter().find(|&&(s, e)| s < end && end <= e)
            else {
                return false;
            };
            compact
                .get(end..word_end)
                .is_some_and(|rest| spellings.iter().any(|s| s == rest))
        })
}

/// The first word of a part of a set the query names (`본품` of `본품+리필`: the words
/// next to its `+`) that the card lacks.
fn set_part_missing(query: &ProductQuery, card: &Text) -> Option<String> {
    let text = query.text();
    let ordinary = |i: usize| {
        text.roles.get(i) == Some(&quantity::WordRole::Other)
            && text.words.get(i).is_some_and(|w| w != "+")
    };
    (0..text.words.len())
        .filter(|&i| text.words.get(i).is_some_and(|w| w == "+"))
        .flat_map(|i| [i.checked_sub(1), Some(i + 1)])
        .flatten()
        .filter(|&i| ordinary(i))
        .filter_map(|i| text.words.get(i))
        .find(|w| !card.contains_key(w))
        .cloned()
}

/// The first word of a second product joined by `+` (`+ AAA 20입`, `본품+리필`), unless
/// the query is such a bundle itself. A part counts when it states an amount, a model
/// number or a variant (`+ 쇼핑백`, `+ SD 어댑터` are what comes in the box).
fn bundled_part(query: &ProductQuery, card: &Text) -> Option<String> {
    if query.text().bundled.iter().any(|b| *b) {
        return None;
    }
    let lexicon = query.lexicon();
    let words: Vec<(usize, &String)> = card
        .words
        .iter()
        .enumerate()
        .filter(|&(i, w)| card.bundled.get(i).copied().unwrap_or(false) && w != "+")
        .collect();
    let first = words.first()?.1.clone();
    let states_amount = words.iter().any(|&(i, w)| {
        w.chars().any(|c| c.is_ascii_digit())
            || card
                .roles
                .get(i)
                .is_some_and(|r| *r != quantity::WordRole::Other)
    });
    let part = Text::new(
        &words
            .iter()
            .map(|(_, w)| w.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        lexicon,
    );
    let names_variant =
        !variants::named_values(lexicon, &part.fragments(&[], false), true).is_empty();
    (states_amount || names_variant).then_some(first)
}

/// Least characters of two words for any one substituted character to be a spelling: in
/// a word of two, one character is half of it (`갈축`/`적축` are two switches).
const SPELLING_LEN: usize = 3;

/// Whether two words differ by at most one substituted character: in words of at least
/// [`SPELLING_LEN`] characters any one, in shorter ones only a Hangul syllable's final
/// consonant (`린넨`/`리넨`), the way loanword spellings vary.
fn one_edit_apart(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let differing: Vec<(&char, &char)> = a.iter().zip(&b).filter(|(x, y)| x != y).collect();
    a.len() == b.len()
        && match differing.as_slice() {
            [] => true,
            [(x, y)] => {
                a.len() >= SPELLING_LEN
                    || translit::jamo(**x)
                        .zip(translit::jamo(**y))
                        .is_some_and(|((i1, m1, _), (i2, m2, _))| i1 == i2 && m1 == m2)
            }
            _ => false,
        }
}

/// The spans of the phrases in which a card says what its item works with: a
/// compatibility word (`호환`, `전용`: the vocabulary's `compatibility` list) with the
/// words it qualifies — before it back to the name (`스위치 호환`, `오피스젯 프로 8710
/// 호환`), or after it for a Latin one (`compatible with iPhone`) — when those words are another
/// product's: no word of the query, and no variant or plain word of the product's own
/// (`WiFi전용` says which model it is). Such a card is the query's product, made to work
/// with another (`샌디스크 마이크로SD 256GB (닌텐도 스위치 호환)`); a compatibility word that
/// qualifies the query's own words (`갤럭시 S24 호환 케이스`) stays an accessory word.
fn compatibility_phrases(query: &ProductQuery, card: &Text, covered: &[Span]) -> Vec<Span> {
    let lexicon = query.lexicon();
    let spans = card.word_spans();
    let overlaps = |i: usize, set: &[Span]| tokens::word_overlaps(&spans, i, set);
    let of_query = |i: usize| {
        overlaps(i, covered)
            || card
                .words
                .get(i)
                .is_some_and(|w| query.text().contains_key(w))
    };
    // A plain-product word (`WiFi` in `WiFi 전용`: the Wi-Fi-only model) is the product's.
    let own_variant = |i: usize| card.words.get(i).is_some_and(|w| query.is_plain_word(w));
    let ordinary = |i: usize| {
        card.roles
            .get(i)
            .is_some_and(|r| *r == quantity::WordRole::Other)
    };
    let has_digit = |i: usize| {
        card.words
            .get(i)
            .is_some_and(|w| w.chars().any(|c| c.is_ascii_digit()))
    };
    // A word of another product's name: not the query's, an ordinary word or a number.
    let foreign = |i: usize| !of_query(i) && (ordinary(i) || has_digit(i));
    let mut out = Vec::new();
    for (at, word) in card.words.iter().enumerate() {
        if let Some(stem) = lexicon.compatibility_stem(word) {
            // Glued to what it qualifies (`닌텐도스위치호환`).
            if !query.text().contains_key(stem)
                && let Some(&span) = spans.get(at)
            {
                out.push(span);
            }
            continue;
        }
        if !lexicon.is_compatibility(word) {
            continue;
        }
        let latin = tokens::is_latin(word);
        let neighbour = if latin {
            Some(at + 1)
        } else {
            at.checked_sub(1)
        };
        let Some(neighbour) = neighbour.filter(|&i| i < card.words.len()) else {
            continue;
        };
        if own_variant(neighbour) {
            // `WiFi 전용`: the product's own model, not a second product.
            if let Some(&span) = spans.get(at) {
                out.push(span);
            }
            continue;
        }
        if !foreign(neighbour) {
            continue;
        }
        let phrase: Vec<usize> = if latin {
            (at + 1..card.words.len())
                .take_while(|&i| foreign(i))
                .collect()
        } else {
            (0..at).rev().take_while(|&i| foreign(i)).collect()
        };
        for i in phrase.into_iter().chain(std::iter::once(at)) {
            if let Some(&span) = spans.get(i) {
                out.push(span);
            }
        }
    }
    out
}

/// Whether a card word spells one of the query's name words in the other script.
fn spells_query_word(query: &ProductQuery, word: &str) -> bool {
    let word = word.replace('-', "");
    query.name_tokens().any(|t| {
        if translit::is_hangul_word(t) {
            translit::same_name(t, &word)
        } else {
            translit::same_name(&word, t)
        }
    })
}

/// Whether a card word is one of the vocabulary's: filler, a brand, a spelling with
/// aliases, an accessory or an assortment word.
fn vocabulary_word(lexicon: &Lexicon, w: &str) -> bool {
    !lexicon.aliases(w).is_empty() || filler_or_kind_word(lexicon, w)
}

/// Whether a card word is filler, a brand, an accessory or an assortment word of the
/// vocabulary: [`vocabulary_word`] but for spellings with aliases, which name lines as
/// often as anything (`익스트림`, `클래식`).
fn filler_or_kind_word(lexicon: &Lexicon, w: &str) -> bool {
    lexicon.is_stopword(w)
        || is_brand(lexicon, w)
        || lexicon
            .accessories
            .iter()
            .chain(&lexicon.assortments)
            .any(|f| f.key == w)
}

/// Whether one of a card word's other spellings is written in the query (`microSDXC`
/// where the query has `마이크로SD`).
fn alias_in_query(query: &ProductQuery, w: &str) -> bool {
    let compact = query.text().compact();
    query
        .lexicon()
        .aliases(w)
        .iter()
        .any(|a| compact.contains(&a.replace(' ', "")))
}

/// Whether a name word is a brand (or a spelling of one).
fn is_brand(lexicon: &Lexicon, key: &str) -> bool {
    lexicon
        .brands
        .iter()
        .any(|b| b.key == key || lexicon.aliases(key).contains(&b.key))
}

/// A name word the card replaced (see [`Reason::OtherName`]): for a query name word the
/// card lacks, between the card words holding its neighbours in the query (the nearest
/// found tokens before and after it; at least one of them found), the card has an
/// ordinary word of its own — not covered by the query, not filler, not a quantity, not a
/// brand, accessory or assortment word. A word with other spellings in the vocabulary is
/// ordinary (`할리갈리 익스트림` for `할리갈리 디럭스`: `익스트림`/`extreme` names a line as
/// well as any word), unless one of its spellings is in the query (`microSDXC` for
/// `마이크로SD`).
fn substitution(
    query: &ProductQuery,
    card: &Text,
    covered: &[Span],
    missing: &[&QueryToken],
) -> Option<(String, String)> {
    if missing.is_empty() {
        return None;
    }
    let lexicon = query.lexicon();
    let word_spans = card.word_spans();
    let is_covered = |i: usize| {
        word_spans
            .get(i)
            .is_some_and(|&(s, e)| covered.iter().any(|&(cs, ce)| cs < e && s < ce))
    };
    let tokens = query.tokens();
    let name_weight: u32 = query
        .tokens_of(TokenKind::Name)
        .filter(|t| !t.variant)
        .map(|t| weight(&t.key))
        .sum();
    // Card word index of each found token: the first word its spans touch.
    let located: Vec<Option<usize>> = tokens
        .iter()
        .map(|t| {
            if t.variant || missing.iter().any(|m| m.key == t.key) {
                return None;
            }
            let spans = find_token(query, card, t).spans;
            word_spans
                .iter()
                .position(|&(s, e)| spans.iter().any(|&(ss, se)| ss < e && s < se))
        })
        .collect();
    let named_spans: Vec<Span> =
        variants::named_values(lexicon, &card.fragments(covered, true), true)
            .into_iter()
            .map(|(_, span)| span)
            .collect();
    let in_value = |i: usize| {
        word_spans
            .get(i)
            .is_some_and(|&(s, e)| named_spans.iter().any(|&(ns, ne)| ns < e && s < ne))
    };
    let name_words: Vec<usize> = located.iter().flatten().copied().collect();
    let name_first = name_words.iter().min().copied().unwrap_or(0);
    let name_last = name_words.iter().max().copied().unwrap_or(0);
    for m in missing {
        let Some(at) = tokens.iter().position(|t| t.key == m.key) else {
            continue;
        };
        // A description the query gives (`고소한`, `바삭쫄깃한`) is what titles drop: left
        // out, it marks no other line; another word in its place (`앵그리` for `얼큰한`) does.
        let attributive = tokens::is_attributive(&m.key);
        let before = located[..at].iter().rev().flatten().next().copied();
        let after = located[at + 1..].iter().flatten().next().copied();
        if before.is_none() && after.is_none() {
            continue;
        }
        // The card runs straight from the word's neighbour before to the one after
        // (`퓨전5 면도날` for `퓨전5 프로글라이드 면도날`): it is the line without the
        // distinctive word, when the word is long enough to be a name of its own.
        if let (Some(b), Some(a)) = (before, after)
            && a == b + 1
            && !attributive
            && m.key.chars().count() >= OMITTED_NAME
            && !m.key.chars().any(|c| c.is_ascii_digit())
            && weight(&m.key) * OMITTED_SHARE_DENOMINATOR >= name_weight
        {
            return Some((m.display.clone(), String::new()));
        }
        // The one word between both its neighbours is in the other script (`Philips Hue
        // White` for `필립스 휴 화이트`): the word spelled in a way the sound rule does not
        // read, not replaced.
        let other_script = |i: usize| {
            card.words.get(i).is_some_and(|w| {
                if tokens::is_latin(&m.key) {
                    translit::is_hangul_word(w)
                } else {
                    translit::is_latin_word(w)
                }
            })
        };
        if let (Some(b), Some(a)) = (before, after)
            && b < a
            && a - b <= 1 + MAX_SPELLED_RUN
            && (b + 1..a).any(|i| !is_covered(i))
            && (b + 1..a).all(other_script)
        {
            continue;
        }
        let (lo, hi) = match (before, after) {
            (Some(b), Some(a)) if b < a => (b + 1, a),
            (Some(b), None) => (b + 1, card.words.len()),
            (None, Some(a)) => (0, a),
            _ => continue,
        };
        let hangul = !tokens::is_latin(&m.key);
        let replaces = |i: usize| {
            let Some(w) = card.words.get(i) else {
                return false;
            };
            let flag = |list: &[bool]| list.get(i).copied().unwrap_or(false);
            card.roles.get(i).is_some_and(|r| *r == quantity::WordRole::Other)
                && !flag(&card.gift)
                && !flag(&card.bracketed)
                && !is_covered(i)
                && !in_value(i)
                && !w.chars().any(|c| c.is_ascii_digit())
                // One letter replaces only a short Latin mark (`F` for `EF`: a nib, a size).
                && (w.chars().count() >= 2 || (!hangul && m.key.chars().count() <= 3))
                // A latin word for a Hangul one is a spelling (`Detect` for `디텍트`).
                && tokens::is_latin(w) != hangul
                // A word with other spellings is a replacement too (`익스트림` for `클래식`),
                // unless one of them is in the query (`microSDXC` for `마이크로SD`).
                && !filler_or_kind_word(lexicon, w)
                && !alias_in_query(query, w)
                && !lexicon.is_descriptor(w)
                && !one_edit_apart(w, &m.key)
                // A spelling of one of the query's words (`LACTO-FIT` for `락토핏`).
                && !spells_query_word(query, w)
        };
        // A word the card adds at the very start or end, with the missing word's
        // neighbour on one side only, is a replacement only next to that neighbour.
        let replacement = match (before, after) {
            (Some(b), None) => Some(b + 1).filter(|&i| replaces(i)),
            (None, Some(a)) => a.checked_sub(1).filter(|&i| replaces(i)),
            _ => (lo..hi).find(|&i| replaces(i)),
        }
        // The card may order its name differently (`삼성전자 노트북 DDR5-5600` for
        // `삼성전자 DDR5-5600 데스크탑`): a word of its own inside its name is a
        // replacement too.
        .or_else(|| {
            (name_first + 1..name_last)
                .filter(|_| !attributive)
                .find(|&i| replaces(i))
        });
        // A variant value the card does not name is replaced only by the word closing
        // its title (amounts aside: `코요테탄`, `코어 50포`), never when a code's letters
        // name it (`PX-S1B` for `… 블랙`): inside the title a word of the card's own is
        // as often its wording.
        let closes = |i: usize| {
            card.roles
                .iter()
                .skip(i + 1)
                .all(|r| *r != quantity::WordRole::Other)
        };
        let value = m.variant && !query.is_plain_word(&m.key);
        // ... or by a word between both its neighbours (`노트 포켓 룰드` for `노트 라지 룰드`).
        let between = |i: usize| matches!((before, after), (Some(b), Some(a)) if b < i && i < a);
        if let Some(i) = replacement
            .filter(|&i| !value || ((closes(i) || between(i)) && !value_in_code(query, card)))
        {
            return Some((m.display.clone(), card.words[i].clone()));
        }
    }
    None
}

/// A Latin word of the card's own between two query words the query writes side by side,
/// which the card writes as the query does and side by side but for it (`4060 Ti STORM`
/// for `4060 STORM`, `체어원 XL 블랙` for `체어원 블랙`, `evo3 EV 245/45R18`): a mark of
/// another model or edition splitting the name. A Hangul word there is as often the
/// seller's description (`스위치 OLED 모델 화이트`), a run of several words always is.
/// The word is ordinary: not covered by the query, no filler, vocabulary, descriptor,
/// variant value, number or tag, no spelling of a query word. As (the query's words
/// around it, the word).
fn inserted_mark(query: &ProductQuery, card: &Text, covered: &[Span]) -> Option<(String, String)> {
    let lexicon = query.lexicon();
    let word_spans = card.word_spans();
    let tokens = query.tokens();
    // The card word holding each query token as the query writes it.
    let located: Vec<Option<usize>> = tokens
        .iter()
        .map(|t| card.words.iter().position(|w| w.replace('-', "") == t.key))
        .collect();
    let named_spans: Vec<Span> =
        variants::named_values(lexicon, &card.fragments(covered, true), true)
            .into_iter()
            .map(|(_, span)| span)
            .collect();
    let ordinary = |i: usize| {
        let Some(w) = card.words.get(i) else {
            return false;
        };
        let flag = |list: &[bool]| list.get(i).copied().unwrap_or(false);
        tokens::is_latin(&w.replace('-', ""))
            && card
                .roles
                .get(i)
                .is_some_and(|r| *r == quantity::WordRole::Other)
            && !flag(&card.gift)
            && !flag(&card.bracketed)
            && !flag(&card.bundled)
            && !tokens::word_overlaps(&word_spans, i, covered)
            && !tokens::word_overlaps(&word_spans, i, &named_spans)
            && !w.chars().any(|c| c.is_ascii_digit())
            && w.chars().count() >= 2
            && !vocabulary_word(lexicon, w)
            && !lexicon.is_descriptor(w)
            && !spells_query_word(query, w)
            && !query.text().contains_key(w)
    };
    for (j, pair) in located.windows(2).enumerate() {
        let (Some(left), Some(right)) = (pair[0], pair[1]) else {
            continue;
        };
        if right == left + 2 && ordinary(left + 1) {
            let around = format!("{} {}", tokens[j].display, tokens[j + 1].display);
            return Some((around, card.words[left + 1].clone()));
        }
    }
    None
}

/// A brand the card names when it names none of the query's (both must name one).
fn other_brand(query: &ProductQuery, card: &Text) -> Option<String> {
    let lexicon = query.lexicon();
    let query_fragments = query.text().fragments(&[], false);
    let card_fragments = card.fragments(&[], true);
    let spellings = |key: &str| -> Vec<String> {
        let mut all = vec![key.to_owned()];
        all.extend(lexicon.aliases(key).iter().cloned());
        all
    };
    let named_by = |fragments: &[Fragment<'_>]| -> Vec<&str> {
        lexicon
            .brands
            .iter()
            .filter(|b| {
                let all = spellings(&b.key);
                let refs: Vec<&str> = all.iter().map(String::as_str).collect();
                variants::names_brand(fragments, &refs)
            })
            .map(|b| b.key.as_str())
            .collect()
    };
    let mut wanted = named_by(&query_fragments);
    if let Some(hint) = query.brand_hint() {
        for key in &hint.keys {
            if let Some(b) = lexicon
                .brands
                .iter()
                .find(|b| b.key == *key || lexicon.aliases(&b.key).contains(key))
            {
                wanted.push(b.key.as_str());
            }
        }
    }
    if wanted.is_empty() {
        return None;
    }
    let found = named_by(&card_fragments);
    let same_brand = |a: &str, b: &str| a == b || lexicon.aliases(a).iter().any(|x| x == b);
    if found.is_empty()
        || found
            .iter()
            .any(|f| wanted.iter().any(|w| same_brand(f, w)))
    {
        return None;
    }
    found.first().map(|b| (*b).to_owned())
}

/// `N종` with N ≥ 2 outside gift phrases (`외 3종`): the listing holds several kinds.
fn kinds_counted(card: &Text, lexicon: &Lexicon) -> Option<String> {
    card.words.windows(2).enumerate().find_map(|(i, pair)| {
        let [n, counter] = pair else { return None };
        let gift = card.gift.get(i).copied().unwrap_or(false);
        let n: u32 = n.parse().ok()?;
        (n >= 2 && !gift && lexicon.is_assortment_counter(counter)).then(|| format!("{n}{counter}"))
    })
}

/// The first variant kind the card and the query disagree on (rules in the module docs).
fn variant_mismatch(
    query: &ProductQuery,
    card: &Text,
    fragments: &[Fragment<'_>],
    code_identifies: bool,
    tail: usize,
) -> Option<Reason> {
    let lexicon = query.lexicon();
    let named = variants::named_values(lexicon, fragments, true);
    // Every value the card names, its name words included: a value the query names that
    // the card holds as the query does (`사과` of `경북 부사 사과`) is on the card.
    let anywhere = variants::named_values(lexicon, &card.fragments(&[], true), true);
    for (k, kind) in lexicon.kinds.iter().enumerate() {
        let asked = query.variants().get(k)?;
        // Of a kind the query is silent on, a value in the description after the amount
        // (`750ml 스프레이 욕실 세제`) says what the product is like, not which one it is;
        // with a full model code found, the code says which one it is.
        let silent_plain = asked.named.is_empty() && kind.silent == Silent::Plain;
        let mut card_values: Vec<usize> = named
            .iter()
            .filter(|(n, _)| n.kind == k && n.value != variants::PLAIN)
            .filter(|(_, span)| {
                !(silent_plain && (code_identifies || described(card, *span, tail)))
            })
            // A value the card writes as a query word spelled in the other script is the
            // query's word (`OLED` for `올레드`), not a value the query is silent on.
            .filter(|(_, span)| {
                card.compact()
                    .get(span.0..span.1)
                    .is_none_or(|text| !spells_query_word(query, text))
            })
            .map(|(n, _)| n.value)
            .collect();
        card_values.dedup();
        let name = |v: Option<&usize>| {
            v.and_then(|&v| kind.values.get(v))
                .map_or_else(|| "plain".to_owned(), |value| value.name.clone())
        };
        let extra = card_values
            .iter()
            .find(|v| !asked.named.contains(v) && !asked.mentioned.contains(v));
        let silent_any = asked.named.is_empty() && kind.silent == Silent::Any;
        if let Some(extra) = extra
            && !silent_any
        {
            return Some(Reason::VariantMismatch {
                kind: kind.name.clone(),
                wanted: name(asked.named.first()),
                found: name(Some(extra)),
            });
        }
        // A value the query names and the card does not: of a "plain" kind the card is
        // the plain product; of an "any" kind a card silent on the kind is taken for the
        // value asked, one naming another value of it is not. A full model code settles
        // it; a bare number stands for a numbered value (`프로 2` for `2세대`).
        let missing = asked.named.iter().find(|v| {
            !card_values.contains(v)
                && !anywhere.iter().any(|(n, _)| n.kind == k && n.value == **v)
                && !kind
                    .values
                    .get(**v)
                    .is_some_and(|value| numbered_in(&value.name, fragments))
        });
        if let Some(missing) = missing
            && !code_identifies
            && (kind.silent == Silent::Plain || !card_values.is_empty())
        {
            return Some(Reason::VariantMismatch {
                kind: kind.name.clone(),
                wanted: name(Some(missing)),
                found: name(card_values.first()),
            });
        }
    }
    None
}

/// Whether a value at `span` is part of the card's description: at or after `tail`, and
/// followed by more words (`스프레이 욕실 세제`); a value closing the title (`400ml 리필`)
/// names the product.
fn described(card: &Text, span: Span, tail: usize) -> bool {
    if span.0 < tail {
        return false;
    }
    let spans = card.word_spans();
    let Some(last) = spans.iter().rposition(|&(s, e)| s < span.1 && span.0 < e) else {
        return false;
    };
    last + 1 < card.words.len()
}

/// Where a card's description begins (a byte offset of its compact text): the first
/// ordinary word after the first amount that follows the name's first word (`제거제 750ml 스프레이 욕실
/// 세제` → `스프레이`); the end of the title when there is none.
fn description_tail(card: &Text, covered: &[Span]) -> usize {
    let spans = card.word_spans();
    let end = card.compact().len();
    // NB: from the name's first word: a description may repeat a name word
    // (`… 로스트 10개입 다크 로스트 커피`).
    let first_name = spans
        .iter()
        .position(|&(s, e)| e > s && covered.iter().any(|&(a, b)| a < e && s < b));
    let Some(first_name) = first_name else {
        return end;
    };
    let amount = (first_name + 1..card.words.len()).find(|&i| {
        card.roles
            .get(i)
            .is_some_and(|r| *r != quantity::WordRole::Other)
            && card
                .words
                .get(i)
                .is_some_and(|w| w.chars().any(|c| c.is_ascii_digit()))
    });
    let Some(amount) = amount else {
        return end;
    };
    (amount + 1..card.words.len())
        .find(|&i| {
            card.roles
                .get(i)
                .is_some_and(|r| *r == quantity::WordRole::Other)
        })
        .and_then(|i| spans.get(i))
        .map_or(end, |&(s, _)| s)
}

/// Whether a value named with a leading number (`2세대`, `10세대`) is stood for by that
/// number as a word of its own among the fragments.
fn numbered_in(value: &str, fragments: &[Fragment<'_>]) -> bool {
    let digits: String = value.chars().take_while(char::is_ascii_digit).collect();
    !digits.is_empty()
        && digits.len() < value.len()
        && fragments.iter().any(|f| f.whole_word && f.text == digits)
}

/// Whether `card_title` states the same amount of product as `query` (the quantity rule
/// alone).
///
/// One of the vetoes behind [`Verdict::wording_only`]: whatever another judge says, a card
/// of another size or pack count (a 6-pack for a 12-pack) is never the product, because
/// its price would not be comparable.
#[must_use]
pub fn same_quantity(query: &ProductQuery, card_title: &str) -> bool {
    query
        .quantity()
        .agrees_with(&Text::new(card_title, query.lexicon()).quantity)
}

/// `found / total` in `0.0..=1.0`; 0 when `total` is 0.
#[allow(
    clippy::cast_possible_truncation,
    reason = "a ratio in 0..=1 fits f32; the precision lost is irrelevant for a score"
)]
fn ratio(found: u32, total: u32) -> f32 {
    if total == 0 {
        0.0
    } else {
        (f64::from(found) / f64::from(total)) as f32
    }
}

/// Builds a query the test knows to be valid.
#[cfg(test)]
fn must_query(name: &str) -> ProductQuery {
    match ProductQuery::new(name, Lexicon::builtin()) {
        Ok(query) => query,
        Err(e) => panic!("test query {name:?} rejected: {e}"),
    }
}
