//! The same-product judge's vocabulary (`docs/vocabulary.md` is its reference): the word
//! lists a buyer's judgement rests on, as data an operator can fix without a rebuild.
//!
//! - [`parse`] reads a vocabulary file (TOML, `format = 1`) into the wire message
//!   [`pb::Vocabulary`] the coordinator sends to nodes in `Welcome`; a site profile's
//!   `[vocabulary]` table ([`parse_additions`]) is the same shape without `format` and adds
//!   words for its mall.
//! - [`Lexicon::compile`] turns a vocabulary plus a profile's additions into the lookups the
//!   judge uses: every word normalised once, units indexed, the quantity-word pattern built.
//!   Compiling *is* the validation: the coordinator compiles the file and every profile's
//!   additions at start-up, so an entry the judge could not use (empty after normalisation,
//!   a unit word with a digit, a unit in two dimensions, a variant kind without a rule, a
//!   value without a spelling) stops it with `vocabulary FILE: FIELD: reason`
//!   (`variants[1].values[3]`).
//! - [`BUILTIN`] is `profiles/vocabulary.toml`, compiled in; [`load`] reads a replacement
//!   file (`LPS_VOCABULARY_FILE`) instead.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    path::Path,
    sync::{Arc, LazyLock},
};

use lps_proto::pb::{self, unit_word::Dimension, variant_kind::WhenSilent};
use regex::Regex;
use serde::Deserialize;

use crate::normalize::{is_hangul, normalize};

/// The format this module reads (`format = 1`).
pub const FORMAT_VERSION: u32 = 1;

/// The built-in vocabulary (`profiles/vocabulary.toml`).
pub const BUILTIN: &str = include_str!("../vocabulary.toml");

/// The name errors in [`BUILTIN`] are reported under.
const BUILTIN_NAME: &str = "builtin:vocabulary.toml";

/// A vocabulary entry that cannot be used, named by file and field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("vocabulary {file}: {field}: {reason}")]
pub struct VocabularyError {
    pub file: String,
    pub field: String,
    pub reason: String,
}

// ---------------------------------------------------------------- the file, as written

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Words {
    #[serde(default)]
    stopwords: Vec<String>,
    #[serde(default)]
    accessories: Vec<String>,
    #[serde(default)]
    gifts: Vec<String>,
    #[serde(default)]
    assortments: Vec<String>,
    #[serde(default)]
    assortment_counters: Vec<String>,
    #[serde(default)]
    aliases: Vec<Vec<String>>,
    #[serde(default)]
    brands: Vec<String>,
    #[serde(default)]
    descriptors: Vec<String>,
    #[serde(default)]
    compatibility: Vec<String>,
    #[serde(default)]
    ordinals: Vec<String>,
    #[serde(default)]
    remove: Option<RemovalsFile>,
    #[serde(default)]
    units: UnitsFile,
    #[serde(default)]
    variants: Vec<KindFile>,
}

