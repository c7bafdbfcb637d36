//! Names across scripts: is a Hangul word the Latin one spelled the Korean way?
//!
//! Korean malls write a brand or a product line in Hangul (`필립스`, `로얄캐닌`), in Latin
//! letters (`Philips`, `ROYAL CANIN`) or both; the vocabulary's aliases can never list
//! every brand, so when a query word has no alias the judge compares it across scripts
//! by sound. Both sides become a sequence of coarse [`Sound`]s, and two sequences match
//! when their weighted edit distance is within a bound that grows with their length.
//!
//! # Hangul, read backwards through the loanword rules
//! Each syllable is cut into its jamo. Consonants map to the class that 외래어 표기법 (the
//! loanword spelling rules) writes them for: ㅂ/ㅍ/ㅃ are one labial class (`b`, `p`, `f`,
//! `v`), ㄷ/ㅌ/ㄸ one dental (`d`, `t`), ㄱ/ㅋ/ㄲ one velar (`k`, `c`, `g`, `q`), ㅈ/ㅊ/ㅉ
//! an affricate (`j`, `ch`, `z`, `ts`), ㅅ/ㅆ a sibilant (`s`, `sh`, soft `c`, `th`), ㄹ
//! `l` or `r`, ㅇ as a final `ng`; a final ㅅ is also a `t` (`로봇`, robot). Vowels keep a
//! coarse quality, and ㅡ — the vowel Korean inserts to break consonant clusters
//! (`스프라이트`, Sprite) — costs nothing to drop.
//!
//! # Latin, read as it is pronounced
//! Accents are folded (`Nestlé` → `nestle`), digraphs read as one sound (`ph`, `th`,
//! `sh`, `ch`, `ck`, `qu`, `ts`/`tz`), `c` and `g` before `e`/`i`/`y` are soft, `x` is
//! `ks`, `w` and `y` are vowels, an `r` that no vowel follows is weak (British spellings
//! drop it: `Burberry`, `버버리`), and so is `h`. Doubled sounds count once on both sides
//! (`Gillette` / `질레트`: `ll` and the syllable-final ㄹ of `질` + `레`).
//!
//! # The distance
//! Substituting a sound by one of its class costs 0, by a related one (sibilant ↔
//! affricate, dental ↔ affricate) a half, by another a whole; a vowel of another quality
//! costs a quarter, dropping one a quarter, dropping a weak `h`/`r` three tenths. Two
//! sequences match when their first consonants agree and the distance is at most
//! [`allowed`] of the longer one's consonant count; one consonant is never enough.

use unicode_normalization::UnicodeNormalization;

use lps_profiles::normalize::is_hangul;

use super::tokens::{Span, Text};

/// The most Latin words one Hangul word may spell (`뉴발란스`: `new balance`;
/// `노스페이스`: `the north face`).
const MAX_WORDS: usize = 3;

/// One sound of a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sound {
    /// b, p, f, v — ㅂ ㅍ ㅃ.
    Labial,
    /// d, t — ㄷ ㅌ ㄸ.
    Dental,
    /// k, hard c, hard g, q — ㄱ ㅋ ㄲ.
    Velar,
    /// s, sh, soft c — ㅅ ㅆ.
    Sibilant,
    /// j, ch, z, ts — ㅈ ㅊ ㅉ.
    Affricate,
    /// sh, sch, `s` before `i` — ㅅ before an `i`/`y` vowel (`시`, `샤`, `쉬`).
    Sh,
    /// f: a labial, or ㅎ in older loanwords (`Fila`, `휠라`; `Fissler`, `휘슬러`).
    F,
    /// A sound that is a sibilant or an affricate (`z`, soft `g`, `ch`).
    SibilantOrAffricate,
    /// `th`: a dental or a sibilant (`Thermos`, `써모스`).
    DentalOrSibilant,
    /// A final ㅅ: a sibilant or a dental (`로봇`).
    CodaS,
    /// `ch`: an affricate, a sibilant (`Chanel`, `샤넬`) or a velar (`Christian`).
    Ch,
    /// Soft `g` (`Gillette`): an affricate or a velar.
    SoftG,
    /// l, r — ㄹ.
    Liquid,
    /// An `r` no vowel follows: often dropped in Korean.
    WeakR,
    /// A final `t` after a vowel: often silent (French names).
    SilentT,
    /// A final `s` after a consonant: a plural Korean may leave out.
    PluralS,
    /// m — ㅁ.
    Nasal,
    /// n, ng — ㄴ, final ㅇ.
    Alveolar,
    /// h — ㅎ: often dropped.
    Aspirate,
    /// A vowel of some quality (0 a, 1 e, 2 i, 3 o, 4 u, [`SCHWA`]).
    Vowel(u8),
    /// ㅡ: the vowel Korean inserts between consonants; free to drop.
    Epenthetic,
}

