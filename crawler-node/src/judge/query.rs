//! [`ProductQuery`]: the product asked for, analysed once and judged against many cards.
//!
//! Every word of the normalised product name falls in exactly one class:
//! - **quantity** (`2l`, `x`, `12`, `병` when read as part of a size or count) →
//!   [`ProductQuery::quantity`];
//! - **model token**: any other word with a digit (`s24`, `sm-s928n`, `256gb`,
//!   `15`). Every model token must be in the card, exactly (hyphens optional);
//! - **name token**: any other word, minus shop filler and single latin letters
//!   (`제주`, `삼다수`, `sony`). Cards need a share of them (see
//!   [`MIN_NAME_OVERLAP`](super::MIN_NAME_OVERLAP)) — unless the query has a
//!   **full model code**: a model token of at least
//!   [`FULL_CODE_LEN`] characters mixing letters and digits (`sm-s928n`,
//!   `wh-1000xm5`) or a model-code hint. Such a code names one product by
//!   itself, and titles such as `WH-1000XM5 블랙` often drop the brand; short
//!   tokens (`s24`, `256gb`, `15`) do not.
//!
//! Hints added after construction:
//! - [`with_brand`](ProductQuery::with_brand): the brand leads the precise and
//!   broad search rounds. It is **required** in cards only when the product
//!   name itself contains it: a brand that titles often omit or spell another
//!   way (`Samsung` vs `삼성`) must not reject every card.
//! - [`with_model_code`](ProductQuery::with_model_code): the manufacturer's
//!   model code (`SM-S928N`), added as a model token and so required in cards.
//!   Never pass an internal SKU or a mall's product id here: it is not in titles.
//! - [`with_gtin`](ProductQuery::with_gtin): the barcode, compared with a card's
//!   (see `gtin.rs`).
//! - [`with_hints`](ProductQuery::with_hints): all three as a caller sent them with
//!   `lps.v1.Product`; how the node builds the query of an assigned job.

use std::sync::Arc;

use lps_profiles::vocabulary::Lexicon;
use lps_proto::model::ProductHints;

use super::gtin::Gtin;
use super::quantity::{Quantity, WordRole};
use super::tokens::{Text, is_latin};
use super::variants::{PLAIN, named_values};

/// Length (without hyphens) from which a letters-and-digits model token is a
/// full model code.
pub(super) const FULL_CODE_LEN: usize = 6;

/// Digits from which a pure number is a product number (`42151`), a full code too.
pub(super) const PRODUCT_NUMBER_LEN: usize = 5;

/// Why a product name cannot be judged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// Nothing left after normalisation (empty, spaces, emoji only).
    #[error("product name is empty")]
    Empty,
    /// Only quantities and filler words (`2L x 12`, `무료배송`): every card would match.
    #[error("product name has no words that identify a product")]
    NoIdentifyingWords,
}

/// Whether a query token must appear exactly or counts toward the overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TokenKind {
    Name,
    Model,
}

/// One identifying word of the query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct QueryToken {
    pub kind: TokenKind,
    /// Normalised, without hyphens: what is looked up in cards.
    pub key: String,
    /// How the word is written into search strings (`SM-S928N`, `삼다수`).
    pub display: String,
    /// The word names a variant value (`제로`, `매운맛`, `2세대`): searched for, but
    /// judged by the variant rule, not found as a name word.
    pub variant: bool,
}

#[derive(Debug, Clone)]
pub(super) struct Brand {
    pub display: String,
    pub keys: Vec<String>,
    /// The brand is in the product name, so cards must hold it too.
    pub required: bool,
}

/// The values the query names of one variant kind.
#[derive(Debug, Clone, Default)]
pub(super) struct KindValues {
    /// Values named by words of their own (`제로` in `코카콜라 제로`): the card must agree.
    pub named: Vec<usize>,
    /// Values spelled inside a name word (`라이트` in `스프라이트`): a card may name them.
    pub mentioned: Vec<usize>,
}