/// Built-in words a profile removes for its mall (`[vocabulary.remove]`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RemovalsFile {
    #[serde(default)]
    stopwords: Vec<String>,
    #[serde(default)]
    accessories: Vec<String>,
    #[serde(default)]
    gifts: Vec<String>,
    #[serde(default)]
    assortments: Vec<String>,
    #[serde(default)]
    brands: Vec<String>,
    #[serde(default)]
    descriptors: Vec<String>,
    #[serde(default)]
    compatibility: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VocabularyFile {
    format: u32,
    #[serde(flatten)]
    words: Words,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct UnitsFile {
    /// Unit word → millilitres.
    #[serde(default)]
    volume: BTreeMap<String, f64>,
    /// Unit word → grams.
    #[serde(default)]
    weight: BTreeMap<String, f64>,
    /// Unit word → gigabytes.
    #[serde(default)]
    data: BTreeMap<String, f64>,
    #[serde(default)]
    count: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KindFile {
    name: String,
    #[serde(default)]
    when_silent: Option<String>,
    #[serde(default)]
    plain: Vec<String>,
    /// Each value: its spellings, the first being its name.
    #[serde(default)]
    values: Vec<Vec<String>>,
}

/// Reads a vocabulary file (`name` is used in errors). The result is validated: it
/// compiles into a [`Lexicon`].
///
/// # Errors
/// A [`VocabularyError`] naming the field: TOML syntax, an unknown key, a wrong `format`,
/// or an entry [`Lexicon::compile`] refuses.
pub fn parse(name: &str, text: &str) -> Result<pb::Vocabulary, VocabularyError> {
    let file: VocabularyFile = toml::from_str(text).map_err(|e| toml_error(name, "", &e))?;
    if file.format != FORMAT_VERSION {
        return Err(error(
            name,
            "format",
            format!(
                "is {}, this coordinator reads format {FORMAT_VERSION}",
                file.format
            ),
        ));
    }
    if file.words.remove.is_some() {
        return Err(error(
            name,
            "remove",
            "is only for a site profile's [vocabulary] (the base vocabulary is edited instead)",
        ));
    }
    let wire = to_wire(name, "", file.words)?;
    Lexicon::compile_named(name, &wire, None)?;
    Ok(wire)
}

/// Reads a site profile's `[vocabulary]` table (`prefix` names it in errors, e.g.
/// `vocabulary`). It is validated against the built-in vocabulary when the profile is
/// compiled with its coordinator's vocabulary ([`Lexicon::compile`]).
///
/// # Errors
/// A [`VocabularyError`] naming the field.
pub fn parse_additions(
    name: &str,
    prefix: &str,
    table: toml::Value,
) -> Result<pb::Vocabulary, VocabularyError> {
    let words: Words = table
        .try_into()
        .map_err(|e: toml::de::Error| toml_error(name, prefix, &e))?;
    to_wire(name, prefix, words)
}

/// The built-in vocabulary, or the file at `path` instead.
///
/// # Errors
/// A [`VocabularyError`] when the file cannot be read or used.
pub fn load(path: Option<&Path>) -> Result<pb::Vocabulary, VocabularyError> {
    match path {
        None => parse(BUILTIN_NAME, BUILTIN),
        Some(path) => {
            let name = path.display().to_string();
            let text = std::fs::read_to_string(path)
                .map_err(|e| error(&name, "(file)", format!("cannot be read: {e}")))?;
            parse(&name, &text)
        }
    }
}

fn toml_error(name: &str, prefix: &str, err: &toml::de::Error) -> VocabularyError {
    let msg = err.message().replace('\n', " ");
    let key = msg.split('`').nth(1).filter(|f| !f.is_empty());
    let field = match (prefix, key) {
        ("", Some(key)) => key.to_owned(),
        ("", None) => "(syntax)".to_owned(),
        (prefix, Some(key)) => format!("{prefix}.{key}"),
        (prefix, None) => prefix.to_owned(),
    };
    error(name, &field, msg)
}

fn error(file: &str, field: &str, reason: impl Into<String>) -> VocabularyError {
    VocabularyError {
        file: file.to_owned(),
        field: field.to_owned(),
        reason: reason.into(),
    }
}

fn to_wire(name: &str, prefix: &str, words: Words) -> Result<pb::Vocabulary, VocabularyError> {
    let at = |field: String| {
        if prefix.is_empty() {
            field
        } else {
            format!("{prefix}.{field}")
        }
    };
    let mut units = Vec::new();
    for (dimension, table, field) in [
        (Dimension::Volume, &words.units.volume, "units.volume"),
        (Dimension::Weight, &words.units.weight, "units.weight"),
        (Dimension::Data, &words.units.data, "units.data"),
    ] {
        for (word, &factor) in table {
            let milli = factor * 1000.0;
            if !(milli.is_finite() && (1.0..=1e15).contains(&milli) && milli.fract() == 0.0) {
                return Err(error(
                    name,
                    &at(format!("{field}.{word}")),
                    format!(
                        "{factor} is not a size this judge can hold (a positive multiple of 0.001 of the base unit)"
                    ),
                ));
            }
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "checked above: a positive whole number below 1e15"
            )]
            units.push(pb::UnitWord {
                word: word.clone(),
                dimension: dimension.into(),
                milli_base: milli as u64,
            });
        }
    }
    units.extend(words.units.count.into_iter().map(|word| pb::UnitWord {
        word,
        dimension: Dimension::Count.into(),
        milli_base: 0,
    }));
    let mut variants = Vec::with_capacity(words.variants.len());
    for (i, kind) in words.variants.into_iter().enumerate() {
        let when_silent = match kind.when_silent.as_deref() {
            None => WhenSilent::Unspecified,
            Some("plain") => WhenSilent::Plain,
            Some("any") => WhenSilent::Any,
            Some(other) => {
                return Err(error(
                    name,
                    &at(format!("variants[{i}].when_silent")),
                    format!("is {other:?}, expected \"plain\" or \"any\""),
                ));
            }
        };
        let mut values = Vec::with_capacity(kind.values.len());
        for (j, forms) in kind.values.into_iter().enumerate() {
            let Some(first) = forms.first() else {
                return Err(error(
                    name,
                    &at(format!("variants[{i}].values[{j}]")),
                    "has no spelling",
                ));
            };
            values.push(pb::VariantValue {
                name: first.clone(),
                forms,
            });
        }
        variants.push(pb::VariantKind {
            name: kind.name,
            when_silent: when_silent.into(),
            plain: kind.plain,
            values,
        });
    }
    Ok(pb::Vocabulary {
        stopwords: words.stopwords,
        accessories: words.accessories,
        gifts: words.gifts,
        assortments: words.assortments,
        assortment_counters: words.assortment_counters,
        aliases: words
            .aliases
            .into_iter()
            .map(|forms| pb::AliasGroup { forms })
            .collect(),
        variants,
        units,
        brands: words.brands,
        descriptors: words.descriptors,
        compatibility: words.compatibility,
        ordinals: words.ordinals,
        remove: words.remove.map(|r| pb::VocabularyRemovals {
            stopwords: r.stopwords,
            accessories: r.accessories,
            gifts: r.gifts,
            assortments: r.assortments,
            brands: r.brands,
            descriptors: r.descriptors,
            compatibility: r.compatibility,
        }),
    })
}

