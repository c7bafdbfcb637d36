//! Result cards out of what a page holds, read with a [`CompiledProfile`]
//! (docs/site-profiles.md, "Card sources", "Fields", "Card classes").
//!
//! The input is a [`PageSnapshot`] — what the node's page script saw: each DOM source's
//! card elements (outer HTML), each embedded source's script text, every fetch/XHR body
//! recorded so far — or, for an `http_api` source, a JSON answer ([`extract_json`]). The
//! output is, per source, the real cards (a title and a price), how many matched items were
//! skeletons (`placeholders`: no title or price, no text) and how many had text but no title
//! or price (`unparsed`: the markup inside the card changed); then [`apply_classes`] sorts
//! the chosen cards into kept (with flags) and excluded (counted by class).
//!
//! Reading a field: its rules are tried in order and the first non-empty value wins; for a
//! number field (price, list price, coupon price) the first rule whose text holds a non-zero
//! amount wins (a `0원` is never a price). A rule reads its value (a constant, an element's
//! text or attribute, a JSON value), applies its regex (group 1, or the whole match; no
//! match is empty), and folds white space. JSON strings lose markup some APIs put in titles
//! (`<b>…</b>`, `&amp;`). Links are made absolute against the page URL.
//!
//! Everything here is pure and never panics: garbage markup reads as text, invalid JSON as
//! nothing.

mod dom;
mod json;
mod url;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashSet};

use lps_proto::model::{CardClass, ShippingStatus};
use scraper::ElementRef;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use self::url::resolve_url;
use crate::{
    compiled::{
        CompiledClass, CompiledFields, CompiledProfile, CompiledSource, DomRead, DomValue, Field,
        Policy, Read, Rule, SourceKind, TextField,
    },
    jsonpath,
    price::{ShippingFacts, pick_amount},
};

/// A card's whole text is clipped to this many characters (for the probe and the judge).
pub const CARD_TEXT_CHARS: usize = 300;

/// How many unparsed items of a source keep their rule reports when explaining.
pub const UNPARSED_REPORTS: usize = 3;

/// What one look at a result page gave (produced by the node's page script).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PageSnapshot {
    /// The page URL (the base of relative links).
    pub url: String,
    /// Per source index (the profile's order): the outer HTML of each element matching that
    /// DOM source's card selector, in page order (empty for other kinds).
    pub dom: Vec<Vec<String>>,
    /// Per source index: the text of the embedded source's script element (`None`: absent,
    /// or not that kind).
    pub scripts: Vec<Option<String>>,
    /// Every fetch/XHR response recorded so far, in arrival order.
    pub captured: Vec<CapturedResponse>,
}

impl PageSnapshot {
    /// What the page script would give for a whole HTML document (the probe's `--html`):
    /// each DOM source's cards and each embedded source's script; nothing captured.
    pub fn from_html(profile: &CompiledProfile, url: &str, html: &str) -> Self {
        dom::snapshot_of(profile, url, html)
    }
}

/// One recorded fetch/XHR response.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CapturedResponse {
    pub url: String,
    pub body: String,
}

/// One result card as read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Card {
    pub title: String,
    /// The sale price.
    pub price: u64,
    /// The struck-out list price, when shown.
    pub list_price: Option<u64>,
    /// A coupon/member/card price, when shown (see [`Card::price_to_pay`]).
    pub coupon_price: Option<u64>,
    /// The raw shipping text (a JSON number as its decimal text), for
    /// [`crate::price::evaluate_shipping`].
    pub shipping_text: Option<String>,
    /// The structured shipping parts, when the source reads them: the fee (0 = free), the
    /// order amount from which shipping is free, and the type code with what the profile's
    /// `shipping_types` says it means.
    pub shipping_fee: Option<u64>,
    pub shipping_threshold: Option<u64>,
    pub shipping_type: Option<(String, Option<ShippingStatus>)>,
    /// Absolute when resolvable against the page URL.
    pub link: String,
    pub seller: Option<String>,
    /// Every class the card matched, in [`CardClass::ALL`] order.
    pub classes: Vec<CardClass>,
    /// The card's whole text, clipped to [`CARD_TEXT_CHARS`].
    pub text: String,
    /// What identifies the card across the page's sources (`key`), when the source reads
    /// one; a link is made absolute.
    pub key: Option<String>,
    /// Rules that could not be read on this card, and why (`shipping[0] $.delivery: lands
    /// on an object, not a value`): the probe shows them; the next rule was tried.
    pub read_errors: Vec<String>,
    /// Every rule of every field the source reads, and how it fared — filled only when the
    /// profile explains its reading ([`CompiledProfile::explaining`], the probe).
    pub rules: Vec<RuleReport>,
    /// The card of another source it was joined with (`join`), and the fields it took
    /// from that card: those fields' values are the partner's, not its own rules'.
    pub joined: Option<Joined>,
}

