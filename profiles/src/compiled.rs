//! A site profile compiled once: every CSS selector, regex and JSON path parsed, every rule
//! checked against its source's kind. Validation *is* compiling — the coordinator compiles
//! each profile at start-up and stops on the first [`CompileError`], which names the field
//! the way the profile file spells it (`sources[0].fields.price[1].css`,
//! `classes.ad.texts[0].regex`, `more.next_page.selector`); a crawler node compiles a
//! profile once per job and extracts every page with it (the `extract` module).
//!
//! Defaults that belong to the mechanism are applied here, so the wire profile stays as
//! written: a price or coupon-price rule that reads text and sets no `exclude` leaves out
//! `del, s, strike` ([`DEFAULT_PRICE_EXCLUDE`]); a class whose policy is unspecified gets
//! its class's default ([`Policy::default_for`]). Default class *matchers* are the
//! coordinator's: what `profile.classes` says is what is applied.
//!
//! NB: selectors are parsed by `scraper` (Servo's `selectors`), which knows nearly all of
//! what Chromium does; a selector only Chromium knows is refused here rather than failing
//! on a node.

use std::collections::BTreeMap;

use lps_proto::{
    model::{CardClass, ShippingStatus},
    pb,
};
use regex::Regex;
use scraper::Selector;

use crate::JsonPath;

/// Left out of a price or coupon-price text when the rule sets no `exclude`: a struck-out
/// number is never the price to pay.
pub const DEFAULT_PRICE_EXCLUDE: &str = "del, s, strike";

/// A profile that does not compile: which field (profile-file path) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct CompileError {
    pub field: String,
    pub reason: String,
}

impl CompileError {
    fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// A profile ready for extraction (see the module docs). Built only by [`compile`].
#[derive(Debug, Clone)]
pub struct CompiledProfile {
    profile: pb::SiteProfile,
    sources: Vec<CompiledSource>,
    classes: Vec<CompiledClass>,
    page: PageSelectors,
    /// `shipping_types`, codes lower-cased.
    shipping_types: BTreeMap<String, ShippingStatus>,
    /// Cards carry a report of every rule (`extract::Card::rules`): the probe's.
    explain: bool,
}

impl CompiledProfile {
    /// This profile, reading cards with a report of every rule of every field (the probe;
    /// a job never pays for it).
    pub fn explaining(mut self) -> Self {
        self.explain = true;
        self
    }

    /// Whether cards carry rule reports.
    pub fn explains(&self) -> bool {
        self.explain
    }

    /// The profile as received.
    pub fn profile(&self) -> &pb::SiteProfile {
        &self.profile
    }

    /// The mall id.
    pub fn id(&self) -> &str {
        &self.profile.id
    }

    /// Card sources, in the profile's order (the order they are tried in).
    pub fn sources(&self) -> &[CompiledSource] {
        &self.sources
    }

    /// Class rules, in the profile's order; at most one per class.
    pub fn classes(&self) -> &[CompiledClass] {
        &self.classes
    }

    /// Page-level selectors (waiting, no results, blocks, more results).
    pub fn page(&self) -> &PageSelectors {
        &self.page
    }

    /// What happens to cards of `class`: the profile's policy, else the class's default.
    pub fn policy(&self, class: CardClass) -> Policy {
        self.classes
            .iter()
            .find(|c| c.class == class)
            .map_or_else(|| Policy::default_for(class), |c| c.policy)
    }

    /// The profile's `free_shipping_texts`, for [`crate::price::evaluate_shipping`].
    pub fn free_shipping_texts(&self) -> &[String] {
        &self.profile.free_shipping_texts
    }

    /// What the mall's shipping type code `code` means (`shipping_types`, without case).
    pub fn shipping_type(&self, code: &str) -> Option<ShippingStatus> {
        self.shipping_types
            .get(&code.trim().to_lowercase())
            .copied()
    }
}

/// One card source.
#[derive(Debug, Clone)]
pub struct CompiledSource {
    /// `name` from the profile, or the kind's name (`dom`, `embedded_json`, …).
    pub name: String,
    pub kind: SourceKind,
    pub fields: CompiledFields,
    /// Fields taken per card from another source's card with the same key.
    pub join: Option<Join>,
}

/// A [`CompiledSource`]'s join: for each of its cards whose `key` another source's card on
/// the same page shares, the `take` fields come from that card when it has them.
#[derive(Debug, Clone)]
pub struct Join {
    /// Index of the other source.
    pub source: usize,
    pub take: Vec<Field>,
}

/// Where a source's cards come from.
#[derive(Debug, Clone)]
pub enum SourceKind {
    Dom {
        cards: Selector,
    },
    EmbeddedJson {
        script: Selector,
        list: JsonPath,
    },
    CapturedJson {
        url_pattern: Regex,
        list: JsonPath,
    },
    HttpApi {
        /// The URL template (`{query}`, `{page}`, `{start}`).
        url: String,
        /// Request headers; values may hold `${env:NAME}`.
        headers: BTreeMap<String, String>,
        list: JsonPath,
    },
}

impl SourceKind {
    /// The kind's name in the profile file.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Dom { .. } => "dom",
            Self::EmbeddedJson { .. } => "embedded_json",
            Self::CapturedJson { .. } => "captured_json",
            Self::HttpApi { .. } => "http_api",
        }
    }

    /// The path to the items, for the JSON kinds.
    pub fn list(&self) -> Option<&JsonPath> {
        match self {
            Self::Dom { .. } => None,
            Self::EmbeddedJson { list, .. }
            | Self::CapturedJson { list, .. }
            | Self::HttpApi { list, .. } => Some(list),
        }
    }
}

/// A card's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Title,
    Price,
    ListPrice,
    CouponPrice,
    Shipping,
    Link,
    Seller,
    ShippingFee,
    ShippingThreshold,
    ShippingType,
    Key,
}

impl Field {
    pub const ALL: [Field; 11] = [
        Self::Title,
        Self::Price,
        Self::ListPrice,
        Self::CouponPrice,
        Self::Shipping,
        Self::Link,
        Self::Seller,
        Self::ShippingFee,
        Self::ShippingThreshold,
        Self::ShippingType,
        Self::Key,
    ];