// ---------------------------------------------------------------- compiled

/// One spelling, normalised: what the judge looks for in a title.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Form {
    /// Normalised, without spaces and hyphens (`usbc`, `매운맛`, `택1`).
    pub key: String,
    /// Only ASCII letters and digits: matched on whole pieces of a code, never inside one.
    pub latin: bool,
}

/// What a unit word measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnitKind {
    /// Thousandths of a millilitre per unit.
    Volume(u64),
    /// Thousandths of a gram per unit.
    Weight(u64),
    /// Thousandths of a gigabyte per unit.
    Data(u64),
    /// One of something.
    Count,
}

/// The rule of a variant kind when the query names none of its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Silent {
    /// Only the plain product: a card naming a value is another product.
    Plain,
    /// Any value is the product.
    Any,
}

/// One value of a variant kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    pub name: String,
    pub forms: Vec<Form>,
}

/// One kind of variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kind {
    pub name: String,
    pub silent: Silent,
    /// Words that name the plain product.
    pub plain: Vec<Form>,
    pub values: Vec<Value>,
}

/// A vocabulary compiled for the judge (see the module docs).
#[derive(Debug, Clone)]
pub struct Lexicon {
    stopwords: HashSet<String>,
    pub accessories: Vec<Form>,
    pub gifts: Vec<Form>,
    pub assortments: Vec<Form>,
    /// Brand names; a brand's other spellings are its aliases.
    pub brands: Vec<Form>,
    /// Words that describe without changing what is sold (never a line word).
    descriptors: HashSet<String>,
    /// Accessory words that say what an item works with.
    compatibility: HashSet<String>,
    /// Words that make a number a grade or an edition (`단계`).
    ordinals: HashSet<String>,
    assortment_counters: HashSet<String>,
    /// Alias key → its group's keys (every spelling, itself included).
    aliases: HashMap<String, Arc<[String]>>,
    pub kinds: Vec<Kind>,
    units: HashMap<String, UnitKind>,
    /// Latin words made only of numbers, latin unit words and `x` marks.
    quantity_word: Regex,
}

