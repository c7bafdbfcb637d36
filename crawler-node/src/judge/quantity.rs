//! Quantities in titles: unit size (volume or weight), how many units, and a device's
//! storage capacity.
//!
//! Parsing works on the words of a [`normalize`](super::normalize())d title, so
//! `2L`, `2 l`, `2리터`, `２Ｌ` all read the same. The unit words are the vocabulary's
//! (`[units]` of `profiles/vocabulary.toml`, plus a mall profile's additions), so an
//! operator adds `펫` or `티백` without a rebuild. Forms understood:
//!
//! | form | meaning |
//! |---|---|
//! | `2l`, `2 l`, `2리터`, `500ml`, `500미리`, `250cc`, `1.5kg`, `1.5키로`, `120g`, `1000mg` | unit size |
//! | `12개`, `12입`, `5개입`, `6병`, `4팩`, `30롤`, `24캔`, `24pet`, `100t`, `100스틱`, `12ea` … | count factor |
//! | `256gb`, `256기가`, `1tb` | storage capacity (the largest stated: `12GB 256GB` is 256GB) |
//! | `x12`, `x 12`, `*20`, `×6` (normalised to `x`) | count factor joined by a mark |
//! | `12 x 500ml` | count before the size |
//! | `1+1`, `2+1` | promotion: multiplies the count by `a+b` |
//! | `총 24병` | stated total: overrides every other count (`총 24L` is ignored: it is size × count) |
//!
//! A hyphenated word is a quantity only when every part is one (`sm-x710` is a code, not
//! `× 710`), and a latin unit word standing alone (`L` in `티셔츠 화이트 L`) is a word.
//!
//! How factors combine into one count:
//! - A **chain** is a run of count factors joined by multiplication marks; its
//!   value is their product (`6개 x 2팩` → 12, `500ml x 6 x 4` → 24). A size may
//!   sit inside a chain (`12개 x 500ml`).
//! - Titles often say the same thing twice (`2L 12병 (6병x2팩)`,
//!   `500ml 24개 24병`), so chains with **equal values count once**; distinct
//!   chain values multiply (`5개입 2팩` → 10). Two different pack options in one
//!   title (`6병 12병`) therefore give a count that matches neither, which rejects
//!   the ambiguous card — the safe side for a lowest-price search.
//! - Promotions multiply on top (`[1+1] 500ml 24개` → 48).
//! - No count at all means 1.
//! - A bare number with no unit and no mark (`2L 12`, `아이폰 15`) is not a count.
//! - Counts saturate at `u32::MAX`; numbers that do not fit are ignored. The
//!   unit size is the first size in the title.
//!
//! Equality ([`Quantity::agrees_with`]): unit sizes must be equal when both
//! sides state one (`2L == 2000ml`; volume never equals weight), or one side's size be
//! the other's total at the same count (`468g 12개입` = `39g x 12`); a side with no
//! size accepts any size, because titles often omit it. A capacity the query states must
//! be the card's (`256G` on a card counts as 256GB when the query asks a capacity).
//! Counts must always be equal, with "no count" meaning 1 — so `x12` never matches a
//! title without a count: a 12-pack and a single bottle are different offers, and
//! comparing their prices is exactly the error this module exists to prevent.

use std::fmt;

use lps_profiles::vocabulary::{Lexicon, UnitKind};

use lps_profiles::normalize::{is_hangul, normalize};

/// Thousandths of the base unit per base unit.
const BASE: u64 = 1_000;

/// Count words may carry the suffix `씩` or `입` (`2개씩`, `24병입`).
const COUNT_SUFFIXES: [&str; 2] = ["씩", "입"];

/// "Total" marker: `총 24병`.
const TOTAL_WORD: &str = "총";

/// What a size measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dimension {
    /// Base unit: millilitre.
    Volume,
    /// Base unit: gram.
    Weight,
    /// Storage capacity; base unit: gigabyte.
    Data,
}

/// A unit size normalised to base units: `2L == 2000ml`, `1.5kg == 1500g`.
///
/// Stored exactly as thousandths of the base unit (µl or mg), so decimal
/// titles (`1.5L`, `0.5g`) compare without floating point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Measure {
    dimension: Dimension,
    milli: u64,
}

impl Measure {
    /// A volume of `ml` millilitres.
    #[must_use]
    pub fn from_ml(ml: u32) -> Self {
        Self {
            dimension: Dimension::Volume,
            milli: u64::from(ml) * BASE,
        }
    }

    /// A weight of `grams` grams.
    #[must_use]
    pub fn from_grams(grams: u32) -> Self {
        Self {
            dimension: Dimension::Weight,
            milli: u64::from(grams) * BASE,
        }
    }

    /// A storage capacity of `gb` gigabytes.
    #[must_use]
    pub fn from_gb(gb: u32) -> Self {
        Self {
            dimension: Dimension::Data,
            milli: u64::from(gb) * BASE,
        }
    }

    /// Volume or weight.
    #[must_use]
    pub fn dimension(self) -> Dimension {
        self.dimension
    }

    /// Thousandths of the base unit (µl for volume, mg for weight).
    #[must_use]
    pub fn milli_base(self) -> u64 {
        self.milli
    }
}

