//! Words of a title and how a query word, an alias or a vocabulary entry is found in it.
//!
//! A [`Text`] is one normalised title seen as **pieces**: each word cut at hyphens and at
//! letter/digit boundaries (`sm-s928n` → `sm`, `s`, `928`, `n`), Hangul words whole, laid
//! end to end in one space-free `compact` string (each piece knows its span there).
//! - A latin/digit key is **present** when consecutive pieces concatenate to exactly the
//!   key: hyphens and spaces inside a code are optional (`SMS928N`, `SM-S928N`,
//!   `sm s928n` all hold `sms928n`), but a key is never found inside a longer code
//!   (`s24` is not in `s245`, `256gb` is not in `1256gb`).
//! - A Hangul key is present where it is a substring of `compact`, because Korean titles
//!   space compounds freely (`제주삼다수` = `제주 삼다수`, `라이트 스탠다드` =
//!   `라이트스탠다드`).
//!
//! The judge marks the spans its query's words were found at as **covered**; what is
//! left are [`Fragment`]s, and vocabulary entries (variant values, accessory and
//! assortment words) are looked for only there: a word that is part of the product's
//! own name (`라이트` in `스프라이트`, when the query is `스프라이트`) names no variant.
//!
//! **Gift phrases** (`+ 정품 케이스 증정`, `(사은품: 텀블러)`) are found on the raw title: it
//! is cut into segments at brackets, `/`, `|` and a `+` not between digits; a segment
//! holding a gift word after the title's first segment is a gift phrase whole, and in the
//! first segment the gift word and up to [`GIFT_REACH`] words before it (after it, when
//! the gift word leads the segment) are. Gift words count for nothing but the name: not
//! for the quantity, a variant, an accessory or an assortment.

use lps_profiles::{
    normalize::is_hangul,
    vocabulary::{Form, Lexicon},
};

use super::quantity::{Quantity, WordRole, parse_words};
use lps_profiles::normalize::normalize;

/// Words of the main segment a gift word takes with it (`정품 케이스 증정`).
pub(super) const GIFT_REACH: usize = 2;

/// The longest run of pieces tried when looking for a key.
const MAX_RUN: usize = 8;

/// Letters a full model code may carry after the query's code (`SM-S928N` →
/// `SM-S928NZKEKOO`: colour and region).
pub(super) const MAX_CODE_SUFFIX: usize = 8;

/// A half-open byte span of [`Text::compact`].
pub(super) type Span = (usize, usize);

#[derive(Debug, Clone)]
struct Piece {
    text: String,
    word: usize,
    span: Span,
}

/// What is left of a piece once the covered spans are cut out.
#[derive(Debug, Clone)]
pub(super) struct Fragment<'a> {
    pub text: &'a str,
    pub span: Span,
    /// The fragment is a whole word of the title (`l`, not the `s` of `s24`).
    pub whole_word: bool,
}

/// One normalised title (see the module docs).
#[derive(Debug, Clone)]
pub(super) struct Text {
    pub words: Vec<String>,
    pub roles: Vec<WordRole>,
    /// Per word: inside a gift phrase.
    pub gift: Vec<bool>,
    /// Per word: inside a second product joined by `+` (`… 2L 12병 + 500ml 20병`).
    pub bundled: Vec<bool>,
    /// Per word: inside square brackets (`[무료배송]`, `【공식】`), where sellers put tags.
    pub bracketed: Vec<bool>,
    /// The quantity of the words outside gift phrases.
    pub quantity: Quantity,
    pieces: Vec<Piece>,
    compact: String,
}