impl Sound {
    fn is_consonant(self) -> bool {
        !matches!(self, Self::Vowel(_) | Self::Epenthetic)
    }

    /// The plain classes this sound may stand for.
    fn classes(self) -> &'static [Self] {
        use Sound::{Affricate, Aspirate, Dental, Labial, Liquid, Sibilant, Velar};
        match self {
            Self::F => &[Labial, Aspirate],
            Self::Sh => &[Self::Sh],
            Self::Aspirate => &[Aspirate],
            Self::SibilantOrAffricate => &[Sibilant, Affricate],
            Self::DentalOrSibilant | Self::CodaS => &[Dental, Sibilant],
            Self::Ch => &[Affricate, Self::Sh, Velar],
            Self::SoftG => &[Affricate, Velar],
            Self::WeakR => &[Liquid],
            Self::SilentT => &[Dental],
            Self::PluralS => &[Sibilant],
            Self::Labial => &[Labial],
            Self::Dental => &[Dental],
            Self::Velar => &[Velar],
            Self::Sibilant => &[Sibilant],
            Self::Affricate => &[Affricate],
            Self::Liquid => &[Liquid],
            _ => &[],
        }
    }
}

/// The quality of ㅓ/ㅕ, which Korean writes for an English schwa, `er`, `u` or `o`
/// (`커버`, `넘버`, `버버리`): near every vowel.
const SCHWA: u8 = 5;

/// Cost of dropping a sound.
fn drop_cost(sound: Sound) -> f32 {
    match sound {
        Sound::Epenthetic => 0.0,
        Sound::Vowel(_) => 0.35,
        Sound::Aspirate | Sound::WeakR => 0.3,
        Sound::SilentT | Sound::PluralS => 0.5,
        _ => 1.0,
    }
}

/// Cost of reading one sound as another.
fn substitution_cost(a: Sound, b: Sound) -> f32 {
    if a == b {
        return 0.0;
    }
    match (a, b) {
        (Sound::Vowel(SCHWA), Sound::Vowel(_)) | (Sound::Vowel(_), Sound::Vowel(SCHWA)) => 0.1,
        (Sound::Vowel(_), Sound::Vowel(_)) => 0.25,
        (Sound::Epenthetic, Sound::Vowel(_)) | (Sound::Vowel(_), Sound::Epenthetic) => 0.1,
        (Sound::Vowel(_) | Sound::Epenthetic, _) | (_, Sound::Vowel(_) | Sound::Epenthetic) => {
            drop_cost(a) + drop_cost(b)
        }
        _ => {
            let (ca, cb) = (a.classes(), b.classes());
            if ca.iter().any(|x| cb.contains(x)) || (ca.is_empty() && a == b) {
                0.0
            } else if related(ca, cb) {
                0.5
            } else {
                1.0
            }
        }
    }
}

/// Sibilant ↔ affricate and dental ↔ affricate are near (`Zwilling` as `즈윌링` or
/// `츠빌링`, `tu` as `츄`).
fn related(a: &[Sound], b: &[Sound]) -> bool {
    let near = |x: Sound, y: Sound| {
        matches!(
            (x, y),
            (Sound::Sibilant, Sound::Affricate)
                | (Sound::Affricate, Sound::Sibilant)
                | (Sound::Sh, Sound::Sibilant | Sound::Affricate)
                | (Sound::Sibilant | Sound::Affricate, Sound::Sh)
                | (Sound::Dental, Sound::Affricate)
                | (Sound::Affricate, Sound::Dental)
        )
    };
    a.iter().any(|&x| b.iter().any(|&y| near(x, y)))
}

/// The sounds of a Hangul word (see the module docs); other characters are skipped.
pub(super) fn hangul_sounds(word: &str) -> Vec<Sound> {
    let mut out = Vec::new();
    let syllables = word.chars().filter(|&c| jamo(c).is_some()).count();
    for (n, c) in word.chars().filter(|&c| jamo(c).is_some()).enumerate() {
        let Some((initial, medial, last)) = jamo(c) else {
            continue;
        };
        // ㅅ before an `i` or a `y` glide is `sh` (`시`, `샤`, `쇼`, `슈`, `쉬`).
        let consonant = match initial_sound(initial) {
            Some(Sound::Sibilant) if matches!(medial, 2 | 3 | 6 | 7 | 12 | 16 | 17 | 20) => {
                Some(Sound::Sh)
            }
            other => other,
        };
        if let Some(sound) = consonant {
            out.push(sound);
        }
        // A closing 이/위 after ㅅ, ㅈ or ㅊ is the vowel Korean adds to a final `sh`,
        // `ch` or `ge` (`보쉬`, `Bosch`; `브릿지`, bridge).
        let closing_i = n + 1 == syllables
            && last == 0
            && matches!(medial, 16 | 20)
            && matches!(consonant, Some(Sound::Sh | Sound::Affricate));
        out.push(if closing_i {
            Sound::Epenthetic
        } else {
            vowel_sound(medial)
        });
        if let Some(sound) = final_sound(last) {
            out.push(sound);
        }
    }
    collapse(out)
}

