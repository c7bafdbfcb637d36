//! `crawler-node probe`: one site profile, one query, one page, in a real local Chromium —
//! what `scrapy shell` is to Scrapy, for profile authors (`docs/site-profiles.md`).
//!
//! It reads the profile file (the coordinator's validation: a bad field stops it, named),
//! loads the mall's search page for the query — or a saved HTML file, or any URL — with the
//! same page reader a job uses (block first, challenges, placeholders, scrolling), and
//! prints, per card source, what it matched and every card: each field as extracted, the
//! card's classes and what the profile's policy does with them, the shipping as evaluated,
//! and the judge's verdict. No coordinator, proxy or database is involved.
//!
//! It ends with the answer the job would report for the page — judged with the job's own
//! [`judge_cards`] (class policy, page contrast, best first) and the search's rule for the
//! answer (the lowest over offers whose shipping is known; a cheaper offer with unknown
//! shipping beside it as `possibly_lower`; else not found and why): the `answer` line.
//!
//! `--json` writes one JSON object instead, for scripts. Its shape is documented in
//! `docs/site-profiles.md` ("The probe"); keys are only ever added to it.

use std::{io::Write, path::PathBuf, sync::Arc, time::Duration};

use anyhow::Context as _;
use clap::Parser;
use lps_profiles::{
    compiled::{CompiledProfile, Field, compile, field_rules},
    extract::{Card, RuleReport, SourceCards, apply_classes, extract_json},
    price::evaluate_facts,
};
use lps_proto::{model::CardClass, pb};

use crate::{
    chromium::{
        Browser, BrowserMode, ChromeDriver, LaunchOptions, PageRead, ProfileSlot, Relay, Upstream,
        default_blocked_patterns,
        page::{read_saved_page, read_search_page, source_kind, wait_timeout},
        parse::{fill_env, page_url, search_url},
    },
    config::{DEFAULT_CHROMEDRIVER_PATH, DEFAULT_CHROMIUM_PATH},
    executor::browser::judge_cards,
    judge::{self, Lexicon, ProductQuery},
};
use lps_proto::model::{Answer, MallId, Offer};
use serde_json::{Value, json};

/// `crawler-node probe` arguments.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "crawler-node probe",
    about = "Run one site profile for one query in a local Chromium and print what it reads"
)]
pub struct ProbeArgs {
    /// The site-profile file (format 2).
    #[arg(long)]
    pub profile: PathBuf,
    /// What to search for (also what the judge compares cards with).
    #[arg(long)]
    pub query: String,
    /// Read this saved HTML file instead of the mall's search page.
    #[arg(long, conflicts_with = "url")]
    pub html: Option<PathBuf>,
    /// Read this URL instead of the mall's search page.
    #[arg(long)]
    pub url: Option<String>,
    /// Judge with this vocabulary file instead of the built-in one (the profile's
    /// `[vocabulary]` words are added either way).
    #[arg(long, env = "LPS_VOCABULARY_FILE")]
    pub vocabulary: Option<PathBuf>,
    #[arg(long, env = "LPS_CHROMIUM_PATH", default_value = DEFAULT_CHROMIUM_PATH)]
    pub chromium: PathBuf,
    #[arg(long, env = "LPS_CHROMEDRIVER_PATH", default_value = DEFAULT_CHROMEDRIVER_PATH)]
    pub chromedriver: PathBuf,
    /// Also print each card's whole text.
    #[arg(long)]
    pub text: bool,
    /// Write one JSON object (documented in docs/site-profiles.md) instead of the text
    /// report.
    #[arg(long)]
    pub json: bool,
    /// Go through this HTTP proxy (an exit IP): `http://[user:password@]host:port`. The
    /// browser talks to a local relay that adds the credentials, as a job's does; an
    /// `http_api` source's call goes through it too.
    // NB: the URL may carry a password: --help never shows the variable's value.
    #[arg(long, env = "LPS_PROBE_PROXY", hide_env_values = true)]
    pub proxy: Option<String>,
    /// Keep the browser's profile directory (cookies, storage) in DIR across probe runs,
    /// so a session a mall handed out is presented again; without it every run starts
    /// with a fresh profile and its cookies are dropped at the end.
    #[arg(long, value_name = "DIR", env = "LPS_PROBE_KEEP_COOKIES")]
    pub keep_cookies: Option<PathBuf>,
}