impl Text {
    pub fn new(raw: &str, lexicon: &Lexicon) -> Self {
        let normalized = normalize(raw);
        let words: Vec<String> = normalized.split_whitespace().map(str::to_owned).collect();
        let bracketed = bracketed_words(raw, &words);
        let (gift, bundled) = gift_words(raw, &words, &bracketed, lexicon);
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        let roles = parse_words(&refs, lexicon).roles;
        let kept: Vec<&str> = refs
            .iter()
            .zip(&gift)
            .filter(|(_, g)| !**g)
            .map(|(w, _)| *w)
            .collect();
        let quantity = parse_words(&kept, lexicon).quantity;
        let mut pieces = Vec::new();
        let mut compact = String::new();
        for (index, word) in words.iter().enumerate() {
            for text in pieces_of(word) {
                let start = compact.len();
                compact.push_str(&text);
                pieces.push(Piece {
                    text,
                    word: index,
                    span: (start, compact.len()),
                });
            }
        }
        Self {
            words,
            roles,
            gift,
            bundled,
            bracketed,
            quantity,
            pieces,
            compact,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The pieces end to end, without spaces or hyphens.
    pub fn compact(&self) -> &str {
        &self.compact
    }

    /// The span of each word in `compact` (empty for a word without pieces).
    pub fn word_spans(&self) -> Vec<Span> {
        let mut spans: Vec<Option<Span>> = vec![None; self.words.len()];
        for piece in &self.pieces {
            if let Some(slot) = spans.get_mut(piece.word) {
                *slot = Some(slot.map_or(piece.span, |(s, _)| (s, piece.span.1)));
            }
        }
        spans.into_iter().map(|s| s.unwrap_or((0, 0))).collect()
    }

    /// Every span where the key (normalised, without hyphens) is present.
    pub fn spans_of(&self, key: &str) -> Vec<Span> {
        if key.is_empty() {
            return Vec::new();
        }
        // Keys with a digit (`s24`, `2단계`) are found on whole pieces, never inside one.
        if is_latin(key) || key.chars().any(|c| c.is_ascii_digit()) {
            (0..self.pieces.len())
                .filter_map(|start| self.run_at(start, key))
                .collect()
        } else {
            self.compact
                .match_indices(key)
                .map(|(at, m)| (at, at + m.len()))
                .collect()
        }
    }

    /// Whether the key is present anywhere.
    pub fn contains_key(&self, key: &str) -> bool {
        !self.spans_of(key).is_empty()
    }

    /// The span of consecutive pieces from `start` that concatenate to exactly `key`.
    fn run_at(&self, start: usize, key: &str) -> Option<Span> {
        let mut joined = String::new();
        for piece in self.pieces.iter().skip(start).take(MAX_RUN) {
            joined.push_str(&piece.text);
            if joined == key {
                return Some((self.pieces.get(start)?.span.0, piece.span.1));
            }
            if !key.starts_with(joined.as_str()) {
                return None;
            }
        }
        None
    }

    /// The letters that continue a span inside its word (`x` after `v1` in `v1x`, `xl`
    /// after `945` in `pg-945xl`), if the piece right after it is one of letters.
    pub fn letters_after(&self, span: Span) -> Option<&str> {
        let last = self.pieces.iter().position(|p| p.span.1 == span.1)?;
        let (here, next) = (self.pieces.get(last)?, self.pieces.get(last + 1)?);
        (next.word == here.word && next.text.chars().all(|c| c.is_ascii_alphabetic()))
            .then_some(next.text.as_str())
    }

    /// Whether the word holding a span goes on after it with another group of digits
    /// (`58` of `901/58`, `26` of `2025-26`).
    pub fn digits_after(&self, span: Span) -> bool {
        let Some(last) = self.pieces.iter().position(|p| p.span.1 == span.1) else {
            return false;
        };
        match (self.pieces.get(last), self.pieces.get(last + 1)) {
            (Some(here), Some(next)) => {
                next.word == here.word && next.text.starts_with(|c: char| c.is_ascii_digit())
            }
            _ => false,
        }
    }

    /// Spans where a full model code is present followed, inside its last piece, only by
    /// up to [`MAX_CODE_SUFFIX`] letters (`sms928n` in `SM-S928NZKEKOO`).
    pub fn code_with_suffix(&self, key: &str) -> Vec<Span> {
        let mut out = Vec::new();
        for start in 0..self.pieces.len() {
            let mut joined = String::new();
            for piece in self.pieces.iter().skip(start).take(MAX_RUN) {
                let before = joined.len();
                joined.push_str(&piece.text);
                if joined.len() > key.len() && joined.starts_with(key) {
                    let rest = &joined[key.len()..];
                    let within_last = key.len() > before;
                    if within_last
                        && rest.len() <= MAX_CODE_SUFFIX
                        && rest.chars().all(|c| c.is_ascii_alphabetic())
                        && let Some(first) = self.pieces.get(start)
                    {
                        out.push((first.span.0, piece.span.1));
                    }
                    break;
                }
                if joined == key || !key.starts_with(joined.as_str()) {
                    break;
                }
            }
        }
        out
    }

    /// The pieces minus `covered`, in order; pieces of quantity words (`2l`, `12`, `개`)
    /// are left out, and those of gift words when `skip_gifts`.
    pub fn fragments(&self, covered: &[Span], skip_gifts: bool) -> Vec<Fragment<'_>> {
        let words = self.word_spans();
        let mut out = Vec::new();
        for piece in &self.pieces {
            let word_span = words.get(piece.word).copied().unwrap_or((0, 0));
            if skip_gifts && self.gift.get(piece.word).copied().unwrap_or(false) {
                continue;
            }
            if self
                .roles
                .get(piece.word)
                .is_some_and(|r| *r != WordRole::Other)
            {
                continue;
            }
            let mut cuts: Vec<Span> = covered
                .iter()
                .filter(|&&(s, e)| s < piece.span.1 && e > piece.span.0)
                .copied()
                .collect();
            cuts.sort_unstable();
            let mut at = piece.span.0;
            for (s, e) in cuts {
                if s > at {
                    out.push(self.fragment(at, s, word_span));
                }
                at = at.max(e);
            }
            if at < piece.span.1 {
                out.push(self.fragment(at, piece.span.1, word_span));
            }
        }
        out
    }

    fn fragment(&self, start: usize, end: usize, word: Span) -> Fragment<'_> {
        Fragment {
            text: self.compact.get(start..end).unwrap_or(""),
            span: (start, end),
            whole_word: (start, end) == word,
        }
    }
}