    /// The key in `[sources.fields]`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Title => "title",
            Self::Price => "price",
            Self::ListPrice => "list_price",
            Self::CouponPrice => "coupon_price",
            Self::Shipping => "shipping",
            Self::Link => "link",
            Self::Seller => "seller",
            Self::ShippingFee => "shipping_fee",
            Self::ShippingThreshold => "shipping_threshold",
            Self::ShippingType => "shipping_type",
            Self::Key => "key",
        }
    }

    /// The field named `name` in `[sources.fields]`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.as_str() == name)
    }

    /// Whether the field is an amount (read with a rule's `pick`).
    pub fn is_number(self) -> bool {
        matches!(
            self,
            Self::Price
                | Self::ListPrice
                | Self::CouponPrice
                | Self::ShippingFee
                | Self::ShippingThreshold
        )
    }

    fn required(self) -> bool {
        matches!(self, Self::Title | Self::Price | Self::Link)
    }
}

/// The rules of each field, tried in order.
#[derive(Debug, Clone)]
pub struct CompiledFields {
    rules: [Vec<Rule>; Field::ALL.len()],
}

impl CompiledFields {
    /// The rules of `field` (empty: the source does not read it).
    pub fn get(&self, field: Field) -> &[Rule] {
        &self.rules[field as usize]
    }
}

/// One way to read one field.
#[derive(Debug, Clone)]
pub struct Rule {
    pub read: Read,
    /// Applied to the value read: capture group 1, or the whole match.
    pub regex: Option<Regex>,
    pub pick: pb::NumberPick,
}

/// Where a rule's value comes from.
#[derive(Debug, Clone)]
pub enum Read {
    /// A fixed value.
    Constant(String),
    /// An element of a DOM card.
    Dom(DomRead),
    /// A JSON path within a JSON item.
    Json(JsonPath),
}

/// An element of a DOM card and what of it to read.
#[derive(Debug, Clone)]
pub struct DomRead {
    /// The first match within the card (the card itself may match); `None`: the card.
    pub css: Option<Selector>,
    pub value: DomValue,
}

/// What of an element a DOM rule reads.
#[derive(Debug, Clone)]
pub enum DomValue {
    /// An attribute (`href`/`src` resolved against the page URL).
    Attr(String),
    /// The text as a person sees it, without `exclude`'s elements.
    Text { exclude: Option<Selector> },
    /// Only the element's own text nodes.
    OwnText,
}

/// What happens to a class's cards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Left out of the offers, counted by class.
    Exclude,
    /// Kept, with the class in `Offer.flags`.
    Flag,
}

impl Policy {
    /// The class's policy when the profile does not say (docs/site-profiles.md, "Card
    /// classes").
    pub fn default_for(class: CardClass) -> Self {
        match class {
            CardClass::Ad
            | CardClass::OptionListing
            | CardClass::Used
            | CardClass::SoldOut
            | CardClass::Rental => Self::Exclude,
            CardClass::Overseas | CardClass::Catalog => Self::Flag,
        }
    }
}

/// How one card class is recognised: any one matcher is enough.
#[derive(Debug, Clone)]
pub struct CompiledClass {
    pub class: CardClass,
    pub policy: Policy,
    /// DOM cards: the card element or an element in it matches.
    pub selectors: Vec<Selector>,
    pub texts: Vec<TextMatch>,
    /// JSON items: the path's value is truthy, or equals.
    pub json: Vec<JsonMatcher>,
}

/// A regex over one of a card's texts.
#[derive(Debug, Clone)]
pub struct TextMatch {
    pub field: TextField,
    pub regex: Regex,
}

/// The text a [`TextMatch`] looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextField {
    Title,
    Price,
    Shipping,
    Seller,
    /// All of the card's text (a JSON item: every string in it).
    Card,
}

impl TextField {
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "title" => Some(Self::Title),
            "price" => Some(Self::Price),
            "shipping" => Some(Self::Shipping),
            "seller" => Some(Self::Seller),
            "card" => Some(Self::Card),
            _ => None,
        }
    }
}

/// A JSON item's value at `path`: truthy, or (when `equals` is set) equal to it as text.
#[derive(Debug, Clone)]
pub struct JsonMatcher {
    pub path: JsonPath,
    pub equals: Option<String>,
}

/// The page-level selectors of a profile (empty ones are `None`).
#[derive(Debug, Clone, Default)]
pub struct PageSelectors {
    pub wait_for: Option<Selector>,
    pub no_results: Option<Selector>,
    /// `block.selectors`.
    pub block: Vec<Selector>,
    /// `block.challenges[i].selector`, by challenge (`None`: a text challenge).
    pub challenges: Vec<Option<Selector>>,
    pub more_button: Option<Selector>,
    pub next_page: Option<Selector>,
}

/// Compiles (and so validates) `profile`.
pub fn compile(profile: &pb::SiteProfile) -> Result<CompiledProfile, CompileError> {
    if profile.sources.is_empty() {
        return Err(CompileError::new(
            "sources",
            "at least one card source is required",
        ));
    }
    let mut sources: Vec<CompiledSource> = profile
        .sources
        .iter()
        .enumerate()
        .map(|(i, source)| compile_source(&format!("sources[{i}]"), source))
        .collect::<Result<_, _>>()?;
    for (i, source) in profile.sources.iter().enumerate() {
        if let Some(join) = &source.join {
            let join = compile_join(&format!("sources[{i}].join"), i, join, &sources)?;
            sources[i].join = Some(join);
        }
    }
    let mut shipping_types = BTreeMap::new();
    for (code, status) in &profile.shipping_types {
        let at = format!("shipping_types.{code}");
        let status = match pb::ShippingStatus::try_from(*status) {
            Ok(pb::ShippingStatus::Free) => ShippingStatus::Free,
            Ok(pb::ShippingStatus::Paid) => ShippingStatus::Paid,
            Ok(pb::ShippingStatus::FreeByThreshold) => ShippingStatus::FreeByThreshold,
            Ok(pb::ShippingStatus::Unknown) => ShippingStatus::Unknown,
            Ok(pb::ShippingStatus::Unspecified) | Err(_) => {
                return Err(CompileError::new(
                    at,
                    "must mean free, paid, free_by_threshold or unknown",
                ));
            }
        };
        if code.trim().is_empty() {
            return Err(CompileError::new("shipping_types", "an empty type code"));
        }
        shipping_types.insert(code.trim().to_lowercase(), status);
    }
    Ok(CompiledProfile {
        profile: profile.clone(),
        sources,
        classes: compile_classes(&profile.classes)?,
        page: compile_page(profile)?,
        shipping_types,
        explain: false,
    })
}

