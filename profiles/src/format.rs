//! The site-profile file format, version 2 (`docs/site-profiles.md` is its reference):
//! TOML in, a validated [`Profile`] out.
//!
//! - Every key is known: an unknown one, a key of another source kind, a missing required
//!   field, a bad duration, URL template, CSS selector, regex or JSON path is a
//!   [`ProfileError`] naming the file and the field (`sources[0].fields.price[1].css`).
//!   Selectors, regexes and paths are checked by compiling the profile
//!   ([`crate::compiled::compile`]), the same code the crawler node reads pages with.
//! - Card classes absent from a profile get the defaults of `profiles/classes.toml` (data,
//!   not code); a class table that sets only `policy` keeps the default matchers.
//! - A `[vocabulary]` table adds words to the judge's vocabulary for the mall
//!   ([`crate::vocabulary`], `docs/vocabulary.md`): checked here against the built-in
//!   words, and again by the coordinator against the vocabulary it runs with.
//! - [`BUILTIN`] are the malls compiled in; [`load`] overrides and extends them by id from a
//!   directory.

use std::{
    collections::{BTreeMap, HashMap},
    path::Path,
    sync::OnceLock,
    time::Duration,
};

use lps_proto::{
    model::{self, CardClass, MallId},
    pb,
};
use serde::Deserialize;

/// The format this module reads (`format = 2`).
pub const FORMAT_VERSION: u32 = 2;
/// `wait_timeout` when a profile sets none.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(15);
/// `max_cards` when a profile sets none.
pub const DEFAULT_MAX_CARDS: u32 = 40;
/// The most cards a profile may ask for per round.
pub const MAX_CARDS_LIMIT: u32 = 500;

/// The built-in profiles: (file name, contents).
pub const BUILTIN: &[(&str, &str)] = &[
    ("naver.toml", include_str!("../builtin/naver.toml")),
    ("coupang.toml", include_str!("../builtin/coupang.toml")),
    (
        "testmall-alpha.toml",
        include_str!("../builtin/testmall-alpha.toml"),
    ),
    (
        "testmall-beta.toml",
        include_str!("../builtin/testmall-beta.toml"),
    ),
    (
        "testmall-gamma.toml",
        include_str!("../builtin/testmall-gamma.toml"),
    ),
];

/// The default card-class rules (`profiles/classes.toml`).
pub const DEFAULT_CLASSES: &str = include_str!("../classes.toml");

/// A loaded profile: what nodes get, and the mall's politeness limits.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// Where it was read from (a path, or `(built-in) naver.toml`): errors found later,
    /// such as vocabulary additions the coordinator's vocabulary cannot take, name it.
    pub file: String,
    pub wire: pb::SiteProfile,
    /// Concurrent running jobs of this mall, deployment-wide (`None` = no cap).
    pub max_running: Option<u32>,
    /// Between two job starts of this mall, deployment-wide.
    pub min_start_gap: Duration,
    /// What this mall's attempts may cost per rolling hour, deployment-wide, USD (`None` =
    /// no cap): reached, none of its jobs is claimed until the hour frees up.
    pub spend_cap_hourly_usd: Option<f64>,
}

impl Profile {
    /// The mall id (validated on load).
    pub fn mall(&self) -> MallId {
        MallId::new(self.wire.id.clone()).unwrap_or_else(|_| unreachable!("validated on load"))
    }
}

/// A profile that cannot be used, named by file and field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("site profile {file}: {field}: {reason}")]
pub struct ProfileError {
    pub file: String,
    pub field: String,
    pub reason: String,
}