/// A card's partner in a joined source ([`crate::compiled::Join`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// The partner's source index.
    pub source: usize,
    /// The key both cards read.
    pub key: String,
    /// The fields taken from the partner (a listed field the partner lacks is not).
    pub took: Vec<Field>,
}

/// How one rule of a field fared on one item (the probe shows them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleReport {
    pub field: Field,
    /// The rule's place in the field's list (`price[1]`).
    pub index: usize,
    pub outcome: RuleOutcome,
}

/// What one rule read on one item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleOutcome {
    /// Its value is the field's.
    Used(String),
    /// It read this, but the field took an earlier rule's value (or, for an amount field,
    /// the text holds no amount that counts).
    Unused(String),
    /// It read nothing, and why: `selector matched nothing`, `attribute "title" missing`,
    /// `path found nothing`, `regex matched nothing in "…"`, `empty`.
    Empty(String),
    /// Something is there that is no value (`$.delivery lands on an object, not a value`).
    Unreadable(String),
}

impl RuleOutcome {
    /// `used`, `unused`, `empty` or `unreadable`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Used(_) => "used",
            Self::Unused(_) => "unused",
            Self::Empty(_) => "empty",
            Self::Unreadable(_) => "unreadable",
        }
    }

    /// The value read, or why there is none.
    pub fn detail(&self) -> &str {
        match self {
            Self::Used(s) | Self::Unused(s) | Self::Empty(s) | Self::Unreadable(s) => s,
        }
    }
}

impl Card {
    /// The price a buyer pays: the sale price, or the coupon price when the profile accepts
    /// it (`accept_coupon_price`) and it is lower.
    pub fn price_to_pay(&self, accept_coupon_price: bool) -> u64 {
        match self.coupon_price {
            Some(coupon) if accept_coupon_price => coupon.min(self.price),
            _ => self.price,
        }
    }

    /// The card's shipping under `profile` for the offer's own `price`: its structured
    /// parts and its text ([`crate::price::evaluate_facts`]).
    pub fn shipping(&self, profile: &CompiledProfile, price: u64) -> crate::price::ShippingRead {
        crate::price::evaluate_facts(&self.shipping_facts(), price, profile.free_shipping_texts())
    }

    /// What the card says about shipping, for [`crate::price::evaluate_facts`].
    pub fn shipping_facts(&self) -> ShippingFacts<'_> {
        ShippingFacts {
            text: self.shipping_text.as_deref(),
            kind: self.shipping_type.as_ref().and_then(|(_, kind)| *kind),
            fee: self.shipping_fee,
            threshold: self.shipping_threshold,
        }
    }
}

/// What one card source gave on one page. `matched = cards + placeholders + unparsed`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceCards {
    pub source_index: usize,
    /// The source's `name`, or its kind's.
    pub source_name: String,
    /// Real cards (a title and a price), in page order, before the class policy.
    pub cards: Vec<Card>,
    /// Matched items without a title or a price and without text (skeletons).
    pub placeholders: u32,
    /// Matched items without a title or a price that do have text.
    pub unparsed: u32,
    /// The rule reports of the first [`UNPARSED_REPORTS`] unparsed items (why each has no
    /// title or price), when the profile explains its reading.
    pub unparsed_rules: Vec<Vec<RuleReport>>,
    /// Items the source matched at all (a captured item seen before is not counted again).
    pub matched: u32,
}