/// Canonical spelling: `2L`, `1.5L`, `500ml`, `1.5kg`, `120g`.
impl fmt::Display for Measure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (big, small) = match self.dimension {
            Dimension::Volume => ("L", "ml"),
            Dimension::Weight => ("kg", "g"),
            Dimension::Data => ("TB", "GB"),
        };
        if self.milli >= 1_000_000 {
            write_scaled(f, self.milli, 1_000_000, 6)?;
            f.write_str(big)
        } else {
            write_scaled(f, self.milli, 1_000, 3)?;
            f.write_str(small)
        }
    }
}

/// Writes `value / scale` as a decimal without trailing zeros.
fn write_scaled(f: &mut fmt::Formatter<'_>, value: u64, scale: u64, digits: usize) -> fmt::Result {
    let whole = value / scale;
    let frac = value % scale;
    if frac == 0 {
        write!(f, "{whole}")
    } else {
        let frac = format!("{frac:0digits$}");
        write!(f, "{whole}.{}", frac.trim_end_matches('0'))
    }
}

/// How much product one offer is: `count` units of `unit_size`, and the storage
/// capacity for devices.
///
/// `"2L x 12"` is `{ unit_size: Some(2000 ml), count: 12 }` (24 L in total).
/// A title that states nothing is `{ unit_size: None, count: 1, capacity: None }`
/// (the [`Default`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quantity {
    /// Size of one unit, if the title states one.
    pub unit_size: Option<Measure>,
    /// Number of units; 1 when the title states no count.
    pub count: u32,
    /// Storage capacity (`256GB`): the largest the title states, since a phone title
    /// also names its memory (`12GB 256GB`).
    pub capacity: Option<Measure>,
}

impl Default for Quantity {
    fn default() -> Self {
        Self {
            unit_size: None,
            count: 1,
            capacity: None,
        }
    }
}

impl Quantity {
    /// Parses the quantity of a raw title (normalising it first) with the built-in
    /// vocabulary's units.
    #[must_use]
    pub fn parse(title: &str) -> Self {
        Self::parse_with(title, &Lexicon::builtin())
    }

    /// Parses the quantity of a raw title with `lexicon`'s units.
    #[must_use]
    pub fn parse_with(title: &str, lexicon: &Lexicon) -> Self {
        let normalized = normalize(title);
        let words: Vec<&str> = normalized.split(' ').collect();
        parse_words(&words, lexicon).quantity
    }

    /// Whether `other` (a card) holds the amount `self` (the query) asks for (see the
    /// module docs): sizes equal when both are stated, counts always equal, and the
    /// capacity equal when the query states one.
    #[must_use]
    pub fn agrees_with(&self, other: &Self) -> bool {
        // `468g 12개입` (a box of 12 weighing 468g) is `39g x 12`.
        let sizes_agree = match (self.unit_size, other.unit_size) {
            (Some(a), Some(b)) => {
                a == b || (self.count > 1 && (self.total() == Some(b) || other.total() == Some(a)))
            }
            _ => true,
        };
        let capacity_agrees = self.capacity.is_none() || self.capacity == other.capacity;
        // `256G` on a phone is its capacity, not grams.
        let capacity_as_grams = match (
            self.capacity,
            other.capacity,
            self.unit_size,
            other.unit_size,
        ) {
            (Some(c), None, None, Some(g)) => {
                g.dimension == Dimension::Weight && g.milli == c.milli
            }
            _ => false,
        };
        if capacity_as_grams {
            return self.count == other.count;
        }
        sizes_agree && capacity_agrees && self.count == other.count
    }

    /// True when the title stated neither a size, a count nor a capacity.
    #[must_use]
    pub fn is_unstated(&self) -> bool {
        *self == Self::default()
    }

    /// `unit_size × count`, or `None` without a size or on overflow.
    #[must_use]
    pub fn total(&self) -> Option<Measure> {
        let size = self.unit_size?;
        Some(Measure {
            dimension: size.dimension,
            milli: size.milli.checked_mul(u64::from(self.count))?,
        })
    }
}

/// Canonical search form: `2L 12개`, `500ml`, `12개`, `256GB`, `1개` (nothing stated).
impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::with_capacity(3);
        parts.extend(self.capacity.map(|c| c.to_string()));
        parts.extend(self.unit_size.map(|s| s.to_string()));
        if self.count != 1 || parts.is_empty() {
            parts.push(format!("{}개", self.count));
        }
        f.write_str(&parts.join(" "))
    }
}

/// What the quantity parser made of each word of a normalised title.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WordRole {
    /// Every number in the word was read as part of a quantity (`2l`, `x12`, `12`).
    Quantity,
    /// A unit word, mark or number-less packaging word (`개`, `x`, `+`, `총`).
    Marker,
    /// Anything else, including numbers that were not a quantity (`15`, `s24`).
    Other,
}