/// A product to look for, built once from its name and judged against many cards.
#[derive(Debug, Clone)]
pub struct ProductQuery {
    name: String,
    lexicon: Arc<Lexicon>,
    text: Text,
    tokens: Vec<QueryToken>,
    brand: Option<Brand>,
    /// Per [`Lexicon::kinds`] entry.
    variants: Vec<KindValues>,
    has_code_hint: bool,
    /// The caller's barcode, when given.
    gtin: Option<Gtin>,
}

impl ProductQuery {
    /// Analyses a product name (`"제주 삼다수 2L x 12"`) with a vocabulary (the
    /// coordinator's plus the mall's additions).
    ///
    /// # Errors
    /// [`QueryError::Empty`] when nothing is left after normalisation, and
    /// [`QueryError::NoIdentifyingWords`] when the name holds only quantities
    /// and filler, which would match any card.
    pub fn new(name: &str, lexicon: Arc<Lexicon>) -> Result<Self, QueryError> {
        let text = Text::new(name, &lexicon);
        if text.is_empty() {
            return Err(QueryError::Empty);
        }
        // Words that spell a variant value or the plain product on their own.
        let fragments = text.fragments(&[], false);
        let mut variant_spans = Vec::new();
        let mut variants = vec![KindValues::default(); lexicon.kinds.len()];
        for (named, span) in named_values(&lexicon, &fragments, false) {
            variant_spans.push(span);
            if let Some(values) = variants.get_mut(named.kind)
                && named.value != PLAIN
                && !values.named.contains(&named.value)
            {
                values.named.push(named.value);
            }
        }
        let word_spans = text.word_spans();
        let mut tokens: Vec<QueryToken> = Vec::new();
        let mut skip = None;
        for (index, (word, role)) in text.words.iter().zip(&text.roles).enumerate() {
            if *role != WordRole::Other || skip == Some(index) {
                continue;
            }
            // A number and the ordinal after it are one grade token (`2단계`).
            let ordinal = text
                .words
                .get(index + 1)
                .filter(|next| word.chars().all(|c| c.is_ascii_digit()) && lexicon.is_ordinal(next))
                .filter(|_| {
                    text.roles
                        .get(index + 1)
                        .is_some_and(|r| *r == WordRole::Other)
                });
            if let Some(next) = ordinal {
                skip = Some(index + 1);
                let key = format!("{word}{next}");
                if !tokens.iter().any(|t| t.key == key) {
                    tokens.push(QueryToken {
                        kind: TokenKind::Model,
                        display: key.clone(),
                        key,
                        variant: false,
                    });
                }
                continue;
            }
            let Some(mut token) = classify(word, &lexicon) else {
                continue;
            };
            token.variant = word_spans.get(index).is_some_and(|&(s, e)| {
                e > s && variant_spans.iter().any(|&(vs, ve)| vs <= s && e <= ve)
            });
            let glued = if token.variant {
                None
            } else {
                glued_value(&token.key, &lexicon)
            };
            let parts = match glued {
                // `진라면매운맛`: the name `진라면` and the value `매운맛`.
                Some((prefix, named)) => {
                    if let Some(values) = variants.get_mut(named.0)
                        && !values.named.contains(&named.1)
                    {
                        values.named.push(named.1);
                    }
                    let suffix = token.key[prefix.len()..].to_owned();
                    vec![
                        QueryToken {
                            key: prefix.clone(),
                            display: prefix,
                            ..token.clone()
                        },
                        QueryToken {
                            key: suffix.clone(),
                            display: suffix,
                            variant: true,
                            ..token
                        },
                    ]
                }
                None => vec![token],
            };
            for token in parts {
                if !tokens.iter().any(|t| t.key == token.key) {
                    tokens.push(token);
                }
            }
        }
        if tokens.is_empty() {
            return Err(QueryError::NoIdentifyingWords);
        }
        if tokens.iter().all(|t| t.variant) {
            // Only variant words (`제로 콜라` would not get here; `블랙 화이트` does):
            // they are the name.
            tokens.iter_mut().for_each(|t| t.variant = false);
        }
        // Values spelled inside name words.
        for token in tokens
            .iter()
            .filter(|t| !t.variant && t.kind == TokenKind::Name)
        {
            for (k, kind) in lexicon.kinds.iter().enumerate() {
                for (v, value) in kind.values.iter().enumerate() {
                    let inside = value.forms.iter().any(|f| {
                        if f.latin {
                            is_latin(&token.key) && token.key != f.key && token.key.contains(&f.key)
                        } else {
                            token.key.contains(&f.key)
                        }
                    });
                    if inside && !variants[k].mentioned.contains(&v) {
                        variants[k].mentioned.push(v);
                    }
                }
            }
        }
        Ok(Self {
            name: name.split_whitespace().collect::<Vec<_>>().join(" "),
            lexicon,
            text,
            tokens,
            brand: None,
            variants,
            has_code_hint: false,
            gtin: None,
        })
    }