static BUILTIN_WIRE: LazyLock<pb::Vocabulary> = LazyLock::new(|| {
    parse(BUILTIN_NAME, BUILTIN)
        .unwrap_or_else(|e| panic!("the built-in vocabulary is invalid: {e}"))
});

static BUILTIN_LEXICON: LazyLock<Arc<Lexicon>> = LazyLock::new(|| {
    Arc::new(
        Lexicon::compile_named(BUILTIN_NAME, &BUILTIN_WIRE, None)
            .unwrap_or_else(|e| panic!("the built-in vocabulary is invalid: {e}")),
    )
});

impl Lexicon {
    /// The built-in vocabulary as sent on the wire.
    #[must_use]
    pub fn builtin_wire() -> pb::Vocabulary {
        BUILTIN_WIRE.clone()
    }

    /// The built-in vocabulary, compiled once per process.
    #[must_use]
    pub fn builtin() -> Arc<Self> {
        BUILTIN_LEXICON.clone()
    }

    /// Compiles `base` with a profile's `additions` (see the module docs).
    ///
    /// # Errors
    /// A [`VocabularyError`] naming the entry that cannot be used (`file` is `base` for
    /// the coordinator's vocabulary, `additions` for the profile's).
    pub fn compile(
        base: &pb::Vocabulary,
        additions: Option<&pb::Vocabulary>,
    ) -> Result<Self, VocabularyError> {
        Self::compile_named("vocabulary", base, additions)
    }

    fn compile_named(
        name: &str,
        base: &pb::Vocabulary,
        additions: Option<&pb::Vocabulary>,
    ) -> Result<Self, VocabularyError> {
        let mut lexicon = Self {
            stopwords: HashSet::new(),
            accessories: Vec::new(),
            gifts: Vec::new(),
            assortments: Vec::new(),
            brands: Vec::new(),
            descriptors: HashSet::new(),
            compatibility: HashSet::new(),
            ordinals: HashSet::new(),
            assortment_counters: HashSet::new(),
            aliases: HashMap::new(),
            kinds: Vec::new(),
            units: HashMap::new(),
            quantity_word: Regex::new("^$").unwrap_or_else(|_| unreachable!("valid regex")),
        };
        lexicon.add(name, "", base)?;
        if let Some(additions) = additions {
            lexicon.add(name, "vocabulary.", additions)?;
            if let Some(remove) = &additions.remove {
                lexicon.remove(name, remove)?;
            }
        }
        lexicon.quantity_word = quantity_word(lexicon.units.keys());
        Ok(lexicon)
    }

