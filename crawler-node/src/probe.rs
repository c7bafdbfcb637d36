//! `crawler-node probe`: one site profile, one query, one page, in a real local Chromium —
//! what `scrapy shell` is to Scrapy, for profile authors (`docs/site-profiles.md`).
//!
//! It reads the profile file (the coordinator's validation: a bad field stops it, named),
//! loads the mall's search page for the query — or a saved HTML file, or any URL — with the
//! same page reader a job uses (block first, challenges, placeholders, scrolling), and
//! prints, per card source, what it matched and every card: each field as extracted, the
//! card's classes and what the profile's policy does with them, the shipping as evaluated,
//! and the judge's verdict. No coordinator, proxy or database is involved.

use std::{io::Write, path::PathBuf, sync::Arc, time::Duration};

use anyhow::Context as _;
use clap::Parser;
use lps_profiles::{
    compiled::{CompiledProfile, compile},
    extract::{Card, SourceCards, apply_classes, extract_json},
    price::evaluate_facts,
};
use lps_proto::{model::CardClass, pb};

use crate::{
    chromium::{
        Browser, BrowserMode, ChromeDriver, LaunchOptions, PageRead, ProfileSlot,
        default_blocked_patterns,
        page::{read_search_page, source_kind, wait_timeout},
        parse::{fill_env, page_url, search_url},
    },
    config::{DEFAULT_CHROMEDRIVER_PATH, DEFAULT_CHROMIUM_PATH},
    judge::{self, Lexicon, ProductQuery},
};

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
}

/// Runs the probe and writes its report to `out`.
pub async fn run(args: &ProbeArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let profile = lps_profiles::format::parse_file(&args.profile)?;
    let wire = profile.wire;
    let compiled = compile(&wire).map_err(|e| anyhow::anyhow!("{}: {}", e.field, e.reason))?;
    let vocabulary = lps_profiles::vocabulary::load(args.vocabulary.as_deref())?;
    let lexicon = Lexicon::compile(&vocabulary, wire.vocabulary.as_ref())?;
    let query = ProductQuery::new(&args.query, Arc::new(lexicon)).context("--query")?;
    writeln!(out, "profile {} ({})", wire.id, wire.display_name)?;
    if wire
        .sources
        .iter()
        .any(|s| matches!(s.kind, Some(pb::card_source::Kind::HttpApi(_))))
    {
        return probe_api(&wire, &compiled, &query, &args.query, out).await;
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
    let driver = ChromeDriver::managed(args.chromedriver.clone());
    let root = std::env::temp_dir().join(format!("lps-probe-{}", std::process::id()));
    std::fs::create_dir_all(&root).with_context(|| format!("{}", root.display()))?;
    let result = async {
        let driver_url = driver.url().await?;
        let slot = ProfileSlot::acquire(&root)?;
        let options = LaunchOptions {
            blocked: default_blocked_patterns(),
            ..LaunchOptions::new(args.chromium.clone(), BrowserMode::Headless)
        };
        let browser = Browser::launch(&driver_url, &slot, &options).await?;
        let read = read_search_page(&browser, &wire, &compiled, &url).await;
        browser.close().await;
        read
    }
    .await;
    driver.stop().await;
    let _ = std::fs::remove_dir_all(&root);
    let read = result.context("the page could not be read")?;
    report(&wire, &compiled, &query, read, args.text, out)
}

fn report(
    wire: &pb::SiteProfile,
    compiled: &CompiledProfile,
    query: &ProductQuery,
    read: PageRead,
    text: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let page = match read {
        PageRead::Cards(page) => page,
        PageRead::NoResults => {
            writeln!(out, "verdict no_results (the no-results marker shows)")?;
            return Ok(());
        }
        PageRead::Blocked { marker, html_bytes } => {
            writeln!(
                out,
                "verdict blocked ({marker}, {html_bytes} bytes of HTML)"
            )?;
            return Ok(());
        }
        PageRead::ErrorPage { url, code } => {
            writeln!(
                out,
                "verdict error_page ({url} {})",
                code.unwrap_or_default()
            )?;
            return Ok(());
        }
        PageRead::HttpError { status } => {
            writeln!(out, "verdict http_error (HTTP {status})")?;
            return Ok(());
        }
        PageRead::Unreadable { reason, .. } => {
            writeln!(out, "verdict unreadable ({reason})")?;
            return Ok(());
        }
        PageRead::Layout { reason, .. } => {
            writeln!(out, "verdict layout ({reason})")?;
            return Ok(());
        }
    };
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
            text,
            out,
        )?;
    }
    Ok(())
}

fn print_source(
    wire: &pb::SiteProfile,
    compiled: &CompiledProfile,
    query: &ProductQuery,
    source: &SourceCards,
    chosen: bool,
    text: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
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
    for (n, card) in source.cards.iter().enumerate() {
        let kept = classified
            .kept
            .iter()
            .position(|(c, _)| c.title == card.title && c.link == card.link);
        let flags = kept
            .and_then(|k| classified.kept.get(k))
            .map(|(_, f)| f.clone());
        let verdict = kept.and_then(|k| verdicts.get(k));
        print_card(wire, n + 1, card, flags, verdict, text, out)?;
    }
    if !classified.excluded.is_empty() {
        writeln!(out, "  excluded by class: {:?}", classified.excluded)?;
    }
    Ok(())
}

/// One card: its fields, classes and the judge's verdict (`None`: excluded, not judged).
fn print_card(
    wire: &pb::SiteProfile,
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
    out: &mut impl Write,
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
    let client = reqwest::Client::builder()
        .timeout(wait_timeout(wire).max(Duration::from_secs(5)))
        .no_proxy()
        .build()?;
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
    let source = extract_json(compiled, index, &body, &url);
    print_source(wire, compiled, query, &source, true, false, out)
}