#[derive(Debug)]
pub(super) struct Parsed {
    pub quantity: Quantity,
    /// One entry per input word.
    pub roles: Vec<WordRole>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    /// Thousandths of the base unit per one of this unit.
    Measure(Dimension, u64),
    Count,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lex {
    /// A number, in thousandths (`1.5` → 1500).
    Num(u64),
    Unit(Unit),
    Times,
    Plus,
    Total,
    Word,
}

#[derive(Debug, Clone, Copy)]
struct Lexeme {
    lex: Lex,
    word: usize,
}

/// Grammar items built from lexemes; `nums` are the lexeme indices of the
/// numbers the item would consume.
#[derive(Debug, Clone, Copy)]
enum Item {
    Measure(Measure, usize),
    /// A count with a unit word (`12개`), or a bare number (`12`) that only
    /// counts when joined by a mark.
    Count {
        n: u32,
        bare: bool,
        num: usize,
    },
    Times,
    Promo(u32, [usize; 2]),
    /// `총 24병` (a count) or `총 24L` (a total size, implied by size × count).
    Total {
        count: Option<u32>,
        num: usize,
    },
    Break,
}

/// Length units that end a dimension (`30 x 40 cm`, `30*40cm`, `1.2 x 2 m`).
pub(super) const LENGTH_UNITS: [&str; 8] = ["mm", "cm", "m", "inch", "in", "인치", "센치", "센티"];

/// Whether a word (hyphens removed) is a glued dimension (`30x40cm`, `1.2x2m`).
pub(super) fn is_dimension(word: &str) -> bool {
    let words = [word];
    dimension_words(&words).first().copied().unwrap_or(false)
}

/// The most units a count written as numbers glued by `x` (`6x4`, `24x2`) can mean.
const MAX_GLUED_COUNT: f64 = 1000.0;

/// Marks the words of dimensions: numbers joined by `x` marks whose last number carries
/// (or is followed by) a length unit. A dimension is a size written with separators,
/// never a count (`30 x 40 cm` is not 1,200 pieces); its words stay ordinary words, so a
/// query's dimension must be the card's, digit for digit, however it is spaced.
fn dimension_words(words: &[&str]) -> Vec<bool> {
    let number = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_digit() || c == '.');
    let with_length = |w: &str| {
        LENGTH_UNITS
            .iter()
            .any(|u| w.strip_suffix(u).is_some_and(number))
    };
    // `30x40` glued: numbers joined by `x` in one word.
    let glued = |w: &str| {
        let parts: Vec<&str> = w.split('x').collect();
        parts.len() >= 2
            && parts
                .iter()
                .enumerate()
                .all(|(i, p)| number(p) || (i + 1 == parts.len() && with_length(p)))
    };
    let mut marks = vec![false; words.len()];
    for (i, w) in words.iter().enumerate() {
        let glued_unit = w.split('x').next_back().is_some_and(with_length);
        let unit_after = words.get(i + 1).is_some_and(|n| LENGTH_UNITS.contains(n));
        // Without a unit, factors whose product passes [`MAX_GLUED_COUNT`] (`77x147`) are
        // a size: nobody sells 77 packs of 147.
        let too_many = w
            .split('x')
            .map(|p| p.parse::<f64>().ok())
            .try_fold(1.0, |acc, p| p.map(|p| acc * p))
            .is_some_and(|product| product > MAX_GLUED_COUNT);
        if glued(w) && (glued_unit || unit_after || too_many) {
            if let Some(m) = marks.get_mut(i) {
                *m = true;
            }
            if unit_after && let Some(m) = marks.get_mut(i + 1) {
                *m = true;
            }
        }
    }
    let mut start = 0;
    while start < words.len() {
        let mut end = start;
        let mut marks_seen = 0;
        // num (x num)+ [unit] or num (x num)* x num+unit
        if words.get(start).is_some_and(|w| number(w)) {
            end = start + 1;
            while words.get(end) == Some(&"x")
                && words
                    .get(end + 1)
                    .is_some_and(|w| number(w) || with_length(w))
            {
                marks_seen += 1;
                end += 2;
                if words.get(end - 1).is_some_and(|w| with_length(w)) {
                    break;
                }
            }
        }
        let last = end.checked_sub(1).and_then(|i| words.get(i)).copied();
        let unit_after = words.get(end).is_some_and(|w| LENGTH_UNITS.contains(w));
        // Bare numbers joined by marks whose product passes [`MAX_GLUED_COUNT`]
        // (`77 x 147`) are a size, as glued ones are.
        let factors: Vec<f64> = words
            .get(start..end)
            .unwrap_or_default()
            .iter()
            .filter(|w| **w != "x")
            .map(|w| w.parse::<f64>().unwrap_or(0.0))
            .collect();
        let too_many =
            factors.iter().all(|f| *f >= 10.0) && factors.iter().product::<f64>() > MAX_GLUED_COUNT;
        // Factors with more bare numbers on either side (`12 7 x 5 8 25`: `12.7 x 5.8.25`
        // with its points lost) are the pieces of a size, never a count.
        let bare = |i: Option<usize>| {
            i.and_then(|i| words.get(i))
                .is_some_and(|w| w.chars().all(|c| c.is_ascii_digit()) && !w.is_empty())
        };
        let in_numbers = bare(start.checked_sub(1)) || bare(Some(end));
        if marks_seen > 0 && (last.is_some_and(with_length) || unit_after || too_many || in_numbers)
        {
            let stop = if unit_after { end + 1 } else { end };
            marks
                .iter_mut()
                .take(stop)
                .skip(start)
                .for_each(|m| *m = true);
            start = stop;
        } else {
            start += 1;
        }
    }
    marks
}