/// Whether consecutive, touching fragments concatenate to exactly the form; a Hangul form
/// of two or more syllables may also sit inside one fragment when `inside` is allowed
/// (accessory and assortment words: `갤럭시s24케이스`). Returns the first match's span.
pub(super) fn find_form(fragments: &[Fragment<'_>], form: &Form, inside: bool) -> Option<Span> {
    let key = form.key.as_str();
    let syllables = key.chars().count();
    for (i, first) in fragments.iter().enumerate() {
        if inside
            && !form.latin
            && syllables >= 2
            && first.text.chars().all(is_hangul)
            && let Some(at) = first.text.find(key)
        {
            let start = first.span.0 + at;
            return Some((start, start + key.len()));
        }
        let mut joined = String::new();
        let mut end = first.span.0;
        for f in fragments.iter().skip(i).take(MAX_RUN) {
            if f.span.0 != end {
                break;
            }
            joined.push_str(f.text);
            end = f.span.1;
            if joined == key {
                return Some((first.span.0, end));
            }
            if !key.starts_with(joined.as_str()) {
                break;
            }
        }
    }
    None
}

/// Whether word `i` (of a title whose word spans are `spans`) overlaps any span of `set`.
pub(super) fn word_overlaps(spans: &[Span], i: usize, set: &[Span]) -> bool {
    spans
        .get(i)
        .is_some_and(|&(s, e)| e > s && set.iter().any(|&(a, b)| a < e && s < b))
}

/// ASCII letters and digits only (a code or a latin word).
pub(super) fn is_latin(key: &str) -> bool {
    key.chars().all(|c| c.is_ascii_alphanumeric() || c == '.')
}

/// Weight of a key in the overlap score: its length in characters.
pub(super) fn weight(key: &str) -> u32 {
    u32::try_from(key.chars().count()).unwrap_or(u32::MAX)
}

/// Cuts a word at hyphens and at letter/digit boundaries; Hangul words stay whole.
fn pieces_of(word: &str) -> Vec<String> {
    #[derive(PartialEq, Eq, Clone, Copy)]
    enum Class {
        Digit,
        Letter,
    }
    let mut out = Vec::new();
    for part in word.split('-').filter(|p| !p.is_empty()) {
        if part.chars().any(is_hangul) {
            out.push(part.to_owned());
            continue;
        }
        let mut current = String::new();
        let mut class = None;
        for c in part.chars() {
            let next = if c.is_ascii_digit() || c == '.' {
                Class::Digit
            } else {
                Class::Letter
            };
            if class.is_some_and(|k| k != next) {
                out.push(std::mem::take(&mut current));
            }
            current.push(c);
            class = Some(next);
        }
        if !current.is_empty() {
            out.push(current);
        }
    }
    out
}

/// Marks the words of `words` (the normalised `raw`) that are in a gift phrase, and those
/// of a second product joined by `+` (see the module docs).
fn gift_words(
    raw: &str,
    words: &[String],
    bracketed: &[bool],
    lexicon: &Lexicon,
) -> (Vec<bool>, Vec<bool>) {
    let mut gift = vec![false; words.len()];
    let mut bundled = vec![false; words.len()];
    let has_gift = words.iter().any(|w| is_gift_word(w, lexicon));
    if !has_gift && !words.iter().any(|w| w == "+") {
        return (gift, bundled);
    }
    // Segment the raw title; its words, segment by segment, must be the title's words
    // (else the title is one segment).
    let segments: Vec<Vec<String>> = segments(raw)
        .iter()
        .map(|s| normalize(s).split_whitespace().map(str::to_owned).collect())
        .filter(|w: &Vec<String>| !w.is_empty())
        .collect();
    let flat: Vec<&String> = segments.iter().flatten().collect();
    let segments = if flat.len() == words.len() && flat.iter().zip(words).all(|(a, b)| *a == b) {
        segments
    } else {
        vec![words.to_vec()]
    };
    let is_plus =
        |segment: &Vec<String>| segment.len() == 1 && segment.first().is_some_and(|w| w == "+");
    // Word offset of each segment.
    let offsets: Vec<usize> = segments
        .iter()
        .scan(0, |at, s| {
            let here = *at;
            *at += s.len();
            Some(here)
        })
        .collect();
    let mut seen_content = false;
    for (index, segment) in segments.iter().enumerate() {
        let offset = offsets.get(index).copied().unwrap_or(0);
        let holds_gift = segment.iter().any(|w| is_gift_word(w, lexicon));
        let after_plus = index
            .checked_sub(1)
            .and_then(|i| segments.get(i))
            .is_some_and(is_plus);
        if holds_gift && seen_content {
            let mut mark = |at: usize, len: usize| {
                gift.iter_mut().skip(at).take(len).for_each(|g| *g = true);
            };
            mark(offset, segment.len());
            // `+ 케이스 + 필름 증정`: the gift word ends a `+` chain, all of it gifts.
            let mut i = index;
            while i >= 2
                && segments.get(i - 1).is_some_and(is_plus)
                && segments.get(i - 2).is_some_and(|s| !is_plus(s))
                && i - 2 > 0
                && segments.get(i - 3).is_some_and(is_plus)
            {
                let at = offsets.get(i - 2).copied().unwrap_or(0);
                let len = segments.get(i - 2).map_or(0, Vec::len);
                mark(at, len);
                i -= 2;
            }
        } else if holds_gift {
            for (i, word) in segment.iter().enumerate() {
                if !is_gift_word(word, lexicon) {
                    continue;
                }
                let reach: Vec<usize> = if i == 0 {
                    (1..=GIFT_REACH).filter(|k| *k < segment.len()).collect()
                } else {
                    (1..=GIFT_REACH.min(i)).map(|k| i - k).collect()
                };
                if let Some(g) = gift.get_mut(offset + i) {
                    *g = true;
                }
                for j in reach {
                    // A word with a digit is the product's size or model, not the gift's.
                    if segment
                        .get(j)
                        .is_some_and(|w| w.chars().any(|c| c.is_ascii_digit()))
                    {
                        break;
                    }
                    if let Some(g) = gift.get_mut(offset + j) {
                        *g = true;
                    }
                }
            }
        }
        if after_plus && seen_content && !holds_gift {
            bundled
                .iter_mut()
                .skip(offset)
                .take(segment.len())
                .for_each(|b| *b = true);
        }
        // A seller's tag in square brackets (`[매일출발]`) is not the product: the title
        // that follows it is still its first content.
        let tag =
            (offset..offset + segment.len()).all(|i| bracketed.get(i).copied().unwrap_or(false));
        if !is_plus(segment) && !holds_gift && !tag {
            seen_content = true;
        }
    }
    // A bundled part that turned out to be a gift is not a second product.
    for (b, g) in bundled.iter_mut().zip(&gift) {
        *b = *b && !*g;
    }
    (gift, bundled)
}

/// Marks the words of `words` (the normalised `raw`) written inside square brackets; none
/// when the brackets do not cut the title at word boundaries.
fn bracketed_words(raw: &str, words: &[String]) -> Vec<bool> {
    let mut runs: Vec<(String, bool)> = vec![(String::new(), false)];
    let mut depth = 0usize;
    for c in raw.chars() {
        let (open, close) = (
            matches!(c, '[' | '【' | '［'),
            matches!(c, ']' | '】' | '］'),
        );
        if open || close {
            depth = if open {
                depth + 1
            } else {
                depth.saturating_sub(1)
            };
            runs.push((String::new(), depth > 0));
        } else if let Some((text, _)) = runs.last_mut() {
            text.push(c);
        }
    }
    let mut marks = Vec::with_capacity(words.len());
    let mut flat: Vec<String> = Vec::with_capacity(words.len());
    for (text, inside) in runs {
        for word in normalize(&text).split_whitespace() {
            flat.push(word.to_owned());
            marks.push(inside);
        }
    }
    if flat.as_slice() == words {
        marks
    } else {
        vec![false; words.len()]
    }
}

fn is_gift_word(word: &str, lexicon: &Lexicon) -> bool {
    lexicon.gifts.iter().any(|g| {
        if g.latin || g.key.chars().count() < 2 {
            word == g.key
        } else {
            word.contains(g.key.as_str())
        }
    })
}

/// The raw title cut at brackets, `/`, `|`, and `+` not between digits; a cutting `+` is
/// a segment of its own.
fn segments(raw: &str) -> Vec<String> {
    const CUTS: [char; 14] = [
        '[', ']', '(', ')', '{', '}', '【', '】', '<', '>', '/', '|', '「', '」',
    ];
    let chars: Vec<char> = raw.chars().collect();
    let mut out = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let digit = |k: Option<usize>| {
            k.and_then(|k| chars.get(k))
                .is_some_and(|c| c.is_ascii_digit())
        };
        // Not a cut: `1+1`, and a mark after a code or grade (`S24+`, `PA++`, `A+`) that
        // no word follows.
        let prev = i.checked_sub(1).and_then(|k| chars.get(k)).copied();
        let next = chars.get(i + 1).copied();
        let grade = prev.is_some_and(|p| p == '+' || p == '＋')
            || (prev.is_some_and(|p| p.is_ascii_alphanumeric())
                && !next.is_some_and(char::is_alphanumeric));
        let plus_cut = (c == '+' || c == '＋')
            && !(digit(i.checked_sub(1)) && digit(Some(i + 1)))
            && !grade
            && !joins_name(&chars, i);
        if CUTS.contains(&c) || plus_cut {
            out.push(std::mem::take(&mut current));
            if plus_cut {
                out.push("+".to_owned());
            }
        } else {
            current.push(c);
        }
    }
    out.push(current);
    out
}