    /// Adds a brand hint (see the module docs). A hint with no usable word is ignored.
    #[must_use]
    pub fn with_brand(mut self, brand: &str) -> Self {
        let text = Text::new(brand, &self.lexicon);
        let mut keys: Vec<String> = Vec::new();
        for word in &text.words {
            let key = word.replace('-', "");
            if !key.is_empty() && !self.lexicon.is_stopword(&key) && !keys.contains(&key) {
                keys.push(key);
            }
        }
        if keys.is_empty() {
            return self;
        }
        let required = keys.iter().all(|k| {
            std::iter::once(k)
                .chain(self.lexicon.aliases(k))
                .any(|a| self.text.contains_key(a))
        });
        self.brand = Some(Brand {
            display: brand.split_whitespace().collect::<Vec<_>>().join(" "),
            keys,
            required,
        });
        self
    }

    /// Adds the manufacturer's model code (see the module docs); it becomes a
    /// required model token. A code with no letter or digit is ignored.
    #[must_use]
    pub fn with_model_code(mut self, code: &str) -> Self {
        // `MTJV3KH/A`: the region after `/` is often left out of titles.
        let code = match code.split_once('/') {
            Some((base, region))
                if region.trim().chars().count() <= 2 && is_full_code(&base.replace('-', "")) =>
            {
                base
            }
            _ => code,
        };
        let key: String = Text::new(code, &self.lexicon)
            .words
            .iter()
            .flat_map(|w| w.chars())
            .filter(|&c| c != '-')
            .collect();
        if key.is_empty() {
            return self;
        }
        self.has_code_hint = true;
        if self.tokens.iter().any(|t| t.key == key) {
            return self;
        }
        self.tokens.push(QueryToken {
            kind: TokenKind::Model,
            key,
            display: code.split_whitespace().collect::<Vec<_>>().join(" "),
            variant: false,
        });
        self
    }

    /// Adds the caller's GTIN (barcode): a card whose page data carries a GTIN is judged
    /// by it (see `gtin.rs`). Text that is no valid GTIN is ignored (callers' input is
    /// validated where it is received).
    #[must_use]
    pub fn with_gtin(mut self, gtin: &str) -> Self {
        self.gtin = Gtin::parse(gtin);
        self
    }

    /// Adds every hint the caller sent with the product (`lps.v1.Product`'s brand, model
    /// code and GTIN): what the node does with an assigned job's product.
    #[must_use]
    pub fn with_hints(self, hints: &ProductHints) -> Self {
        let mut query = self;
        if let Some(brand) = hints.brand() {
            query = query.with_brand(brand);
        }
        if let Some(code) = hints.model_code() {
            query = query.with_model_code(code);
        }
        if let Some(gtin) = hints.gtin() {
            query = query.with_gtin(gtin);
        }
        query
    }

    /// The caller's GTIN, if a valid one was given.
    #[must_use]
    pub fn gtin(&self) -> Option<&Gtin> {
        self.gtin.as_ref()
    }

    /// The product name as given (whitespace collapsed).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The vocabulary this query is judged with.
    #[must_use]
    pub fn lexicon(&self) -> &Arc<Lexicon> {
        &self.lexicon
    }

    /// The quantity the name states (`{ 2000 ml, 12 }` for `2L x 12`).
    #[must_use]
    pub fn quantity(&self) -> Quantity {
        self.text.quantity
    }

    /// The brand hint, if one was given.
    #[must_use]
    pub fn brand(&self) -> Option<&str> {
        self.brand.as_ref().map(|b| b.display.as_str())
    }