/// A `--proxy` URL's parts.
#[derive(Clone)]
struct ProxyUrl {
    host: String,
    port: u16,
    username: String,
    password: String,
}

impl ProxyUrl {
    fn parse(text: &str) -> anyhow::Result<Self> {
        let url = reqwest::Url::parse(text).context("--proxy: not a URL")?;
        anyhow::ensure!(
            url.scheme() == "http",
            "--proxy: only http:// proxies (an HTTP CONNECT gateway), not {}://",
            url.scheme()
        );
        let host = url
            .host_str()
            .context("--proxy: the URL names no host")?
            .to_owned();
        let port = url.port_or_known_default().unwrap_or(80);
        Ok(Self {
            host,
            port,
            username: percent_decode(url.username()),
            password: percent_decode(url.password().unwrap_or_default()),
        })
    }

    /// The URL without its password, for the report.
    fn shown(&self) -> String {
        match self.username.as_str() {
            "" => format!("http://{}:{}", self.host, self.port),
            user => format!("http://{user}:***@{}:{}", self.host, self.port),
        }
    }
}

/// `%XX` escapes of a URL's user or password decoded (as a proxy client sends them).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Runs the probe and writes its report to `out`.
pub async fn run(args: &ProbeArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let mut report = Report {
        show_text: args.text,
        ..Report::default()
    };
    let mut text = Vec::new();
    run_into(args, &mut text, &mut report).await?;
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &report.into_json())?;
        writeln!(out)?;
    } else {
        out.write_all(&text)?;
    }
    Ok(())
}

/// What `--json` writes; filled while the text report is written.
#[derive(Debug, Default)]
struct Report {
    /// `--text`: each card's whole text in the text report.
    show_text: bool,
    profile: String,
    /// `--proxy`, without its password.
    proxy: Option<String>,
    url: String,
    notes: Vec<String>,
    verdict: Value,
    sources: Vec<Value>,
    answer: Value,
}

impl Report {
    fn into_json(self) -> Value {
        json!({
            "profile": self.profile,
            "proxy": self.proxy,
            "url": self.url,
            "notes": self.notes,
            "verdict": self.verdict,
            "sources": self.sources,
            "answer": self.answer,
        })
    }
}