/// Whether the `+` at `at` joins two Latin words of three or more letters with no space
/// (`Bausch+Lomb`): one name, not a product and a second one (`AA+AAA`, `S24+버즈` are).
fn joins_name(chars: &[char], at: usize) -> bool {
    let word = |range: &mut dyn Iterator<Item = usize>| -> bool {
        let mut letters = 0;
        for k in range {
            match chars.get(k) {
                Some(c) if c.is_ascii_alphabetic() => letters += 1,
                Some(c) if c.is_alphanumeric() => return false,
                _ => break,
            }
        }
        letters >= 3
    };
    word(&mut (0..at).rev()) && word(&mut (at + 1..chars.len()))
}

/// Syllables Korean attributive forms end with (`고소한`, `부드러운`, `맛있는`, `달지않은`).
const ATTRIBUTIVE_ENDINGS: [char; 5] = ['한', '운', '는', '은', '던'];

/// Whether a Hangul word of three or more syllables is an attributive form — an adjective
/// or verb describing the noun after it (`고소한 두유`, `바삭쫄깃한 탕수육`): a description
/// titles drop or reword, never a name of its own.
pub(super) fn is_attributive(word: &str) -> bool {
    let syllables: Vec<char> = word.chars().collect();
    syllables.len() >= 3
        && syllables
            .iter()
            .all(|&c| ('\u{AC00}'..='\u{D7A3}').contains(&c))
        && syllables
            .last()
            .is_some_and(|c| ATTRIBUTIVE_ENDINGS.contains(c))
}