/// Marks a size whose last factor carries a letter that is no unit (`700 x 25c`, a tyre
/// width): numbers joined by `x` that end in a code's letter are a size, never a count.
fn coded_sizes(words: &[&str], lexicon: &Lexicon, marks: &mut [bool]) {
    let number = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_digit() || c == '.');
    let coded = |w: &str| {
        let digits = w.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        let letters = &w[digits.len()..];
        number(digits)
            && (1..=2).contains(&letters.len())
            && !letters.contains('x')
            && lexicon.unit(letters).is_none()
            && !LENGTH_UNITS.contains(&letters)
    };
    for i in 0..words.len().saturating_sub(2) {
        if number(words[i]) && words[i + 1] == "x" && coded(words[i + 2]) {
            marks.iter_mut().skip(i).take(3).for_each(|m| *m = true);
        }
    }
}

/// Parses the words of a normalised title with `lexicon`'s units.
pub(super) fn parse_words(words: &[&str], lexicon: &Lexicon) -> Parsed {
    let mut dimension = dimension_words(words);
    coded_sizes(words, lexicon, &mut dimension);
    // NB: a dimension's words are read as ordinary words (`_` is none of the units).
    let read: Vec<&str> = words
        .iter()
        .zip(&dimension)
        .map(|(w, d)| if *d { "_" } else { *w })
        .collect();
    let lexemes = lex_words(&read, lexicon);
    let items = build_items(&lexemes);
    let mut consumed = vec![false; lexemes.len()];
    let quantity = combine(&items, &mut consumed);
    let latin: Vec<bool> = words
        .iter()
        .map(|w| w.chars().all(|c| c.is_ascii_alphabetic()))
        .collect();
    let roles = word_roles(words.len(), &latin, &lexemes, &consumed);
    Parsed { quantity, roles }
}

fn lex_words(words: &[&str], lexicon: &Lexicon) -> Vec<Lexeme> {
    let mut out = Vec::new();
    for (word, text) in words.iter().enumerate() {
        for lex in lex_word(text, lexicon) {
            out.push(Lexeme { lex, word });
        }
    }
    out
}

fn lex_word(text: &str, lexicon: &Lexicon) -> Vec<Lex> {
    if text.is_empty() {
        return Vec::new();
    }
    if text == "+" {
        return vec![Lex::Plus];
    }
    if text.chars().any(is_hangul) {
        return vec![hangul_word(text, lexicon)];
    }
    // A hyphenated word is a quantity only when every part is one (`2l-12`); otherwise it
    // is a code (`sm-x710`, not `sm` and `× 710`).
    // A unit letter between two numbers (`45r18`, `0w30`) is a code's, not an amount.
    if glued_between_numbers(text) {
        return vec![Lex::Word];
    }
    // A hyphenated word that starts with letters (`rx-93`, `sm-x710`) is a code: its
    // number is no count.
    if text.contains('-') && !text.starts_with(|c: char| c.is_ascii_digit()) {
        return vec![Lex::Word];
    }
    let mut out = Vec::new();
    for part in text.split('-').filter(|p| !p.is_empty()) {
        match lex_latin_part(part, lexicon) {
            Some(lexes) => out.extend(lexes),
            None => return vec![Lex::Word],
        }
    }
    out
}

/// Whether a word is a number, one or two letters other than `x`, and a number
/// (`45r18`, `0w30`): a tyre size or an oil grade.
fn glued_between_numbers(text: &str) -> bool {
    let chars: Vec<char> = text.chars().collect();
    let Some(start) = chars.iter().position(char::is_ascii_alphabetic) else {
        return false;
    };
    let end = chars[start..]
        .iter()
        .position(|c| !c.is_ascii_alphabetic())
        .map_or(chars.len(), |n| start + n);
    let letters = &chars[start..end];
    start > 0
        && end < chars.len()
        && letters.len() <= 2
        && !letters.contains(&'x')
        && chars[..start].iter().all(char::is_ascii_digit)
        && chars[end..].iter().all(char::is_ascii_digit)
}

fn hangul_word(text: &str, lexicon: &Lexicon) -> Lex {
    if text == TOTAL_WORD {
        return Lex::Total;
    }
    if let Some(unit) = lookup(lexicon, text) {
        return Lex::Unit(unit);
    }
    let suffixed = COUNT_SUFFIXES
        .iter()
        .filter_map(|s| text.strip_suffix(s))
        .any(|stem| lookup(lexicon, stem) == Some(Unit::Count));
    if suffixed {
        Lex::Unit(Unit::Count)
    } else {
        Lex::Word
    }
}

/// Splits a latin/digit part into numbers, units and marks, or `None` when it
/// is an ordinary word.
fn lex_latin_part(part: &str, lexicon: &Lexicon) -> Option<Vec<Lex>> {
    if !lexicon.is_quantity_word(part) {
        return None;
    }
    let mut out = Vec::new();
    let mut rest = part;
    while let Some(first) = rest.chars().next() {
        let is_num = first.is_ascii_digit();
        let end = rest
            .find(|c: char| (c.is_ascii_digit() || c == '.') != is_num)
            .unwrap_or(rest.len());
        let (run, tail) = rest.split_at(end);
        if is_num {
            out.push(Lex::Num(parse_milli(run)?));
        } else {
            out.extend(latin_run(run, lexicon)?);
        }
        rest = tail;
    }
    Some(out)
}