// ---------------------------------------------------------------- the file, as written

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    format: u32,
    id: String,
    display_name: String,
    search_url_template: String,
    #[serde(default)]
    price_sort_url_template: String,
    #[serde(default)]
    wait_for: String,
    #[serde(default)]
    wait_timeout: Option<String>,
    #[serde(default)]
    max_cards: Option<u32>,
    #[serde(default)]
    no_results_selector: String,
    #[serde(default)]
    no_results_text: String,
    #[serde(default)]
    free_shipping_texts: Vec<String>,
    /// A mall's shipping type codes and what each means (`free`, `paid`,
    /// `free_by_threshold`, `unknown`).
    #[serde(default)]
    shipping_types: BTreeMap<String, String>,
    #[serde(default)]
    warmup_url: String,
    #[serde(default)]
    ip_request_budget: u32,
    #[serde(default)]
    blocked_url_patterns: Vec<String>,
    #[serde(default)]
    accept_coupon_price: bool,
    #[serde(default)]
    sources: Vec<SourceFile>,
    #[serde(default)]
    classes: BTreeMap<String, ClassFile>,
    #[serde(default)]
    more: Option<MoreFile>,
    #[serde(default)]
    navigation: Option<NavigationFile>,
    /// Words added to the judge's vocabulary for this mall (`crate::vocabulary`).
    #[serde(default)]
    vocabulary: Option<toml::Value>,
    #[serde(default)]
    block: BlockFile,
    #[serde(default)]
    limits: LimitsFile,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceFile {
    kind: String,
    #[serde(default)]
    name: String,
    script: Option<String>,
    list: Option<String>,
    url_pattern: Option<String>,
    cards: Option<String>,
    url: Option<String>,
    headers: Option<BTreeMap<String, String>>,
    #[serde(default)]
    fields: BTreeMap<String, toml::Value>,
    /// Fields taken per card from another source with the same key.
    join: Option<JoinFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JoinFile {
    source: String,
    take: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    #[serde(default)]
    css: String,
    #[serde(default)]
    attr: String,
    #[serde(default)]
    own_text: bool,
    #[serde(default)]
    exclude: String,
    #[serde(default)]
    json: String,
    #[serde(default)]
    regex: String,
    #[serde(default)]
    pick: Option<String>,
    #[serde(default)]
    constant: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClassFile {
    policy: Option<String>,
    /// `true`: the table's matchers are added to the default ones instead of replacing them.
    #[serde(default)]
    extend: bool,
    selectors: Option<Vec<String>>,
    texts: Option<Vec<TextFile>>,
    json: Option<Vec<JsonFile>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TextFile {
    field: String,
    regex: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonFile {
    path: String,
    #[serde(default)]
    equals: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MoreFile {
    scroll: Option<ScrollFile>,
    more_button: Option<String>,
    max_clicks: Option<u32>,
    next_page: Option<NextPageFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NavigationFile {
    mode: String,
    #[serde(default)]
    home_url: String,
    #[serde(default)]
    search_input: String,
    #[serde(default)]
    typing: Option<String>,
    #[serde(default)]
    dwell: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScrollFile {
    #[serde(default)]
    until_cards: u32,
    max_scrolls: Option<u32>,
    settle: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NextPageFile {
    #[serde(default)]
    url_template: String,
    #[serde(default)]
    selector: String,
    max_pages: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BlockFile {
    #[serde(default)]
    texts: Vec<String>,
    #[serde(default)]
    selectors: Vec<String>,
    #[serde(default)]
    statuses: Vec<u32>,
    #[serde(default)]
    min_html_bytes: u32,
    #[serde(default)]
    challenges: Vec<ChallengeFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChallengeFile {
    #[serde(default)]
    text: String,
    #[serde(default)]
    selector: String,
    clears_within: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsFile {
    max_running: Option<u32>,
    min_start_gap: Option<String>,
    spend_cap_hourly_usd: Option<f64>,
}

/// Scroll steps when a profile's scroll rule names none.
pub const DEFAULT_MAX_SCROLLS: u32 = 10;
/// How long a scroll step waits for new cards when the rule names no `settle`.
pub const DEFAULT_SCROLL_SETTLE: Duration = Duration::from_millis(1500);
/// "More" button clicks when the profile names no `max_clicks`.
pub const DEFAULT_MAX_CLICKS: u32 = 3;
/// The most pages a profile may read per round.
pub const MAX_PAGES_LIMIT: u32 = 10;
/// The longest `clears_within` a challenge may have.
pub const MAX_CLEARS_WITHIN: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------- parsing

/// One file's field errors, built with the file name.
struct Errors<'a> {
    file: &'a str,
}

impl Errors<'_> {
    fn at(&self, field: impl Into<String>, reason: impl Into<String>) -> ProfileError {
        ProfileError {
            file: self.file.to_owned(),
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// Parses and validates one profile file's contents (`file` names it in errors).
pub fn parse(file: &str, text: &str) -> Result<Profile, ProfileError> {
    let e = Errors { file };
    let table: toml::Table = toml::from_str(text).map_err(|err| toml_error(&e, text, &err))?;
    match table.get("format") {
        Some(toml::Value::Integer(v)) if *v == i64::from(FORMAT_VERSION) => {}
        Some(other) => {
            return Err(e.at(
                "format",
                format!("{other} is not a format this build reads (want {FORMAT_VERSION})"),
            ));
        }
        None => {
            let v1 = table.contains_key("card_selector");
            return Err(e.at(
                "format",
                if v1 {
                    "this is a format-1 profile (card_selector, title_selector, …): rewrite it as format 2 with one `dom` source: `crawler-node profile convert FILE` does it (docs/site-profiles.md, \"Format 1\")".to_owned()
                } else {
                    format!("missing: a profile starts with `format = {FORMAT_VERSION}`")
                },
            ));
        }
    }
    let raw: ProfileFile = toml::from_str(text).map_err(|err| toml_error(&e, text, &err))?;
    build(&e, raw)
}

fn toml_error(e: &Errors<'_>, text: &str, err: &toml::de::Error) -> ProfileError {
    // toml names the key in backticks; keep the message on one line, with its line number.
    let msg = err.message().replace('\n', " ");
    let field = msg
        .split('`')
        .nth(1)
        .filter(|f| !f.is_empty())
        .unwrap_or("(syntax)")
        .to_owned();
    let line = err
        .span()
        .map(|span| text[..span.start.min(text.len())].lines().count().max(1));
    match line {
        Some(line) => e.at(field, format!("{msg} (line {line})")),
        None => e.at(field, msg),
    }
}

fn duration(e: &Errors<'_>, field: &str, text: &str) -> Result<Duration, ProfileError> {
    humantime::parse_duration(text).map_err(|err| e.at(field, format!("{text:?}: {err}")))
}

fn url_template(
    e: &Errors<'_>,
    field: &str,
    template: &str,
    needs: &[&str],
) -> Result<(), ProfileError> {
    if !(template.starts_with("http://") || template.starts_with("https://")) {
        return Err(e.at(field, "must start with http:// or https://"));
    }
    if !needs.iter().any(|n| template.contains(n)) {
        return Err(e.at(field, format!("must contain {}", needs.join(" or "))));
    }
    Ok(())
}

fn build(e: &Errors<'_>, raw: ProfileFile) -> Result<Profile, ProfileError> {
    debug_assert_eq!(raw.format, FORMAT_VERSION);
    MallId::new(raw.id.clone()).map_err(|err| e.at("id", err.reason))?;
    if raw.display_name.trim().is_empty() {
        return Err(e.at("display_name", "must not be empty"));
    }
    url_template(
        e,
        "search_url_template",
        &raw.search_url_template,
        &["{query}"],
    )?;
    if !raw.price_sort_url_template.is_empty() {
        url_template(
            e,
            "price_sort_url_template",
            &raw.price_sort_url_template,
            &["{query}"],
        )?;
    }
    let wait_timeout = match &raw.wait_timeout {
        Some(t) => duration(e, "wait_timeout", t)?,
        None => DEFAULT_WAIT_TIMEOUT,
    };
    if wait_timeout.is_zero() {
        return Err(e.at("wait_timeout", "must be more than 0s"));
    }
    let max_cards = raw.max_cards.unwrap_or(DEFAULT_MAX_CARDS);
    if max_cards == 0 || max_cards > MAX_CARDS_LIMIT {
        return Err(e.at("max_cards", format!("must be 1..={MAX_CARDS_LIMIT}")));
    }
    if raw.sources.is_empty() {
        return Err(e.at("sources", "a profile needs at least one [[sources]] entry"));
    }
    let sources = raw
        .sources
        .iter()
        .enumerate()
        .map(|(i, s)| source(e, i, s))
        .collect::<Result<Vec<_>, _>>()?;
    let browser = raw.sources.iter().any(|s| s.kind != "http_api");
    if browser && raw.sources.iter().any(|s| s.kind == "http_api") {
        return Err(e.at(
            "sources",
            "an http_api source must be the profile's only source (it is read without a browser)",
        ));
    }
    if browser && raw.no_results_selector.is_empty() && raw.no_results_text.is_empty() {
        return Err(e.at(
            "no_results_selector",
            "a profile needs a no-results marker (selector or text): without one a healthy empty page cannot be told from a broken one",
        ));
    }
    let classes = classes(e, &raw.classes)?;
    let more = raw.more.as_ref().map(|m| more(e, m)).transpose()?;
    let block = block(e, raw.block)?;
    let min_start_gap = match &raw.limits.min_start_gap {
        Some(gap) => duration(e, "limits.min_start_gap", gap)?,
        None => Duration::ZERO,
    };
    if raw.limits.max_running == Some(0) {
        return Err(e.at(
            "limits.max_running",
            "must be at least 1 (omit it for no cap)",
        ));
    }
    if let Some(usd) = raw.limits.spend_cap_hourly_usd
        && !(usd > 0.0 && usd < 1e9)
    {
        return Err(e.at(
            "limits.spend_cap_hourly_usd",
            "must be a positive number of USD below 1e9 (omit it for no cap)",
        ));
    }
    let navigation = raw
        .navigation
        .as_ref()
        .map(|n| navigation(e, n))
        .transpose()?
        .flatten();
    let vocabulary = match raw.vocabulary {
        None => None,
        Some(table) => {
            let additions = crate::vocabulary::parse_additions(e.file, "vocabulary", table)
                .map_err(|err| e.at(err.field, err.reason))?;
            // Checked against the built-in words here; the coordinator checks it again
            // against the vocabulary it runs with.
            let base = crate::vocabulary::Lexicon::builtin_wire();
            crate::vocabulary::Lexicon::compile(&base, Some(&additions))
                .map_err(|err| e.at(err.field, err.reason))?;
            Some(additions)
        }
    };
    let shipping_types = shipping_types(e, &raw.shipping_types)?;
    let wire = pb::SiteProfile {
        id: raw.id,
        display_name: raw.display_name,
        search_url_template: raw.search_url_template,
        wait_for: raw.wait_for,
        wait_timeout: Some(model::duration_to_pb(wait_timeout)),
        no_results_selector: raw.no_results_selector,
        no_results_text: raw.no_results_text,
        block: Some(block),
        warmup_url: raw.warmup_url,
        ip_request_budget: raw.ip_request_budget,
        free_shipping_texts: raw.free_shipping_texts,
        shipping_types,
        blocked_url_patterns: raw.blocked_url_patterns,
        max_cards,
        sources,
        classes,
        more,
        accept_coupon_price: raw.accept_coupon_price,
        price_sort_url_template: raw.price_sort_url_template,
        vocabulary,
        navigation,
    };
    crate::compiled::compile(&wire).map_err(|err| e.at(err.field, err.reason))?;
    Ok(Profile {
        file: e.file.to_owned(),
        wire,
        max_running: raw.limits.max_running,
        min_start_gap,
        spend_cap_hourly_usd: raw.limits.spend_cap_hourly_usd,
    })
}

/// The keys each source kind takes besides `kind`, `name` and `fields`.
fn kind_keys(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "embedded_json" => &["script", "list"],
        "captured_json" => &["url_pattern", "list"],
        "dom" => &["cards"],
        "http_api" => &["url", "headers", "list"],
        _ => return None,
    })
}

fn source(e: &Errors<'_>, i: usize, s: &SourceFile) -> Result<pb::CardSource, ProfileError> {
    let at = |key: &str| format!("sources[{i}].{key}");
    let allowed = kind_keys(&s.kind).ok_or_else(|| {
        e.at(
            at("kind"),
            format!(
                "{:?} is not a source kind (embedded_json, captured_json, dom, http_api)",
                s.kind
            ),
        )
    })?;
    let given = [
        ("script", s.script.is_some()),
        ("list", s.list.is_some()),
        ("url_pattern", s.url_pattern.is_some()),
        ("cards", s.cards.is_some()),
        ("url", s.url.is_some()),
        ("headers", s.headers.is_some()),
    ];
    for (key, present) in given {
        if present && !allowed.contains(&key) {
            return Err(e.at(at(key), format!("not a key of a {} source", s.kind)));
        }
    }
    let need = |key: &str, value: &Option<String>| -> Result<String, ProfileError> {
        value
            .as_deref()
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| e.at(at(key), format!("a {} source needs it", s.kind)))
    };
    use pb::card_source::Kind;
    let kind = match s.kind.as_str() {
        "embedded_json" => Kind::EmbeddedJson(pb::EmbeddedJsonSource {
            script_selector: need("script", &s.script)?,
            list_path: need("list", &s.list)?,
        }),
        "captured_json" => Kind::CapturedJson(pb::CapturedJsonSource {
            url_pattern: need("url_pattern", &s.url_pattern)?,
            list_path: need("list", &s.list)?,
        }),
        "dom" => Kind::Dom(pb::DomSource {
            card_selector: need("cards", &s.cards)?,
        }),
        _ => {
            let url = need("url", &s.url)?;
            url_template(e, &at("url"), &url, &["{query}"])?;
            let headers = s.headers.clone().unwrap_or_default();
            for (name, value) in &headers {
                if name.trim().is_empty() || name.contains(char::is_whitespace) {
                    return Err(e.at(at("headers"), format!("{name:?} is not a header name")));
                }
                check_env_refs(value)
                    .map_err(|reason| e.at(at(&format!("headers.{name}")), reason))?;
            }
            Kind::HttpApi(pb::HttpApiSource {
                url_template: url,
                headers: headers.into_iter().collect(),
                list_path: need("list", &s.list)?,
            })
        }
    };
    let dom = s.kind == "dom";
    let mut fields = pb::CardFields::default();
    for (name, value) in &s.fields {
        let rules = field_rules(e, &at(&format!("fields.{name}")), value, dom)?;
        let slot = match name.as_str() {
            "title" => &mut fields.title,
            "price" => &mut fields.price,
            "list_price" => &mut fields.list_price,
            "coupon_price" => &mut fields.coupon_price,
            "shipping" => &mut fields.shipping,
            "shipping_fee" => &mut fields.shipping_fee,
            "shipping_threshold" => &mut fields.shipping_threshold,
            "shipping_type" => &mut fields.shipping_type,
            "key" => &mut fields.key,
            "link" => &mut fields.link,
            "seller" => &mut fields.seller,
            _ => {
                return Err(e.at(
                    at(&format!("fields.{name}")),
                    "not a field (title, price, list_price, coupon_price, shipping, shipping_fee, shipping_threshold, shipping_type, link, seller, key)",
                ));
            }
        };
        *slot = rules;
    }
    for (name, rules) in [
        ("title", &fields.title),
        ("price", &fields.price),
        ("link", &fields.link),
    ] {
        if rules.is_empty() {
            return Err(e.at(at(&format!("fields.{name}")), "required"));
        }
    }
    Ok(pb::CardSource {
        name: s.name.trim().to_owned(),
        kind: Some(kind),
        fields: Some(fields),
        join: s.join.as_ref().map(|j| pb::SourceJoin {
            source: j.source.trim().to_owned(),
            take: j.take.clone(),
        }),
    })
}

/// `shipping_types`: each code means `free`, `paid`, `free_by_threshold` or `unknown`.
fn shipping_types(
    e: &Errors<'_>,
    types: &BTreeMap<String, String>,
) -> Result<HashMap<String, i32>, ProfileError> {
    let mut out = HashMap::new();
    for (code, meaning) in types {
        let at = format!("shipping_types.{code}");
        if code.trim().is_empty() {
            return Err(e.at("shipping_types", "an empty type code"));
        }
        let status = match meaning.trim() {
            "free" => pb::ShippingStatus::Free,
            "paid" => pb::ShippingStatus::Paid,
            "free_by_threshold" => pb::ShippingStatus::FreeByThreshold,
            "unknown" => pb::ShippingStatus::Unknown,
            other => {
                return Err(e.at(
                    at,
                    format!("{other:?} is not free, paid, free_by_threshold or unknown"),
                ));
            }
        };
        let key = code.trim().to_lowercase();
        if out.insert(key, status as i32).is_some() {
            return Err(e.at(at, "listed twice (codes are compared without case)"));
        }
    }
    Ok(out)
}

/// `${env:NAME}` references must be well formed.
fn check_env_refs(value: &str) -> Result<(), String> {
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("{value:?}: `${{` without `}}`"))?;
        let name = after[..end]
            .strip_prefix("env:")
            .ok_or_else(|| format!("{value:?}: only ${{env:NAME}} references are known"))?;
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "{value:?}: {name:?} is not an environment variable name"
            ));
        }
        rest = &after[end + 1..];
    }
    Ok(())
}

fn field_rules(
    e: &Errors<'_>,
    at: &str,
    value: &toml::Value,
    dom: bool,
) -> Result<Vec<pb::FieldRule>, ProfileError> {
    match value {
        toml::Value::String(s) => Ok(vec![if dom {
            pb::FieldRule {
                css: s.clone(),
                ..pb::FieldRule::default()
            }
        } else {
            pb::FieldRule {
                json: s.clone(),
                ..pb::FieldRule::default()
            }
        }]),
        toml::Value::Table(_) => Ok(vec![rule(e, at, value)?]),
        toml::Value::Array(items) => {
            if items.is_empty() {
                return Err(e.at(at, "an empty list of rules"));
            }
            items
                .iter()
                .enumerate()
                .map(|(i, item)| match item {
                    toml::Value::String(_) | toml::Value::Table(_) => {
                        field_rules(e, &format!("{at}[{i}]"), item, dom).map(|mut r| r.remove(0))
                    }
                    _ => Err(e.at(format!("{at}[{i}]"), "a rule is a string or a table")),
                })
                .collect()
        }
        _ => Err(e.at(at, "a field is a string, a rule table or a list of them")),
    }
}

fn rule(e: &Errors<'_>, at: &str, value: &toml::Value) -> Result<pb::FieldRule, ProfileError> {
    let raw: RuleFile = value.clone().try_into().map_err(|err: toml::de::Error| {
        let msg = err.message().replace('\n', " ");
        let key = msg.split('`').nth(1).unwrap_or_default().to_owned();
        e.at(
            if key.is_empty() {
                at.to_owned()
            } else {
                format!("{at}.{key}")
            },
            msg,
        )
    })?;
    let pick = match raw.pick.as_deref() {
        None | Some("first") => pb::NumberPick::First,
        Some("last") => pb::NumberPick::Last,
        Some("min") => pb::NumberPick::Min,
        Some("max") => pb::NumberPick::Max,
        Some(other) => {
            return Err(e.at(
                format!("{at}.pick"),
                format!("{other:?} is not first, last, min or max"),
            ));
        }
    };
    Ok(pb::FieldRule {
        css: raw.css,
        attr: raw.attr,
        own_text: raw.own_text,
        exclude: raw.exclude,
        json: raw.json,
        regex: raw.regex,
        pick: pick as i32,
        constant: raw.constant,
    })
}

/// Field names a class text pattern may read.
const TEXT_FIELDS: [&str; 5] = ["title", "price", "shipping", "seller", "card"];

fn default_classes() -> &'static BTreeMap<String, ClassFile> {
    static DEFAULTS: OnceLock<BTreeMap<String, ClassFile>> = OnceLock::new();
    DEFAULTS.get_or_init(|| {
        // NB: the file is compiled in and checked by a unit test.
        toml::from_str(DEFAULT_CLASSES).unwrap_or_default()
    })
}

fn classes(
    e: &Errors<'_>,
    own: &BTreeMap<String, ClassFile>,
) -> Result<Vec<pb::CardClassRule>, ProfileError> {
    for name in own.keys() {
        if CardClass::from_name(name).is_none() {
            let names: Vec<&str> = CardClass::ALL.iter().map(|c| c.as_str()).collect();
            return Err(e.at(
                format!("classes.{name}"),
                format!("not a card class ({})", names.join(", ")),
            ));
        }
    }
    // NB: an extending table's matchers follow the defaults in the compiled rule, so their
    // indexes there are not the profile's: check them here, named as written.
    for (name, mine) in own.iter().filter(|(_, c)| c.extend) {
        for (i, s) in mine.selectors.iter().flatten().enumerate() {
            scraper::Selector::parse(s).map_err(|err| {
                e.at(
                    format!("classes.{name}.selectors[{i}]"),
                    format!(
                        "invalid CSS selector {s:?}: {}",
                        crate::compiled::selector_error(&err)
                    ),
                )
            })?;
        }
        for (i, t) in mine.texts.iter().flatten().enumerate() {
            regex::Regex::new(&t.regex).map_err(|err| {
                e.at(
                    format!("classes.{name}.texts[{i}].regex"),
                    format!("invalid regex {:?}: {err}", t.regex),
                )
            })?;
        }
    }
    let defaults = default_classes();
    let mut rules = Vec::new();
    for class in CardClass::ALL {
        let name = class.as_str();
        let base = defaults.get(name).cloned().unwrap_or_default();
        let merged = match own.get(name) {
            None => base,
            Some(mine) if mine.extend => {
                // The defaults first, then the profile's own matchers.
                fn both<T: Clone>(base: &Option<Vec<T>>, mine: &Option<Vec<T>>) -> Option<Vec<T>> {
                    let all: Vec<T> = base.iter().chain(mine).flatten().cloned().collect();
                    (!all.is_empty()).then_some(all)
                }
                ClassFile {
                    policy: mine.policy.clone().or_else(|| base.policy.clone()),
                    extend: true,
                    selectors: both(&base.selectors, &mine.selectors),
                    texts: both(&base.texts, &mine.texts),
                    json: both(&base.json, &mine.json),
                }
            }
            Some(mine) => {
                let replaces =
                    mine.selectors.is_some() || mine.texts.is_some() || mine.json.is_some();
                let policy = mine.policy.clone().or_else(|| base.policy.clone());
                ClassFile {
                    policy,
                    ..if replaces { mine.clone() } else { base }
                }
            }
        };
        let at = |key: &str| format!("classes.{name}.{key}");
        let policy = match merged.policy.as_deref() {
            Some("exclude") => pb::ClassPolicy::Exclude,
            Some("flag") => pb::ClassPolicy::Flag,
            None => pb::ClassPolicy::Unspecified,
            Some(other) => {
                return Err(e.at(at("policy"), format!("{other:?} is not exclude or flag")));
            }
        };
        let texts = merged.texts.unwrap_or_default();
        for (i, t) in texts.iter().enumerate() {
            if !TEXT_FIELDS.contains(&t.field.as_str()) {
                return Err(e.at(
                    format!("classes.{name}.texts[{i}].field"),
                    format!("{:?} is not one of {}", t.field, TEXT_FIELDS.join(", ")),
                ));
            }
        }
        rules.push(pb::CardClassRule {
            class: pb::CardClass::from(class) as i32,
            policy: policy as i32,
            selectors: merged.selectors.unwrap_or_default(),
            texts: texts
                .into_iter()
                .map(|t| pb::TextPattern {
                    field: t.field,
                    regex: t.regex,
                })
                .collect(),
            json: merged
                .json
                .unwrap_or_default()
                .into_iter()
                .map(|j| pb::JsonMatch {
                    path: j.path,
                    equals: j.equals,
                })
                .collect(),
        });
    }
    Ok(rules)
}

/// Default per-key delay of human navigation.
pub const DEFAULT_TYPING: (Duration, Duration) =
    (Duration::from_millis(70), Duration::from_millis(220));
/// Default dwell on the home page of human navigation.
pub const DEFAULT_DWELL: (Duration, Duration) =
    (Duration::from_millis(800), Duration::from_millis(2500));

fn navigation(e: &Errors<'_>, n: &NavigationFile) -> Result<Option<pb::Navigation>, ProfileError> {
    match n.mode.as_str() {
        "direct" => return Ok(None),
        "human" => {}
        other => {
            return Err(e.at(
                "navigation.mode",
                format!("is {other:?}, expected \"direct\" or \"human\""),
            ));
        }
    }
    url_template(e, "navigation.home_url", &n.home_url, &["://"])?;
    if n.search_input.trim().is_empty() {
        return Err(e.at(
            "navigation.search_input",
            "is required for human navigation",
        ));
    }
    let range =
        |field: &str, text: &Option<String>, default: (Duration, Duration), max: Duration| {
            let Some(text) = text else {
                return Ok(default);
            };
            let Some((lo, hi)) = text.split_once("..") else {
                return Err(e.at(
                    field,
                    format!("{text:?}: expected MIN..MAX, e.g. \"70ms..220ms\""),
                ));
            };
            let (lo, hi) = (
                duration(e, field, lo.trim())?,
                duration(e, field, hi.trim())?,
            );
            if lo > hi || hi > max {
                return Err(e.at(
                    field,
                    format!("{text:?}: MIN must not exceed MAX, and MAX at most {max:?}"),
                ));
            }
            Ok((lo, hi))
        };
    let typing = range(
        "navigation.typing",
        &n.typing,
        DEFAULT_TYPING,
        Duration::from_secs(2),
    )?;
    let dwell = range(
        "navigation.dwell",
        &n.dwell,
        DEFAULT_DWELL,
        Duration::from_secs(30),
    )?;
    Ok(Some(pb::Navigation {
        human: true,
        home_url: n.home_url.clone(),
        search_input_selector: n.search_input.clone(),
        key_delay_min: Some(model::duration_to_pb(typing.0)),
        key_delay_max: Some(model::duration_to_pb(typing.1)),
        dwell_min: Some(model::duration_to_pb(dwell.0)),
        dwell_max: Some(model::duration_to_pb(dwell.1)),
    }))
}

fn more(e: &Errors<'_>, m: &MoreFile) -> Result<pb::MoreResults, ProfileError> {
    let scroll = m
        .scroll
        .as_ref()
        .map(|s| -> Result<pb::ScrollRule, ProfileError> {
            let settle = match &s.settle {
                Some(t) => duration(e, "more.scroll.settle", t)?,
                None => DEFAULT_SCROLL_SETTLE,
            };
            let max_scrolls = s.max_scrolls.unwrap_or(DEFAULT_MAX_SCROLLS);
            if max_scrolls == 0 || max_scrolls > 100 {
                return Err(e.at("more.scroll.max_scrolls", "must be 1..=100"));
            }
            if settle.is_zero() || settle > Duration::from_secs(30) {
                return Err(e.at("more.scroll.settle", "must be more than 0s and at most 30s"));
            }
            Ok(pb::ScrollRule {
                until_cards: s.until_cards,
                max_scrolls,
                settle: Some(model::duration_to_pb(settle)),
            })
        })
        .transpose()?;
    let next_page = m
        .next_page
        .as_ref()
        .map(|n| -> Result<pb::NextPage, ProfileError> {
            if n.url_template.is_empty() && n.selector.is_empty() {
                return Err(e.at("more.next_page", "needs url_template or selector"));
            }
            if !n.url_template.is_empty() {
                url_template(
                    e,
                    "more.next_page.url_template",
                    &n.url_template,
                    &["{page}", "{start}"],
                )?;
            }
            let max_pages = n.max_pages.unwrap_or(2);
            if max_pages == 0 || max_pages > MAX_PAGES_LIMIT {
                return Err(e.at(
                    "more.next_page.max_pages",
                    format!("must be 1..={MAX_PAGES_LIMIT}"),
                ));
            }
            Ok(pb::NextPage {
                url_template: n.url_template.clone(),
                selector: n.selector.clone(),
                max_pages,
            })
        })
        .transpose()?;
    let more_button = m.more_button.clone().unwrap_or_default();
    if m.max_clicks.is_some() && more_button.is_empty() {
        return Err(e.at("more.max_clicks", "set more_button too"));
    }
    Ok(pb::MoreResults {
        scroll,
        max_clicks: if more_button.is_empty() {
            0
        } else {
            m.max_clicks.unwrap_or(DEFAULT_MAX_CLICKS)
        },
        more_button_selector: more_button,
        next_page,
    })
}

fn block(e: &Errors<'_>, b: BlockFile) -> Result<pb::BlockMarkers, ProfileError> {
    let mut challenges = Vec::new();
    for (i, c) in b.challenges.into_iter().enumerate() {
        let at = |key: &str| format!("block.challenges[{i}].{key}");
        if c.text.trim().is_empty() && c.selector.trim().is_empty() {
            return Err(e.at(at("text"), "a challenge needs a text or a selector"));
        }
        let within = duration(e, &at("clears_within"), &c.clears_within)?;
        if within.is_zero() || within > MAX_CLEARS_WITHIN {
            return Err(e.at(
                at("clears_within"),
                format!("must be more than 0s and at most {MAX_CLEARS_WITHIN:?}"),
            ));
        }
        challenges.push(pb::Challenge {
            text: c.text,
            selector: c.selector,
            clears_within: Some(model::duration_to_pb(within)),
        });
    }
    for (i, s) in b.statuses.iter().enumerate() {
        if !(100..=599).contains(s) {
            return Err(e.at(format!("block.statuses[{i}]"), "not an HTTP status"));
        }
    }
    Ok(pb::BlockMarkers {
        texts: b.texts,
        selectors: b.selectors,
        statuses: b.statuses,
        min_html_bytes: b.min_html_bytes,
        challenges,
    })
}

// ---------------------------------------------------------------- loading

/// The built-in profiles, overridden and extended by id by the `*.toml` files of `dir`.
pub fn load(dir: Option<&Path>) -> Result<Vec<Profile>, ProfileError> {
    let files = match dir {
        Some(dir) => read_dir(dir)?,
        None => Vec::new(),
    };
    load_files(&files)
}

/// The `*.toml` files of `dir` as (path, contents), in path order: what [`load_files`]
/// takes. Files are read through symbolic links (a mounted Kubernetes ConfigMap is a set
/// of links into a directory that is swapped whole); other entries are skipped.
pub fn read_dir(dir: &Path) -> Result<Vec<(String, String)>, ProfileError> {
    let io = |reason: String| ProfileError {
        file: dir.display().to_string(),
        field: "(directory)".into(),
        reason,
    };
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| io(e.to_string()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let name = path.display().to_string();
            match std::fs::read_to_string(&path) {
                Ok(text) => Ok((name, text)),
                Err(e) => Err(ProfileError {
                    file: name,
                    field: "(file)".into(),
                    reason: e.to_string(),
                }),
            }
        })
        .collect()
}

/// The built-in profiles, overridden and extended by id by `files` ((path, contents), as
/// [`read_dir`] returns them; a later file wins over an earlier one with the same id).
pub fn load_files(files: &[(String, String)]) -> Result<Vec<Profile>, ProfileError> {
    let mut by_id = BTreeMap::new();
    for (file, text) in BUILTIN {
        let p = parse(&format!("(built-in) {file}"), text)?;
        by_id.insert(p.wire.id.clone(), p);
    }
    for (name, text) in files {
        let p = parse(name, text)?;
        by_id.insert(p.wire.id.clone(), p);
    }
    Ok(by_id.into_values().collect())
}

/// Reads and parses one profile file.
pub fn parse_file(path: &Path) -> Result<Profile, ProfileError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ProfileError {
        file: name.clone(),
        field: "(file)".into(),
        reason: e.to_string(),
    })?;
    parse(&name, &text)
}