    fn add(&mut self, file: &str, prefix: &str, v: &pb::Vocabulary) -> Result<(), VocabularyError> {
        let err = |field: String, reason: &str| error(file, &format!("{prefix}{field}"), reason);
        let form = |field: String, text: &str| {
            to_form(text).ok_or_else(|| err(field, "is empty after normalisation"))
        };
        // Word sets: every entry one normalised key.
        for (list, field, target) in [
            (&v.stopwords, "stopwords", &mut self.stopwords),
            (&v.descriptors, "descriptors", &mut self.descriptors),
            (&v.compatibility, "compatibility", &mut self.compatibility),
        ] {
            for (i, w) in list.iter().enumerate() {
                target.insert(form(format!("{field}[{i}]"), w)?.key);
            }
        }
        for (list, field, target) in [
            (&v.accessories, "accessories", &mut self.accessories),
            (&v.gifts, "gifts", &mut self.gifts),
            (&v.assortments, "assortments", &mut self.assortments),
            (&v.brands, "brands", &mut self.brands),
        ] {
            for (i, w) in list.iter().enumerate() {
                let f = form(format!("{field}[{i}]"), w)?;
                if !target.contains(&f) {
                    target.push(f);
                }
            }
        }
        for (i, w) in v.ordinals.iter().enumerate() {
            let f = form(format!("ordinals[{i}]"), w)?;
            if !f.key.chars().all(is_hangul) {
                return Err(err(format!("ordinals[{i}]"), "must be a Hangul word"));
            }
            self.ordinals.insert(f.key);
        }
        for (i, w) in v.assortment_counters.iter().enumerate() {
            let f = form(format!("assortment_counters[{i}]"), w)?;
            if f.key.chars().any(|c| c.is_ascii_digit()) {
                return Err(err(
                    format!("assortment_counters[{i}]"),
                    "must be a word without digits",
                ));
            }
            self.assortment_counters.insert(f.key);
        }
        for (i, group) in v.aliases.iter().enumerate() {
            if group.forms.len() < 2 {
                return Err(err(format!("aliases[{i}]"), "needs at least two spellings"));
            }
            let mut keys: Vec<String> = Vec::new();
            for (j, w) in group.forms.iter().enumerate() {
                let f = form(format!("aliases[{i}][{j}]"), w)?;
                // A spelling already in a group joins the two groups.
                if let Some(existing) = self.aliases.get(&f.key) {
                    keys.extend(existing.iter().cloned());
                }
                keys.push(f.key);
            }
            keys.sort();
            keys.dedup();
            let shared: Arc<[String]> = keys.clone().into();
            for k in keys {
                self.aliases.insert(k, shared.clone());
            }
        }
        for (i, kind) in v.variants.iter().enumerate() {
            let at = |field: &str| format!("variants[{i}]{field}");
            let name = kind.name.trim();
            if name.is_empty() {
                return Err(err(at(".name"), "is empty"));
            }
            let silent = match kind.when_silent() {
                WhenSilent::Plain => Some(Silent::Plain),
                WhenSilent::Any => Some(Silent::Any),
                WhenSilent::Unspecified => None,
            };
            let index = match self.kinds.iter().position(|k| k.name == name) {
                Some(index) => {
                    if silent.is_some_and(|s| s != self.kinds[index].silent) {
                        return Err(err(
                            at(".when_silent"),
                            "differs from the kind's rule in the base vocabulary",
                        ));
                    }
                    index
                }
                None => {
                    let Some(silent) = silent else {
                        return Err(err(
                            at(".when_silent"),
                            "is required for a new kind (\"plain\" or \"any\")",
                        ));
                    };
                    self.kinds.push(Kind {
                        name: name.to_owned(),
                        silent,
                        plain: Vec::new(),
                        values: Vec::new(),
                    });
                    self.kinds.len() - 1
                }
            };
            let mut plain = Vec::new();
            for (j, w) in kind.plain.iter().enumerate() {
                plain.push(form(at(&format!(".plain[{j}]")), w)?);
            }
            let mut values = Vec::new();
            for (j, value) in kind.values.iter().enumerate() {
                if value.forms.is_empty() {
                    return Err(err(at(&format!(".values[{j}]")), "has no spelling"));
                }
                let mut forms = Vec::new();
                for (k, w) in value.forms.iter().enumerate() {
                    forms.push(form(at(&format!(".values[{j}][{k}]")), w)?);
                }
                let value_name = if value.name.trim().is_empty() {
                    value.forms[0].trim().to_owned()
                } else {
                    value.name.trim().to_owned()
                };
                values.push(Value {
                    name: value_name,
                    forms,
                });
            }
            let target = &mut self.kinds[index];
            target.plain.extend(plain);
            for value in values {
                match target.values.iter_mut().find(|v| v.name == value.name) {
                    Some(existing) => existing.forms.extend(value.forms),
                    None => target.values.push(value),
                }
            }
        }
        for (i, unit) in v.units.iter().enumerate() {
            let field = format!("units[{i}] ({:?})", unit.word);
            let normalized = normalize(&unit.word);
            if normalized.is_empty() || normalized.contains(' ') {
                return Err(err(field, "must be one word after normalisation"));
            }
            if normalized.chars().any(|c| c.is_ascii_digit()) {
                return Err(err(field, "must not hold a digit"));
            }
            let latin = normalized.chars().all(|c| c.is_ascii_alphabetic());
            let hangul = normalized.chars().all(is_hangul);
            if !(latin || hangul) {
                return Err(err(field, "must be all latin letters or all Hangul"));
            }
            if normalized == "x" {
                return Err(err(field, "\"x\" is the multiplication mark"));
            }
            let kind = match unit.dimension() {
                Dimension::Volume => UnitKind::Volume(unit.milli_base),
                Dimension::Weight => UnitKind::Weight(unit.milli_base),
                Dimension::Data => UnitKind::Data(unit.milli_base),
                Dimension::Count => UnitKind::Count,
                Dimension::Unspecified => return Err(err(field, "has no dimension")),
            };
            if matches!(
                kind,
                UnitKind::Volume(0) | UnitKind::Weight(0) | UnitKind::Data(0)
            ) {
                return Err(err(field, "has no size"));
            }
            if let Some(previous) = self.units.insert(normalized, kind)
                && previous != kind
            {
                return Err(err(field, "is already a unit of another size or dimension"));
            }
        }
        Ok(())
    }

