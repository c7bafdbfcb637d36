//! Matching: is a search-result card the same product as the one asked for?
//!
//! Owns the rule-based half of DESIGN §5 "Matching": title normalisation,
//! quantity parsing, brand/model tokens, the [`judge`], the query
//! [`rounds`](rounds()). Pure logic: no I/O, no
//! async, no state between calls; every function takes any string without
//! panicking. Regexes are compiled once per process. (The optional LLM
//! keyword generation and judging of §5 live elsewhere and run only when
//! these rules found nothing; [`same_quantity`] is their hard veto.)
//!
//! # Flow
//! A job builds one [`ProductQuery`] from the product name (plus optional
//! brand and model-code hints), searches each of its [`rounds`](rounds()) in
//! order until a round yields a match, and calls [`judge`] on every card title
//! (the executor prices the cards judged the same and orders them best first).
//!
//! # The judge's rules
//! A card is the same product only when **all** of these hold, checked in this
//! order (the first failure is the [`Reason`]):
//! 1. the title is not empty after normalisation ([`Reason::EmptyTitle`]);
//! 2. it holds no accessory/condition word (`케이스`, `호환`, `리필`, `중고` …)
//!    that the query lacks ([`Reason::Accessory`]);
//! 3. every model token of the query (`SM-S928N`, `S24`, `256GB`, `15`) is in it
//!    exactly, hyphens and spaces optional ([`Reason::MissingModelToken`]);
//! 4. it holds the brand hint, when the product name contains that brand
//!    ([`Reason::MissingBrand`]);
//! 5. it names the same model-line variants (`제로`, `울트라`, `프로` …)
//!    ([`Reason::VariantMismatch`]);
//! 6. it holds at least [`MIN_NAME_OVERLAP`] of the query's name tokens,
//!    weighted by length, so `삼다수 2리터 12입` matches `제주 삼다수` but
//!    `제주 용암수` does not ([`Reason::LowTokenOverlap`]). Waived when the query
//!    has a full model code (`SM-S928N`, `WH-1000XM5`, or a model-code hint),
//!    which rule 3 has already found: titles often drop the brand before a code;
//! 7. its quantity agrees with the query's ([`Reason::QuantityMismatch`]):
//!    unit sizes equal when both state one (`2L == 2000ml`), and unit counts
//!    equal, a title without a count meaning 1. So `500ml` ≠ `2L`, `x6` ≠
//!    `x12`, `1+1` ≠ a single item, and `x12` ≠ no count. A price is only
//!    comparable for the same amount of product; a missing size is tolerated
//!    because titles often omit it, a missing count is not because it silently
//!    means one. The parsing rules are in the `quantity.rs` module docs.
//!
//! Identity is checked before quantity, so `QuantityMismatch` means "right
//! product, wrong pack" — the number worth watching when tuning the parser.
//! [`Verdict::score`] is the length-weighted share of query tokens found in the
//! card, reported for every verdict to rank and debug cards; `same` alone
//! decides.
//!
//! See `normalize.rs`, `quantity.rs`, `tokens.rs` (word lists), `query.rs` and
//! `rounds.rs` for the rules of each step.

mod normalize;
mod quantity;
mod query;
mod rounds;
mod tokens;

#[cfg(test)]
mod tests;

use std::fmt;

pub use normalize::normalize;
pub use quantity::{Dimension, Measure, Quantity};
pub use query::{ProductQuery, QueryError};
pub use rounds::{Round, RoundKind, rounds};

use query::{QueryToken, TokenKind};
use tokens::{Text, variant_of, weight};

/// Least share of the query's name tokens (weighted by length) a card must hold.
pub const MIN_NAME_OVERLAP: f32 = 0.5;