async fn run_into(args: &ProbeArgs, out: &mut impl Write, rep: &mut Report) -> anyhow::Result<()> {
    let profile = lps_profiles::format::parse_file(&args.profile)?;
    let wire = profile.wire;
    let compiled = compile(&wire)
        .map_err(|e| anyhow::anyhow!("{}: {}", e.field, e.reason))?
        .explaining();
    let vocabulary = lps_profiles::vocabulary::load(args.vocabulary.as_deref())?;
    let lexicon = Lexicon::compile(&vocabulary, wire.vocabulary.as_ref())?;
    let query = ProductQuery::new(&args.query, Arc::new(lexicon)).context("--query")?;
    writeln!(out, "profile {} ({})", wire.id, wire.display_name)?;
    rep.profile = wire.id.clone();
    let proxy = args.proxy.as_deref().map(ProxyUrl::parse).transpose()?;
    if let Some(proxy) = &proxy {
        writeln!(out, "proxy {}", proxy.shown())?;
        rep.proxy = Some(proxy.shown());
    }
    if wire
        .sources
        .iter()
        .any(|s| matches!(s.kind, Some(pb::card_source::Kind::HttpApi(_))))
    {
        return probe_api(&wire, &compiled, &query, &args.query, proxy, out, rep).await;
    }
    if args.html.is_some() {
        // NB: a saved file has no fetch/XHR responses to capture: say so rather than let
        // the author read an empty source as a wrong rule.
        for (i, source) in wire.sources.iter().enumerate() {
            if matches!(source.kind, Some(pb::card_source::Kind::CapturedJson(_))) {
                let note = format!(
                    "source #{i} {:?} reads the page's captured fetch/XHR responses: a saved \
                     HTML file cannot provide them, so it reads nothing here (probe the live \
                     page or --url to see it)",
                    source.name
                );
                writeln!(out, "note {note}")?;
                rep.notes.push(note);
            }
        }
    }
    let url = match (&args.html, &args.url) {
        (Some(file), _) => {
            let path = std::fs::canonicalize(file)
                .with_context(|| format!("--html {}", file.display()))?;
            format!("file://{}", path.display())
        }
        (None, Some(url)) => url.clone(),
        (None, None) => {
            let template = if wire.price_sort_url_template.is_empty() {
                &wire.search_url_template
            } else {
                &wire.price_sort_url_template
            };
            search_url(template, &args.query)
        }
    };
    writeln!(out, "url {url}")?;
    rep.url = url.clone();
    let driver = ChromeDriver::managed(args.chromedriver.clone());
    let (root, keep) = match &args.keep_cookies {
        Some(dir) => (dir.clone(), true),
        None => (
            std::env::temp_dir().join(format!("lps-probe-{}", std::process::id())),
            false,
        ),
    };
    std::fs::create_dir_all(&root).with_context(|| format!("{}", root.display()))?;
    if keep {
        writeln!(out, "cookies kept in {}", root.display())?;
    }
    let relay = match &proxy {
        Some(proxy) => {
            let relay = Relay::start().await.context("starting the proxy relay")?;
            relay.point_to(Some(Upstream::new(
                proxy.host.clone(),
                proxy.port,
                &proxy.username,
                &proxy.password,
            )));
            Some(relay)
        }
        None => None,
    };
    let result = async {
        let driver_url = driver.url().await?;
        let slot = ProfileSlot::acquire(&root)?;
        let options = LaunchOptions {
            blocked: default_blocked_patterns(),
            proxy: relay.as_ref().map(Relay::addr),
            ..LaunchOptions::new(args.chromium.clone(), BrowserMode::Headless)
        };
        let browser = Browser::launch(&driver_url, &slot, &options).await?;
        let read = if args.html.is_some() {
            read_saved_page(&browser, &wire, &compiled, &url).await
        } else {
            read_search_page(&browser, &wire, &compiled, &url).await
        };
        browser.close().await;
        read
    }
    .await;
    driver.stop().await;
    if let Some(relay) = relay {
        relay.stop().await;
    }
    if !keep {
        let _ = std::fs::remove_dir_all(&root);
    }
    let read = result.context("the page could not be read")?;
    report(&wire, &compiled, &query, read, out, rep)
}

/// A verdict without cards: its text line, its JSON and the answer it means.
fn no_cards(
    out: &mut impl Write,
    rep: &mut Report,
    kind: &str,
    detail: String,
    not_found: &str,
) -> anyhow::Result<()> {
    writeln!(out, "verdict {kind} ({detail})")?;
    rep.verdict = json!({ "kind": kind, "detail": detail });
    answer_line(out, rep, None, None, not_found)
}