/// What every source gave on one page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageCards {
    /// Every source, in the profile's order.
    pub per_source: Vec<SourceCards>,
    /// Index into `per_source` of the first source with a real card.
    pub chosen: Option<usize>,
}

impl PageCards {
    /// The chosen source's cards, if any source had one.
    pub fn chosen_source(&self) -> Option<&SourceCards> {
        self.chosen.and_then(|i| self.per_source.get(i))
    }
}

/// Cards after the class policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Classified {
    /// Kept cards, each with its flagged classes (in [`CardClass::ALL`] order).
    pub kept: Vec<(Card, Vec<CardClass>)>,
    /// Excluded cards, counted by class name (a card under its first excluding class).
    pub excluded: BTreeMap<String, u32>,
}

/// Reads every source of `profile` on the page `snapshot` shows. An `http_api` source reads
/// nothing here (see [`extract_json`]).
pub fn extract_page(profile: &CompiledProfile, snapshot: &PageSnapshot) -> PageCards {
    let base = snapshot.url.as_str();
    let per_source: Vec<SourceCards> = profile
        .sources()
        .iter()
        .enumerate()
        .map(|(index, source)| {
            // Captured responses repeat (a refetch, a scroll re-requesting a page).
            let dedupe = matches!(source.kind, SourceKind::CapturedJson { .. });
            let mut tally = Tally::new(index, source, dedupe);
            match &source.kind {
                SourceKind::Dom { .. } => {
                    for outer_html in snapshot.dom.get(index).into_iter().flatten() {
                        let fragment = dom::Fragment::parse(outer_html);
                        if let Some(card) = fragment.card() {
                            tally.add(read_card(&DomItem { card, base }, source, profile));
                        }
                    }
                }
                SourceKind::EmbeddedJson { list, .. } => {
                    let script = snapshot.scripts.get(index).and_then(Option::as_deref);
                    if let Some(root) = script.and_then(json::parse_lenient) {
                        tally.add_items(list.select(&root), source, profile, base);
                    }
                }
                SourceKind::CapturedJson { url_pattern, list } => {
                    for response in &snapshot.captured {
                        if !url_pattern.is_match(&response.url) {
                            continue;
                        }
                        if let Some(root) = json::parse_lenient(&response.body) {
                            tally.add_items(list.select(&root), source, profile, base);
                        }
                    }
                }
                SourceKind::HttpApi { .. } => {}
            }
            tally.cards
        })
        .collect();
    let per_source = join_sources(profile, per_source);
    let chosen = per_source.iter().position(|s| !s.cards.is_empty());
    PageCards { per_source, chosen }
}

/// Applies every source's join ([`crate::compiled::Join`]): a card whose key a card of the
/// joined source shares takes the join's fields from that card where it has them, and
/// the classes of both. Cards without a partner stay as read.
fn join_sources(profile: &CompiledProfile, mut per_source: Vec<SourceCards>) -> Vec<SourceCards> {
    for (index, source) in profile.sources().iter().enumerate() {
        let Some(join) = &source.join else {
            continue;
        };
        let partners: std::collections::HashMap<String, Card> = per_source
            .get(join.source)
            .map(|other| {
                other
                    .cards
                    .iter()
                    .filter_map(|c| c.key.clone().map(|k| (k, c.clone())))
                    .collect()
            })
            .unwrap_or_default();
        if partners.is_empty() {
            continue;
        }
        let Some(mine) = per_source.get_mut(index) else {
            continue;
        };
        for card in &mut mine.cards {
            let Some(key) = card.key.clone() else {
                continue;
            };
            if let Some(other) = partners.get(&key) {
                let took = take_fields(card, other, &join.take);
                card.joined = Some(Joined {
                    source: join.source,
                    key,
                    took,
                });
            }
        }
    }
    per_source
}