/// A precomposed syllable's (initial, medial, final) indices.
pub(super) fn jamo(c: char) -> Option<(u32, u32, u32)> {
    let code = u32::from(c);
    if !(0xAC00..=0xD7A3).contains(&code) {
        return None;
    }
    let index = code - 0xAC00;
    Some((index / (21 * 28), (index / 28) % 21, index % 28))
}

fn initial_sound(index: u32) -> Option<Sound> {
    // ㄱ ㄲ ㄴ ㄷ ㄸ ㄹ ㅁ ㅂ ㅃ ㅅ ㅆ ㅇ ㅈ ㅉ ㅊ ㅋ ㅌ ㅍ ㅎ
    Some(match index {
        0 | 1 | 15 => Sound::Velar,
        2 => Sound::Alveolar,
        3 | 4 | 16 => Sound::Dental,
        5 => Sound::Liquid,
        6 => Sound::Nasal,
        7 | 8 | 17 => Sound::Labial,
        9 | 10 => Sound::Sibilant,
        12..=14 => Sound::Affricate,
        18 => Sound::Aspirate,
        _ => return None,
    })
}

fn vowel_sound(index: u32) -> Sound {
    // ㅏ ㅐ ㅑ ㅒ ㅓ ㅔ ㅕ ㅖ ㅗ ㅘ ㅙ ㅚ ㅛ ㅜ ㅝ ㅞ ㅟ ㅠ ㅡ ㅢ ㅣ
    match index {
        0 | 2 | 9 => Sound::Vowel(0),
        1 | 3 | 5 | 7 | 10 | 11 | 15 => Sound::Vowel(1),
        16 | 19 | 20 => Sound::Vowel(2),
        4 | 6 => Sound::Vowel(SCHWA),
        8 | 12 | 14 => Sound::Vowel(3),
        13 | 17 => Sound::Vowel(4),
        _ => Sound::Epenthetic,
    }
}

fn final_sound(index: u32) -> Option<Sound> {
    // (none) ㄱ ㄲ ㄳ ㄴ ㄵ ㄶ ㄷ ㄹ ㄺ ㄻ ㄼ ㄽ ㄾ ㄿ ㅀ ㅁ ㅂ ㅄ ㅅ ㅆ ㅇ ㅈ ㅊ ㅋ ㅌ ㅍ ㅎ
    Some(match index {
        1..=3 | 9 | 24 => Sound::Velar,
        4..=6 | 21 => Sound::Alveolar,
        7 | 25 => Sound::Dental,
        8 | 11..=13 | 15 => Sound::Liquid,
        10 | 16 => Sound::Nasal,
        14 | 17 | 18 | 26 => Sound::Labial,
        19 | 20 => Sound::CodaS,
        22 | 23 => Sound::Affricate,
        27 => Sound::Aspirate,
        _ => return None,
    })
}

/// The sounds of a Latin word (see the module docs); digits and marks are skipped.
pub(super) fn latin_sounds(word: &str) -> Vec<Sound> {
    latin_sounds_of(fold(word, false))
}