fn compile_source(at: &str, source: &pb::CardSource) -> Result<CompiledSource, CompileError> {
    use pb::card_source::Kind;
    let kind = match &source.kind {
        None => {
            return Err(CompileError::new(
                format!("{at}.kind"),
                "required: dom, embedded_json, captured_json or http_api",
            ));
        }
        Some(Kind::Dom(dom)) => SourceKind::Dom {
            cards: required_selector(&format!("{at}.cards"), &dom.card_selector)?,
        },
        Some(Kind::EmbeddedJson(json)) => SourceKind::EmbeddedJson {
            script: required_selector(&format!("{at}.script"), &json.script_selector)?,
            list: json_path(&format!("{at}.list"), &json.list_path)?,
        },
        Some(Kind::CapturedJson(json)) => SourceKind::CapturedJson {
            url_pattern: required_regex(&format!("{at}.url_pattern"), &json.url_pattern)?,
            list: json_path(&format!("{at}.list"), &json.list_path)?,
        },
        Some(Kind::HttpApi(api)) => {
            let url = api.url_template.trim();
            if url.is_empty() {
                return Err(CompileError::new(format!("{at}.url"), "required"));
            }
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(CompileError::new(
                    format!("{at}.url"),
                    format!("{url:?} is not an http(s) URL"),
                ));
            }
            if let Some(name) = api.headers.keys().find(|name| !is_token(name)) {
                return Err(CompileError::new(
                    format!("{at}.headers"),
                    format!("{name:?} is not a header name"),
                ));
            }
            SourceKind::HttpApi {
                url: url.to_owned(),
                headers: api
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                list: json_path(&format!("{at}.list"), &api.list_path)?,
            }
        }
    };
    let name = match source.name.trim() {
        "" => kind.name().to_owned(),
        name => name.to_owned(),
    };
    let default_fields = pb::CardFields::default();
    let fields = source.fields.as_ref().unwrap_or(&default_fields);
    let dom = matches!(kind, SourceKind::Dom { .. });
    let mut rules: [Vec<Rule>; Field::ALL.len()] = Default::default();
    for field in Field::ALL {
        let at = format!("{at}.fields.{}", field.as_str());
        let written = field_rules(fields, field);
        if written.is_empty() && field.required() {
            return Err(CompileError::new(at, "required"));
        }
        rules[field as usize] = written
            .iter()
            .enumerate()
            .map(|(i, rule)| compile_rule(&format!("{at}[{i}]"), rule, field, &kind, dom))
            .collect::<Result<_, _>>()?;
    }
    Ok(CompiledSource {
        name,
        kind,
        fields: CompiledFields { rules },
        join: None,
    })
}

fn compile_join(
    at: &str,
    me: usize,
    join: &pb::SourceJoin,
    sources: &[CompiledSource],
) -> Result<Join, CompileError> {
    let names: Vec<&str> = sources.iter().map(|s| s.name.as_str()).collect();
    let Some(other) = sources.iter().position(|s| s.name == join.source.trim()) else {
        return Err(CompileError::new(
            format!("{at}.source"),
            format!(
                "{:?} is not the name of a source ({})",
                join.source,
                names.join(", ")
            ),
        ));
    };
    if other == me {
        return Err(CompileError::new(
            format!("{at}.source"),
            "a source cannot join itself",
        ));
    }
    if matches!(sources[other].kind, SourceKind::HttpApi { .. })
        || matches!(sources[me].kind, SourceKind::HttpApi { .. })
    {
        return Err(CompileError::new(
            format!("{at}.source"),
            "an http_api source is read without a page: it joins nothing",
        ));
    }
    for (index, what) in [(me, "this source"), (other, "the joined source")] {
        if sources[index].fields.get(Field::Key).is_empty() {
            return Err(CompileError::new(
                format!("{at}.source"),
                format!(
                    "{what} ({}) needs a `key` field to match cards by",
                    sources[index].name
                ),
            ));
        }
    }
    if join.take.is_empty() {
        return Err(CompileError::new(
            format!("{at}.take"),
            "name the fields to take (e.g. [\"title\", \"shipping\"])",
        ));
    }
    let take = join
        .take
        .iter()
        .enumerate()
        .map(|(i, name)| match Field::from_name(name.trim()) {
            Some(Field::Key) | None => Err(CompileError::new(
                format!("{at}.take[{i}]"),
                format!("{name:?} is not a field a card takes (title, price, list_price, coupon_price, shipping, shipping_fee, shipping_threshold, shipping_type, link, seller)"),
            )),
            Some(field) => Ok(field),
        })
        .collect::<Result<_, _>>()?;
    Ok(Join {
        source: other,
        take,
    })
}

/// The rules written for `field` in a source's `[sources.fields]` (compiled 1:1, in order).
pub fn field_rules(fields: &pb::CardFields, field: Field) -> &[pb::FieldRule] {
    match field {
        Field::Title => &fields.title,
        Field::Price => &fields.price,
        Field::ListPrice => &fields.list_price,
        Field::CouponPrice => &fields.coupon_price,
        Field::Shipping => &fields.shipping,
        Field::Link => &fields.link,
        Field::Seller => &fields.seller,
        Field::ShippingFee => &fields.shipping_fee,
        Field::ShippingThreshold => &fields.shipping_threshold,
        Field::ShippingType => &fields.shipping_type,
        Field::Key => &fields.key,
    }
}