    /// Takes a profile's removals out of the lists (`vocabulary.remove.LIST[i]` names a
    /// word that cannot be read; a word the list does not hold is no error: a newer base
    /// vocabulary may have dropped it already).
    fn remove(&mut self, file: &str, r: &pb::VocabularyRemovals) -> Result<(), VocabularyError> {
        let keys = |list: &[String], field: &str| -> Result<Vec<String>, VocabularyError> {
            list.iter()
                .enumerate()
                .map(|(i, w)| {
                    to_form(w).map(|f| f.key).ok_or_else(|| {
                        error(
                            file,
                            &format!("vocabulary.remove.{field}[{i}]"),
                            "is empty after normalisation",
                        )
                    })
                })
                .collect()
        };
        for key in keys(&r.stopwords, "stopwords")? {
            self.stopwords.remove(&key);
        }
        for key in keys(&r.descriptors, "descriptors")? {
            self.descriptors.remove(&key);
        }
        for key in keys(&r.compatibility, "compatibility")? {
            self.compatibility.remove(&key);
        }
        for (list, field, target) in [
            (&r.accessories, "accessories", &mut self.accessories),
            (&r.gifts, "gifts", &mut self.gifts),
            (&r.assortments, "assortments", &mut self.assortments),
            (&r.brands, "brands", &mut self.brands),
        ] {
            let gone = keys(list, field)?;
            target.retain(|f| !gone.contains(&f.key));
        }
        Ok(())
    }

    /// The stem of a Hangul word glued to a compatibility word (`닌텐도스위치호환` →
    /// `닌텐도스위치`), if it is one.
    #[must_use]
    pub fn compatibility_stem<'w>(&self, word: &'w str) -> Option<&'w str> {
        if !word.chars().all(is_hangul) {
            return None;
        }
        self.compatibility
            .iter()
            .filter(|c| c.chars().all(is_hangul))
            .find_map(|c| word.strip_suffix(c.as_str()))
            .filter(|stem| stem.chars().count() >= 2)
    }

    /// Whether a normalised word makes the number before it a grade (`단계`).
    #[must_use]
    pub fn is_ordinal(&self, key: &str) -> bool {
        self.ordinals.contains(key)
    }

    /// Whether a normalised accessory word says what an item works with (`호환`).
    #[must_use]
    pub fn is_compatibility(&self, key: &str) -> bool {
        self.compatibility.contains(key)
    }

    /// Whether a normalised word describes a product without changing what is sold.
    #[must_use]
    pub fn is_descriptor(&self, key: &str) -> bool {
        self.descriptors.contains(key)
    }

    /// Whether a normalised word (hyphens removed) is shop filler.
    #[must_use]
    pub fn is_stopword(&self, key: &str) -> bool {
        self.stopwords.contains(key)
    }

    /// Every spelling of `key`'s alias group (itself included); empty when it has none.
    #[must_use]
    pub fn aliases(&self, key: &str) -> &[String] {
        self.aliases.get(key).map_or(&[], |g| g)
    }

    /// The unit a normalised word is, if any.
    #[must_use]
    pub fn unit(&self, word: &str) -> Option<UnitKind> {
        self.units.get(word).copied()
    }

    /// Whether a normalised word counts kinds in an assortment (`종`).
    #[must_use]
    pub fn is_assortment_counter(&self, word: &str) -> bool {
        self.assortment_counters.contains(word)
    }

    /// Whether a latin word is made only of numbers, latin unit words and `x` marks
    /// (`2l`, `2lx12`, `x12`, `24pet`, `256gb`), or is a unit word on its own.
    #[must_use]
    pub fn is_quantity_word(&self, word: &str) -> bool {
        self.quantity_word.is_match(word)
    }
}