/// A letter run inside a quantity word: a unit, a unit followed by one `x`,
/// or only `x` marks.
fn latin_run(run: &str, lexicon: &Lexicon) -> Option<Vec<Lex>> {
    if let Some(unit) = lookup(lexicon, run) {
        return Some(vec![Lex::Unit(unit)]);
    }
    if let Some(unit) = run.strip_suffix('x').and_then(|u| lookup(lexicon, u)) {
        return Some(vec![Lex::Unit(unit), Lex::Times]);
    }
    if run.chars().all(|c| c == 'x') {
        return Some(vec![Lex::Times; run.len()]);
    }
    None
}

fn lookup(lexicon: &Lexicon, word: &str) -> Option<Unit> {
    Some(match lexicon.unit(word)? {
        UnitKind::Volume(per) => Unit::Measure(Dimension::Volume, per),
        UnitKind::Weight(per) => Unit::Measure(Dimension::Weight, per),
        UnitKind::Data(per) => Unit::Measure(Dimension::Data, per),
        UnitKind::Count => Unit::Count,
    })
}

/// `"1.5"` → 1500; more than three decimals are truncated; `None` on overflow.
fn parse_milli(run: &str) -> Option<u64> {
    let (whole, frac) = run.split_once('.').unwrap_or((run, ""));
    let whole: u64 = whole.parse().ok()?;
    let mut milli = whole.checked_mul(1_000)?;
    let mut scale = 100;
    for c in frac.chars().take(3) {
        let digit = u64::from(c.to_digit(10)?);
        milli = milli.checked_add(digit * scale)?;
        scale /= 10;
    }
    Some(milli)
}

/// A positive whole number that fits a count.
fn as_count(milli: u64) -> Option<u32> {
    if !milli.is_multiple_of(1_000) {
        return None;
    }
    u32::try_from(milli / 1_000).ok().filter(|&n| n > 0)
}

fn build_items(lexemes: &[Lexeme]) -> Vec<Item> {
    let lex_at = |i: usize| lexemes.get(i).map(|l| l.lex);
    let mut items = Vec::new();
    let mut i = 0;
    while let Some(lex) = lex_at(i) {
        // `a+b` is a promotion only between bare numbers: not `x 12 + 500ml`.
        let promo_ok = !matches!(i.checked_sub(1).and_then(lex_at), Some(Lex::Times))
            && !matches!(lex_at(i + 3), Some(Lex::Unit(_) | Lex::Times));
        let (item, used) = match (lex, lex_at(i + 1), lex_at(i + 2)) {
            (Lex::Num(v), Some(Lex::Unit(Unit::Measure(dimension, per))), _) => {
                let size = v.checked_mul(per).map(|m| Measure {
                    dimension,
                    milli: m / 1_000,
                });
                match size {
                    Some(size) if size.milli > 0 => (Item::Measure(size, i), 2),
                    _ => (Item::Break, 2),
                }
            }
            (Lex::Num(v), Some(Lex::Unit(Unit::Count)), _) => match as_count(v) {
                Some(n) => (
                    Item::Count {
                        n,
                        bare: false,
                        num: i,
                    },
                    2,
                ),
                None => (Item::Break, 2),
            },
            (Lex::Num(a), Some(Lex::Plus), Some(Lex::Num(b))) if promo_ok => {
                match (as_count(a), as_count(b)) {
                    (Some(a), Some(b)) => (Item::Promo(a.saturating_add(b), [i, i + 2]), 3),
                    _ => (Item::Break, 3),
                }
            }
            (Lex::Num(v), _, _) => match as_count(v) {
                Some(n) => (
                    Item::Count {
                        n,
                        bare: true,
                        num: i,
                    },
                    1,
                ),
                None => (Item::Break, 1),
            },
            (Lex::Total, Some(Lex::Num(v)), Some(Lex::Unit(Unit::Count))) => match as_count(v) {
                Some(n) => (
                    Item::Total {
                        count: Some(n),
                        num: i + 1,
                    },
                    3,
                ),
                None => (Item::Break, 3),
            },
            (Lex::Total, Some(Lex::Num(_)), Some(Lex::Unit(Unit::Measure(..)))) => (
                Item::Total {
                    count: None,
                    num: i + 1,
                },
                3,
            ),
            (Lex::Times, _, _) => (Item::Times, 1),
            (Lex::Unit(_) | Lex::Plus | Lex::Total | Lex::Word, _, _) => (Item::Break, 1),
        };
        items.push(item);
        i += used;
    }
    items
}

