//! Page contrast: a word some cards add next to the product's name, and others do not, is
//! another line of the product.
//!
//! No vocabulary can list every line, formula or edition word (`인텐시브`, `시그니처`,
//! `8+`, `Futura`), and a card that holds every word of the query plus one of them passes
//! every per-card rule. A result page shows what one card cannot: among the cards that
//! hold the whole name, the true product appears *without* the word. So the judge looks
//! at the page:
//! 1. For each card the rules accept, its **added words** are the ordinary words it has
//!    inside the name (between the first and last word of the query it holds) or right
//!    after it when that word ends the name phrase (an amount, a bracket, a query or
//!    variant word or the title's end follows it; a word followed by more words of its own
//!    starts a description: `자동차 장난감 조립 블록`): not the query's nor a spelling of
//!    one in the other script, not filler, brands, aliases, accessory,
//!    assortment or gift words, not a variant value (a colour when the query names none is
//!    the product), not a vocabulary **descriptor** (`사료`, `대용량`: words that say what
//!    kind of thing it is), not in square brackets (seller tags), no digits, two or more
//!    characters.
//! 2. An added word is a **line word** when some accepted cards hold the name without it,
//!    at most half of the accepted cards carry it (the plain product is what most sellers
//!    list), and no card of another product on the page carries it (a word other
//!    products share says what kind of thing it is: `건전지`, `구강청결제`). A counter
//!    glued to a number (`3세대`, `100사이즈`) is the number's.
//! 3. A card carrying a line word is rejected ([`Reason::LineWord`](super::Reason), naming
//!    the word and the cards without it). With a single accepted card there is nothing to
//!    contrast: the per-card rules and the vocabulary decide alone.
//!
//! Words after an amount (`2kg 소형견 성견용 사료`) and in brackets are where sellers put
//! tags and descriptions, so they are never line words.

use super::quantity::WordRole;
use super::tokens::{self, Span, Text};
use super::{ProductQuery, Reason, Seen, spells_query_word, translit, variants, vocabulary_word};

/// Shortest added word, in characters.
const MIN_CHARS: usize = 2;

/// Hangul words of three or more syllables ending in `용` (`캠핑용`, `차량용`, `가정용`)
/// say what a product is for: a description, never a line (a usage the vocabulary lists,
/// `업소용`, is a variant value and judged as one).
fn says_use(word: &str) -> bool {
    word.chars().count() >= 3 && word.ends_with('용') && translit::is_hangul_word(word)
}

/// The words a card adds next to the name (rule 1 of the module docs), given the spans its
/// query words were found at.
pub(super) fn added_words(query: &ProductQuery, card: &Text, covered: &[Span]) -> Vec<String> {
    let lexicon = query.lexicon();
    let spans = card.word_spans();
    let overlaps = |i: usize, set: &[Span]| tokens::word_overlaps(&spans, i, set);
    let named: Vec<Span> = variants::named_values(lexicon, &card.fragments(covered, true), true)
        .into_iter()
        .map(|(_, span)| span)
        .collect();
    let name_words: Vec<usize> = (0..card.words.len())
        .filter(|&i| overlaps(i, covered))
        .collect();
    let (Some(&first), Some(&last)) = (name_words.first(), name_words.last()) else {
        return Vec::new();
    };
    let flag = |list: &[bool], i: usize| list.get(i).copied().unwrap_or(false);
    // A word after the name ends the name phrase only when what follows it is an amount,
    // a bracket, the query's or a variant's word, or the end: a word followed by more
    // words of its own starts a description (`자동차 장난감 조립 블록`).
    let ends_name = |i: usize| {
        i + 1 >= card.words.len()
            || card.roles.get(i + 1).is_some_and(|r| *r != WordRole::Other)
            || flag(&card.bracketed, i + 1)
            || overlaps(i + 1, covered)
            || overlaps(i + 1, &named)
    };
    (first + 1..=last + 1)
        .filter(|&i| {
            if i == last + 1 && !ends_name(i) {
                return false;
            }
            let Some(word) = card.words.get(i) else {
                return false;
            };
            card.roles.get(i).is_some_and(|r| *r == WordRole::Other)
                && !overlaps(i, covered)
                && !overlaps(i, &named)
                && !flag(&card.gift, i)
                && !flag(&card.bundled, i)
                && !flag(&card.bracketed, i)
                && word.chars().count() >= MIN_CHARS
                && !word.chars().any(|c| c.is_ascii_digit())
                && !vocabulary_word(lexicon, word)
                && !lexicon.is_descriptor(word)
                && !says_use(word)
                && !query.text().contains_key(word)
                // A spelling of one of the query's words (`Azodyl` for `아조딜`).
                && !spells_query_word(query, word)
                // A Hangul counter after a number (`3세대`, `100사이즈`) belongs to it.
                && !(translit::is_hangul_word(word) && i
                    .checked_sub(1)
                    .and_then(|p| card.words.get(p))
                    .is_some_and(|p| p.chars().all(|c| c.is_ascii_digit())))
        })
        .filter_map(|i| card.words.get(i).cloned())
        .collect()
}

/// Per card of the page: the line word it carries and the cards that hold the name
/// without it (rules 2 and 3 of the module docs), or `None`.
pub(super) fn line_words(seen: &[Seen]) -> Vec<Option<(String, Vec<usize>)>> {
    let accepted: Vec<usize> = (0..seen.len())
        .filter(|&i| seen.get(i).is_some_and(|s| s.verdict.same))
        .collect();
    let holds = |j: usize, word: &str| {
        seen.get(j)
            .and_then(|s| s.text.as_ref())
            .is_some_and(|t| t.contains_key(word))
    };
    // Cards of other products (they do not hold the name): a word they carry too says
    // what kind of thing this is (`건전지`, `구강청결제`), not which line.
    let others: Vec<usize> = (0..seen.len())
        .filter(|&j| {
            seen.get(j).is_some_and(|s| {
                matches!(
                    s.verdict.reason,
                    Reason::LowTokenOverlap | Reason::OtherBrand { .. } | Reason::OtherName { .. }
                )
            })
        })
        .collect();
    (0..seen.len())
        .map(|i| {
            if accepted.len() < 2 || !accepted.contains(&i) {
                return None;
            }
            seen.get(i)?.added.iter().find_map(|word| {
                let lacking: Vec<usize> = accepted
                    .iter()
                    .copied()
                    .filter(|&j| j != i && !holds(j, word))
                    .collect();
                let carriers = accepted.len() - lacking.len();
                let generic = others.iter().any(|&j| holds(j, word));
                (!lacking.is_empty() && carriers * 2 <= accepted.len() && !generic)
                    .then(|| (word.clone(), lacking))
            })
        })
        .collect()
}