/// Takes `take`'s fields from `other` where it has them; the fields taken.
fn take_fields(card: &mut Card, other: &Card, take: &[Field]) -> Vec<Field> {
    let mut took = Vec::new();
    for &field in take {
        match field {
            Field::Title => card.title.clone_from(&other.title),
            Field::Price => card.price = other.price,
            Field::ListPrice if other.list_price.is_some() => card.list_price = other.list_price,
            Field::CouponPrice if other.coupon_price.is_some() => {
                card.coupon_price = other.coupon_price;
            }
            Field::Shipping if other.shipping_text.is_some() => {
                card.shipping_text.clone_from(&other.shipping_text);
            }
            Field::ShippingFee if other.shipping_fee.is_some() => {
                card.shipping_fee = other.shipping_fee;
            }
            Field::ShippingThreshold if other.shipping_threshold.is_some() => {
                card.shipping_threshold = other.shipping_threshold;
            }
            Field::ShippingType if other.shipping_type.is_some() => {
                card.shipping_type.clone_from(&other.shipping_type);
            }
            Field::Link if !other.link.is_empty() => card.link.clone_from(&other.link),
            Field::Seller if other.seller.is_some() => card.seller.clone_from(&other.seller),
            _ => continue,
        }
        took.push(field);
    }
    card.classes.extend(other.classes.iter().copied());
    card.classes.sort_unstable();
    card.classes.dedup();
    took
}

/// Reads the JSON source `source_index` of `profile` on `body`, a JSON answer obtained
/// without a page (an `http_api` source; any JSON kind works). A DOM source, or an index
/// past the sources, reads nothing.
pub fn extract_json(
    profile: &CompiledProfile,
    source_index: usize,
    body: &Value,
    base_url: &str,
) -> SourceCards {
    let Some(source) = profile.sources().get(source_index) else {
        return SourceCards {
            source_index,
            ..Default::default()
        };
    };
    let mut tally = Tally::new(source_index, source, false);
    if let Some(list) = source.kind.list() {
        tally.add_items(list.select(body), source, profile, base_url);
    }
    tally.cards
}

/// Applies the profile's class policies to `cards`: a card of any excluding class is
/// left out (counted under its first such class in [`CardClass::ALL`] order); flagging
/// classes become the card's flags.
pub fn apply_classes(profile: &CompiledProfile, cards: Vec<Card>) -> Classified {
    let mut out = Classified::default();
    for card in cards {
        let mut classes = card.classes.clone();
        classes.sort_unstable();
        classes.dedup();
        let (excluding, flags): (Vec<CardClass>, Vec<CardClass>) = classes
            .into_iter()
            .partition(|&class| profile.policy(class) == Policy::Exclude);
        match excluding.first() {
            Some(class) => *out.excluded.entry(class.as_str().to_owned()).or_default() += 1,
            None => out.kept.push((card, flags)),
        }
    }
    out
}

/// How one matched item was read.
enum Outcome {
    Card(Box<Card>),
    /// No title or price, no text.
    Placeholder,
    /// No title or price, but text (and the rule reports, when explaining).
    Unparsed(Vec<RuleReport>),
}

/// Counts one source's items as they are read.
struct Tally {
    cards: SourceCards,
    /// Drop a card whose (link, title) was seen before (captured responses repeat).
    dedupe: bool,
    seen: HashSet<(String, String)>,
}

impl Tally {
    fn new(index: usize, source: &CompiledSource, dedupe: bool) -> Self {
        Self {
            cards: SourceCards {
                source_index: index,
                source_name: source.name.clone(),
                ..Default::default()
            },
            dedupe,
            seen: HashSet::new(),
        }
    }

