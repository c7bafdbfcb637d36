//! Numbers with structure: a size, a grade or a code the query writes with separators is
//! the card's when the card writes the same digits in the same groups, or run together —
//! never split another way.
//!
//! `245/45R18` is the groups `245`, `45`, `18`: a card's `245/45 R18`, `245 45 18` and
//! `2454518` hold it, `24545 18` does not. Letters between the groups (`R`, `W` of
//! `0W-30`) may be left out by the card, never replaced by others; a length unit closing a
//! number (`0.5mm`) may be left out too (`0.5`); letters that make a code (`3S`,
//! `MR530SG`) never. Only the card's ordinary words are read: its amounts (`30롤`) are no
//! codes. The query's
//! groups are the run of its consecutive words holding digits that the token belongs to.

use super::ProductQuery;
use super::quantity::WordRole;
use super::tokens::{self, Text};

/// The most card words one query run may be spread over.
const MAX_WINDOW: usize = 6;

/// The digit groups of a text, in order (a `.` between digits belongs to its number, and
/// a decimal's trailing zeros are no digits of it: `-3.00` is `-3.0`).
fn groups(text: &str) -> Vec<String> {
    raw_groups(text)
        .into_iter()
        .map(|group| {
            if group.contains('.') {
                group.trim_end_matches('0').trim_end_matches('.').to_owned()
            } else {
                group
            }
        })
        .collect()
}

/// The digit groups of a text as written.
fn raw_groups(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let decimal =
            c == '.' && !current.is_empty() && chars.get(i + 1).is_some_and(char::is_ascii_digit);
        if c.is_ascii_digit() || decimal {
            current.push(c);
        } else if !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The letters of a text outside its numbers.
fn letters(text: &str) -> Vec<char> {
    text.chars().filter(char::is_ascii_alphabetic).collect()
}

/// Length units a size's number may carry or leave out (`0.5mm`, `0.5`).
const LENGTH_UNITS: [&str; 5] = ["mm", "cm", "m", "inch", "in"];

/// The letters of a run a card must keep: all but those between two numbers of one word
/// (`R` of `45R18`, `W` of `0W30`, `x` of `30x40`) and a length unit closing a number
/// (`mm` of `0.5mm`). Letters that make a code (`S` of `3S`, `MR` and `SG` of `MR530SG`)
/// are required.
fn required_letters(run: &str) -> Vec<char> {
    let mut out = Vec::new();
    for word in run.split_whitespace() {
        let chars: Vec<char> = word.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            if !chars[i].is_ascii_alphabetic() {
                i += 1;
                continue;
            }
            let start = i;
            while i < chars.len() && chars[i].is_ascii_alphabetic() {
                i += 1;
            }
            let letters: String = chars[start..i].iter().collect();
            let after_digit = start > 0 && chars[start - 1].is_ascii_digit();
            let before_digit = i < chars.len() && chars[i].is_ascii_digit();
            let between = after_digit && before_digit && letters.len() <= 2;
            let unit = after_digit && i == chars.len() && LENGTH_UNITS.contains(&letters.as_str());
            if !between && !unit && word != "x" {
                out.extend(letters.chars());
            }
        }
    }
    out
}