#[cfg(test)]
mod tests {
    use lps_profiles::vocabulary::{Lexicon, to_form};

    use super::{Text, find_form, pieces_of};

    fn text(title: &str) -> Text {
        Text::new(title, &Lexicon::builtin())
    }

    #[test]
    fn pieces_split_codes() {
        let cases: [(&str, &[&str]); 6] = [
            ("sm-s928n", &["sm", "s", "928", "n"]),
            ("wh1000xm5", &["wh", "1000", "xm", "5"]),
            ("8.0", &["8.0"]),
            ("제주삼다수", &["제주삼다수"]),
            ("-", &[]),
            ("s24", &["s", "24"]),
        ];
        for (word, want) in cases {
            assert_eq!(pieces_of(word), want, "word {word:?}");
        }
    }

    #[test]
    fn finds_keys() {
        let cases = [
            ("삼성 갤럭시 SM-S928N", "sms928n", true),
            ("삼성 갤럭시 SMS928N", "sms928n", true),
            ("삼성 갤럭시 SM S928N", "sms928n", true),
            ("삼성 갤럭시 SM-S928NZKE", "sms928n", false),
            ("삼성 갤럭시 SM-S921N", "sms928n", false),
            ("소니 WH1000XM5", "wh1000xm5", true),
            ("소니 WH-1000XM4", "wh1000xm5", false),
            ("갤럭시S24", "s24", true),
            ("갤럭시 S24 FE", "s24", true),
            ("갤럭시 S245", "s24", false),
            ("아이폰 15 프로", "15", true),
            ("아이폰 2015", "15", false),
            ("[무료배송] 제주삼다수 2L", "제주", true),
            ("[무료배송] 제주삼다수 2L", "삼다수", true),
            ("제주 삼다수", "제주삼다수", true),
            ("라이트 스탠다드", "라이트스탠다드", true),
            ("백산수", "삼다수", false),
            ("", "삼다수", false),
            ("아무거나", "", false),
        ];
        for (title, key, want) in cases {
            assert_eq!(text(title).contains_key(key), want, "{key:?} in {title:?}");
        }
    }