/// Format 1's per-field selector keys and the format-2 field each becomes.
const FORMAT1_FIELDS: [(&str, &str); 6] = [
    ("title_selector", "title"),
    ("price_selector", "price"),
    ("shipping_selector", "shipping"),
    ("link_selector", "link"),
    ("seller_selector", "seller"),
    ("list_price_selector", "list_price"),
];

/// Rewrites a format-1 profile (flat `card_selector`, `title_selector`, …) as format 2: one
/// `dom` source, `link_selector`'s `href` as the link, every other key kept as it was. The
/// result is checked by [`parse`], so what comes back loads (or the error names the field
/// the rewrite could not fix, e.g. a missing no-results marker).
pub fn convert_format1(file: &str, text: &str) -> Result<String, ProfileError> {
    let e = Errors { file };
    let mut table: toml::Table = toml::from_str(text).map_err(|err| toml_error(&e, text, &err))?;
    if table.contains_key("format") {
        return Err(e.at("format", "already set: not a format-1 profile"));
    }
    let cards = match table.remove("card_selector") {
        Some(toml::Value::String(cards)) => cards,
        _ => return Err(e.at("card_selector", "a format-1 profile names its cards here")),
    };
    let mut fields = toml::Table::new();
    for (old, new) in FORMAT1_FIELDS {
        match table.remove(old) {
            None => {}
            Some(toml::Value::String(css)) if css.trim().is_empty() => {}
            Some(toml::Value::String(css)) if new == "link" => {
                let mut rule = toml::Table::new();
                rule.insert("css".into(), css.into());
                rule.insert("attr".into(), "href".into());
                fields.insert(new.into(), rule.into());
            }
            Some(toml::Value::String(css)) => {
                fields.insert(new.into(), css.into());
            }
            Some(_) => return Err(e.at(old, "a CSS selector (a string)")),
        }
    }
    let mut source = toml::Table::new();
    source.insert("kind".into(), "dom".into());
    source.insert("cards".into(), cards.into());
    source.insert("fields".into(), fields.into());
    table.insert("sources".into(), toml::Value::Array(vec![source.into()]));
    let body = toml::to_string(&table).map_err(|err| e.at("(file)", err.to_string()))?;
    let out = format!(
        "# Converted from format 1 by `crawler-node profile convert` (docs/site-profiles.md).\nformat = {FORMAT_VERSION}\n{body}"
    );
    parse(file, &out)?;
    Ok(out)
}