    fn add(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Card(card) => {
                let card = *card;
                if self.dedupe && !self.seen.insert((card.link.clone(), card.title.clone())) {
                    return;
                }
                self.cards.cards.push(card);
            }
            Outcome::Placeholder => self.cards.placeholders += 1,
            Outcome::Unparsed(rules) => {
                self.cards.unparsed += 1;
                if !rules.is_empty() && self.cards.unparsed_rules.len() < UNPARSED_REPORTS {
                    self.cards.unparsed_rules.push(rules);
                }
            }
        }
        self.cards.matched += 1;
    }

    /// Adds the JSON items `selected` (values that are not objects are skipped).
    fn add_items(
        &mut self,
        selected: Vec<&Value>,
        source: &CompiledSource,
        profile: &CompiledProfile,
        base: &str,
    ) {
        for value in selected.into_iter().filter(|v| v.is_object()) {
            self.add(read_card(&JsonItem { value, base }, source, profile));
        }
    }
}

/// A matched item a card is read from.
trait Item {
    /// What `read` gives on this item, before a rule's regex ([`Miss::Nothing`]: nothing
    /// there, and why; [`Miss::Unreadable`]: something there that is no value, e.g. a JSON
    /// path landing on an object).
    fn read(&self, read: &Read) -> Result<String, Miss>;
    /// All of the item's text, unclipped.
    fn text(&self) -> String;
    /// All of the item's text with every element's text apart (DOM; see
    /// [`dom::separate_words`]); `None` when that is [`Item::text`].
    fn separate_words(&self) -> Option<String> {
        None
    }
    /// Whether one of the class's selectors or JSON matchers matches the item.
    fn matches(&self, class: &CompiledClass) -> bool;
    /// The page URL, for links.
    fn base(&self) -> &str;
}

/// A DOM card element.
struct DomItem<'a> {
    card: ElementRef<'a>,
    base: &'a str,
}

impl Item for DomItem<'_> {
    fn read(&self, read: &Read) -> Result<String, Miss> {
        let Read::Dom(DomRead { css, value }) = read else {
            return Err(Miss::Nothing("a JSON rule on a DOM card".into()));
        };
        let element = match css {
            None => self.card,
            Some(selector) => match dom::first_match(self.card, selector) {
                Some(element) => element,
                None => return Err(Miss::Nothing("selector matched nothing".into())),
            },
        };
        Ok(match value {
            DomValue::Attr(name) => {
                let Some(attr) = element.attr(name) else {
                    return Err(Miss::Nothing(format!("attribute {name:?} missing")));
                };
                if name.eq_ignore_ascii_case("href") || name.eq_ignore_ascii_case("src") {
                    resolve_url(self.base, attr)
                } else {
                    attr.to_owned()
                }
            }
            DomValue::Text { exclude } => dom::visible_text(element, exclude.as_ref()),
            DomValue::OwnText => dom::own_text(element),
        })
    }

    fn text(&self) -> String {
        dom::visible_text(self.card, None)
    }

    fn separate_words(&self) -> Option<String> {
        Some(dom::separate_words(self.card))
    }

    fn matches(&self, class: &CompiledClass) -> bool {
        class.selectors.iter().any(|s| dom::contains(self.card, s))
    }

    fn base(&self) -> &str {
        self.base
    }
}

/// A JSON item (an object).
struct JsonItem<'a> {
    value: &'a Value,
    base: &'a str,
}

impl Item for JsonItem<'_> {
    fn read(&self, read: &Read) -> Result<String, Miss> {
        let Read::Json(path) = read else {
            return Err(Miss::Nothing("a DOM rule on a JSON item".into()));
        };
        let Some(value) = path.first(self.value) else {
            return Err(Miss::Nothing(format!("{path} found nothing")));
        };
        match jsonpath::value_text(value) {
            Some(text) => Ok(json::clean_markup(&text)),
            None => Err(Miss::Unreadable(format!(
                "{path} lands on {}, not a value",
                jsonpath::type_name(value)
            ))),
        }
    }

    fn text(&self) -> String {
        json::all_strings(self.value)
    }

    fn matches(&self, class: &CompiledClass) -> bool {
        class.json.iter().any(|m| {
            m.path
                .select(self.value)
                .into_iter()
                .any(|v| match &m.equals {
                    None => jsonpath::truthy(v),
                    Some(equals) => jsonpath::value_text(v).is_some_and(|t| t == *equals),
                })
        })
    }

    fn base(&self) -> &str {
        self.base
    }
}

