//! Page contrast: a word some cards add inside the product's name, and others do not, is
//! another line of the product.
//!
//! No vocabulary can list every line, formula or edition word (`인텐시브`, `시그니처`,
//! `8+`, `Futura`), and a card that holds every word of the query plus one of them passes
//! every per-card rule. A result page shows what one card cannot: among the cards that
//! hold the whole name, the true product appears *without* the word. So the judge looks
//! at the page:
//! 1. For each card the rules accept, its **name phrase** is the shortest run of words
//!    that holds every query word it holds, within the run of the title that holds the
//!    most of them without an amount between them (`프리마 500g … 동서`: the brand after
//!    the amount is a tag; `바이오 메가마트 매일 바이오 그릭요거트`: the first `바이오`
//!    repeats a word the phrase has). Its **added words** are the ordinary words inside
//!    the name phrase, or right after it when an amount, a bracket or a variant word
//!    follows (`스테럴라이즈드 2kg`, `하이백 블랙`; a word that ends the title or is
//!    followed by more words of its own starts a description: `… 블랙앤브라스`,
//!    `자동차 장난감 조립 블록`): not the query's nor a spelling of one in the other
//!    script, not filler, brands, aliases, accessory, assortment or gift words, not a
//!    variant value (a colour when the query names none is the product), not a
//!    vocabulary **descriptor** (`사료`, `대용량`: words that say what kind of thing it
//!    is), not in square brackets (seller tags), no digits, two or more characters, and
//!    not a word that follows a code of the card's own (`SPF34 PA++`: the code's mark) nor a
//!    short Latin label before a number of its own (`US 9`).
//!    A word in one script is no added word when the card lacks a name word of the query
//!    in the other script: it may be that word's spelling (`Ruby Woo` for `루비 우`).
//! 2. An added word is a **line word** when some accepted cards hold the name without it,
//!    at most half of the accepted cards carry it (the plain product is what most sellers
//!    list), another card of the product carries it too — an accepted card (a second
//!    seller) or one rejected for its size or count alone (the line in another amount); a
//!    word one card alone adds is that seller's wording, and a card rejected as an
//!    accessory, another variant or model may carry it for its own reasons — and no card
//!    of another product on the page carries it (a word other
//!    products share says what kind of thing it is: `건전지`, `구강청결제`). A counter
//!    glued to a number (`3세대`, `100사이즈`) is the number's.
//! 3. A card carrying a line word is rejected ([`Reason::LineWord`](super::Reason), naming
//!    the word and the cards without it). With a single accepted card there is nothing to
//!    contrast: the per-card rules and the vocabulary decide alone.
//!
//! A query for an item that fits another product (`… 호환 실리콘 스트랩`) has no line to
//! contrast: many makers sell such items, each with words of its own (`말랑`, `후면`), so
//! the per-card rules decide alone. Words after an amount (`2kg 소형견 성견용 사료`) and
//! in brackets are where sellers put tags and descriptions, so they are never line words.

use super::quantity::WordRole;
use super::query::QueryToken;
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
/// query words were found at and the query's name words it lacks.
pub(super) fn added_words(
    query: &ProductQuery,
    card: &Text,
    covered: &[Span],
    missing: &[&QueryToken],
) -> Vec<String> {
    let lexicon = query.lexicon();
    if query_fits_another(query) {
        return Vec::new();
    }
    let spans = card.word_spans();
    let overlaps = |i: usize, set: &[Span]| tokens::word_overlaps(&spans, i, set);
    let named: Vec<Span> = variants::named_values(lexicon, &card.fragments(covered, true), true)
        .into_iter()
        .map(|(_, span)| span)
        .collect();
    let name_words: Vec<usize> = (0..card.words.len())
        .filter(|&i| overlaps(i, covered))
        .collect();
    let Some((first, last)) = name_phrase(card, &name_words) else {
        return Vec::new();
    };
    let flag = |list: &[bool], i: usize| list.get(i).copied().unwrap_or(false);
    // A word after the name ends the name phrase only when what follows it is an amount,
    // a bracket, the query's or a variant's word: a word at the title's end or followed
    // by more words of its own starts a description (`자동차 장난감 조립 블록`).
    // A word at the title's end takes the place of a query word the card lacks
    // (`체어원 코요테탄` for `체어원 블랙`).
    let replaces = !missing.is_empty()
        || query
            .tokens()
            .iter()
            .any(|t| t.variant && !card.contains_key(&t.key));
    let ends_name = |i: usize| {
        (i + 1 >= card.words.len() && replaces)
            || card.roles.get(i + 1).is_some_and(|r| *r != WordRole::Other)
            || flag(&card.bracketed, i + 1)
            || overlaps(i + 1, covered)
            || overlaps(i + 1, &named)
    };
    let missing_hangul = missing.iter().any(|t| translit::is_hangul_word(&t.key));
    let missing_latin = missing.iter().any(|t| translit::is_latin_word(&t.key));
    (first + 1..=last + 1)
        .filter(|&i| {
            if i == last + 1 && !ends_name(i) {
                return false;
            }
            let Some(word) = card.words.get(i) else {
                return false;
            };
            let after = i.checked_sub(1).and_then(|p| card.words.get(p));
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
                // A spelling of one of the query's words (`Azodyl` for `아조딜`), or maybe
                // of one the card lacks in the other script (`Woo` for `우`).
                && !spells_query_word(query, word)
                && !(translit::is_latin_word(word) && missing_hangul)
                && !(translit::is_hangul_word(word) && missing_latin)
                // A Hangul counter after a number or a grade's marks (`3세대`, `100사이즈`,
                // `1++등급`) belongs to it, and a mark after a code of the card's own
                // (`SPF34 PA++`) to the code.
                && !(translit::is_hangul_word(word)
                    && after.is_some_and(|p| p.chars().all(|c| c.is_ascii_digit()) || p == "+"))
                && !(i > 0
                    && !overlaps(i - 1, covered)
                    && after.is_some_and(|p| p.chars().any(|c| c.is_ascii_digit())))
                // A short Latin label before a number of the card's own (`US 9`, `EU 42`).
                && !(translit::is_latin_word(word)
                    && word.len() <= 3
                    && !overlaps(i + 1, covered)
                    && card
                        .words
                        .get(i + 1)
                        .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit())))
        })
        .filter_map(|i| card.words.get(i).cloned())
        .collect()
}