/// A built-in profile by file name (`testmall-alpha.toml`), as written.
pub fn builtin_text(file: &str) -> Option<&'static str> {
    BUILTIN.iter().find(|(f, _)| *f == file).map(|(_, t)| *t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alpha() -> &'static str {
        builtin_text("testmall-alpha.toml").unwrap()
    }

    #[test]
    fn builtin_profiles_parse_and_compile() {
        let all = load(None).unwrap();
        let ids: Vec<&str> = all.iter().map(|p| p.wire.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "coupang",
                "naver",
                "testmall-alpha",
                "testmall-beta",
                "testmall-gamma"
            ]
        );
        let naver = all.iter().find(|p| p.wire.id == "naver").unwrap();
        assert_eq!(naver.max_running, Some(4));
        assert_eq!(naver.min_start_gap, Duration::from_secs(2));
        // JSON first (one source per design of the inline blob), DOM last; Naver's
        // restriction (418) and captcha challenge (405) statuses are blocks.
        let kinds: Vec<_> = naver.wire.sources.iter().map(|s| s.kind.clone()).collect();
        assert!(matches!(
            kinds[0],
            Some(pb::card_source::Kind::EmbeddedJson(_))
        ));
        assert!(matches!(
            kinds.last(),
            Some(Some(pb::card_source::Kind::Dom(_)))
        ));
        let statuses = &naver.wire.block.as_ref().unwrap().statuses;
        assert!(statuses.contains(&418) && statuses.contains(&405));
        // Every class has a rule, defaults filled in.
        for p in &all {
            assert_eq!(p.wire.classes.len(), CardClass::ALL.len(), "{}", p.wire.id);
        }
    }

    #[test]
    fn default_classes_file_is_valid() {
        let parsed: BTreeMap<String, ClassFile> = toml::from_str(DEFAULT_CLASSES).unwrap();
        for name in parsed.keys() {
            assert!(CardClass::from_name(name).is_some(), "{name}");
        }
        for (name, class) in &parsed {
            for t in class.texts.iter().flatten() {
                regex::Regex::new(&t.regex).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
        }
    }

    #[test]
    fn class_tables_replace_matchers_or_only_the_policy() {
        let text = format!(
            "{}\n[classes.overseas]\npolicy = \"exclude\"\n[classes.ad]\nselectors = [\"span.ad\"]\n",
            alpha()
        );
        let p = parse("alpha.toml", &text).unwrap();
        let rule = |class: CardClass| {
            p.wire
                .classes
                .iter()
                .find(|r| r.class == pb::CardClass::from(class) as i32)
                .unwrap()
                .clone()
        };
        let overseas = rule(CardClass::Overseas);
        assert_eq!(overseas.policy, pb::ClassPolicy::Exclude as i32);
        assert!(!overseas.texts.is_empty(), "default matchers kept");
        let ad = rule(CardClass::Ad);
        assert_eq!(ad.selectors, ["span.ad"]);
        assert!(ad.texts.is_empty(), "default matchers replaced");
        assert_eq!(
            ad.policy,
            pb::ClassPolicy::Exclude as i32,
            "default policy kept"
        );
    }

    #[test]
    fn a_spend_cap_is_a_politeness_limit() {
        let capped = alpha().replace(
            "max_running = 8",
            "max_running = 8\nspend_cap_hourly_usd = 2.5",
        );
        let p = parse("/p/alpha.toml", &capped).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.spend_cap_hourly_usd, Some(2.5));
        let p = parse("/p/alpha.toml", alpha()).unwrap();
        assert_eq!(
            p.spend_cap_hourly_usd, None,
            "no cap unless the profile sets one"
        );
    }

    #[test]
    fn structured_shipping_fields_and_type_codes() {
        let text = alpha().replace(
            "max_cards = 40",
            "max_cards = 40\nshipping_types = { FREE = \"free\", CONDITIONAL = \"free_by_threshold\" }",
        ).replace(
            "seller = \"span.product-seller\"",
            "seller = \"span.product-seller\"\nshipping_fee = [\"span.fee\", { css = \"span.ship\", pick = \"last\" }]\nshipping_threshold = \"span.free-from\"\nshipping_type = { css = \"span.ship\", attr = \"data-type\" }",
        );
        let profile = parse("alpha.toml", &text).unwrap();
        let fields = profile.wire.sources[0].fields.as_ref().unwrap();
        assert_eq!(fields.shipping_fee.len(), 2);
        assert_eq!(fields.shipping_threshold[0].css, "span.free-from");
        assert_eq!(fields.shipping_type[0].attr, "data-type");
        assert_eq!(
            profile.wire.shipping_types.get("conditional"),
            Some(&(pb::ShippingStatus::FreeByThreshold as i32))
        );
        crate::compiled::compile(&profile.wire).unwrap();
        let bad = alpha().replace(
            "max_cards = 40",
            "max_cards = 40\nshipping_types = { FREE = \"gratis\" }",
        );
        let err = parse("alpha.toml", &bad).unwrap_err();
        assert_eq!(err.field, "shipping_types.FREE", "{err}");
        assert!(
            err.reason
                .contains("free, paid, free_by_threshold or unknown"),
            "{err}"
        );
        let twice = alpha().replace(
            "max_cards = 40",
            "max_cards = 40\nshipping_types = { FREE = \"free\", free = \"paid\" }",
        );
        assert!(
            parse("alpha.toml", &twice)
                .unwrap_err()
                .reason
                .contains("twice")
        );
    }

    #[test]
    fn a_source_joins_another_by_key() {
        let text = alpha().replace(
            "seller = \"span.product-seller\"",
            "seller = \"span.product-seller\"\nkey = { css = \"\", attr = \"data-id\" }",
        ) + "\n[[sources]]\nkind = \"captured_json\"\nname = \"api\"\nurl_pattern = \"/api/search\"\nlist = \"$.items[*]\"\n[sources.fields]\ntitle = \"$.title\"\nprice = \"$.price\"\nlink = \"$.url\"\nkey = \"$.id\"\n";
        let text = text.replacen(
            "kind = \"dom\"",
            "kind = \"dom\"\njoin = { source = \"api\", take = [\"title\", \"shipping\"] }",
            1,
        );
        let profile = parse("alpha.toml", &text).unwrap();
        let join = profile.wire.sources[0].join.as_ref().unwrap();
        assert_eq!((join.source.as_str(), join.take.len()), ("api", 2));
        let compiled = crate::compiled::compile(&profile.wire).unwrap();
        assert_eq!(compiled.sources()[0].join.as_ref().unwrap().source, 1);
        let bad = text.replace("source = \"api\"", "source = \"apu\"");
        let err = parse("alpha.toml", &bad).unwrap_err();
        assert_eq!(err.field, "sources[0].join.source", "{err}");
        assert!(err.reason.contains("(dom, api)"), "{err}");
    }

    #[test]
    fn errors_name_file_and_field() {
        let good = alpha();
        let cases = [
            (good.replace("cards = \"li.product-item\"", "cards = \"\""), "sources[0].cards"),
            (good.replace("cards = \"li.product-item\"", "cards = \"li[\""), "sources[0].cards"),
            (good.replace("?q={query}", "?q=x"), "search_url_template"),
            (good.replace("wait_timeout = \"10s\"", "wait_timeout = \"soon\""), "wait_timeout"),
            (good.replace("max_cards = 40", "max_cards = 40\ncolour = \"red\""), "colour"),
            (good.replace("id = \"testmall-alpha\"", "id = \"Test Mall\""), "id"),
            (good.replace("max_running = 8", "max_running = 0"), "limits.max_running"),
            (
                good.replace("max_running = 8", "max_running = 8\nspend_cap_hourly_usd = 0"),
                "limits.spend_cap_hourly_usd",
            ),
            (
                good.replace("max_running = 8", "max_running = 8\nspend_cap_hourly_usd = nan"),
                "limits.spend_cap_hourly_usd",
            ),
            (good.replace("format = 2\n", ""), "format"),
            (good.replace("format = 2", "format = 3"), "format"),
            (good.replace("kind = \"dom\"", "kind = \"xml\""), "sources[0].kind"),
            (good.replace("kind = \"dom\"", "kind = \"dom\"\nlist = \"$.x\""), "sources[0].list"),
            (
                good.replace("title = \"div.product-title\"", "title = { css = \"div\", colour = 1 }"),
                "sources[0].fields.title.colour",
            ),
            (good.replace("title = \"div.product-title\"\n", ""), "sources[0].fields.title"),
            (
                good.replace("seller = \"span.product-seller\"", "seller = { css = \"span\", pick = \"most\" }"),
                "sources[0].fields.seller.pick",
            ),
            (
                good.replace("seller = \"span.product-seller\"", "vendor = \"span\""),
                "sources[0].fields.vendor",
            ),
            (format!("{good}\n[classes.promo]\npolicy = \"flag\"\n"), "classes.promo"),
            (
                format!("{good}\n[classes.ad]\ntexts = [{{ field = \"body\", regex = \"x\" }}]\n"),
                "classes.ad.texts[0].field",
            ),
            (
                good.replace("[limits]", "[[block.challenges]]\ntext = \"wait\"\nclears_within = \"2m\"\n\n[limits]"),
                "block.challenges[0].clears_within",
            ),
            (
                format!("{good}\n[more]\nnext_page = {{ url_template = \"http://m/s?q={{query}}\" }}\n"),
                "more.next_page.url_template",
            ),
            (
                good.replace("no_results_selector = \"div.no-result\"\nno_results_text = \"검색결과가 없습니다\"\n", ""),
                "no_results_selector",
            ),
        ];
        for (text, field) in cases {
            let e = parse("alpha.toml", &text).unwrap_err();
            assert_eq!(
                (e.file.as_str(), e.field.as_str()),
                ("alpha.toml", field),
                "{e}"
            );
        }
    }

    #[test]
    fn human_navigation_is_read_and_checked() {
        let good = alpha();
        let human = format!(
            "{good}\n[navigation]\nmode = \"human\"\nhome_url = \"http://127.0.0.1:18081/home\"\nsearch_input = \"form input[name=q]\"\ntyping = \"10ms..50ms\"\n"
        );
        let nav = parse("alpha.toml", &human)
            .unwrap()
            .wire
            .navigation
            .unwrap();
        assert!(nav.human);
        assert_eq!(nav.search_input_selector, "form input[name=q]");
        assert_eq!(
            nav.key_delay_max,
            Some(model::duration_to_pb(Duration::from_millis(50)))
        );
        assert_eq!(
            nav.dwell_min,
            Some(model::duration_to_pb(DEFAULT_DWELL.0)),
            "dwell defaults"
        );
        let direct = format!("{good}\n[navigation]\nmode = \"direct\"\n");
        assert!(
            parse("alpha.toml", &direct)
                .unwrap()
                .wire
                .navigation
                .is_none()
        );
        let cases = [
            (
                human.replace("mode = \"human\"", "mode = \"robot\""),
                "navigation.mode",
            ),
            (
                human.replace("http://127.0.0.1:18081/home", "home"),
                "navigation.home_url",
            ),
            (
                human.replace("form input[name=q]", "input["),
                "navigation.search_input",
            ),
            (
                human.replace("search_input = \"form input[name=q]\"\n", ""),
                "navigation.search_input",
            ),
            (
                human.replace("10ms..50ms", "50ms..10ms"),
                "navigation.typing",
            ),
            (human.replace("10ms..50ms", "fast"), "navigation.typing"),
            (format!("{human}dwell = \"1s..2m\"\n"), "navigation.dwell"),
        ];
        for (text, field) in cases {
            let e = parse("alpha.toml", &text).unwrap_err();
            assert_eq!(e.field, field, "{e}");
        }
    }

    #[test]
    fn a_vocabulary_table_adds_words_for_the_mall() {
        use crate::vocabulary::{Lexicon, UnitKind};
        use pb::{unit_word::Dimension, variant_kind::WhenSilent};

        assert_eq!(parse("alpha.toml", alpha()).unwrap().wire.vocabulary, None);
        let text = format!(
            "{}\n[vocabulary]\nstopwords = [\"알파특가\"]\naliases = [[\"알파몰\", \"alpha mall\"]]\n\
             [vocabulary.units]\ncount = [\"꾸러미\"]\n\
             [[vocabulary.variants]]\nname = \"flavour\"\nvalues = [[\"흑임자\", \"black sesame\"]]\n",
            alpha()
        );
        let p = parse("alpha.toml", &text).unwrap_or_else(|e| panic!("{e}"));
        let v = p
            .wire
            .vocabulary
            .as_ref()
            .expect("the profile's vocabulary");
        assert_eq!(v.stopwords, ["알파특가"]);
        assert_eq!(v.aliases.len(), 1);
        assert_eq!(v.aliases[0].forms, ["알파몰", "alpha mall"]);
        assert_eq!(
            v.units,
            [pb::UnitWord {
                word: "꾸러미".into(),
                dimension: Dimension::Count.into(),
                milli_base: 0,
            }]
        );
        assert_eq!(v.variants.len(), 1);
        let flavour = &v.variants[0];
        assert_eq!(flavour.name, "flavour");
        assert_eq!(
            flavour.when_silent(),
            WhenSilent::Unspecified,
            "an extended kind keeps its rule"
        );
        assert_eq!(flavour.values[0].name, "흑임자");
        assert_eq!(flavour.values[0].forms, ["흑임자", "black sesame"]);
        assert!(v.accessories.is_empty() && v.gifts.is_empty());

        // What the judge makes of it: the built-in words and the mall's.
        let lexicon = Lexicon::compile(&Lexicon::builtin_wire(), Some(v)).unwrap();
        assert!(lexicon.is_stopword("알파특가"));
        assert!(lexicon.is_stopword("무료배송"));
        assert!(lexicon.aliases("alphamall").contains(&"알파몰".to_owned()));
        assert_eq!(lexicon.unit("꾸러미"), Some(UnitKind::Count));
    }

    #[test]
    fn a_bad_vocabulary_entry_is_refused_naming_it() {
        let cases = [
            ("aliases = [[\"하나\"]]\n", "vocabulary.aliases[0]"),
            (
                "stopwords = [\"무료배송\", \"~~\"]\n",
                "vocabulary.stopwords[1]",
            ),
            ("colour = [\"red\"]\n", "vocabulary.colour"),
            ("format = 1\n", "vocabulary.format"),
            (
                "[[vocabulary.variants]]\nname = \"taste\"\nvalues = [[\"단맛\"]]\n",
                "vocabulary.variants[0].when_silent",
            ),
            (
                "[[vocabulary.variants]]\nname = \"flavour\"\nwhen_silent = \"any\"\n",
                "vocabulary.variants[0].when_silent",
            ),
            (
                "[vocabulary.units]\ncount = [\"12개\"]\n",
                "vocabulary.units[0] (\"12개\")",
            ),
        ];
        for (table, field) in cases {
            let header = if table.starts_with('[') {
                ""
            } else {
                "[vocabulary]\n"
            };
            let text = format!("{}\n{header}{table}", alpha());
            let e = parse("alpha.toml", &text).unwrap_err();
            assert_eq!(
                (e.file.as_str(), e.field.as_str()),
                ("alpha.toml", field),
                "{table:?}: {e}"
            );
            assert!(
                e.to_string()
                    .starts_with(&format!("site profile alpha.toml: {field}: ")),
                "{e}"
            );
        }
    }

    #[test]
    fn a_format_one_profile_converts_to_one_that_loads() {
        let v1 = r#"id = "oldmall"
display_name = "옛날몰"
search_url_template = "https://old.example/search?q={query}"
wait_for = "li.item, div.none"
wait_timeout = "10s"
card_selector = "li.item"
title_selector = "div.title"
price_selector = "div.price"
shipping_selector = "div.ship"
link_selector = "a.link"
seller_selector = ""
no_results_selector = "div.none"
free_shipping_texts = ["무료배송"]
ip_request_budget = 2

[block]
statuses = [403]

[limits]
max_running = 2
"#;
        assert_eq!(parse("old.toml", v1).unwrap_err().field, "format");
        let v2 = convert_format1("old.toml", v1).unwrap_or_else(|e| panic!("{e}"));
        let p = parse("old.toml", &v2).unwrap_or_else(|e| panic!("{e}\n{v2}"));
        assert_eq!(p.wire.id, "oldmall");
        assert_eq!(p.wire.ip_request_budget, 2);
        assert_eq!(p.max_running, Some(2));
        let source = &p.wire.sources[0];
        assert!(
            matches!(&source.kind, Some(pb::card_source::Kind::Dom(d)) if d.card_selector == "li.item")
        );
        let fields = source.fields.as_ref().unwrap();
        assert_eq!(fields.title[0].css, "div.title");
        assert_eq!(
            (fields.link[0].css.as_str(), fields.link[0].attr.as_str()),
            ("a.link", "href")
        );
        assert!(fields.seller.is_empty());
        // Not format 1, or not loadable after the rewrite: named.
        assert_eq!(
            convert_format1("x.toml", alpha()).unwrap_err().field,
            "format"
        );
        let no_marker = v1.replace("no_results_selector = \"div.none\"\n", "");
        assert_eq!(
            convert_format1("old.toml", &no_marker).unwrap_err().field,
            "no_results_selector"
        );
    }

    #[test]
    fn a_format_one_profile_is_named_as_such() {
        let v1 = "id = \"x\"\ncard_selector = \"li\"\n";
        let e = parse("old.toml", v1).unwrap_err();
        assert_eq!(e.field, "format");
        assert!(e.reason.contains("format-1"), "{e}");
    }

    #[test]
    fn an_api_profile_needs_no_browser_marker_but_must_stand_alone() {
        let api = r#"
format = 2
id = "api-mall"
display_name = "API mall"
search_url_template = "https://mall.example/search?q={query}"
[[sources]]
kind = "http_api"
url = "https://api.example/v1/search?query={query}&start={start}"
headers = { "X-Key" = "${env:API_MALL_KEY}" }
list = "$.items[*]"
[sources.fields]
title = "$.title"
price = "$.price"
link = "$.link"
"#;
        let p = parse("api.toml", api).unwrap();
        assert!(matches!(
            p.wire.sources[0].kind,
            Some(pb::card_source::Kind::HttpApi(_))
        ));
        let bad = api.replace("${env:API_MALL_KEY}", "${secret:API_MALL_KEY}");
        assert_eq!(
            parse("api.toml", &bad).unwrap_err().field,
            "sources[0].headers.X-Key"
        );
        let mixed = format!(
            "{api}\n[[sources]]\nkind = \"dom\"\ncards = \"li\"\n[sources.fields]\ntitle = \"a\"\nprice = \"b\"\nlink = \"a\"\n"
        );
        assert_eq!(parse("api.toml", &mixed).unwrap_err().field, "sources");
    }

    /// The chart's example values carry a profile: it must be one the coordinator loads.
    #[test]
    fn the_helm_example_profile_parses() {
        let values = include_str!("../../helm/lps/ci/full-values.yaml");
        let mut lines = values
            .lines()
            .skip_while(|l| !l.starts_with("  fixture-mall.toml: |"));
        assert!(
            lines.next().is_some(),
            "no fixture-mall.toml in the chart's example values"
        );
        let text: String = lines
            .take_while(|l| l.is_empty() || l.starts_with("    "))
            .map(|l| format!("{}\n", l.strip_prefix("    ").unwrap_or(l)))
            .collect();
        let p =
            parse("full-values.yaml: fixture-mall.toml", &text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.wire.id, "fixture-mall");
    }

    #[test]
    fn a_directory_overrides_by_id() {
        let dir = std::env::temp_dir().join(format!("lps-profiles-fmt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("alpha.toml"), alpha().replace("18081", "40001")).unwrap();
        std::fs::write(dir.join("notes.txt"), "ignored").unwrap();
        let all = load(Some(&dir)).unwrap();
        let alpha = all.iter().find(|p| p.wire.id == "testmall-alpha").unwrap();
        assert!(alpha.wire.search_url_template.contains("40001"));
        std::fs::write(dir.join("broken.toml"), "format = 2\nid = ").unwrap();
        let e = load(Some(&dir)).unwrap_err();
        assert!(e.file.ends_with("broken.toml"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