/// The `answer` line and JSON: what the job would report for this page.
fn answer_line(
    out: &mut impl Write,
    rep: &mut Report,
    lowest: Option<&Offer>,
    possibly_lower: Option<&Offer>,
    not_found: &str,
) -> anyhow::Result<()> {
    let brief = |o: &Offer| {
        format!(
            "{} {} + shipping {} {} = {} ({:?})",
            o.title,
            o.price,
            o.shipping.as_str(),
            o.shipping_fee,
            o.effective_price(),
            o.url
        )
    };
    let offer_json = |o: &Offer| {
        json!({
            "title": o.title,
            "price": o.price,
            "shipping": o.shipping.as_str(),
            "shipping_fee": o.shipping_fee,
            "effective_price": o.effective_price(),
            "url": o.url,
            "seller": o.seller,
            "match_score": o.match_score,
        })
    };
    match (lowest, possibly_lower) {
        (Some(l), maybe) => {
            write!(out, "\nanswer lowest {}", brief(l))?;
            if let Some(m) = maybe {
                write!(out, "; possibly_lower (shipping unknown) {}", brief(m))?;
            }
            writeln!(out)?;
        }
        (None, Some(m)) => writeln!(
            out,
            "\nanswer no lowest (no matching offer has known shipping); possibly_lower (shipping unknown) {}",
            brief(m)
        )?,
        (None, None) => writeln!(out, "\nanswer not_found ({not_found})")?,
    }
    rep.answer = json!({
        "lowest": lowest.map(offer_json),
        "possibly_lower": possibly_lower.map(offer_json),
        "not_found": (lowest.is_none() && possibly_lower.is_none()).then_some(not_found),
    });
    Ok(())
}

fn report(
    wire: &pb::SiteProfile,
    compiled: &CompiledProfile,
    query: &ProductQuery,
    read: PageRead,
    out: &mut impl Write,
    rep: &mut Report,
) -> anyhow::Result<()> {
    let page = match read {
        PageRead::Cards(page) => page,
        PageRead::NoResults => {
            return no_cards(
                out,
                rep,
                "no_results",
                "the no-results marker shows".into(),
                "the mall has no results for the query",
            );
        }
        PageRead::Blocked { marker, html_bytes } => {
            return no_cards(
                out,
                rep,
                "blocked",
                format!("{marker}, {html_bytes} bytes of HTML"),
                "blocked: the job would retry on another IP, never answer",
            );
        }
        PageRead::ErrorPage { url, code } => {
            return no_cards(
                out,
                rep,
                "error_page",
                format!("{url} {}", code.unwrap_or_default()),
                "an error page: the job would retry on another IP",
            );
        }
        PageRead::HttpError { status } => {
            return no_cards(
                out,
                rep,
                "http_error",
                format!("HTTP {status}"),
                "an HTTP error: the job would retry",
            );
        }
        PageRead::Unreadable { reason, .. } => {
            return no_cards(
                out,
                rep,
                "unreadable",
                reason.clone(),
                "only placeholders: the job fails `parse` and retries",
            );
        }
        PageRead::Layout { reason, .. } => {
            return no_cards(
                out,
                rep,
                "layout",
                reason.clone(),
                "no source found a card: the job fails `layout` at once",
            );
        }
    };
    rep.verdict = json!({
        "kind": "cards",
        "source": page.source,
        "source_kind": page.source_kind,
        "scrolls": page.scrolls,
        "challenge_cleared": page.challenge_cleared,
        "next_page": page.next_href,
    });
    writeln!(
        out,
        "verdict cards from source {:?} ({}), {} scroll steps/clicks{}{}",
        page.source,
        page.source_kind,
        page.scrolls,
        if page.challenge_cleared {
            ", a challenge cleared by itself"
        } else {
            ""
        },
        page.next_href
            .as_deref()
            .map(|h| format!(", next page {h}"))
            .unwrap_or_default(),
    )?;
    for source in &page.per_source {
        print_source(
            wire,
            compiled,
            query,
            source,
            source.source_name == page.source,
            out,
            rep,
        )?;
    }
    summarise(wire, compiled, query, page.cards, out, rep)
}

/// Judges the chosen source's cards as the job does and writes the answer.
fn summarise(
    wire: &pb::SiteProfile,
    compiled: &CompiledProfile,
    query: &ProductQuery,
    cards: Vec<Card>,
    out: &mut impl Write,
    rep: &mut Report,
) -> anyhow::Result<()> {
    let mall = MallId::new(wire.id.clone()).context("the profile's id")?;
    let read = cards.len();
    let judged = judge_cards(query, cards, &mall, wire, compiled);
    let Answer {
        lowest,
        possibly_lower,
    } = Answer::over(&judged.offers);
    let not_found = format!(
        "{read} cards read, {} excluded by class {:?}, {} judged, none the product",
        read.saturating_sub(judged.seen as usize),
        judged.excluded,
        judged.seen
    );
    answer_line(out, rep, lowest, possibly_lower, &not_found)
}

