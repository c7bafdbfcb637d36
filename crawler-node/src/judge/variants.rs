//! Which variant values (and brands) a text names, from the vocabulary.
//!
//! Values are looked for in a text's [`Fragment`]s — what the product's own name left —
//! as whole words or runs of words (`매운맛`, `usb c`, `2 세대`). On a card, a Hangul
//! spelling of two or more syllables also counts with one syllable after it (`레몬향`,
//! `현미밥`) or up to three before it (`티타늄블랙`, `매일잡곡밥`), because titles glue
//! words together; a one-letter latin spelling (`s`, `m`, `l`) counts only as a word of
//! its own, never as a piece of a code (`S24`).
//!
//! Matches overlap (`라이트닝` holds `라이트`, `블랙 티타늄` holds `블랙`): the longest
//! whole-word match wins its span, then the longest glued one, so every span names one
//! value.

use lps_profiles::{normalize::is_hangul, vocabulary::Lexicon};

use super::tokens::{Fragment, Span};

/// Syllables a card may glue after a value (`레몬향`).
const GLUED_AFTER: usize = 1;
/// Syllables a card may glue before a value (`티타늄블랙`).
const GLUED_BEFORE: usize = 3;

/// One value named by a text: indices into [`Lexicon::kinds`] and its values;
/// [`PLAIN`] for a word naming the plain product (`오리지널`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Named {
    pub kind: usize,
    pub value: usize,
}

/// [`Named::value`] of a plain-product word.
pub(super) const PLAIN: usize = usize::MAX;

struct Candidate {
    named: Named,
    span: Span,
    whole: bool,
    len: usize,
    /// Candidates of one compound (`현미녹차` = `현미` + `녹차`) share their span.
    group: usize,
}

/// The values `fragments` name with the span naming each, each span naming at most one
/// (see the module docs); `glued` allows the card's glued spellings. Plain-product words
/// are in it too, as [`PLAIN`].
pub(super) fn named_values(
    lexicon: &Lexicon,
    fragments: &[Fragment<'_>],
    glued: bool,
) -> Vec<(Named, Span)> {
    let mut candidates = Vec::new();
    for (k, kind) in lexicon.kinds.iter().enumerate() {
        let plain = kind.plain.iter().map(|f| (PLAIN, f));
        let values = kind
            .values
            .iter()
            .enumerate()
            .flat_map(|(v, value)| value.forms.iter().map(move |f| (v, f)));
        for (v, form) in plain.chain(values) {
            {
                let named = Named { kind: k, value: v };
                let key = form.key.as_str();
                let one_letter = form.latin && key.chars().count() == 1;
                for span in runs(fragments, key) {
                    if one_letter && !fragments.iter().any(|f| f.span == span && f.whole_word) {
                        continue;
                    }
                    candidates.push(Candidate {
                        named,
                        span,
                        whole: true,
                        len: key.len(),
                        group: candidates.len(),
                    });
                }
                let syllables = key.chars().count();
                if !glued || form.latin || syllables < 2 {
                    continue;
                }
                for f in fragments {
                    if f.text.len() == key.len() || !f.text.chars().all(is_hangul) {
                        continue;
                    }
                    let extra = f.text.chars().count().saturating_sub(syllables);
                    let after = f.text.starts_with(key) && extra <= GLUED_AFTER;
                    let before = f.text.ends_with(key) && extra <= GLUED_BEFORE;
                    if after || before {
                        candidates.push(Candidate {
                            named,
                            span: f.span,
                            whole: false,
                            len: key.len(),
                            group: candidates.len(),
                        });
                    }
                }
            }
        }
    }
    if glued {
        compounds(lexicon, fragments, &mut candidates);
    }
    candidates.sort_by(|a, b| b.whole.cmp(&a.whole).then(b.len.cmp(&a.len)));
    let mut out: Vec<(Named, Span)> = Vec::new();
    let mut taken: Vec<(Span, usize)> = Vec::new();
    for c in candidates {
        let (s, e) = c.span;
        if taken
            .iter()
            .any(|&((ts, te), group)| s < te && ts < e && group != c.group)
        {
            continue;
        }
        taken.push((c.span, c.group));
        out.push((c.named, c.span));
    }
    out
}

/// A Hangul fragment that is two values glued (`현미녹차`), or a value and a known word
/// (`액체세제`): the values, over the whole fragment.
fn compounds(lexicon: &Lexicon, fragments: &[Fragment<'_>], candidates: &mut Vec<Candidate>) {
    let value_of = |key: &str| -> Option<Named> {
        lexicon.kinds.iter().enumerate().find_map(|(k, kind)| {
            kind.values.iter().enumerate().find_map(|(v, value)| {
                value
                    .forms
                    .iter()
                    .any(|f| f.key == key)
                    .then_some(Named { kind: k, value: v })
            })
        })
    };
    for f in fragments {
        if !f.text.chars().all(is_hangul) || f.text.chars().count() < 4 {
            continue;
        }
        for (cut, _) in f.text.char_indices().skip(2) {
            let (left, right) = f.text.split_at(cut);
            if right.chars().count() < 2 {
                break;
            }
            // Two values, or a value glued to a known word of the vocabulary (`액체세제`:
            // 액체 and the alias word 세제).
            let known = |w: &str| !lexicon.aliases(w).is_empty();
            let pair = match (value_of(left), value_of(right)) {
                (Some(a), Some(b)) => vec![a, b],
                (Some(a), None) if known(right) => vec![a],
                (None, Some(b)) if known(left) => vec![b],
                _ => Vec::new(),
            };
            if !pair.is_empty() {
                let group = candidates.len();
                for named in pair {
                    candidates.push(Candidate {
                        named,
                        span: f.span,
                        whole: true,
                        len: f.text.len(),
                        group,
                    });
                }
                break;
            }
        }
    }
}

/// Whether one of the brand spellings (a brand and its aliases) is in `fragments`: as
/// whole words, or a Hangul brand of two or more syllables leading a word (`삼성갤럭시`).
pub(super) fn names_brand(fragments: &[Fragment<'_>], spellings: &[&str]) -> bool {
    spellings.iter().any(|key| {
        if !runs(fragments, key).is_empty() {
            return true;
        }
        let latin = key.chars().all(|c| c.is_ascii_alphanumeric());
        !latin
            && key.chars().count() >= 2
            && fragments
                .iter()
                .any(|f| f.text.chars().all(is_hangul) && f.text.starts_with(key))
    })
}

/// Spans where consecutive, touching fragments concatenate to exactly `key`.
fn runs(fragments: &[Fragment<'_>], key: &str) -> Vec<Span> {
    let mut out = Vec::new();
    for (i, first) in fragments.iter().enumerate() {
        if !key.starts_with(first.text) || first.text.is_empty() {
            continue;
        }
        let mut joined = String::new();
        let mut end = first.span.0;
        for f in fragments.iter().skip(i) {
            if f.span.0 != end {
                break;
            }
            joined.push_str(f.text);
            end = f.span.1;
            if joined == key {
                out.push((first.span.0, end));
                break;
            }
            if !key.starts_with(joined.as_str()) {
                break;
            }
        }
    }
    out
}