fn compile_rule(
    at: &str,
    rule: &pb::FieldRule,
    field: Field,
    kind: &SourceKind,
    dom: bool,
) -> Result<Rule, CompileError> {
    let key = |name: &str| format!("{at}.{name}");
    let constant = (!rule.constant.is_empty()).then(|| rule.constant.clone());
    let css = rule.css.trim();
    let attr = rule.attr.trim();
    let exclude = rule.exclude.trim();
    let json = rule.json.trim();
    let read = if dom {
        if !json.is_empty() {
            return Err(CompileError::new(
                key("json"),
                "a dom source reads elements: use css",
            ));
        }
        let dom_keys = !css.is_empty() || !attr.is_empty() || rule.own_text || !exclude.is_empty();
        if let Some(constant) = constant {
            if dom_keys {
                return Err(CompileError::new(
                    key("constant"),
                    "a constant rule takes no css, attr, own_text or exclude",
                ));
            }
            Read::Constant(constant)
        } else {
            let css = (!css.is_empty())
                .then(|| selector(&key("css"), css))
                .transpose()?;
            let value = if !attr.is_empty() {
                if rule.own_text {
                    return Err(CompileError::new(key("own_text"), "not with attr"));
                }
                if !exclude.is_empty() {
                    return Err(CompileError::new(key("exclude"), "not with attr"));
                }
                DomValue::Attr(attr.to_owned())
            } else if rule.own_text {
                if !exclude.is_empty() {
                    return Err(CompileError::new(key("exclude"), "not with own_text"));
                }
                DomValue::OwnText
            } else if !exclude.is_empty() {
                DomValue::Text {
                    exclude: Some(selector(&key("exclude"), exclude)?),
                }
            } else {
                let default = matches!(field, Field::Price | Field::CouponPrice)
                    .then(|| Selector::parse(DEFAULT_PRICE_EXCLUDE).ok())
                    .flatten();
                DomValue::Text { exclude: default }
            };
            Read::Dom(DomRead { css, value })
        }
    } else {
        for (name, set) in [
            ("css", !css.is_empty()),
            ("attr", !attr.is_empty()),
            ("own_text", rule.own_text),
            ("exclude", !exclude.is_empty()),
        ] {
            if set {
                return Err(CompileError::new(
                    key(name),
                    format!("a {} source reads JSON: use json", kind.name()),
                ));
            }
        }
        match (constant, json.is_empty()) {
            (Some(_), false) => {
                return Err(CompileError::new(
                    key("constant"),
                    "a constant rule takes no json",
                ));
            }
            (Some(constant), true) => Read::Constant(constant),
            (None, false) => {
                let path = json_path(&key("json"), json)?;
                // NB: a field reads one value; a path that can only land on an object or
                // an array would read nothing on every item.
                if let Some(what) = path.selects_containers() {
                    return Err(CompileError::new(
                        key("json"),
                        format!(
                            "{json:?} selects {what}, not a value: add the key to read (e.g. `{json}.name`)"
                        ),
                    ));
                }
                Read::Json(path)
            }
            (None, true) => {
                return Err(CompileError::new(at, "needs json or constant"));
            }
        }
    };
    let regex = (!rule.regex.is_empty())
        .then(|| regex(&key("regex"), &rule.regex))
        .transpose()?;
    let pick = pb::NumberPick::try_from(rule.pick)
        .map_err(|_| CompileError::new(key("pick"), format!("unknown pick {}", rule.pick)))?;
    if pick != pb::NumberPick::First && !field.is_number() {
        return Err(CompileError::new(
            key("pick"),
            "applies to price, list_price, coupon_price, shipping_fee and shipping_threshold only",
        ));
    }
    Ok(Rule { read, regex, pick })
}

fn compile_classes(rules: &[pb::CardClassRule]) -> Result<Vec<CompiledClass>, CompileError> {
    let mut out: Vec<CompiledClass> = Vec::with_capacity(rules.len());
    for (i, rule) in rules.iter().enumerate() {
        let Some(class) = CardClass::from_pb(rule.class) else {
            let names: Vec<&str> = CardClass::ALL.iter().map(|c| c.as_str()).collect();
            return Err(CompileError::new(
                format!("classes[{i}].class"),
                format!("{} is not a card class ({})", rule.class, names.join(", ")),
            ));
        };
        let at = format!("classes.{}", class.as_str());
        if out.iter().any(|c| c.class == class) {
            return Err(CompileError::new(at, "listed twice"));
        }
        let policy = match pb::ClassPolicy::try_from(rule.policy) {
            Ok(pb::ClassPolicy::Unspecified) => Policy::default_for(class),
            Ok(pb::ClassPolicy::Exclude) => Policy::Exclude,
            Ok(pb::ClassPolicy::Flag) => Policy::Flag,
            Err(_) => {
                return Err(CompileError::new(
                    format!("{at}.policy"),
                    format!("unknown policy {}; exclude or flag", rule.policy),
                ));
            }
        };
        let selectors = rule
            .selectors
            .iter()
            .enumerate()
            .map(|(j, s)| required_selector(&format!("{at}.selectors[{j}]"), s))
            .collect::<Result<_, _>>()?;
        let texts = rule
            .texts
            .iter()
            .enumerate()
            .map(|(j, t)| {
                let at = format!("{at}.texts[{j}]");
                let field = TextField::from_name(t.field.trim()).ok_or_else(|| {
                    CompileError::new(
                        format!("{at}.field"),
                        format!(
                            "{:?}: must be title, price, shipping, seller or card",
                            t.field
                        ),
                    )
                })?;
                let regex = required_regex(&format!("{at}.regex"), &t.regex)?;
                Ok(TextMatch { field, regex })
            })
            .collect::<Result<_, _>>()?;
        let json = rule
            .json
            .iter()
            .enumerate()
            .map(|(j, m)| {
                Ok(JsonMatcher {
                    path: json_path(&format!("{at}.json[{j}].path"), &m.path)?,
                    equals: (!m.equals.is_empty()).then(|| m.equals.clone()),
                })
            })
            .collect::<Result<_, _>>()?;
        out.push(CompiledClass {
            class,
            policy,
            selectors,
            texts,
            json,
        });
    }
    Ok(out)
}