    /// Name tokens (normalised), in name order.
    pub fn name_tokens(&self) -> impl Iterator<Item = &str> {
        self.tokens_of(TokenKind::Name).map(|t| t.key.as_str())
    }

    /// Model tokens as written into search strings (`SM-S928N`), in name order,
    /// then the model-code hint.
    pub fn model_tokens(&self) -> impl Iterator<Item = &str> {
        self.tokens_of(TokenKind::Model).map(|t| t.display.as_str())
    }

    pub(super) fn tokens(&self) -> &[QueryToken] {
        &self.tokens
    }

    pub(super) fn tokens_of(&self, kind: TokenKind) -> impl Iterator<Item = &QueryToken> {
        self.tokens.iter().filter(move |t| t.kind == kind)
    }

    pub(super) fn text(&self) -> &Text {
        &self.text
    }

    pub(super) fn brand_hint(&self) -> Option<&Brand> {
        self.brand.as_ref()
    }

    pub(super) fn variants(&self) -> &[KindValues] {
        &self.variants
    }

    /// Whether a full model code identifies the product (see the module docs).
    pub(super) fn has_full_code(&self) -> bool {
        self.has_code_hint
            || self
                .tokens_of(TokenKind::Model)
                .any(|t| is_full_code(&t.key))
    }

    /// Whether a word names the plain product (`오리지널`, `클래식`).
    pub(super) fn is_plain_word(&self, key: &str) -> bool {
        self.lexicon
            .kinds
            .iter()
            .any(|k| k.plain.iter().any(|f| f.key == key))
    }
}

/// Most letters closing a size written as numbers joined by `x` (`C` of `700x25C`).
const SIZE_CODE_LETTERS: usize = 2;

/// Numbers joined by `x`, the last closed by at most [`SIZE_CODE_LETTERS`] letters
/// (`700x25c`, a tyre's size): a size many makers' products share, not one product's code.
fn is_size_code(key: &str) -> bool {
    let parts: Vec<&str> = key.split('x').collect();
    let number = |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit() || c == '.');
    parts.len() >= 2
        && parts.iter().enumerate().all(|(i, p)| {
            if i + 1 < parts.len() {
                return number(p);
            }
            let digits = p.trim_end_matches(|c: char| c.is_ascii_alphabetic());
            number(digits) && p.len() - digits.len() <= SIZE_CODE_LETTERS
        })
}

pub(super) fn is_full_code(key: &str) -> bool {
    // A dimension (`30x40cm`) names a size, not a product.
    if super::quantity::is_dimension(key) || is_size_code(key) {
        return false;
    }
    // A product number of five or more digits (a LEGO set, a catalog number).
    let product_number =
        key.chars().count() >= PRODUCT_NUMBER_LEN && key.chars().all(|c| c.is_ascii_digit());
    product_number
        || (key.chars().count() >= FULL_CODE_LEN
            && key.chars().any(|c| c.is_ascii_alphabetic())
            && key.chars().any(|c| c.is_ascii_digit()))
}

/// A Hangul name word ending in a variant value glued to a name of two or more syllables
/// (`진라면매운맛`, `코카콜라제로`): the name and the (kind, value). A word that is itself
/// a known name (an alias or a brand: `스프라이트`) is never cut.
fn glued_value(key: &str, lexicon: &Lexicon) -> Option<(String, (usize, usize))> {
    if is_latin(key)
        || !lexicon.aliases(key).is_empty()
        || lexicon.brands.iter().any(|b| b.key == key)
    {
        return None;
    }
    let mut best: Option<(String, (usize, usize), usize)> = None;
    for (k, kind) in lexicon.kinds.iter().enumerate() {
        for (v, value) in kind.values.iter().enumerate() {
            for form in value.forms.iter().filter(|f| !f.latin) {
                let syllables = form.key.chars().count();
                let Some(prefix) = key.strip_suffix(form.key.as_str()) else {
                    continue;
                };
                if syllables < 2 || prefix.chars().count() < 2 {
                    continue;
                }
                if best.as_ref().is_none_or(|b| b.2 < syllables) {
                    best = Some((prefix.to_owned(), (k, v), syllables));
                }
            }
        }
    }
    best.map(|(prefix, named, _)| (prefix, named))
}

