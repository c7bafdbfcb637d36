//! Words of a title, how a query word is found in a card, and the word lists.
//!
//! A [`Text`] is one normalised title seen three ways:
//! - `words`: the normalised words, in order;
//! - `pieces`: each word cut at hyphens and at letter/digit boundaries
//!   (`sm-s928n` → `sm`, `s`, `928`, `n`); a latin/digit key is **present** when
//!   some run of consecutive pieces concatenates to exactly the key. So hyphens
//!   and spaces inside a code are optional (`SMS928N`, `SM-S928N`, `sm s928n` all
//!   hold `sms928n`, and `WH1000XM5` holds `wh1000xm5`), but a key is never found
//!   inside a longer code (`s24` is not in `s245`, `256gb` is not in `1256gb`);
//! - `compact`: all words glued together without hyphens; a key with Hangul (or
//!   any non-latin letter) is present when it is a substring of it, because
//!   Korean titles space compounds freely (`제주삼다수` = `제주 삼다수`).
//!
//! Word lists (small on purpose; each entry is a word that misled a match):
//! - [`STOPWORDS`]: shop filler (`무료배송`, `정품`, `특가` …) that never
//!   identifies a product, dropped from queries;
//! - [`DECOYS`]: accessory/condition words (`케이스`, `호환`, `리필`, `중고` …); a
//!   card holding one is rejected unless the query holds it too;
//! - [`VARIANTS`]: model-line words (`제로`, `울트라`, `프로`, `맥스`, `미니`,
//!   `라이트` …); the query and the card must hold the same set, so `코카콜라`
//!   does not match `코카콜라 제로` and `갤럭시 S24` does not match
//!   `갤럭시 S24 울트라`. Latin and Hangul spellings are the same variant.

use super::normalize::{is_hangul, normalize};
use super::quantity::{Quantity, WordRole, parse_words};

/// Shop filler that never identifies a product.
pub(super) const STOPWORDS: &[&str] = &[
    "무료배송",
    "무배",
    "무료",
    "배송",
    "당일발송",
    "당일배송",
    "빠른배송",
    "로켓배송",
    "정품",
    "국내정품",
    "정식",
    "공식",
    "특가",
    "최저가",
    "할인",
    "행사",
    "이벤트",
    "신상",
    "신제품",
    "새상품",
    "인기",
    "추천",
    "best",
    "new",
    "sale",
    "free",
];

/// Accessory, compatible-part and condition words. Hangul entries match as a
/// substring (`갤럭시S24케이스`), latin ones as a whole word.
pub(super) const DECOYS: &[&str] = &[
    "케이스",
    "커버",
    "필름",
    "호환",
    "리필",
    "교체용",
    "거치대",
    "파우치",
    "스트랩",
    "악세사리",
    "액세서리",
    "중고",
    "리퍼",
    "공병",
    "case",
    "cover",
    "refill",
    "compatible",
];

/// One model-line variant and its spellings.
#[derive(Debug)]
pub(super) struct Variant {
    /// Name used in verdicts.
    pub name: &'static str,
    /// Spellings: Hangul ones match a word equal to or ending with them
    /// (`코카콜라제로`), latin ones a whole word.
    pub forms: &'static [&'static str],
}

/// Model-line variants that must agree between query and card.
pub(super) const VARIANTS: &[Variant] = &[
    Variant {
        name: "제로",
        forms: &["제로", "zero"],
    },
    Variant {
        name: "울트라",
        forms: &["울트라", "ultra"],
    },
    Variant {
        name: "프로",
        forms: &["프로", "pro"],
    },
    Variant {
        name: "플러스",
        forms: &["플러스", "plus"],
    },
    Variant {
        name: "맥스",
        forms: &["맥스", "max"],
    },
    Variant {
        name: "미니",
        forms: &["미니", "mini"],
    },
    Variant {
        name: "라이트",
        forms: &["라이트", "lite", "light"],
    },
    Variant {
        name: "디카페인",
        forms: &["디카페인", "decaf"],
    },
];

/// The variants a text holds, as a bit per [`VARIANTS`] entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct VariantSet(u32);

impl VariantSet {
    pub fn contains(self, index: usize) -> bool {
        u32::try_from(index)
            .ok()
            .and_then(|i| self.0.checked_shr(i))
            .is_some_and(|bits| bits & 1 == 1)
    }

    /// The first variant held by exactly one of the two sets.
    pub fn first_difference(self, other: Self) -> Option<&'static str> {
        VARIANTS
            .iter()
            .enumerate()
            .find(|&(i, _)| self.contains(i) != other.contains(i))
            .map(|(_, v)| v.name)
    }
}

/// The longest run of pieces tried when looking for a key.
const MAX_RUN: usize = 8;