/// Folds items into one quantity (rules in the module docs), marking the
/// numbers it used in `consumed`.
fn combine(items: &[Item], consumed: &mut [bool]) -> Quantity {
    let mut mark = |i: usize| {
        if let Some(c) = consumed.get_mut(i) {
            *c = true;
        }
    };
    let mut unit_size = None;
    let mut capacity: Option<Measure> = None;
    let mut chains: Vec<u32> = Vec::new();
    let mut open: Option<u32> = None;
    let mut joined = false;
    let mut promo: u32 = 1;
    let mut total = None;
    for (idx, item) in items.iter().enumerate() {
        match *item {
            Item::Count { n, bare, num } => {
                // A bare number joined by `x` to nothing (`12 x 룰드`: a size cut short) is
                // no count.
                let next_is_times = matches!(items.get(idx + 1), Some(Item::Times))
                    && (!bare
                        || matches!(
                            items.get(idx + 2),
                            Some(Item::Count { .. } | Item::Measure(..))
                        ));
                if bare && !joined && !next_is_times {
                    chains.extend(open.take());
                    joined = false;
                    continue;
                }
                mark(num);
                open = match open {
                    Some(product) if joined => Some(product.saturating_mul(n)),
                    previous => {
                        chains.extend(previous);
                        Some(n)
                    }
                };
                joined = false;
            }
            Item::Times => joined = true,
            Item::Measure(size, num) if size.dimension == Dimension::Data => {
                // A capacity is no unit size, and never joins a count chain.
                mark(num);
                capacity =
                    Some(capacity.map_or(size, |c| if size.milli > c.milli { size } else { c }));
                chains.extend(open.take());
                joined = false;
            }
            Item::Measure(size, num) => {
                mark(num);
                unit_size = unit_size.or(Some(size));
                if !joined {
                    chains.extend(open.take());
                }
                joined = false;
            }
            Item::Promo(n, nums) => {
                nums.into_iter().for_each(&mut mark);
                promo = promo.saturating_mul(n);
                chains.extend(open.take());
                joined = false;
            }
            Item::Total { count, num } => {
                mark(num);
                total = total.or(count);
                chains.extend(open.take());
                joined = false;
            }
            Item::Break => {
                chains.extend(open.take());
                joined = false;
            }
        }
    }
    chains.extend(open);
    chains.sort_unstable();
    chains.dedup();
    let count = total.unwrap_or_else(|| chains.into_iter().fold(promo, u32::saturating_mul));
    Quantity {
        unit_size,
        count,
        capacity,
    }
}