/// A spelling as the judge compares it; `None` when nothing is left.
#[must_use]
pub fn to_form(text: &str) -> Option<Form> {
    let key: String = normalize(text)
        .chars()
        .filter(|&c| c != ' ' && c != '-')
        .collect();
    if key.is_empty() {
        return None;
    }
    let latin = key.chars().all(|c| c.is_ascii_alphanumeric() || c == '.');
    Some(Form { key, latin })
}

/// The pattern of [`Lexicon::is_quantity_word`] over the latin unit words.
fn quantity_word<'a>(units: impl Iterator<Item = &'a String>) -> Regex {
    let mut latin: Vec<&str> = units
        .map(String::as_str)
        .filter(|u| u.chars().all(|c| c.is_ascii_alphabetic()))
        .collect();
    // Longest first, so `pcs` is tried before `pc` and `p`.
    latin.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    let alternation = if latin.is_empty() {
        // Matches nothing (the regex crate has no look-around).
        r"[^\s\S]".to_owned()
    } else {
        latin.join("|")
    };
    Regex::new(&format!(
        r"^(?:(?:[0-9]+(?:\.[0-9]+)?(?:{alternation})?|x)+|(?:{alternation})x?)$"
    ))
    .unwrap_or_else(|e| unreachable!("unit words are plain letters: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_vocabulary_compiles() {
        let lexicon = Lexicon::builtin();
        assert_eq!(lexicon.unit("ml"), Some(UnitKind::Volume(1_000)));
        assert_eq!(lexicon.unit("리터"), Some(UnitKind::Volume(1_000_000)));
        assert_eq!(lexicon.unit("pet"), Some(UnitKind::Count));
        assert_eq!(lexicon.unit("기가"), Some(UnitKind::Data(1_000)));
        assert!(lexicon.is_stopword("무료배송"));
        assert!(lexicon.aliases("코카콜라").contains(&"cocacola".to_owned()));
        assert!(lexicon.is_quantity_word("24pet"));
        assert!(lexicon.is_quantity_word("256gb"));
        assert!(!lexicon.is_quantity_word("s24"));
        for kind in [
            "flavour",
            "line",
            "colour",
            "connector",
            "generation",
            "form",
        ] {
            assert!(
                lexicon.kinds.iter().any(|k| k.name == kind),
                "kind {kind} missing"
            );
        }
        assert!(lexicon.is_assortment_counter("종"));
    }

    #[test]
    fn malformed_vocabularies_are_refused_naming_the_entry() {
        let cases = [
            ("format = 2\n", "format"),
            ("format = 1\nstopwords = [\"--\"]\n", "stopwords[0]"),
            ("format = 1\nwords = []\n", "words"),
            ("format = 1\naliases = [[\"코카콜라\"]]\n", "aliases[0]"),
            (
                "format = 1\n[units]\ncount = [\"12개\"]\n",
                "units[0] (\"12개\")",
            ),
            (
                "format = 1\n[units]\nvolume = { ml = 1 }\ncount = [\"ml\"]\n",
                "units[1] (\"ml\")",
            ),
            (
                "format = 1\n[units]\nvolume = { ml = 0 }\n",
                "units.volume.ml",
            ),
            (
                "format = 1\n[[variants]]\nname = \"flavour\"\nvalues = [[\"매운맛\"]]\n",
                "variants[0].when_silent",
            ),
            (
                "format = 1\n[[variants]]\nname = \"flavour\"\nwhen_silent = \"some\"\n",
                "variants[0].when_silent",
            ),
            (
                "format = 1\n[[variants]]\nname = \"flavour\"\nwhen_silent = \"plain\"\nvalues = [[]]\n",
                "variants[0].values[0]",
            ),
            (
                "format = 1\n[[variants]]\nname = \"flavour\"\nwhen_silent = \"plain\"\nvalues = [[\"맛\", \"!!\"]]\n",
                "variants[0].values[0][1]",
            ),
        ];
        for (text, field) in cases {
            match parse("v.toml", text) {
                Ok(v) => panic!("accepted {text:?}: {v:?}"),
                Err(e) => {
                    assert_eq!(e.file, "v.toml", "{e}");
                    assert_eq!(e.field, field, "{text:?}: {e}");
                    assert!(e.to_string().starts_with("vocabulary v.toml: "), "{e}");
                }
            }
        }
    }

    #[test]
    fn a_vocabulary_without_latin_units_compiles() {
        let wire = parse("v.toml", "format = 1\nstopwords = [\"정품\"]\n").unwrap();
        let lexicon = Lexicon::compile(&wire, None).unwrap();
        assert!(!lexicon.is_quantity_word("2l"));
        assert!(lexicon.is_quantity_word("x12"));
    }

    #[test]
    fn a_profile_adds_words_and_extends_kinds() {
        let base = parse(BUILTIN_NAME, BUILTIN).unwrap();
        let table: toml::Value = toml::from_str(
            "stopwords = [\"로켓와우\"]\naliases = [[\"삼다수\", \"samdasoo\"]]\n\
             [units]\ncount = [\"곽\"]\n\
             [[variants]]\nname = \"flavour\"\nvalues = [[\"흑임자\", \"black sesame\"]]\n",
        )
        .unwrap();
        let additions = parse_additions("p.toml", "vocabulary", table).unwrap();
        let lexicon = Lexicon::compile(&base, Some(&additions)).unwrap();
        assert!(lexicon.is_stopword("로켓와우"));
        assert!(lexicon.aliases("samdasoo").contains(&"삼다수".to_owned()));
        assert_eq!(lexicon.unit("곽"), Some(UnitKind::Count));
        let flavour = lexicon.kinds.iter().find(|k| k.name == "flavour").unwrap();
        assert!(flavour.values.iter().any(|v| v.name == "흑임자"));

        let bad: toml::Value = toml::from_str("unknown = 1\n").unwrap();
        let e = parse_additions("p.toml", "vocabulary", bad).unwrap_err();
        assert_eq!(e.field, "vocabulary.unknown", "{e}");

        // A profile narrows the built-in lists for its mall: `호환` is no accessory word
        // there, `대용량` no descriptor; a word the list lacks is no error.
        let table: toml::Value = toml::from_str(
            "descriptors = [\"사은\"]\n[remove]\naccessories = [\"호환\", \"없는말\"]\n\
             descriptors = [\"대용량\"]\n",
        )
        .unwrap();
        let narrowing = parse_additions("p.toml", "vocabulary", table).unwrap();
        let builtin = Lexicon::compile(&base, None).unwrap();
        assert!(builtin.accessories.iter().any(|f| f.key == "호환"));
        assert!(builtin.is_descriptor("대용량"));
        let narrowed = Lexicon::compile(&base, Some(&narrowing)).unwrap();
        assert!(!narrowed.accessories.iter().any(|f| f.key == "호환"));
        assert!(narrowed.accessories.iter().any(|f| f.key == "케이스"));
        assert!(!narrowed.is_descriptor("대용량"));
        assert!(narrowed.is_descriptor("사은"));
        let e = parse("v.toml", "format = 1\n[remove]\nstopwords = [\"정품\"]\n").unwrap_err();
        assert_eq!(e.field, "remove", "{e}");

        let empty = pb::Vocabulary {
            gifts: vec!["  ".into()],
            ..pb::Vocabulary::default()
        };
        let e = Lexicon::compile(&base, Some(&empty)).unwrap_err();
        assert_eq!(e.field, "vocabulary.gifts[0]", "{e}");
    }
}