    #[test]
    fn a_full_code_may_carry_a_letter_suffix() {
        assert_eq!(
            text("SM-S928NZKEKOO 256GB")
                .code_with_suffix("sms928n")
                .len(),
            1
        );
        assert!(
            text("SM-S9280 256GB")
                .code_with_suffix("sms928n")
                .is_empty()
        );
        assert!(
            text("SM-S928N 256GB")
                .code_with_suffix("sms928n")
                .is_empty()
        );
        assert!(
            text("SM-S928NZKEKOOABCDEF")
                .code_with_suffix("sms928n")
                .is_empty()
        );
    }

    #[test]
    fn forms_are_found_in_what_the_name_left() {
        let t = text("스프라이트 제로 500ml");
        let covered = t.spans_of("스프라이트");
        let fragments = t.fragments(&covered, true);
        let form = |s: &str| to_form(s).unwrap_or_else(|| panic!("{s}"));
        assert!(find_form(&fragments, &form("제로"), false).is_some());
        assert!(find_form(&fragments, &form("라이트"), false).is_none());

        let t = text("진라면매운맛 5개입");
        let covered = t.spans_of("진라면");
        let fragments = t.fragments(&covered, true);
        assert!(find_form(&fragments, &form("매운맛"), false).is_some());

        let t = text("애플 충전기 USB-C 20W");
        let fragments = t.fragments(&[], true);
        assert!(find_form(&fragments, &form("usb c"), false).is_some());
        assert!(find_form(&fragments, &form("c타입"), false).is_none());

        let t = text("갤럭시S24케이스");
        let fragments = t.fragments(&t.spans_of("갤럭시"), true);
        assert!(find_form(&fragments, &form("케이스"), true).is_some());
    }

    #[test]
    fn gift_phrases_are_marked() {
        let cases: [(&str, &[&str]); 5] = [
            (
                "갤럭시 S24 울트라 256GB + 정품 케이스 증정",
                &["+", "정품", "케이스", "증정"],
            ),
            ("갤럭시 S24 정품 케이스 증정", &["정품", "케이스", "증정"]),
            (
                "[사은품증정] 다우니 2L (+사은품 텀블러)",
                &["사은품증정", "사은품", "텀블러"],
            ),
            (
                "제주삼다수 2L 12병 + 500ml 1병 증정",
                &["500ml", "1", "병", "증정"],
            ),
            ("1+1 코카콜라 500ml", &[]),
        ];
        for (title, want) in cases {
            let t = text(title);
            let gifts: Vec<&str> = t
                .words
                .iter()
                .zip(&t.gift)
                .filter(|(_, g)| **g)
                .map(|(w, _)| w.as_str())
                .filter(|w| *w != "+")
                .collect();
            let want: Vec<&str> = want.iter().copied().filter(|w| *w != "+").collect();
            assert_eq!(gifts, want, "title {title:?}");
        }
        let t = text("제주삼다수 2L 12병 + 500ml 1병 증정");
        assert_eq!(t.quantity.count, 12, "{:?}", t.quantity);
    }
}