fn read_card(item: &impl Item, source: &CompiledSource, profile: &CompiledProfile) -> Outcome {
    let fields = &source.fields;
    let mut errors = Vec::new();
    let text = dom::fold(&item.text());
    let title = read_text(item, fields, Field::Title, &mut errors);
    let price = read_number(item, fields, Field::Price, &mut errors);
    let (Some(title), Some(price_value)) = (title, price.value) else {
        return if text.is_empty() {
            Outcome::Placeholder
        } else if profile.explains() {
            Outcome::Unparsed(explain_fields(item, fields))
        } else {
            Outcome::Unparsed(Vec::new())
        };
    };
    let shipping_text = read_text(item, fields, Field::Shipping, &mut errors);
    let seller = read_text(item, fields, Field::Seller, &mut errors);
    let words = item
        .separate_words()
        .map(|w| dom::fold(&w))
        .filter(|w| *w != text);
    let texts = ClassTexts {
        title: &title,
        price: price.text.as_deref().unwrap_or_default(),
        shipping: shipping_text.as_deref().unwrap_or_default(),
        seller: seller.as_deref().unwrap_or_default(),
        card: &text,
        card_words: words.as_deref(),
    };
    let mut classes: Vec<CardClass> = profile
        .classes()
        .iter()
        .filter(|class| item.matches(class) || texts.match_any(class))
        .map(|class| class.class)
        .collect();
    classes.sort_unstable();
    classes.dedup();
    let link = read_text(item, fields, Field::Link, &mut errors)
        .map(|link| resolve_url(item.base(), &link))
        .unwrap_or_default();
    let key = read_text(item, fields, Field::Key, &mut errors).map(|key| {
        if key.starts_with('/') || key.starts_with("http") {
            resolve_url(item.base(), &key)
        } else {
            key
        }
    });
    let shipping_type = read_text(item, fields, Field::ShippingType, &mut errors).map(|code| {
        let kind = profile.shipping_type(&code);
        if kind.is_none() {
            errors.push(format!(
                "shipping_type: {code:?} is not one of the profile's shipping_types"
            ));
        }
        (code, kind)
    });
    Outcome::Card(Box::new(Card {
        price: price_value,
        list_price: read_number(item, fields, Field::ListPrice, &mut errors).value,
        coupon_price: read_number(item, fields, Field::CouponPrice, &mut errors).value,
        shipping_text,
        shipping_fee: read_number(item, fields, Field::ShippingFee, &mut errors).value,
        shipping_threshold: read_number(item, fields, Field::ShippingThreshold, &mut errors).value,
        shipping_type,
        link,
        seller,
        classes,
        text: clip(&text, CARD_TEXT_CHARS),
        title,
        key,
        read_errors: errors,
        rules: if profile.explains() {
            explain_fields(item, fields)
        } else {
            Vec::new()
        },
        joined: None,
    }))
}

/// Every rule of every field `fields` reads, applied to `item`, with the one whose value
/// the field takes marked used.
// NB: "used" follows read_text and read_number: the first non-empty value; for an amount,
// the first text holding an amount that counts (never a 0 price).
fn explain_fields(item: &impl Item, fields: &CompiledFields) -> Vec<RuleReport> {
    let mut reports = Vec::new();
    for field in Field::ALL {
        let mut taken = false;
        for (index, rule) in fields.get(field).iter().enumerate() {
            let outcome = match apply(item, rule) {
                Ok(value) => {
                    let counts = !field.is_number()
                        || pick_amount(&value, rule.pick)
                            .is_some_and(|v| v > 0 || field == Field::ShippingFee);
                    if counts && !taken {
                        taken = true;
                        RuleOutcome::Used(value)
                    } else if counts {
                        RuleOutcome::Unused(value)
                    } else {
                        RuleOutcome::Unused(format!("{value} (no amount that counts)"))
                    }
                }
                Err(Miss::Nothing(why)) => RuleOutcome::Empty(why),
                Err(Miss::Unreadable(why)) => RuleOutcome::Unreadable(why),
            };
            reports.push(RuleReport {
                field,
                index,
                outcome,
            });
        }
    }
    reports
}