/// The first and last word of the card's name phrase (rule 1 of the module docs), given
/// the words that hold query words.
fn name_phrase(card: &Text, name_words: &[usize]) -> Option<(usize, usize)> {
    // Runs of name words with no amount between them; the run holding the most distinct
    // words is the name.
    let mut runs: Vec<Vec<usize>> = Vec::new();
    for &i in name_words {
        let split = runs.last().and_then(|run| run.last()).is_none_or(|&prev| {
            (prev + 1..i).any(|j| card.roles.get(j) == Some(&WordRole::Quantity))
        });
        if split {
            runs.push(vec![i]);
        } else if let Some(run) = runs.last_mut() {
            run.push(i);
        }
    }
    let distinct = |run: &[usize]| -> usize {
        let mut words: Vec<&String> = run.iter().filter_map(|&i| card.words.get(i)).collect();
        words.sort();
        words.dedup();
        words.len()
    };
    let mut run: Vec<usize> = runs.into_iter().rev().max_by_key(|run| distinct(run))?;
    // An end word the title repeats among its name words, with other words between, is a
    // tag before or after the name (`바이오 메가마트 매일 바이오 그릭요거트`, `… 플로우스테이트
    // 대용량 손잡이 빨대 텀블러` after `스탠리 텀블러 887ml`).
    let word = |i: usize| card.words.get(i);
    let repeated = |i: usize| name_words.iter().any(|&j| j != i && word(j) == word(i));
    while let (Some(&first), Some(&next)) = (run.first(), run.get(1)) {
        if next == first + 1 || !repeated(first) {
            break;
        }
        run.remove(0);
    }
    while let [.., before, last] = run[..] {
        if last == before + 1 || !repeated(last) {
            break;
        }
        run.pop();
    }
    Some((*run.first()?, *run.last()?))
}

/// The query names an item that fits another product (`갤럭시 워치 호환 실리콘 스트랩`):
/// an accessory or compatibility word of the vocabulary is in it.
fn query_fits_another(query: &ProductQuery) -> bool {
    let fragments = query.text().fragments(&[], false);
    query
        .lexicon()
        .accessories
        .iter()
        .any(|f| tokens::find_form(&fragments, f, false).is_some())
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
                // Evidence of a line: another card of the product's name carries the word
                // too (the line in another size or count, or from a second seller); a word
                // one card alone adds is that seller's wording.
                // Only a card of the product in another amount says so: an accepted one, or
                // one rejected for its size or count alone; a card rejected as an accessory,
                // another variant or model may carry the word for its own reasons.
                let seconded = (0..seen.len()).any(|j| {
                    j != i
                        && holds(j, word)
                        && seen.get(j).is_some_and(|s| {
                            s.verdict.same
                                || matches!(
                                    s.verdict.reason,
                                    Reason::QuantityMismatch { .. } | Reason::OtherValue { .. }
                                )
                        })
                });
                (!lacking.is_empty() && seconded && carriers * 2 <= accepted.len() && !generic)
                    .then(|| (word.clone(), lacking))
            })
        })
        .collect()
}