/// The sounds of a Latin name as Korean may spell it: without a leading `The`, and with
/// it (`The Ordinary`, `디오디너리`; `The Body Shop`, `더바디샵` or `바디샵`).
fn latin_readings(word: &str) -> Vec<Vec<Sound>> {
    let (without, with) = (fold(word, false), fold(word, true));
    let mut out = vec![latin_sounds_of(without.clone())];
    if with != without {
        out.push(latin_sounds_of(with));
    }
    // German `schw` may be said with a `v` (`Schwalbe`, `슈발베`) or, as English says it,
    // with a `w` (`Schweppes`, `슈웹스`).
    let german: Vec<char> = without
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let after_sch = i >= 3 && without.get(i - 3..i) == Some(&['s', 'c', 'h'][..]);
            if c == 'w' && after_sch { 'v' } else { c }
        })
        .collect();
    if german != without {
        out.push(latin_sounds_of(german));
    }
    // A `re` after a vowel and before a consonant may close a compound's first part, said
    // `-er` with a silent `e` (`Forerunner`, `포러너`; `Goretex`, `고어텍스`), as a second
    // reading: inside a word it as often begins a syllable (`Arena`, `아레나`).
    let vowel = |c: Option<&char>| c.is_some_and(|c| "aeiouy".contains(*c));
    let compound: Vec<char> = without
        .iter()
        .enumerate()
        .filter(|&(i, &c)| {
            !(c == 'e'
                && i >= 2
                && without.get(i - 1) == Some(&'r')
                && vowel(without.get(i - 2))
                && without
                    .get(i + 1)
                    .is_some_and(|n| n.is_ascii_alphabetic() && !vowel(Some(n))))
        })
        .map(|(_, &c)| c)
        .collect();
    if compound != without {
        out.push(latin_sounds_of(compound));
    }
    out
}

fn latin_sounds_of(letters: Vec<char>) -> Vec<Sound> {
    let at = |i: usize| letters.get(i).copied();
    let vowel = |c: Option<char>| c.is_some_and(|c| "aeiouy".contains(c));
    let soft = |c: Option<char>| c.is_some_and(|c| "eiy".contains(c));
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(c) = at(i) {
        let next = at(i + 1);
        let (sound, used) = match (c, next) {
            ('p', Some('h')) => (Some(Sound::F), 2),
            ('t', Some('h')) => (Some(Sound::DentalOrSibilant), 2),
            ('s', Some('c')) if at(i + 2) == Some('h') => (Some(Sound::Sh), 3),
            ('s', Some('h')) => (Some(Sound::Sh), 2),
            ('s', Some('s')) if at(i + 2) == Some('h') => (None, 1),
            ('s', Some('i' | 'y')) => (Some(Sound::Sh), 1),
            // `tch` is one `ch` (`Watch`, `워치`; `Swatch`, `스와치`).
            ('t', Some('c')) if at(i + 2) == Some('h') => (Some(Sound::Ch), 3),
            ('c', Some('h')) => (Some(Sound::Ch), 2),
            ('c', Some('k')) => (Some(Sound::Velar), 2),
            ('c', Some('c')) if soft(at(i + 2)) => (Some(Sound::Ch), 2),
            ('q', Some('u')) => (Some(Sound::Velar), 2),
            // `ts` before a vowel or at the end is one sound (`Ritz`, `Tsum`); before a
            // consonant it ends a part and starts the next (`Jetstream`, `제트스트림`).
            ('t', Some('s' | 'z')) if at(i + 2).is_none_or(|c| vowel(Some(c))) => {
                (Some(Sound::Affricate), 2)
            }
            // `oo` is Korean's `우` (`Google`, `구글`; `Hankook`, `한국`).
            ('o', Some('o')) => (Some(Sound::Vowel(4)), 2),
            ('g', Some('h')) => (None, 2),
            ('n', Some('g')) if !vowel(at(i + 2)) => (Some(Sound::Alveolar), 2),
            ('c', Some('i' | 'y')) => (Some(Sound::Sh), 1),
            ('c', n) if soft(n) => (Some(Sound::Sibilant), 1),
            ('g', n) if soft(n) => (Some(Sound::SoftG), 1),
            // `Xiaomi` (`샤오미`), `Xylitol` (`자일리톨`), but `Xbox` (`엑스박스`).
            ('x', Some('i')) if i == 0 => (Some(Sound::Sh), 1),
            ('x', n) if i == 0 && vowel(n) => (Some(Sound::SibilantOrAffricate), 1),
            // `xx` is one `x` (`KIXX`, `킥스`).
            ('x', _) => {
                out.push(Sound::Velar);
                (Some(Sound::Sibilant), if next == Some('x') { 2 } else { 1 })
            }
            ('f', _) => (Some(Sound::F), 1),
            ('b' | 'p' | 'v', _) => (Some(Sound::Labial), 1),
            // A final `t` is often silent (`Millet`, `밀레`; `Tissot`, `티쏘`).
            ('t', None) if i > 0 && vowel(at(i - 1)) => (Some(Sound::SilentT), 1),
            ('d' | 't', _) => (Some(Sound::Dental), 1),
            ('c' | 'k' | 'g' | 'q', _) => (Some(Sound::Velar), 1),
            // A plural `s` after a consonant (`AirPods`, `에어팟`).
            ('s', None) if i > 0 && !vowel(at(i - 1)) => (Some(Sound::PluralS), 1),
            ('s', _) => (Some(Sound::Sibilant), 1),
            ('z', _) => (Some(Sound::SibilantOrAffricate), 1),
            ('j', _) => (Some(Sound::Affricate), 1),
            ('l', _) => (Some(Sound::Liquid), 1),
            ('r', n) if !vowel(n) && i > 0 => (Some(Sound::WeakR), 1),
            // `re` closing a word after a vowel is said `-er` (`Claire`, `클레어`).
            ('r', Some('e')) if i > 0 && vowel(at(i - 1)) && at(i + 2).is_none() => {
                (Some(Sound::WeakR), 1)
            }

            ('r', _) => (Some(Sound::Liquid), 1),
            ('m', _) => (Some(Sound::Nasal), 1),
            ('n', _) => (Some(Sound::Alveolar), 1),
            ('h', _) => (Some(Sound::Aspirate), 1),
            ('a', _) => (Some(Sound::Vowel(0)), 1),
            // A final `e` is silent (`Gillette`) or Korean's own closing vowel.
            ('e', None) if i > 0 => (Some(Sound::Epenthetic), 1),
            ('e', _) => (Some(Sound::Vowel(1)), 1),
            ('i' | 'y', _) => (Some(Sound::Vowel(2)), 1),
            ('o', _) => (Some(Sound::Vowel(3)), 1),
            ('u' | 'w', _) => (Some(Sound::Vowel(4)), 1),
            _ => (None, 1),
        };
        out.extend(sound);
        i += used;
    }
    collapse(out)
}