/// Whether the card holds the query's number run that `key` (a model token) belongs to,
/// in another shape (see the module docs).
pub(super) fn shape_found(query: &ProductQuery, card: &Text, key: &str) -> bool {
    let text = query.text();
    let words = &text.words;
    let numeric = |i: usize| {
        words
            .get(i)
            .is_some_and(|w| w.chars().any(|c| c.is_ascii_digit()))
            && text.roles.get(i).is_some_and(|r| *r == WordRole::Other)
    };
    let Some(at) = (0..words.len())
        .find(|&i| (numeric(i) || words[i] == "x") && words[i].replace('-', "") == key)
    else {
        return false;
    };
    // The run's other words start with a digit (`245` of `245/45R18`; not `S1 evo3`).
    let leads_with_digit = |i: usize| {
        words.get(i).is_some_and(|w| w == "x")
            || (numeric(i) && words[i].chars().next().is_some_and(|c| c.is_ascii_digit()))
    };
    let mut lo = at;
    while lo > 0 && leads_with_digit(lo - 1) && leads_with_digit(lo) {
        lo -= 1;
    }
    let mut hi = at;
    while leads_with_digit(hi + 1) && leads_with_digit(hi) {
        hi += 1;
    }
    let run: String = words[lo..=hi].join(" ");
    let wanted = groups(&run);
    let required = required_letters(&run);
    let mut allowed = letters(&run);
    // A unit word after the run (`30x40 cm`) may be glued to it on the card.
    if let Some(unit) = words
        .get(hi + 1)
        .filter(|w| w.len() <= 4 && w.chars().all(|c| c.is_ascii_alphabetic()))
    {
        allowed.extend(unit.chars());
    }
    if wanted.is_empty() {
        return false;
    }
    let joined: String = wanted.concat();
    for start in 0..card.words.len() {
        for len in 1..=MAX_WINDOW {
            let Some(window) = card.words.get(start..start + len) else {
                break;
            };
            // Ordinary words only: a card's amounts (`30롤`) are not its codes.
            let ordinary = (start..start + len)
                .all(|i| card.roles.get(i).is_some_and(|r| *r == WordRole::Other));
            if !ordinary
                || !window
                    .iter()
                    .all(|w| w.chars().any(|c| c.is_ascii_digit()) || w.len() <= 2)
            {
                break;
            }
            let shown = window.join(" ");
            let found = groups(&shown);
            let same_groups = found == wanted;
            let run_together = found.len() == 1 && found.first() == Some(&joined);
            let shown_letters = letters(&shown);
            let letters_fit = shown_letters.iter().all(|c| allowed.contains(c))
                && required.iter().all(|c| shown_letters.contains(c));
            if (same_groups || run_together) && letters_fit {
                return true;
            }
        }
    }
    false
}

/// Most characters of a unit word after a number (`채널` of `2 채널`, `세대`): a longer
/// word is a name, not what the number counts.
const MAX_UNIT_WORD: usize = 3;

/// The valued attributes of a text's ordinary words: a number with the unit it is glued
/// to (`50mm`, `144hz`, `3s`) or the short word right after it (`2 채널`), as (number,
/// unit, as written). Amounts (`500ml`, `12개`) are the quantity's, not read here; words
/// of a gift or a second product are not the card's.
fn valued(text: &Text) -> Vec<(f64, String, String)> {
    let ordinary = |i: usize| {
        text.roles.get(i).is_some_and(|r| *r == WordRole::Other)
            && !text.gift.get(i).copied().unwrap_or(false)
            && !text.bundled.get(i).copied().unwrap_or(false)
    };
    // A number joined to the one before it (`30 x 40cm`, `30*40cm`) is a group of a size,
    // which `shape_found` compares.
    let joined = |i: usize| {
        text.words.get(i).is_some_and(|w| {
            w.ends_with('x') || w.ends_with('*') || w.ends_with('/') || w.ends_with('-')
        })
    };
    let mut out = Vec::new();
    for (i, word) in text.words.iter().enumerate() {
        if !ordinary(i) || (i > 0 && joined(i - 1)) {
            continue;
        }
        let digits: String = word
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let Ok(number) = digits.parse::<f64>() else {
            continue;
        };
        let rest = &word[digits.len()..];
        let unit = if rest.is_empty() {
            match text.words.get(i + 1) {
                Some(next)
                    if ordinary(i + 1)
                        && !tokens::is_latin(next)
                        && next.chars().count() <= MAX_UNIT_WORD
                        && next.chars().all(char::is_alphabetic) =>
                {
                    next.clone()
                }
                _ => continue,
            }
        } else if rest.chars().all(|c| c.is_ascii_alphabetic()) && rest != "x" {
            rest.to_owned()
        } else {
            continue;
        };
        out.push((number, unit.clone(), format!("{digits}{unit}")));
    }
    out
}

/// A valued attribute of the query the card states with another number (`1채널` for
/// `2채널`, `54mm` for `50mm`, `2S` for `3S`) and never with the query's: the same slot
/// filled with another value, whatever the card's other words, code included. As (the
/// query's, the card's).
pub(super) fn other_value(query: &ProductQuery, card: &Text) -> Option<(String, String)> {
    let found = valued(card);
    for (number, unit, shown) in valued(query.text()) {
        let same_unit = || found.iter().filter(|(_, u, _)| *u == unit);
        if same_unit().any(|(n, _, _)| (*n - number).abs() < f64::EPSILON)
            || shape_found(query, card, &shown)
        {
            continue;
        }
        if let Some((_, _, other)) = same_unit().next() {
            return Some((shown, other.clone()));
        }
    }
    other_grade(query.text(), card)
}