fn word_roles(
    words: usize,
    latin_words: &[bool],
    lexemes: &[Lexeme],
    consumed: &[bool],
) -> Vec<WordRole> {
    let mut has_num = vec![false; words];
    let mut all_used = vec![true; words];
    let mut has_word = vec![false; words];
    let mut seen = vec![false; words];
    for (lexeme, &used) in lexemes.iter().zip(consumed) {
        let w = lexeme.word;
        if let Some(s) = seen.get_mut(w) {
            *s = true;
        }
        match lexeme.lex {
            Lex::Num(_) => {
                if let Some(h) = has_num.get_mut(w) {
                    *h = true;
                }
                if !used && let Some(a) = all_used.get_mut(w) {
                    *a = false;
                }
            }
            Lex::Word => {
                if let Some(h) = has_word.get_mut(w) {
                    *h = true;
                }
            }
            Lex::Unit(_) | Lex::Times | Lex::Plus | Lex::Total => {}
        }
    }
    // A latin unit word standing alone (`L` in `티셔츠 화이트 L`, not after a number) is a
    // word: a size letter, not a litre.
    let mut lone_unit = vec![false; words];
    for (i, lexeme) in lexemes.iter().enumerate() {
        if matches!(lexeme.lex, Lex::Unit(_))
            && latin_words.get(lexeme.word).copied().unwrap_or(false)
        {
            let after_number = i
                .checked_sub(1)
                .and_then(|j| lexemes.get(j))
                .is_some_and(|p| matches!(p.lex, Lex::Num(_)));
            let alone = lexemes.iter().filter(|l| l.word == lexeme.word).count() == 1;
            if alone
                && !after_number
                && let Some(l) = lone_unit.get_mut(lexeme.word)
            {
                *l = true;
            }
        }
    }
    (0..words)
        .map(|w| {
            let get = |v: &[bool]| v.get(w).copied().unwrap_or(false);
            if !get(&seen) || get(&has_word) || get(&lone_unit) {
                WordRole::Other
            } else if !get(&has_num) {
                WordRole::Marker
            } else if get(&all_used) {
                WordRole::Quantity
            } else {
                WordRole::Other
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::normalize;
    use super::{Dimension, Lexicon, Measure, Quantity, WordRole, parse_words};

    fn q(size: impl Into<Option<Measure>>, count: u32) -> Quantity {
        Quantity {
            unit_size: size.into(),
            count,
            capacity: None,
        }
    }
    fn ml(v: u32) -> Measure {
        Measure::from_ml(v)
    }
    fn g(v: u32) -> Measure {
        Measure::from_grams(v)
    }

    #[test]
    fn parses_every_form() {
        let cases = [
            // sizes
            ("2L", q(ml(2000), 1)),
            ("2 l", q(ml(2000), 1)),
            ("500ml", q(ml(500), 1)),
            ("500 mL", q(ml(500), 1)),
            ("500㎖", q(ml(500), 1)),
            ("1.5ℓ", q(ml(1500), 1)),
            ("250cc", q(ml(250), 1)),
            ("2리터", q(ml(2000), 1)),
            ("500미리", q(ml(500), 1)),
            ("1.5kg", q(g(1500), 1)),
            ("1.5키로", q(g(1500), 1)),
            ("120g", q(g(120), 1)),
            ("120그램", q(g(120), 1)),
            ("1,000ml", q(ml(1000), 1)),
            // counts
            ("12개", q(None, 12)),
            ("12 개", q(None, 12)),
            ("12입", q(None, 12)),
            ("6병", q(None, 6)),
            ("4팩", q(None, 4)),
            ("30롤", q(None, 30)),
            ("5개입", q(None, 5)),
            ("24캔", q(None, 24)),
            ("2개씩", q(None, 2)),
            ("12P", q(None, 12)),
            ("12ea", q(None, 12)),
            ("x12", q(None, 12)),
            ("X 12", q(None, 12)),
            ("*20", q(None, 20)),
            ("×6", q(None, 6)),
            ("1+1", q(None, 2)),
            ("2+1", q(None, 3)),
            // combined
            ("2L x 12", q(ml(2000), 12)),
            ("2Lx12", q(ml(2000), 12)),
            ("2L×12병", q(ml(2000), 12)),
            ("500ml 24개", q(ml(500), 24)),
            ("(2L*6)", q(ml(2000), 6)),
            ("12개 x 500ml", q(ml(500), 12)),
            ("12 x 500ml", q(ml(500), 12)),
            ("500ml x 6 x 4", q(ml(500), 24)),
            ("2L 6개 x 2팩", q(ml(2000), 12)),
            ("5개입 2팩", q(None, 10)),
            ("2L 12병 (6병x2팩)", q(ml(2000), 12)),
            ("2L x 12병 (2L 12개)", q(ml(2000), 12)),
            ("500ml 24개 24병", q(ml(500), 24)),
            ("2L 12개 (총 12개)", q(ml(2000), 12)),
            ("총 24병 2L 6개 x 4", q(ml(2000), 24)),
            ("[1+1] 코카콜라 500ml 24개", q(ml(500), 48)),
            ("500mlx24ea", q(ml(500), 24)),
            ("2L 6병 12병", q(ml(2000), 72)),
            ("2L x 12 (총 24L)", q(ml(2000), 12)),
            ("2L x 12 + 500ml x 20", q(ml(2000), 240)),
            ("1+1 500ml", q(ml(500), 2)),
            // nothing stated, or numbers that are not quantities
            ("", q(None, 1)),
            ("제주 삼다수", q(None, 1)),
            ("아이폰 15", q(None, 1)),
            ("2L 12", q(ml(2000), 1)),
            ("WH-1000XM5", q(None, 1)),
            ("SM-X710", q(None, 1)),
            ("a7x12", q(None, 1)),
            ("XL 사이즈", q(None, 1)),
            ("12개월 할부", q(None, 1)),
            ("개당 1,200원", q(None, 1)),
            ("0개", q(None, 1)),
            ("1.5개", q(None, 1)),
        ];
        for (title, want) in cases {
            assert_eq!(Quantity::parse(title), want, "title {title:?}");
        }
    }

    #[test]
    fn vocabulary_units_and_capacity() {
        let cap = |gb: u32, count: u32| Quantity {
            unit_size: None,
            count,
            capacity: Some(Measure::from_gb(gb)),
        };
        let cases = [
            ("코카콜라 500ml 24PET", q(ml(500), 24)),
            ("칠성사이다 500ml 20펫", q(ml(500), 20)),
            ("모카골드 12g x 100T", q(g(12), 100)),
            (
                "카누 0.9g 100스틱",
                q(
                    Measure {
                        dimension: Dimension::Weight,
                        milli: 900,
                    },
                    100,
                ),
            ),
            (
                "녹차 1.8g 100티백",
                q(
                    Measure {
                        dimension: Dimension::Weight,
                        milli: 1_800,
                    },
                    100,
                ),
            ),
            ("화장지 30m 30R", q(None, 30)),
            ("갤럭시 S24 256GB", cap(256, 1)),
            ("갤럭시 S24 256기가", cap(256, 1)),
            ("갤럭시 S24 12GB 512GB", cap(512, 1)),
            ("SSD 1TB", cap(1_000, 1)),
            ("티셔츠 화이트 L", q(None, 1)),
        ];
        for (title, want) in cases {
            assert_eq!(Quantity::parse(title), want, "title {title:?}");
        }
        // A capacity is asked only when the query states one; `256G` on a phone is it.
        let phone = Quantity::parse("갤럭시 S24 256GB");
        assert!(phone.agrees_with(&Quantity::parse("갤럭시 S24 256GB 자급제")));
        assert!(!phone.agrees_with(&Quantity::parse("갤럭시 S24 512GB")));
        assert!(!phone.agrees_with(&Quantity::parse("갤럭시 S24")));
        assert!(phone.agrees_with(&Quantity::parse("갤럭시 S24 256G")));
        assert!(Quantity::parse("갤럭시 S24").agrees_with(&phone));
        // A box stated by its total is its pieces.
        let box_ = Quantity::parse("초코파이 468g 12개입");
        assert!(box_.agrees_with(&Quantity::parse("초코파이 39g x 12개")));
        assert!(!box_.agrees_with(&Quantity::parse("초코파이 39g x 6개")));
        assert_eq!(phone.to_string(), "256GB");
    }

    #[test]
    fn base_units_are_equal() {
        assert_eq!(Quantity::parse("2L"), Quantity::parse("2000ml"));
        assert_eq!(Quantity::parse("1.5kg"), Quantity::parse("1500g"));
        assert_eq!(Quantity::parse("0.5L"), Quantity::parse("500ml"));
        assert_ne!(Quantity::parse("2L"), Quantity::parse("2kg"));
        assert_eq!(Measure::from_ml(2000).dimension(), Dimension::Volume);
        assert_eq!(Measure::from_grams(5).milli_base(), 5_000);
    }

    #[test]
    fn equality_rules() {
        let cases = [
            ("2L x 12", "2리터 12입", true),
            ("2L x 12", "2000ml 12병", true),
            ("2L x 12", "12개", true),
            ("12개", "2L x 12", true),
            ("2L x 12", "500ml x 12", false),
            ("2L x 12", "2L x 6", false),
            ("2L x 12", "2L", false),
            ("x12", "", false),
            ("", "x12", false),
            ("", "", true),
            ("500ml", "", true),
            ("1+1", "", false),
            ("1+1", "2개", true),
            ("2L", "2kg", false),
        ];
        for (a, b, want) in cases {
            let (qa, qb) = (Quantity::parse(a), Quantity::parse(b));
            assert_eq!(qa.agrees_with(&qb), want, "{a:?} vs {b:?}");
            assert_eq!(qb.agrees_with(&qa), want, "symmetry {b:?} vs {a:?}");
        }
    }

    #[test]
    fn displays_canonically() {
        let cases = [
            ("2L x 12", "2L 12개"),
            ("2000ml", "2L"),
            ("1.5L", "1.5L"),
            ("500ml 24개", "500ml 24개"),
            ("0.25ml", "0.25ml"),
            ("1.5kg", "1.5kg"),
            ("120g", "120g"),
            ("5개입 x 2", "10개"),
            ("", "1개"),
        ];
        for (title, want) in cases {
            assert_eq!(Quantity::parse(title).to_string(), want, "title {title:?}");
        }
        assert!(Quantity::parse("삼다수").is_unstated());
        assert!(!Quantity::parse("x1 2L").is_unstated());
    }

    #[test]
    fn total_multiplies_size_by_count() {
        let total = Quantity::parse("2L x 12").total();
        assert_eq!(total, Some(ml(24_000)));
        assert_eq!(Quantity::parse("x12").total(), None);
    }

    #[test]
    fn odd_and_huge_inputs_do_not_panic() {
        let cases = [
            (
                "99999999999ml",
                q(
                    Some(Measure {
                        dimension: Dimension::Volume,
                        milli: 99_999_999_999_000,
                    }),
                    1,
                ),
            ),
            ("99999999999999999999999ml", q(None, 1)),
            ("99999999999개", q(None, 1)),
            ("4294967295개 x 4294967295", q(None, u32::MAX)),
            ("18446744073709551ml", q(None, 1)),
            ("😀😀😀", q(None, 1)),
            ("xxxxxxxx", q(None, 1)),
            ("+ + + 1 +", q(None, 1)),
            ("1+", q(None, 1)),
            ("총", q(None, 1)),
            ("-", q(None, 1)),
            ("0.0001l", q(None, 1)),
            ("1.2.3kg", q(None, 1)),
        ];
        for (title, want) in cases {
            assert_eq!(Quantity::parse(title), want, "title {title:?}");
        }
        let long = "2L x 12 ".repeat(2_000);
        assert_eq!(Quantity::parse(&long), q(ml(2000), 12));
    }

    #[test]
    fn codes_and_coded_sizes_are_no_counts() {
        // A hyphenated code's number (`RX-93`), a scale (`1/144`) next to it, and a size
        // whose last factor carries a code's letter (`700 x 25C`) are no counts.
        assert_eq!(Quantity::parse("RG 1/144 RX-93 건담"), q(None, 1));
        assert_eq!(Quantity::parse("RG 1:144 건담 (RX-93)"), q(None, 1));
        assert_eq!(Quantity::parse("마라톤 700 x 25C 타이어 1개"), q(None, 1));
        // Counts still read: a hyphenated amount and a multiplier with a count unit.
        assert_eq!(Quantity::parse("삼다수 2L-12"), q(ml(2000), 1));
        assert_eq!(Quantity::parse("2 x 10개"), q(None, 20));
        assert_eq!(Quantity::parse("24 x 2"), q(None, 48));
        // A size whose points were lost, and one cut short, are no counts either.
        assert_eq!(Quantity::parse("노트 라지 12 7 x 5 8 25 유선"), q(None, 1));
        assert_eq!(Quantity::parse("노트 라지 12 x 룰드 240페이지"), q(None, 1));
        assert_eq!(Quantity::parse("2L x 12"), q(ml(2000), 12));
        assert_eq!(Quantity::parse("6 x 4"), q(None, 24));
    }

    #[test]
    fn roles_mark_quantity_words() {
        use WordRole::{Marker, Other, Quantity as Q};
        let text = normalize("제주 삼다수 2L x 12병 아이폰 15 프로 sm-s928n");
        let words: Vec<&str> = text.split(' ').collect();
        let roles = parse_words(&words, &Lexicon::builtin()).roles;
        assert_eq!(
            words,
            [
                "제주",
                "삼다수",
                "2l",
                "x",
                "12",
                "병",
                "아이폰",
                "15",
                "프로",
                "sm-s928n"
            ]
        );
        assert_eq!(
            roles,
            [
                Other, Other, Q, Marker, Q, Marker, Other, Other, Other, Other
            ]
        );
    }
}