/// Lowercase ASCII letters of a name, accents folded (`Nestlé` → `nestle`, `ß` → `ss`),
/// read the way Korean spells it: a possessive `'s` and a leading `The` are dropped
/// (`Kiehl's`, `키엘`; `The Body Shop`, `바디샵`), `Dr` is `doctor` (`닥터자르트`) and `&`
/// is `앤` (`Head & Shoulders`, `헤드앤숄더`).
fn fold(word: &str, keep_the: bool) -> Vec<char> {
    let lower: String = word
        .nfd()
        .flat_map(char::to_lowercase)
        .collect::<String>()
        .replace('&', " en ");
    let mut words: Vec<String> = Vec::new();
    for raw in lower.split(|c: char| c.is_whitespace() || c == '.' || c == '+') {
        let raw = raw
            .strip_suffix("'s")
            .or_else(|| raw.strip_suffix("\u{2019}s"))
            .unwrap_or(raw);
        words.push(raw.to_owned());
    }
    words.retain(|w| !w.is_empty());
    if words.len() > 1 && words.first().is_some_and(|w| w == "the") && !keep_the {
        words.remove(0);
    }
    let mut out = Vec::new();
    for w in &words {
        let w = if w == "dr" { "doctor" } else { w.as_str() };
        for c in w.chars() {
            match c {
                'a'..='z' => out.push(c),
                'ß' => out.extend(['s', 's']),
                'æ' => out.extend(['a', 'e']),
                'ø' => out.push('o'),
                'œ' => out.extend(['o', 'e']),
                _ => {}
            }
        }
    }
    out
}

/// Doubled sounds count once (`ll`, `질레`), and so does a vowel run (`oo`, `ea`).
fn collapse(sounds: Vec<Sound>) -> Vec<Sound> {
    let mut out: Vec<Sound> = Vec::with_capacity(sounds.len());
    for s in sounds {
        let same_as_last = out.last().is_some_and(|&last| {
            last == s
                || (matches!(last, Sound::Vowel(_)) && matches!(s, Sound::Vowel(_)))
                || (last.is_consonant()
                    && s.is_consonant()
                    && last.classes().iter().any(|c| s.classes().contains(c)))
        });
        if !same_as_last {
            out.push(s);
        }
    }
    out
}

/// The distance allowed to names with a single strong consonant.
const ONE_CONSONANT: f32 = 0.3;

/// The distance two sequences may have at a consonant count (see the module docs).
fn allowed(consonants: usize) -> f32 {
    match consonants {
        0 | 1 => -1.0,
        2 => 0.5,
        3 => 0.75,
        4 => 1.0,
        5 | 6 => 1.5,
        _ => 2.0,
    }
}

/// Cost of dropping the sound at `i` of `seq`: a consonant squeezed between two others is
/// often not written (`Nestlé`, `네슬레`), a vowel closing the word always is (`Bruno`,
/// `브루노`).
fn drop_cost_at(seq: &[Sound], i: usize) -> f32 {
    let Some(&sound) = seq.get(i) else {
        return 1.0;
    };
    let consonant_at =
        |k: Option<usize>| k.and_then(|k| seq.get(k)).is_some_and(|s| s.is_consonant());
    match sound {
        Sound::Vowel(q) if i + 1 == seq.len() && q != SCHWA => 0.6,
        Sound::Dental | Sound::Velar | Sound::Labial
            if consonant_at(i.checked_sub(1)) && consonant_at(Some(i + 1)) =>
        {
            0.6
        }
        _ => drop_cost(sound),
    }
}