/// A non-quantity word of the name as a token, or `None` for filler.
fn classify(word: &str, lexicon: &Lexicon) -> Option<QueryToken> {
    let key = word.replace('-', "");
    if key.is_empty() || lexicon.is_stopword(&key) || word == "+" {
        return None;
    }
    if key.chars().any(|c| c.is_ascii_digit()) {
        return Some(QueryToken {
            kind: TokenKind::Model,
            key,
            display: word.to_uppercase(),
            variant: false,
        });
    }
    if key.len() == 1 && key.is_ascii() {
        // `박카스D`, `갤럭시 Z`: a one-letter line mark, required like a model token.
        return Some(QueryToken {
            kind: TokenKind::Model,
            key,
            display: word.to_uppercase(),
            variant: false,
        });
    }
    Some(QueryToken {
        kind: TokenKind::Name,
        key,
        display: word.to_owned(),
        variant: false,
    })
}

#[cfg(test)]
mod tests {
    use super::super::must_query;
    use super::{Lexicon, ProductQuery, QueryError};

    #[test]
    fn classifies_words() {
        let cases: [(&str, &[&str], &[&str]); 7] = [
            ("제주 삼다수 2L x 12", &["제주", "삼다수"], &[]),
            ("[무료배송] 제주삼다수 2L x 12병", &["제주삼다수"], &[]),
            (
                "삼성 갤럭시 S24 울트라 SM-S928N 256GB",
                &["삼성", "갤럭시", "울트라"],
                &["S24", "SM-S928N"],
            ),
            ("Sony WH-1000XM5 블랙", &["sony", "블랙"], &["WH-1000XM5"]),
            ("아이폰15 프로", &["아이폰", "프로"], &["15"]),
            ("코카콜라500ml x 24", &["코카콜라"], &[]),
            (
                "나이키 x 피스마이너스원 a",
                &["나이키", "피스마이너스원"],
                &["A"],
            ),
        ];
        for (name, names, models) in cases {
            let query = ProductQuery::new(name, Lexicon::builtin());
            let Ok(query) = query else {
                panic!("{name:?} rejected: {query:?}");
            };
            assert_eq!(
                query.name_tokens().collect::<Vec<_>>(),
                names,
                "name {name:?}"
            );
            assert_eq!(
                query.model_tokens().collect::<Vec<_>>(),
                models,
                "name {name:?}"
            );
        }
    }

    #[test]
    fn rejects_names_that_identify_nothing() {
        let cases = [
            ("", QueryError::Empty),
            ("   ", QueryError::Empty),
            ("😀🔥", QueryError::Empty),
            ("2L x 12", QueryError::NoIdentifyingWords),
            ("[무료배송] 특가", QueryError::NoIdentifyingWords),
            ("1+1 총 24병", QueryError::NoIdentifyingWords),
        ];
        for (name, want) in cases {
            assert_eq!(
                ProductQuery::new(name, Lexicon::builtin()).err(),
                Some(want),
                "name {name:?}"
            );
        }
    }

    #[test]
    fn hints() {
        let query = must_query("제주 삼다수 2L x 12").with_brand("삼다수");
        assert_eq!(query.brand(), Some("삼다수"));
        assert!(query.brand_hint().is_some_and(|b| b.required));

        let query = must_query("갤럭시 S24").with_brand("Samsung");
        assert!(query.brand_hint().is_some_and(|b| !b.required));

        let query = must_query("갤럭시 S24").with_brand(" [ ] ");
        assert_eq!(query.brand(), None);

        let query = must_query("갤럭시 S24 울트라")
            .with_model_code("SM-S928N")
            .with_model_code("sm s928n")
            .with_model_code("");
        assert_eq!(
            query.model_tokens().collect::<Vec<_>>(),
            ["S24", "SM-S928N"]
        );
        assert!(query.has_full_code());

        for (name, full) in [
            ("소니 WH-1000XM5", true),
            ("삼성 SM-S928N", true),
            ("갤럭시 S24 256GB", false),
            ("아이폰 15 프로", false),
            ("제주 삼다수 2L x 12", false),
        ] {
            assert_eq!(must_query(name).has_full_code(), full, "name {name:?}");
        }
    }
}