fn compile_page(profile: &pb::SiteProfile) -> Result<PageSelectors, CompileError> {
    let default_block = pb::BlockMarkers::default();
    let block = profile.block.as_ref().unwrap_or(&default_block);
    let challenges = block
        .challenges
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let at = format!("block.challenges[{i}]");
            match (c.text.trim().is_empty(), c.selector.trim().is_empty()) {
                (true, true) => Err(CompileError::new(at, "needs text or selector")),
                (false, false) => Err(CompileError::new(at, "text or selector, not both")),
                _ => optional_selector(&format!("{at}.selector"), &c.selector),
            }
        })
        .collect::<Result<_, _>>()?;
    let (more_button, next_page) = match &profile.more {
        None => (None, None),
        Some(more) => {
            let more_button = optional_selector("more.more_button", &more.more_button_selector)?;
            let next_page = match &more.next_page {
                None => None,
                Some(next) => {
                    if next.url_template.trim().is_empty() && next.selector.trim().is_empty() {
                        return Err(CompileError::new(
                            "more.next_page",
                            "needs url_template or selector",
                        ));
                    }
                    optional_selector("more.next_page.selector", &next.selector)?
                }
            };
            (more_button, next_page)
        }
    };
    if let Some(nav) = &profile.navigation {
        optional_selector("navigation.search_input", &nav.search_input_selector)?;
    }
    Ok(PageSelectors {
        wait_for: optional_selector("wait_for", &profile.wait_for)?,
        no_results: optional_selector("no_results_selector", &profile.no_results_selector)?,
        block: block
            .selectors
            .iter()
            .enumerate()
            .map(|(i, s)| required_selector(&format!("block.selectors[{i}]"), s))
            .collect::<Result<_, _>>()?,
        challenges,
        more_button,
        next_page,
    })
}

fn selector(at: &str, text: &str) -> Result<Selector, CompileError> {
    Selector::parse(text).map_err(|e| {
        CompileError::new(
            at,
            format!("invalid CSS selector {text:?}: {}", selector_error(&e)),
        )
    })
}

/// What is wrong with a selector, in the profile author's words. NB: `scraper` words the
/// errors of Servo's selector parser it does not name as "Unexpected error occurred.
/// Please report this to the developer" plus a debug dump; such an error is the author's
/// selector, not a bug, so it is said as the parser's error kind (`unsupported pseudo
/// class or element`), after the selector the message quotes.
pub(crate) fn selector_error(err: &scraper::error::SelectorErrorKind) -> String {
    use scraper::error::SelectorErrorKind;
    match err {
        SelectorErrorKind::UnexpectedSelectorParseError(kind) => {
            let debug = format!("{kind:?}");
            let (name, detail) = debug.split_once('(').unwrap_or((&debug, ""));
            let mut words = String::new();
            for c in name.chars() {
                if c.is_uppercase() && !words.is_empty() {
                    words.push(' ');
                }
                words.extend(c.to_lowercase());
            }
            let detail = detail.trim_end_matches(')').split_whitespace();
            let detail = detail.collect::<Vec<_>>().join(" ");
            if detail.is_empty() {
                words
            } else {
                format!("{words} {detail}")
            }
        }
        other => other.to_string().to_lowercase(),
    }
}

fn required_selector(at: &str, text: &str) -> Result<Selector, CompileError> {
    if text.trim().is_empty() {
        return Err(CompileError::new(at, "required: a CSS selector"));
    }
    selector(at, text.trim())
}

fn optional_selector(at: &str, text: &str) -> Result<Option<Selector>, CompileError> {
    let text = text.trim();
    (!text.is_empty()).then(|| selector(at, text)).transpose()
}

fn regex(at: &str, text: &str) -> Result<Regex, CompileError> {
    Regex::new(text).map_err(|e| CompileError::new(at, format!("invalid regex {text:?}: {e}")))
}

fn required_regex(at: &str, text: &str) -> Result<Regex, CompileError> {
    if text.is_empty() {
        return Err(CompileError::new(at, "required: a regex"));
    }
    regex(at, text)
}

fn json_path(at: &str, text: &str) -> Result<JsonPath, CompileError> {
    if text.trim().is_empty() {
        return Err(CompileError::new(at, "required: a JSON path"));
    }
    JsonPath::parse(text).map_err(|e| CompileError::new(at, format!("invalid JSON path {e}")))
}