/// Weighted edit distance between two sound sequences.
fn distance(a: &[Sound], b: &[Sound]) -> f32 {
    let mut previous: Vec<f32> = Vec::with_capacity(b.len() + 1);
    let mut acc = 0.0;
    previous.push(0.0);
    for j in 0..b.len() {
        acc += drop_cost_at(b, j);
        previous.push(acc);
    }
    for (i, &x) in a.iter().enumerate() {
        let drop_x_cost = drop_cost_at(a, i);
        let mut current = Vec::with_capacity(b.len() + 1);
        current.push(previous.first().copied().unwrap_or(0.0) + drop_x_cost);
        for (j, &y) in b.iter().enumerate() {
            let replace = previous.get(j).copied().unwrap_or(f32::MAX) + substitution_cost(x, y);
            let drop_x = previous.get(j + 1).copied().unwrap_or(f32::MAX) + drop_x_cost;
            let drop_y = current.get(j).copied().unwrap_or(f32::MAX) + drop_cost_at(b, j);
            current.push(replace.min(drop_x).min(drop_y));
        }
        previous = current;
    }
    previous.last().copied().unwrap_or(0.0)
}

/// The first consonant, skipping a weak `h`.
fn first_consonant(sounds: &[Sound]) -> Option<Sound> {
    sounds
        .iter()
        .copied()
        .find(|s| s.is_consonant() && *s != Sound::Aspirate)
}

/// Whether two sound sequences name the same word (see the module docs).
pub(super) fn sounds_match(a: &[Sound], b: &[Sound]) -> bool {
    let count = |s: &[Sound]| s.iter().filter(|s| s.is_consonant()).count();
    let strong = |s: &[Sound]| {
        s.iter()
            .filter(|s| {
                s.is_consonant()
                    && !matches!(
                        s,
                        Sound::Aspirate | Sound::WeakR | Sound::SilentT | Sound::PluralS
                    )
            })
            .count()
    };
    let strong_consonants = strong(a).min(strong(b));
    // One strong consonant (`헤라`, `Hera`; `코웨이`, `Coway`) is enough only when the
    // sounds agree all but exactly.
    let limit = if strong_consonants == 1 && a.len().min(b.len()) >= 2 {
        ONE_CONSONANT
    } else if strong_consonants == 1 {
        -1.0
    } else {
        allowed(count(a).max(count(b)))
    };
    if limit < 0.0 || strong_consonants == 0 {
        return false;
    }
    // The first consonants agree, an `h` included (`Fila`, `휠라`) or skipped (`Hermès`,
    // `에르메스`).
    let first = |s: &[Sound]| s.iter().copied().find(|s| s.is_consonant());
    let first_agrees = match (first(a), first(b)) {
        (Some(x), Some(y)) if substitution_cost(x, y) < 1.0 => true,
        _ => match (first_consonant(a), first_consonant(b)) {
            (Some(x), Some(y)) => substitution_cost(x, y) < 1.0,
            _ => false,
        },
    };
    first_agrees && distance(a, b) <= limit
}

/// Whether a Hangul word can be compared by sound at all: two syllables, or one with two
/// consonants (`밤`, `Baume`); a single open syllable (`라`) names nothing.
fn long_enough(hangul: &str) -> bool {
    let syllables = hangul.chars().filter(|c| jamo(*c).is_some()).count();
    let consonants = hangul_sounds(hangul)
        .iter()
        .filter(|s| s.is_consonant() && **s != Sound::Aspirate)
        .count();
    syllables >= 2 || consonants >= 2
}

/// The most letters of a Latin word Korean may spell letter by letter (`DJI`, `디제이아이`).
const MAX_SPELLED: usize = 5;

/// The Korean names of a Latin letter (`d` 디, `w` 더블유), the usual spellings first.
fn letter_names(c: char) -> &'static [&'static str] {
    match c {
        'a' => &["에이"],
        'b' => &["비"],
        'c' => &["씨", "시"],
        'd' => &["디"],
        'e' => &["이"],
        'f' => &["에프", "애프"],
        'g' => &["지", "쥐"],
        'h' => &["에이치", "에치"],
        'i' => &["아이"],
        'j' => &["제이"],
        'k' => &["케이"],
        'l' => &["엘"],
        'm' => &["엠"],
        'n' => &["엔"],
        'o' => &["오"],
        'p' => &["피"],
        'q' => &["큐"],
        'r' => &["알", "아르"],
        's' => &["에스"],
        't' => &["티"],
        'u' => &["유"],
        'v' => &["브이", "뷔"],
        'w' => &["더블유", "더블류"],
        'x' => &["엑스"],
        'y' => &["와이"],
        'z' => &["지", "제트", "젯"],
        _ => &[],
    }
}