fn print_source(
    wire: &pb::SiteProfile,
    compiled: &CompiledProfile,
    query: &ProductQuery,
    source: &SourceCards,
    chosen: bool,
    out: &mut impl Write,
    rep: &mut Report,
) -> anyhow::Result<()> {
    let text = rep.show_text;
    let kind = wire
        .sources
        .get(source.source_index)
        .map_or("?", source_kind);
    writeln!(
        out,
        "\nsource #{} {:?} ({kind}){}: matched {}, cards {}, placeholders {}, unparsed {}",
        source.source_index,
        source.source_name,
        if chosen { " [chosen]" } else { "" },
        source.matched,
        source.cards.len(),
        source.placeholders,
        source.unparsed,
    )?;
    let fields = wire
        .sources
        .get(source.source_index)
        .and_then(|s| s.fields.as_ref());
    // Why the unparsed items have no title or price: their rules, as for a card.
    for (n, rules) in source.unparsed_rules.iter().enumerate() {
        writeln!(out, "  unparsed item {} (no title or no price):", n + 1)?;
        print_rules(fields, rules, out)?;
    }
    let classified = apply_classes(compiled, source.cards.clone());
    // The kept cards are judged together, as the job judges a page (page contrast).
    let page: Vec<judge::PageCard<'_>> = classified
        .kept
        .iter()
        .map(|(c, _)| judge::PageCard {
            title: &c.title,
            gtin: None,
        })
        .collect();
    let verdicts = judge::judge_page(query, &page);
    let mut cards_json = Vec::new();
    for (n, card) in source.cards.iter().enumerate() {
        let kept = classified
            .kept
            .iter()
            .position(|(c, _)| c.title == card.title && c.link == card.link);
        let flags = kept
            .and_then(|k| classified.kept.get(k))
            .map(|(_, f)| f.clone());
        let verdict = kept.and_then(|k| verdicts.get(k));
        cards_json.push(card_json(wire, fields, card, flags.as_deref(), verdict));
        print_card(wire, fields, n + 1, card, flags, verdict, text, out)?;
    }
    if !classified.excluded.is_empty() {
        writeln!(out, "  excluded by class: {:?}", classified.excluded)?;
    }
    rep.sources.push(json!({
        "index": source.source_index,
        "name": source.source_name,
        "kind": kind,
        "chosen": chosen,
        "matched": source.matched,
        "placeholders": source.placeholders,
        "unparsed": source.unparsed,
        "excluded": classified.excluded,
        "cards": cards_json,
        "unparsed_items": source
            .unparsed_rules
            .iter()
            .map(|rules| rules_json(fields, rules))
            .collect::<Vec<_>>(),
    }));
    Ok(())
}

/// A rule as the profile writes it (`css "a.name" attr "title"`, `$.price regex "…"`).
fn describe(rule: &pb::FieldRule) -> String {
    let mut parts = Vec::new();
    if !rule.constant.is_empty() {
        parts.push(format!("constant {:?}", rule.constant));
    } else if !rule.json.is_empty() {
        parts.push(rule.json.clone());
    } else if rule.css.is_empty() {
        parts.push("the card".to_owned());
    } else {
        parts.push(format!("css {:?}", rule.css));
    }
    if !rule.attr.is_empty() {
        parts.push(format!("attr {:?}", rule.attr));
    }
    if rule.own_text {
        parts.push("own_text".to_owned());
    }
    if !rule.exclude.is_empty() {
        parts.push(format!("exclude {:?}", rule.exclude));
    }
    if !rule.regex.is_empty() {
        parts.push(format!("regex {:?}", rule.regex));
    }
    parts.join(" ")
}

fn rule_text(fields: Option<&pb::CardFields>, field: Field, index: usize) -> String {
    fields
        .and_then(|f| field_rules(f, field).get(index))
        .map(describe)
        .unwrap_or_default()
}