/// The judge's answer for one card.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The card is the same product (same amount) as the query.
    pub same: bool,
    /// Length-weighted share of query tokens found in the card, `0.0..=1.0`.
    pub score: f32,
    /// Why: [`Reason::Match`] when `same`, else the first rule that failed.
    pub reason: Reason,
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
        word: &'static str,
    },
    /// A model token of the query is not in the card.
    MissingModelToken {
        /// The token as the query wrote it (`SM-S928N`).
        token: String,
    },
    /// The brand, named in the product name, is not in the card.
    MissingBrand {
        /// The brand hint.
        brand: String,
    },
    /// The card and the query differ on a model-line variant.
    VariantMismatch {
        /// The variant held by only one side (`제로`).
        variant: &'static str,
    },
    /// Too few of the query's name tokens are in the card.
    LowTokenOverlap,
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
            Self::MissingModelToken { .. } => "missing_model_token",
            Self::MissingBrand { .. } => "missing_brand",
            Self::VariantMismatch { .. } => "variant_mismatch",
            Self::LowTokenOverlap => "low_token_overlap",
            Self::QuantityMismatch { .. } => "quantity_mismatch",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Match | Self::EmptyTitle | Self::LowTokenOverlap => f.write_str(self.as_str()),
            Self::Accessory { word } => write!(f, "accessory word {word:?}"),
            Self::MissingModelToken { token } => write!(f, "missing model token {token:?}"),
            Self::MissingBrand { brand } => write!(f, "missing brand {brand:?}"),
            Self::VariantMismatch { variant } => write!(f, "variant {variant:?} on one side only"),
            Self::QuantityMismatch { wanted, found } => {
                write!(f, "quantity mismatch: wanted {wanted}, found {found}")
            }
        }
    }
}

/// Judges whether `card_title` is the same product as `query` (rules in the module docs).
#[must_use]
pub fn judge(query: &ProductQuery, card_title: &str) -> Verdict {
    let card = Text::new(card_title);
    if card.is_empty() {
        return Verdict {
            same: false,
            score: 0.0,
            reason: Reason::EmptyTitle,
        };
    }
    let card_variants = card.variants();
    // A name token that is a variant spelling (`울트라`) is found through its
    // variant, so `ultra` in the card counts for it.
    let present = |token: &QueryToken| match variant_of(&token.key) {
        Some(variant) if token.kind == TokenKind::Name => card_variants.contains(variant),
        _ => card.contains_key(&token.key),
    };

    let (mut found, mut total, mut name_found, mut name_total) = (0u32, 0u32, 0u32, 0u32);
    for token in query.tokens() {
        let w = weight(&token.key);
        let hit = present(token);
        total = total.saturating_add(w);
        found = found.saturating_add(if hit { w } else { 0 });
        if token.kind == TokenKind::Name {
            name_total = name_total.saturating_add(w);
            name_found = name_found.saturating_add(if hit { w } else { 0 });
        }
    }
    let score = ratio(found, total);
    // A full model code identifies the product alone (rule 6), and a query of
    // model tokens only has no name tokens to share.
    let name_overlap = if name_total == 0 || query.has_full_code() {
        1.0
    } else {
        ratio(name_found, name_total)
    };

    let reason = if let Some(word) = card.decoys().find(|d| !query.text().contains_key(d)) {
        Reason::Accessory { word }
    } else if let Some(token) = query
        .tokens_of(TokenKind::Model)
        .find(|t| !card.contains_key(&t.key))
    {
        Reason::MissingModelToken {
            token: token.display.clone(),
        }
    } else if let Some(brand) = query
        .brand_hint()
        .filter(|b| b.required && !b.keys.iter().all(|k| card.contains_key(k)))
    {
        Reason::MissingBrand {
            brand: brand.display.clone(),
        }
    } else if let Some(variant) = query.variants().first_difference(card_variants) {
        Reason::VariantMismatch { variant }
    } else if name_overlap < MIN_NAME_OVERLAP {
        Reason::LowTokenOverlap
    } else if !query.quantity().agrees_with(&card.quantity) {
        Reason::QuantityMismatch {
            wanted: query.quantity(),
            found: card.quantity,
        }
    } else {
        Reason::Match
    };
    Verdict {
        same: reason == Reason::Match,
        score,
        reason,
    }
}

/// Whether `card_title` states the same amount of product as `query` (rule 7 alone).
///
/// The hard veto on any other judge's "same": the LLM judge may accept a card the rules
/// rejected on its wording, never one of another size or pack count (a 6-pack for a
/// 12-pack), because its price would not be comparable.
#[must_use]
pub fn same_quantity(query: &ProductQuery, card_title: &str) -> bool {
    query
        .quantity()
        .agrees_with(&Text::new(card_title).quantity)
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
    match ProductQuery::new(name) {
        Ok(query) => query,
        Err(e) => panic!("test query {name:?} rejected: {e}"),
    }
}
