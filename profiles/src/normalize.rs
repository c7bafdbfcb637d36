//! Title normalisation: the one place that decides what a "word" is.
//!
//! Both sides of a comparison (the product name and a card title) go through
//! [`normalize`](normalize()), so every later rule can compare plain strings.
//!
//! Steps, in order:
//! 1. NFKC, so full-width `２Ｌ`, `㎖`, `ℓ` and `ｘ` become `2L`, `ml`, `l`, `x`.
//! 2. Lowercase.
//! 3. Every character that is not a letter or digit becomes a space, except:
//!    - `.` between two digits (a decimal point: `1.5kg`);
//!    - `-` between two ASCII letters/digits (inside a model code: `sm-s928n`;
//!      matching later treats the hyphen as optional);
//!    - `,` used as a thousands separator (`1,000ml`) is dropped, not spaced;
//!    - `*`, `×`, `✕`, `✖`, `⨯` become a stand-alone ` x ` (one multiplication mark);
//!    - `+` becomes a stand-alone ` + ` (for `1+1`).
//! 4. A space is inserted where Hangul meets another letter or digit
//!    (`코카콜라500ml` → `코카콜라 500ml`, `12개` → `12 개`).
//! 5. Whitespace is collapsed and trimmed.
//!
//! Korean text is otherwise preserved: Hangul words are never split or respelled.

use unicode_normalization::UnicodeNormalization;

/// Multiplication marks that become a stand-alone `x`.
const TIMES_MARKS: [char; 5] = ['*', '×', '✕', '✖', '⨯'];

/// Normalises a product name or card title (see the module docs for the rules).
///
/// Never panics; any input (empty, emoji, control characters) gives a string
/// of space-separated words, possibly empty.
#[must_use]
pub fn normalize(text: &str) -> String {
    let chars: Vec<char> = text.nfkc().flat_map(char::to_lowercase).collect();
    let mut out = String::with_capacity(text.len() + 8);
    // Script of the last character pushed, `None` right after a separator.
    let mut last: Option<Script> = None;
    for (i, &c) in chars.iter().enumerate() {
        let prev = i.checked_sub(1).and_then(|j| chars.get(j)).copied();
        let next = chars.get(i + 1).copied();
        if c.is_alphanumeric() {
            let script = Script::of(c);
            if last.is_some_and(|l| l != script) {
                out.push(' ');
            }
            out.push(c);
            last = Some(script);
        } else if c == '.' && is_digit(prev) && is_digit(next) {
            out.push('.');
        } else if c == '-' && is_ascii_alnum(prev) && is_ascii_alnum(next) {
            out.push('-');
        } else if c == ',' && is_thousands_separator(&chars, i) {
            // NB: dropped, not spaced: `1,000ml` must read as one number.
        } else if TIMES_MARKS.contains(&c) {
            out.push_str(" x ");
            last = None;
        } else if c == '+' {
            out.push_str(" + ");
            last = None;
        } else {
            out.push(' ');
            last = None;
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Writing systems whose boundary splits a word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Script {
    Hangul,
    Other,
}

impl Script {
    fn of(c: char) -> Self {
        if is_hangul(c) {
            Self::Hangul
        } else {
            Self::Other
        }
    }
}

/// Hangul syllables and jamo (including compatibility jamo such as `ㅋ`).
pub fn is_hangul(c: char) -> bool {
    matches!(c,
        '\u{AC00}'..='\u{D7A3}'
        | '\u{1100}'..='\u{11FF}'
        | '\u{3130}'..='\u{318F}'
        | '\u{A960}'..='\u{A97F}'
        | '\u{D7B0}'..='\u{D7FF}')
}

fn is_digit(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_ascii_digit())
}

fn is_ascii_alnum(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_ascii_alphanumeric())
}

/// `,` preceded by a digit and followed by exactly three digits (`1,000`).
fn is_thousands_separator(chars: &[char], i: usize) -> bool {
    let at = |k: usize| chars.get(k).copied();
    let Some(prev) = i.checked_sub(1) else {
        return false;
    };
    is_digit(at(prev)) && (1..=3).all(|k| is_digit(at(i + k))) && !is_digit(at(i + 4))
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn normalises_titles() {
        let cases = [
            ("", ""),
            ("   ", ""),
            (
                "[무료배송] 제주삼다수 2L x 12병",
                "무료배송 제주삼다수 2l x 12 병",
            ),
            ("코카콜라500ml", "코카콜라 500ml"),
            ("(2L*6)", "2l x 6"),
            ("2L×12", "2l x 12"),
            ("２Ｌ ｘ １２", "2l x 12"),
            ("500㎖", "500ml"),
            ("1.5ℓ", "1.5l"),
            ("1.5kg", "1.5kg"),
            ("끝.", "끝"),
            ("v.2", "v 2"),
            ("1,000ml", "1000ml"),
            ("1,5", "1 5"),
            ("SM-S928N", "sm-s928n"),
            ("WH-1000XM5/블랙", "wh-1000xm5 블랙"),
            ("코카-콜라", "코카 콜라"),
            ("-a-", "a"),
            ("1+1 행사", "1 + 1 행사"),
            ("갤럭시S24울트라", "갤럭시 s24 울트라"),
            ("  여러   칸\t공백\n", "여러 칸 공백"),
            ("😀🔥 2L", "2l"),
            ("【특가】삼다수♥", "특가 삼다수"),
        ];
        for (input, want) in cases {
            assert_eq!(normalize(input), want, "input {input:?}");
        }
    }

    #[test]
    fn is_idempotent() {
        for input in [
            "[무료배송] 제주삼다수 2L x 12병",
            "(2L*6) 1+1",
            "SM-S928N 갤럭시S24",
            "1,000ml 1.5kg",
        ] {
            let once = normalize(input);
            assert_eq!(normalize(&once), once, "input {input:?}");
        }
    }
}