/// Every rule of every field, one line each: `title[0] css "a.name": used "…"`.
fn print_rules(
    fields: Option<&pb::CardFields>,
    rules: &[RuleReport],
    out: &mut impl Write,
) -> anyhow::Result<()> {
    for r in rules {
        let what = match &r.outcome {
            lps_profiles::extract::RuleOutcome::Used(v) => format!("used {v:?}"),
            lps_profiles::extract::RuleOutcome::Unused(v) => format!("unused {v:?}"),
            other => format!("{}: {}", other.kind(), other.detail()),
        };
        writeln!(
            out,
            "      rule {}[{}] {}: {what}",
            r.field.as_str(),
            r.index,
            rule_text(fields, r.field, r.index)
        )?;
    }
    Ok(())
}

fn rules_json(fields: Option<&pb::CardFields>, rules: &[RuleReport]) -> Vec<Value> {
    rules
        .iter()
        .map(|r| {
            json!({
                "field": r.field.as_str(),
                "index": r.index,
                "rule": rule_text(fields, r.field, r.index),
                "outcome": r.outcome.kind(),
                "detail": r.outcome.detail(),
            })
        })
        .collect()
}

/// One card as `--json` shows it.
fn card_json(
    wire: &pb::SiteProfile,
    fields: Option<&pb::CardFields>,
    card: &Card,
    flags: Option<&[CardClass]>,
    verdict: Option<&judge::Verdict>,
) -> Value {
    let shipping = evaluate_facts(
        &card.shipping_facts(),
        card.price,
        &wire.free_shipping_texts,
    );
    let names = |c: &[CardClass]| c.iter().map(|c| c.as_str()).collect::<Vec<_>>();
    json!({
        "title": card.title,
        "price": card.price,
        "list_price": card.list_price,
        "coupon_price": card.coupon_price,
        "shipping_text": card.shipping_text,
        "shipping": {
            "status": shipping.status.as_str(),
            "fee": shipping.status.is_known().then_some(shipping.fee),
            "fee_part": card.shipping_fee,
            "threshold_part": card.shipping_threshold,
            "type_part": card.shipping_type.as_ref().map(|(code, _)| code),
        },
        "seller": card.seller,
        "link": card.link,
        "classes": names(&card.classes),
        "kept": flags.is_some(),
        "flagged": flags.map(names).unwrap_or_default(),
        "judge": verdict.map(|v| json!({
            "same": v.same,
            "score": v.score,
            "reason": (!v.same).then(|| v.reason.to_string()),
        })),
        "read_errors": card.read_errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "rules": rules_json(fields, &card.rules),
        "joined": card.joined.as_ref().map(|j| json!({
            "source": j.source,
            "key": j.key,
            "took": j.took.iter().map(|f| f.as_str()).collect::<Vec<_>>(),
        })),
    })
}