/// The Hangul spellings of a short Latin word read letter by letter (`dji` → `디제이아이`,
/// `us` → `유에스`): an acronym Korean writes by its letters' names. Two to
/// [`MAX_SPELLED`] letters; none for a longer or other word.
fn spelled_by_letters(latin: &str) -> Vec<String> {
    let letters: Vec<char> = latin.chars().flat_map(char::to_lowercase).collect();
    if !(2..=MAX_SPELLED).contains(&letters.len()) || !letters.iter().all(char::is_ascii_lowercase)
    {
        return Vec::new();
    }
    let mut out = vec![String::new()];
    for c in letters {
        out = out
            .iter()
            .flat_map(|prefix| letter_names(c).iter().map(move |n| format!("{prefix}{n}")))
            .collect();
    }
    out
}

/// The Korean names of a digit as English says it (`1` 원, `2` 투), the way product names
/// spell a number glued to a word (`에어포스원`, Air Force 1).
fn digit_names(c: char) -> &'static [&'static str] {
    match c {
        '1' => &["원"],
        '2' => &["투"],
        '3' => &["쓰리"],
        '4' => &["포"],
        '5' => &["파이브"],
        '6' => &["식스"],
        '7' => &["세븐"],
        '8' => &["에잇", "에이트"],
        '9' => &["나인"],
        _ => &[],
    }
}

/// The most characters of a short mark spelled in Hangul after the word before it
/// (`박카스디`, `에어포스원`, `프로브이원`).
const MAX_SPELLED_MARK: usize = 3;

/// The Hangul spellings of a short mark of letters and digits (`d` 디, `1` 원, `v1`
/// 브이원): letters by their names, digits as English says them.
pub(super) fn spelled_mark(key: &str) -> Vec<String> {
    let chars: Vec<char> = key.chars().collect();
    if chars.is_empty()
        || chars.len() > MAX_SPELLED_MARK
        || !chars
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    {
        return Vec::new();
    }
    let mut out = vec![String::new()];
    for c in chars {
        let names = if c.is_ascii_digit() {
            digit_names(c)
        } else {
            letter_names(c)
        };
        out = out
            .iter()
            .flat_map(|prefix| names.iter().map(move |n| format!("{prefix}{n}")))
            .collect();
    }
    out.retain(|s| !s.is_empty());
    out
}

/// Whether a Hangul spelling and a Latin one name the same word.
pub(super) fn same_name(hangul: &str, latin: &str) -> bool {
    let wanted = hangul_sounds(hangul);
    if spelled_by_letters(latin).iter().any(|s| s == hangul) {
        return true;
    }
    long_enough(hangul)
        && latin_readings(latin)
            .iter()
            .any(|reading| sounds_match(&wanted, reading))
}

/// Where a card spells a Hangul key in Latin letters: the spans of the first run of up
/// to [`MAX_WORDS`] consecutive Latin words that sounds like it (shortest run first).
pub(super) fn latin_spans(card: &Text, key: &str) -> Vec<Span> {
    if !is_hangul_word(key) || !long_enough(key) {
        return Vec::new();
    }
    // `앤` inside a name is `&`, which normalisation drops from the card (`캣앤키튼`,
    // `Cat & Kitten`).
    let without_and = key.replace('앤', "");
    let mut wanted = vec![hangul_sounds(key)];
    if without_and != key && without_and.chars().count() >= 2 {
        wanted.push(hangul_sounds(&without_and));
    }
    let spans = card.word_spans();
    for len in 1..=MAX_WORDS {
        for start in 0..card.words.len() {
            let Some(run) = card.words.get(start..start + len) else {
                break;
            };
            // A hyphen joins the parts of one name (`Capri-Sun`), and so does a `+` or `&`
            // between two of its words (`Bausch+Lomb`).
            let joiner = |w: &String| w == "+" || w == "&";
            let inner = run.get(1..len.saturating_sub(1)).unwrap_or_default();
            let latin = |w: &String| is_latin_word(&w.replace('-', ""));
            if !run.first().is_some_and(latin)
                || !run.last().is_some_and(latin)
                || !inner.iter().all(|w| latin(w) || joiner(w))
            {
                continue;
            }
            let joined: String = run
                .iter()
                .filter(|w| !joiner(w))
                .map(|w| w.replace('-', ""))
                .collect();
            let readings = latin_readings(&joined);
            let by_letters = len == 1 && spelled_by_letters(&joined).iter().any(|s| s == key);
            if by_letters
                || wanted
                    .iter()
                    .any(|w| readings.iter().any(|r| sounds_match(w, r)))
            {
                return spans
                    .get(start..start + len)
                    .map(<[Span]>::to_vec)
                    .unwrap_or_default();
            }
        }
    }
    Vec::new()
}