/// An HTTP header name (RFC 9110 `token`).
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn css(css: &str) -> pb::FieldRule {
        pb::FieldRule {
            css: css.into(),
            ..Default::default()
        }
    }

    pub(crate) fn json(path: &str) -> pb::FieldRule {
        pb::FieldRule {
            json: path.into(),
            ..Default::default()
        }
    }

    pub(crate) fn dom_source(cards: &str, fields: pb::CardFields) -> pb::CardSource {
        pb::CardSource {
            name: String::new(),
            kind: Some(pb::card_source::Kind::Dom(pb::DomSource {
                card_selector: cards.into(),
            })),
            fields: Some(fields),
            join: None,
        }
    }

    pub(crate) fn embedded_source(
        script: &str,
        list: &str,
        fields: pb::CardFields,
    ) -> pb::CardSource {
        pb::CardSource {
            name: String::new(),
            kind: Some(pb::card_source::Kind::EmbeddedJson(
                pb::EmbeddedJsonSource {
                    script_selector: script.into(),
                    list_path: list.into(),
                },
            )),
            fields: Some(fields),
            join: None,
        }
    }

    pub(crate) fn captured_source(
        pattern: &str,
        list: &str,
        fields: pb::CardFields,
    ) -> pb::CardSource {
        pb::CardSource {
            name: String::new(),
            kind: Some(pb::card_source::Kind::CapturedJson(
                pb::CapturedJsonSource {
                    url_pattern: pattern.into(),
                    list_path: list.into(),
                },
            )),
            fields: Some(fields),
            join: None,
        }
    }

    pub(crate) fn dom_fields() -> pb::CardFields {
        pb::CardFields {
            title: vec![css("a.name")],
            price: vec![css("div.price")],
            link: vec![pb::FieldRule {
                css: "a.name".into(),
                attr: "href".into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    pub(crate) fn json_fields() -> pb::CardFields {
        pb::CardFields {
            title: vec![json("$.title")],
            price: vec![json("$.price")],
            link: vec![json("$.url")],
            ..Default::default()
        }
    }

    pub(crate) fn profile(sources: Vec<pb::CardSource>) -> pb::SiteProfile {
        pb::SiteProfile {
            id: "examplemall".into(),
            search_url_template: "https://www.example.com/search?q={query}".into(),
            no_results_selector: "div.no-result".into(),
            sources,
            ..Default::default()
        }
    }

    fn error(profile: &pb::SiteProfile) -> CompileError {
        compile(profile).expect_err("should not compile")
    }

    fn assert_error(profile: &pb::SiteProfile, field: &str, says: &str) {
        let err = error(profile);
        assert_eq!(err.field, field, "{err}");
        assert!(err.reason.contains(says), "{err}");
    }

    #[test]
    fn a_good_profile_compiles() {
        let mut p = profile(vec![
            embedded_source("script#__NEXT_DATA__", "$.props.items[*]", json_fields()),
            dom_source("li.product-card", dom_fields()),
        ]);
        p.sources[0].name = "next".into();
        p.classes = vec![pb::CardClassRule {
            class: pb::CardClass::Ad.into(),
            selectors: vec!["span.ad-badge".into()],
            ..Default::default()
        }];
        let c = compile(&p).unwrap();
        assert_eq!(c.id(), "examplemall");
        assert_eq!(c.sources().len(), 2);
        assert_eq!(c.sources()[0].name, "next");
        assert_eq!(c.sources()[1].name, "dom");
        assert_eq!(c.sources()[0].kind.name(), "embedded_json");
        assert_eq!(c.policy(CardClass::Ad), Policy::Exclude);
        assert_eq!(c.policy(CardClass::Overseas), Policy::Flag);
        assert!(c.page().no_results.is_some() && c.page().wait_for.is_none());
        // The price rule got the default exclusion; the title rule did not.
        let fields = &c.sources()[1].fields;
        let Read::Dom(price) = &fields.get(Field::Price)[0].read else {
            panic!("a dom rule")
        };
        assert!(matches!(price.value, DomValue::Text { exclude: Some(_) }));
        let Read::Dom(title) = &fields.get(Field::Title)[0].read else {
            panic!("a dom rule")
        };
        assert!(matches!(title.value, DomValue::Text { exclude: None }));
        assert!(fields.get(Field::Seller).is_empty());
        assert!(format!("{c:?}").contains("CompiledProfile"));
    }

    #[test]
    fn sources_are_required_and_checked() {
        assert_error(&profile(vec![]), "sources", "at least one");
        let mut p = profile(vec![dom_source("li", dom_fields())]);
        p.sources[0].kind = None;
        assert_error(&p, "sources[0].kind", "required");
        assert_error(
            &profile(vec![dom_source("", dom_fields())]),
            "sources[0].cards",
            "required",
        );
        assert_error(
            &profile(vec![
                dom_source("li", dom_fields()),
                dom_source("li[", dom_fields()),
            ]),
            "sources[1].cards",
            "invalid CSS selector",
        );
        assert_error(
            &profile(vec![embedded_source("script#x", "items", json_fields())]),
            "sources[0].list",
            "starts with `$`",
        );
        assert_error(
            &profile(vec![embedded_source("", "$.items", json_fields())]),
            "sources[0].script",
            "required",
        );
        assert_error(
            &profile(vec![captured_source(
                "api/(search",
                "$.items",
                json_fields(),
            )]),
            "sources[0].url_pattern",
            "invalid regex",
        );
        let api = |url: &str, headers: &[(&str, &str)]| pb::CardSource {
            name: String::new(),
            kind: Some(pb::card_source::Kind::HttpApi(pb::HttpApiSource {
                url_template: url.into(),
                headers: headers
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
                list_path: "$.items[*]".into(),
            })),
            fields: Some(json_fields()),
            join: None,
        };
        assert_error(&profile(vec![api("", &[])]), "sources[0].url", "required");
        assert_error(
            &profile(vec![api("ftp://x/{query}", &[])]),
            "sources[0].url",
            "http(s)",
        );
        assert_error(
            &profile(vec![api(
                "https://api.example.com/?q={query}",
                &[("X Id", "a")],
            )]),
            "sources[0].headers",
            "header name",
        );
        let ok = compile(&profile(vec![api(
            "https://api.example.com/?q={query}",
            &[("X-Naver-Client-Id", "${env:NAVER_ID}")],
        )]))
        .unwrap();
        assert!(
            matches!(&ok.sources()[0].kind, SourceKind::HttpApi { headers, .. } if headers.len() == 1)
        );
    }

    #[test]
    fn a_field_path_that_can_only_land_on_an_object_is_refused() {
        for (path, says) in [
            ("$", "the item itself"),
            (
                "$.delivery[?(@.type=='fee')]",
                "the elements its filter keeps",
            ),
        ] {
            let mut fields = json_fields();
            fields.shipping = vec![json(path)];
            assert_error(
                &profile(vec![embedded_source("script#d", "$.items[*]", fields)]),
                "sources[0].fields.shipping[0].json",
                says,
            );
        }
        // A filter followed by the member to read is a value path.
        let mut fields = json_fields();
        fields.shipping_fee = vec![json("$.delivery[?(@.type=='fee')].amount")];
        fields.shipping_threshold = vec![json("$.delivery[?(@.type)].freeFrom")];
        assert!(
            compile(&profile(vec![embedded_source(
                "script#d",
                "$.items[*]",
                fields
            )]))
            .is_ok()
        );
    }

    #[test]
    fn shipping_types_must_say_what_they_mean() {
        let mut p = profile(vec![dom_source("li", dom_fields())]);
        p.shipping_types = [("FREE".to_owned(), 0)].into_iter().collect();
        assert_error(&p, "shipping_types.FREE", "must mean free, paid");
        p.shipping_types = [("FREE".to_owned(), pb::ShippingStatus::Free as i32)]
            .into_iter()
            .collect();
        let compiled = compile(&p).unwrap();
        assert_eq!(compiled.shipping_type(" free "), Some(ShippingStatus::Free));
        assert_eq!(compiled.shipping_type("PAID"), None);
    }

    #[test]
    fn fields_name_the_rule() {
        for (field, at) in [("title", 0), ("price", 1), ("link", 2)] {
            let mut fields = dom_fields();
            match at {
                0 => fields.title.clear(),
                1 => fields.price.clear(),
                _ => fields.link.clear(),
            }
            assert_error(
                &profile(vec![dom_source("li", fields)]),
                &format!("sources[0].fields.{field}"),
                "required",
            );
        }
        let mut p = profile(vec![dom_source("li", dom_fields())]);
        p.sources[0].fields = None;
        assert_error(&p, "sources[0].fields.title", "required");

        let mut fields = dom_fields();
        fields.price.push(css("span.price >"));
        assert_error(
            &profile(vec![dom_source("li", fields)]),
            "sources[0].fields.price[1].css",
            "invalid CSS selector",
        );
        let mut fields = dom_fields();
        fields.price[0].exclude = "del,,".into();
        assert_error(
            &profile(vec![dom_source("li", fields)]),
            "sources[0].fields.price[0].exclude",
            "invalid CSS selector",
        );
        let mut fields = dom_fields();
        fields.title[0].regex = "(".into();
        assert_error(
            &profile(vec![dom_source("li", fields)]),
            "sources[0].fields.title[0].regex",
            "invalid regex",
        );
        let mut fields = dom_fields();
        fields.seller = vec![json("$.seller")];
        assert_error(
            &profile(vec![dom_source("li", fields)]),
            "sources[0].fields.seller[0].json",
            "use css",
        );
        let mut fields = dom_fields();
        fields.shipping = vec![pb::FieldRule {
            css: "span.ship".into(),
            constant: "무료배송".into(),
            ..Default::default()
        }];
        assert_error(
            &profile(vec![dom_source("li", fields)]),
            "sources[0].fields.shipping[0].constant",
            "takes no css",
        );
        let mut fields = dom_fields();
        fields.title[0].attr = "title".into();
        fields.title[0].own_text = true;
        assert_error(
            &profile(vec![dom_source("li", fields)]),
            "sources[0].fields.title[0].own_text",
            "not with attr",
        );
        let mut fields = dom_fields();
        fields.title[0].own_text = true;
        fields.title[0].exclude = "em".into();
        assert_error(
            &profile(vec![dom_source("li", fields)]),
            "sources[0].fields.title[0].exclude",
            "not with own_text",
        );
        let mut fields = dom_fields();
        fields.title[0].pick = pb::NumberPick::Max.into();
        assert_error(
            &profile(vec![dom_source("li", fields)]),
            "sources[0].fields.title[0].pick",
            "price, list_price, coupon_price, shipping_fee and shipping_threshold only",
        );
        let mut fields = dom_fields();
        fields.price[0].pick = 9;
        assert_error(
            &profile(vec![dom_source("li", fields)]),
            "sources[0].fields.price[0].pick",
            "unknown pick",
        );
        // An empty dom rule reads the card itself; a constant alone is fine.
        let mut fields = dom_fields();
        fields.title.push(pb::FieldRule::default());
        fields.shipping = vec![pb::FieldRule {
            constant: "무료배송".into(),
            ..Default::default()
        }];
        compile(&profile(vec![dom_source("li", fields)])).unwrap();
    }

    #[test]
    fn json_rules_read_json() {
        for (key, rule) in [
            ("css", css("a")),
            (
                "attr",
                pb::FieldRule {
                    json: "$.x".into(),
                    attr: "href".into(),
                    ..Default::default()
                },
            ),
            (
                "own_text",
                pb::FieldRule {
                    json: "$.x".into(),
                    own_text: true,
                    ..Default::default()
                },
            ),
            (
                "exclude",
                pb::FieldRule {
                    json: "$.x".into(),
                    exclude: "del".into(),
                    ..Default::default()
                },
            ),
        ] {
            let mut fields = json_fields();
            fields.list_price = vec![rule];
            assert_error(
                &profile(vec![
                    dom_source("li", dom_fields()),
                    embedded_source("script", "$[*]", fields),
                ]),
                &format!("sources[1].fields.list_price[0].{key}"),
                "a embedded_json source reads JSON",
            );
        }
        let mut fields = json_fields();
        fields.title[0].json = String::new();
        assert_error(
            &profile(vec![captured_source("api", "$.items[*]", fields)]),
            "sources[0].fields.title[0]",
            "needs json or constant",
        );
        let mut fields = json_fields();
        fields.title[0].constant = "x".into();
        assert_error(
            &profile(vec![captured_source("api", "$.items[*]", fields)]),
            "sources[0].fields.title[0].constant",
            "takes no json",
        );
        let mut fields = json_fields();
        fields.link[0].json = "$.a[".into();
        assert_error(
            &profile(vec![captured_source("api", "$.items[*]", fields)]),
            "sources[0].fields.link[0].json",
            "invalid JSON path",
        );
    }

    #[test]
    fn classes_are_checked() {
        let rule = |class: pb::CardClass| pb::CardClassRule {
            class: class.into(),
            ..Default::default()
        };
        let with = |classes: Vec<pb::CardClassRule>| {
            let mut p = profile(vec![dom_source("li", dom_fields())]);
            p.classes = classes;
            p
        };
        assert_error(
            &with(vec![rule(pb::CardClass::Unspecified)]),
            "classes[0].class",
            "not a card class",
        );
        let mut unknown = rule(pb::CardClass::Ad);
        unknown.class = 42;
        assert_error(
            &with(vec![rule(pb::CardClass::Ad), unknown]),
            "classes[1].class",
            "42",
        );
        assert_error(
            &with(vec![rule(pb::CardClass::Used), rule(pb::CardClass::Used)]),
            "classes.used",
            "listed twice",
        );
        let mut bad = rule(pb::CardClass::Ad);
        bad.texts = vec![
            pb::TextPattern {
                field: "card".into(),
                regex: "광고".into(),
            },
            pb::TextPattern {
                field: "title".into(),
                regex: "[광고".into(),
            },
        ];
        assert_error(
            &with(vec![bad]),
            "classes.ad.texts[1].regex",
            "invalid regex",
        );
        let mut bad = rule(pb::CardClass::SoldOut);
        bad.texts = vec![pb::TextPattern {
            field: "name".into(),
            regex: "품절".into(),
        }];
        assert_error(
            &with(vec![bad]),
            "classes.sold_out.texts[0].field",
            "must be title",
        );
        let mut bad = rule(pb::CardClass::Catalog);
        bad.selectors = vec!["div.sellers".into(), "div..x".into()];
        assert_error(
            &with(vec![bad]),
            "classes.catalog.selectors[1]",
            "invalid CSS",
        );
        let mut bad = rule(pb::CardClass::Overseas);
        bad.json = vec![pb::JsonMatch {
            path: "overseas".into(),
            equals: String::new(),
        }];
        assert_error(
            &with(vec![bad]),
            "classes.overseas.json[0].path",
            "invalid JSON path",
        );
        let mut bad = rule(pb::CardClass::Ad);
        bad.policy = 7;
        assert_error(&with(vec![bad]), "classes.ad.policy", "unknown policy");

        let mut flagged = rule(pb::CardClass::Used);
        flagged.policy = pb::ClassPolicy::Flag.into();
        let mut excluded = rule(pb::CardClass::Catalog);
        excluded.policy = pb::ClassPolicy::Exclude.into();
        let c = compile(&with(vec![
            flagged,
            excluded,
            rule(pb::CardClass::Overseas),
        ]))
        .unwrap();
        assert_eq!(c.policy(CardClass::Used), Policy::Flag);
        assert_eq!(c.policy(CardClass::Catalog), Policy::Exclude);
        assert_eq!(c.policy(CardClass::Overseas), Policy::Flag);
        assert_eq!(c.policy(CardClass::SoldOut), Policy::Exclude);
    }

    #[test]
    fn page_selectors_are_checked() {
        let base = || profile(vec![dom_source("li", dom_fields())]);
        let mut p = base();
        p.wait_for = "div[".into();
        assert_error(&p, "wait_for", "invalid CSS selector");
        let mut p = base();
        p.no_results_selector = ":nope".into();
        assert_error(&p, "no_results_selector", "invalid CSS selector");
        let mut p = base();
        p.block = Some(pb::BlockMarkers {
            selectors: vec!["#captcha".into(), "iframe".into(), "a >> b".into()],
            ..Default::default()
        });
        assert_error(&p, "block.selectors[2]", "invalid CSS selector");
        let challenge = |text: &str, selector: &str| pb::Challenge {
            text: text.into(),
            selector: selector.into(),
            clears_within: None,
        };
        let mut p = base();
        p.block = Some(pb::BlockMarkers {
            challenges: vec![challenge("잠시만 기다려 주세요", ""), challenge("", "#cf[")],
            ..Default::default()
        });
        assert_error(&p, "block.challenges[1].selector", "invalid CSS selector");
        p.block.as_mut().unwrap().challenges[1] = challenge("", "");
        assert_error(&p, "block.challenges[1]", "needs text or selector");
        p.block.as_mut().unwrap().challenges[1] = challenge("x", "#cf");
        assert_error(&p, "block.challenges[1]", "not both");
        p.block.as_mut().unwrap().challenges[1] = challenge("", "#cf-challenge");
        let c = compile(&p).unwrap();
        assert!(c.page().challenges[0].is_none() && c.page().challenges[1].is_some());

        let mut p = base();
        p.more = Some(pb::MoreResults {
            more_button_selector: "button.more:".into(),
            ..Default::default()
        });
        assert_error(&p, "more.more_button", "invalid CSS selector");
        let mut p = base();
        p.more = Some(pb::MoreResults {
            next_page: Some(pb::NextPage {
                selector: "a.next[".into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        assert_error(&p, "more.next_page.selector", "invalid CSS selector");
        p.more.as_mut().unwrap().next_page = Some(pb::NextPage::default());
        assert_error(&p, "more.next_page", "needs url_template or selector");
        p.more.as_mut().unwrap().next_page = Some(pb::NextPage {
            url_template: "https://www.example.com/search?q={query}&page={page}".into(),
            max_pages: 2,
            ..Default::default()
        });
        let c = compile(&p).unwrap();
        assert!(c.page().next_page.is_none());
    }

    #[test]
    fn compiled_profiles_cross_threads() {
        fn shareable<T: Send + Sync + Clone>() {}
        shareable::<CompiledProfile>();
    }

    #[test]
    fn errors_read_as_one_line() {
        let err = error(&profile(vec![dom_source("li[", dom_fields())]));
        assert!(
            err.to_string()
                .starts_with("sources[0].cards: invalid CSS selector \"li[\"")
        );
    }

    #[test]
    fn a_selector_error_is_the_authors_not_a_bug_report() {
        for bad in ["li:hover-x", "li::nope", "li:nth-child(x)", "li[", "li >"] {
            let source = dom_source(bad, dom_fields());
            let err = compile(&profile(vec![source])).unwrap_err();
            let text = err.to_string();
            assert!(
                text.starts_with("sources[0].cards: invalid CSS selector"),
                "{text}"
            );
            assert!(
                !text.contains("developer") && !text.contains('\n'),
                "{bad}: {text}"
            );
        }
        let source = dom_source("li:hover-x", dom_fields());
        let text = compile(&profile(vec![source])).unwrap_err().to_string();
        assert!(
            text.contains("hover-x"),
            "the error names what is wrong: {text}"
        );
    }
}