/// One normalised title (see the module docs).
#[derive(Debug, Clone)]
pub(super) struct Text {
    pub words: Vec<String>,
    pub roles: Vec<WordRole>,
    pub quantity: Quantity,
    pieces: Vec<String>,
    compact: String,
}

impl Text {
    pub fn new(raw: &str) -> Self {
        let normalized = normalize(raw);
        let words: Vec<String> = normalized.split_whitespace().map(str::to_owned).collect();
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        let parsed = parse_words(&refs);
        let pieces = words.iter().flat_map(|w| pieces_of(w)).collect();
        let compact = words
            .iter()
            .flat_map(|w| w.chars())
            .filter(|&c| c != '-')
            .collect();
        Self {
            words,
            roles: parsed.roles,
            quantity: parsed.quantity,
            pieces,
            compact,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Whether the key (a normalised word without hyphens) is in this text.
    pub fn contains_key(&self, key: &str) -> bool {
        if key.is_empty() {
            return false;
        }
        if key.chars().all(|c| c.is_ascii_alphanumeric() || c == '.') {
            self.has_run(key)
        } else {
            self.compact.contains(key)
        }
    }

    /// Whether consecutive pieces concatenate to exactly `key`.
    fn has_run(&self, key: &str) -> bool {
        (0..self.pieces.len()).any(|start| {
            let mut joined = String::new();
            for piece in self.pieces.iter().skip(start).take(MAX_RUN) {
                joined.push_str(piece);
                if joined == key {
                    return true;
                }
                if !key.starts_with(joined.as_str()) {
                    return false;
                }
            }
            false
        })
    }

    /// Whether a variant spelling is in this text.
    fn has_variant_form(&self, form: &str) -> bool {
        if form.is_ascii() {
            self.has_run(form)
        } else {
            self.words.iter().any(|w| w.ends_with(form))
        }
    }

    pub fn variants(&self) -> VariantSet {
        let bits = VARIANTS
            .iter()
            .enumerate()
            .filter(|(_, v)| v.forms.iter().any(|f| self.has_variant_form(f)))
            .fold(0u32, |acc, (i, _)| {
                acc | u32::try_from(i)
                    .ok()
                    .and_then(|i| 1u32.checked_shl(i))
                    .unwrap_or(0)
            });
        VariantSet(bits)
    }

    /// Decoy words in this text, in [`DECOYS`] order.
    pub fn decoys(&self) -> impl Iterator<Item = &'static str> + '_ {
        DECOYS.iter().copied().filter(|d| self.contains_key(d))
    }
}

/// The [`VARIANTS`] index of a word that is exactly one variant spelling.
pub(super) fn variant_of(word: &str) -> Option<usize> {
    VARIANTS.iter().position(|v| v.forms.contains(&word))
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

#[cfg(test)]
mod tests {
    use super::{Text, VARIANTS, pieces_of, variant_of};

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
            ("갤럭시 S245", "s24", false),
            ("아이폰 15 프로", "15", true),
            ("아이폰 2015", "15", false),
            ("[무료배송] 제주삼다수 2L", "제주", true),
            ("[무료배송] 제주삼다수 2L", "삼다수", true),
            ("제주 삼다수", "제주삼다수", true),
            ("백산수", "삼다수", false),
            ("", "삼다수", false),
            ("아무거나", "", false),
        ];
        for (title, key, want) in cases {
            assert_eq!(
                Text::new(title).contains_key(key),
                want,
                "{key:?} in {title:?}"
            );
        }
    }

    #[test]
    fn detects_variants_and_decoys() {
        let zero = variant_of("제로").unwrap_or(usize::MAX);
        let ultra = variant_of("ultra").unwrap_or(usize::MAX);
        assert!(zero < VARIANTS.len() && ultra < VARIANTS.len());

        let cases = [
            ("코카콜라제로 500ml", Some(zero)),
            ("코카콜라 ZERO 500ml", Some(zero)),
            ("갤럭시S24울트라", Some(ultra)),
            ("갤럭시 S24 Ultra", Some(ultra)),
        ];
        for (title, want) in cases {
            let set = Text::new(title).variants();
            assert!(want.is_some_and(|i| set.contains(i)), "title {title:?}");
        }
        for title in ["코카콜라 500ml", "프로모션 특가", "맥스웰하우스"] {
            let set = Text::new(title).variants();
            assert_eq!(set, super::VariantSet::default(), "title {title:?}");
        }

        let decoys: Vec<_> = Text::new("갤럭시S24케이스 호환 CASE").decoys().collect();
        assert_eq!(decoys, ["케이스", "호환", "case"]);
        assert_eq!(Text::new("showcase 삼다수").decoys().count(), 0);
    }
}
