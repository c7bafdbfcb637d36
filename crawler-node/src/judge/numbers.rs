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
use super::tokens::Text;

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