/// Grades written as a number and `+` marks (`1++`, `1+`: beef grades), as (number, marks)
/// and as written; a `+` between two numbers (`1+1`) is a promotion, no grade.
fn grades(text: &Text) -> Vec<(String, usize, String)> {
    let words = &text.words;
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if w.is_empty() || !w.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let marks = words[i + 1..].iter().take_while(|n| *n == "+").count();
        let then_number = words
            .get(i + 1 + marks)
            .is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit()));
        if marks > 0 && !then_number {
            out.push((w.clone(), marks, format!("{w}{}", "+".repeat(marks))));
        }
    }
    out
}

/// A grade the query names (`1++`) that the card writes only with other marks (`1+`).
fn other_grade(query: &Text, card: &Text) -> Option<(String, String)> {
    let found = grades(card);
    grades(query)
        .into_iter()
        .find_map(|(number, marks, shown)| {
            let same_number = || found.iter().filter(|(n, _, _)| *n == number);
            if same_number().any(|(_, m, _)| *m == marks) {
                return None;
            }
            same_number()
                .next()
                .map(|(_, _, other)| (shown, other.clone()))
        })
}

/// Words after a number that make it a screen's or blade's size in inches (`65인치`,
/// `65형` as Korean writes screen sizes, `27 inch`).
const INCH_WORDS: [&str; 5] = ["인치", "형", "inch", "in", "\""];

/// Centimetres in an inch.
const CM_PER_INCH: f64 = 2.54;

/// How far a size in centimetres may be from the inches' own (a screen's size is its
/// visible diagonal: LG's 65-inch set is `163cm`, 165.1 cm exactly).
const INCH_TOLERANCE: f64 = 0.03;

/// Whether the query's number `key` is a size in inches (`65 인치`) the card states in
/// inches another way (`65형`) or in centimetres or millimetres within
/// [`INCH_TOLERANCE`] (`163cm`, `650mm` for `26인치`).
pub(super) fn inches_found(query: &ProductQuery, card: &Text, key: &str) -> bool {
    let text = query.text();
    let Some(inches) = text
        .words
        .iter()
        .enumerate()
        .find(|(i, w)| {
            *w == key
                && text
                    .words
                    .get(i + 1)
                    .is_some_and(|u| INCH_WORDS.contains(&u.as_str()))
        })
        .and_then(|(_, w)| w.parse::<f64>().ok())
    else {
        return false;
    };
    let wanted_cm = inches * CM_PER_INCH;
    let words = &card.words;
    words.iter().enumerate().any(|(i, w)| {
        let digits: String = w
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let Ok(number) = digits.parse::<f64>() else {
            return false;
        };
        let glued = &w[digits.len()..];
        let unit = if glued.is_empty() {
            words.get(i + 1).map_or("", String::as_str)
        } else {
            glued
        };
        let cm = match unit {
            "cm" => number,
            "mm" => number / 10.0,
            u if INCH_WORDS.contains(&u) => number * CM_PER_INCH,
            _ => return false,
        };
        (cm - wanted_cm).abs() <= wanted_cm * INCH_TOLERANCE
    })
}

#[cfg(test)]
mod tests {
    use super::super::{judge, must_query};

    #[test]
    fn grouped_numbers_match_in_every_shape_and_no_other_split() {
        let query = must_query("한국타이어 벤투스 S1 evo3 245/45R18");
        for (title, same) in [
            ("한국타이어 벤투스 S1 evo3 245/45 R18", true),
            ("한국타이어 벤투스 S1 evo3 245 45 18", true),
            ("한국타이어 벤투스 S1 evo3 2454518", true),
            ("한국타이어 벤투스 S1 evo3 245-45-18", true),
            ("한국타이어 벤투스 S1 evo3 24545 18", false),
            ("한국타이어 벤투스 S1 evo3 235/45R18", false),
            ("한국타이어 벤투스 S1 evo3 245/45Z18", false),
        ] {
            let verdict = judge(&query, title);
            assert_eq!(verdict.same, same, "{title}: {verdict:?}");
        }
        let pen = must_query("제트스트림 3색 볼펜 0.5mm");
        assert!(judge(&pen, "제트스트림 3색 볼펜 0.5 블랙바디").same);
        assert!(!judge(&pen, "제트스트림 3색 볼펜 0.7").same);
        let lens = must_query("바이오트루 원데이 30p -3.00");
        assert!(judge(&lens, "바이오트루 원데이 30p -3.0").same);
        assert!(!judge(&lens, "바이오트루 원데이 30p -3.25").same);
        assert!(!judge(&lens, "바이오트루 원데이 30p -30").same);
    }
}