/// Why a rule read no value.
enum Miss {
    /// Nothing there (a selector matched nothing, an attribute is missing, a path found
    /// nothing, the regex matched nothing, the value is empty).
    Nothing(String),
    /// Something there that is no value.
    Unreadable(String),
}

/// The texts class patterns look at.
struct ClassTexts<'a> {
    title: &'a str,
    price: &'a str,
    shipping: &'a str,
    seller: &'a str,
    card: &'a str,
    /// The card's text with every element apart, when that differs from `card`.
    card_words: Option<&'a str>,
}

impl ClassTexts<'_> {
    fn match_any(&self, class: &CompiledClass) -> bool {
        class.texts.iter().any(|t| {
            let text = match t.field {
                TextField::Title => self.title,
                TextField::Price => self.price,
                TextField::Shipping => self.shipping,
                TextField::Seller => self.seller,
                TextField::Card => {
                    return t.regex.is_match(self.card)
                        || self.card_words.is_some_and(|w| t.regex.is_match(w));
                }
            };
            t.regex.is_match(text)
        })
    }
}

/// One rule's value: read, regex applied, white space folded; never empty.
fn apply(item: &impl Item, rule: &Rule) -> Result<String, Miss> {
    let raw = match &rule.read {
        Read::Constant(value) => value.clone(),
        read => item.read(read)?,
    };
    let value = match &rule.regex {
        None => raw,
        Some(regex) => regex
            .captures(&raw)
            .and_then(|captures| {
                captures
                    .get(1)
                    .or_else(|| captures.get(0))
                    .map(|m| m.as_str().to_owned())
            })
            .ok_or_else(|| {
                Miss::Nothing(format!(
                    "regex matched nothing in {:?}",
                    clip(&dom::fold(&raw), 60)
                ))
            })?,
    };
    let value = dom::fold(&value);
    if value.is_empty() {
        return Err(Miss::Nothing("empty".into()));
    }
    Ok(value)
}

/// `field`'s rules read in order, each that cannot be read noted in `errors`.
fn rule_values<'a>(
    item: &'a impl Item,
    fields: &'a CompiledFields,
    field: Field,
    errors: &'a mut Vec<String>,
) -> impl Iterator<Item = (&'a Rule, String)> + 'a {
    fields
        .get(field)
        .iter()
        .enumerate()
        .filter_map(move |(i, rule)| match apply(item, rule) {
            Ok(value) => Some((rule, value)),
            Err(Miss::Nothing(_)) => None,
            Err(Miss::Unreadable(why)) => {
                errors.push(format!("{}[{i}]: {why}", field.as_str()));
                None
            }
        })
}

/// The first non-empty value of `field`'s rules.
fn read_text(
    item: &impl Item,
    fields: &CompiledFields,
    field: Field,
    errors: &mut Vec<String>,
) -> Option<String> {
    rule_values(item, fields, field, errors)
        .next()
        .map(|(_, value)| value)
}

/// A number field as read: the amount, and the text it came from (else the first
/// non-empty text, for class patterns on a price cell that shows `품절`).
struct NumberRead {
    value: Option<u64>,
    text: Option<String>,
}

/// A price is never 0 (`0원` is no price); a shipping fee of 0 is free shipping.
fn read_number(
    item: &impl Item,
    fields: &CompiledFields,
    field: Field,
    errors: &mut Vec<String>,
) -> NumberRead {
    let zero_ok = field == Field::ShippingFee;
    let mut first_text = None;
    for (rule, text) in rule_values(item, fields, field, errors) {
        if let Some(value) = pick_amount(&text, rule.pick).filter(|&v| v > 0 || zero_ok) {
            return NumberRead {
                value: Some(value),
                text: Some(text),
            };
        }
        first_text.get_or_insert(text);
    }
    NumberRead {
        value: None,
        text: first_text,
    }
}

/// `text` cut to `max` characters (an ellipsis marks the cut).
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}…", &text[..cut]),
    }
}