/// Where a card spells a Latin key in Hangul: the span of the first (longest) run of
/// syllables inside a Hangul card word that sounds like it (`royal` in `로얄캐닌`).
pub(super) fn hangul_spans(card: &Text, key: &str) -> Vec<Span> {
    if !is_latin_word(key) {
        return Vec::new();
    }
    let wanted = latin_sounds(key);
    let spans = card.word_spans();
    let spelled = spelled_by_letters(key);
    for (word, &(start, _)) in card.words.iter().zip(&spans) {
        if !is_hangul_word(word) {
            continue;
        }
        // An acronym written by its letters' names, at the start or the end of the word
        // (`유에스오픈` for `US 오픈`, `디제이아이`).
        if let Some(s) = spelled
            .iter()
            .find(|s| word.starts_with(s.as_str()) || word.ends_with(s.as_str()))
        {
            let at = if word.starts_with(s.as_str()) {
                0
            } else {
                word.len() - s.len()
            };
            return vec![(start + at, start + at + s.len())];
        }
        let offsets: Vec<usize> = word
            .char_indices()
            .map(|(i, _)| i)
            .chain(std::iter::once(word.len()))
            .collect();
        let syllables = offsets.len() - 1;
        for len in (2..=syllables).rev() {
            for from in 0..=syllables - len {
                let (Some(&a), Some(&b)) = (offsets.get(from), offsets.get(from + len)) else {
                    continue;
                };
                let part = word.get(a..b).unwrap_or("");
                if sounds_match(&hangul_sounds(part), &wanted) {
                    return vec![(start + a, start + b)];
                }
            }
        }
    }
    Vec::new()
}

/// Whether a word is written in Hangul syllables only.
pub(super) fn is_hangul_word(word: &str) -> bool {
    !word.is_empty() && word.chars().all(is_hangul)
}

/// Whether a word is written in Latin letters only (accents allowed).
pub(super) fn is_latin_word(word: &str) -> bool {
    !word.is_empty() && word.chars().all(|c| c.is_alphabetic() && !is_hangul(c))
}

#[cfg(test)]
mod tests {
    use super::same_name;

    #[test]
    fn loanword_spellings_match() {
        let pairs = [
            ("필립스", "philips"),
            ("질레트", "gillette"),
            ("네슬레", "nestlé"),
            ("스프라이트", "sprite"),
            ("로얄캐닌", "royalcanin"),
            ("라바짜", "lavazza"),
            ("네스카페", "nescafe"),
            ("써모스", "thermos"),
            ("버버리", "burberry"),
            ("슈바르츠코프", "schwarzkopf"),
            ("인도어", "indoor"),
            ("에르메스", "hermes"),
            ("뉴발란스", "newbalance"),
            ("켈로그", "kelloggs"),
            ("브라운", "braun"),
            ("워치", "watch"),
            ("포러너", "forerunner"),
            ("고어텍스", "goretex"),
            ("아레나", "arena"),
        ];
        for (hangul, latin) in pairs {
            assert!(same_name(hangul, latin), "{hangul} ~ {latin}");
        }
    }

    #[test]
    fn other_names_do_not() {
        let pairs = [
            ("필립스", "pilot"),
            ("네스카페", "nespresso"),
            ("브라운", "bruno"),
            ("로얄캐닌", "orijen"),
            ("보쉬", "puma"),
            ("캣", "dog"),
            ("라", "la"),
        ];
        for (hangul, latin) in pairs {
            assert!(!same_name(hangul, latin), "{hangul} !~ {latin}");
        }
    }

    #[test]
    fn acronyms_spelled_by_letter_names() {
        for (hangul, latin) in [("디제이아이", "DJI"), ("엘지", "LG"), ("비엠더블유", "bmw")]
        {
            assert!(same_name(hangul, latin), "{hangul} ~ {latin}");
        }
        for (hangul, latin) in [("디제이", "DJI"), ("엘지", "LS"), ("이", "e")] {
            assert!(!same_name(hangul, latin), "{hangul} !~ {latin}");
        }
    }
}