/// One card: its fields, classes and the judge's verdict (`None`: excluded, not judged).
#[allow(clippy::too_many_arguments)]
fn print_card(
    wire: &pb::SiteProfile,
    fields: Option<&pb::CardFields>,
    n: usize,
    card: &Card,
    flags: Option<Vec<CardClass>>,
    verdict: Option<&judge::Verdict>,
    text: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let names = |classes: &[CardClass]| {
        classes
            .iter()
            .map(|c| c.as_str())
            .collect::<Vec<_>>()
            .join(",")
    };
    let shipping = evaluate_facts(
        &card.shipping_facts(),
        card.price,
        &wire.free_shipping_texts,
    );
    writeln!(out, "  [{n}] {}", card.title)?;
    writeln!(
        out,
        "      price {}  list {}  coupon {}  shipping {:?} -> {} {}",
        card.price,
        card.list_price.map_or("-".into(), |v| v.to_string()),
        card.coupon_price.map_or("-".into(), |v| v.to_string()),
        card.shipping_text.as_deref().unwrap_or(""),
        shipping.status.as_str(),
        if shipping.status.is_known() {
            shipping.fee.to_string()
        } else {
            "?".into()
        },
    )?;
    let parts = [
        card.shipping_fee.map(|fee| format!("fee {fee}")),
        card.shipping_threshold.map(|t| format!("free from {t}")),
        card.shipping_type.as_ref().map(|(code, kind)| {
            format!(
                "type {code:?} = {}",
                kind.map_or("(not in shipping_types)", |k| k.as_str())
            )
        }),
    ];
    let parts: Vec<String> = parts.into_iter().flatten().collect();
    if !parts.is_empty() {
        writeln!(out, "      shipping parts: {}", parts.join(", "))?;
    }
    writeln!(
        out,
        "      seller {}  link {}",
        card.seller.as_deref().unwrap_or("-"),
        card.link
    )?;
    for error in &card.read_errors {
        writeln!(out, "      unreadable rule {error}")?;
    }
    print_rules(fields, &card.rules, out)?;
    if let Some(joined) = &card.joined {
        writeln!(
            out,
            "      joined with source #{} by key {:?}: took {} from it (its values, not these rules')",
            joined.source,
            joined.key,
            joined
                .took
                .iter()
                .map(|f| f.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )?;
    }
    let class_line = match &flags {
        Some(flags) if flags.is_empty() => format!("classes [{}] -> kept", names(&card.classes)),
        Some(flags) => format!(
            "classes [{}] -> kept, flagged {}",
            names(&card.classes),
            names(flags)
        ),
        None => format!("classes [{}] -> excluded", names(&card.classes)),
    };
    let judged = match verdict {
        None => "not judged".to_owned(),
        Some(v) if v.same => format!("same product (score {:.2})", v.score),
        Some(v) => format!("not the product ({})", v.reason),
    };
    writeln!(out, "      {class_line}  judge: {judged}")?;
    if text {
        writeln!(out, "      text: {}", card.text)?;
    }
    Ok(())
}

/// An `http_api` profile: one GET of the first page, straight out (no proxy).
async fn probe_api(
    wire: &pb::SiteProfile,
    compiled: &CompiledProfile,
    query: &ProductQuery,
    text: &str,
    proxy: Option<ProxyUrl>,
    out: &mut impl Write,
    rep: &mut Report,
) -> anyhow::Result<()> {
    let Some((index, api)) = wire
        .sources
        .iter()
        .enumerate()
        .find_map(|(i, s)| match &s.kind {
            Some(pb::card_source::Kind::HttpApi(api)) => Some((i, api.clone())),
            _ => None,
        })
    else {
        anyhow::bail!("no http_api source");
    };
    let url = page_url(&api.url_template, text, 1, 1);
    writeln!(out, "url {url}")?;
    rep.url = url.clone();
    let mut client = reqwest::Client::builder()
        .timeout(wait_timeout(wire).max(Duration::from_secs(5)))
        .no_proxy();
    if let Some(p) = proxy {
        let mut through = reqwest::Proxy::all(format!("http://{}:{}", p.host, p.port))?;
        if !p.username.is_empty() {
            through = through.basic_auth(&p.username, &p.password);
        }
        client = client.proxy(through);
    }
    let client = client.build()?;
    let mut request = client.get(&url);
    for (name, value) in &api.headers {
        let resolved = fill_env(value, |var| std::env::var(var).ok()).map_err(|var| {
            anyhow::anyhow!("the API header {name} needs the environment variable {var}")
        })?;
        request = request.header(name.as_str(), resolved);
    }
    let response = request.send().await.context("GET")?;
    let status = response.status();
    let body: serde_json::Value = response.json().await.context("the answer is not JSON")?;
    writeln!(out, "verdict HTTP {status}")?;
    rep.verdict = json!({ "kind": "http", "detail": status.as_u16() });
    let source = extract_json(compiled, index, &body, &url);
    print_source(wire, compiled, query, &source, true, out, rep)?;
    summarise(wire, compiled, query, source.cards, out, rep)
}
