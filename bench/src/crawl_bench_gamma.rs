//! `crawl-bench --gamma`: the test kit's "gamma" mall, whose result pages carry every trap
//! of a real one (placeholders, lazy loading past 10 cards, a second page, ads, option
//! listings, time deals, conditional shipping). The same searches are read twice in the
//! same run, alternating: with the built-in profile (`testmall-gamma`: the inline
//! `__NEXT_DATA__` JSON first) and with its DOM source alone (`testmall-gamma-dom`: the
//! rendered cards, scrolled into view, next page followed). Per source: searches per
//! node-minute, relay bytes and result pages per search, and how many answers are the
//! catalog's truth.

use std::{path::Path, time::Instant};

use lps_test_kit::{MallStyle, catalog::Catalog};

use super::{Bench, mean, percentile};

/// The profile id of the DOM-only variant.
pub const DOM_MALL: &str = "testmall-gamma-dom";
/// The built-in gamma profile.
pub const JSON_MALL: &str = "testmall-gamma";

/// Writes the DOM-only variant of `dir`'s gamma profile next to it.
pub fn write_dom_profile(dir: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(dir.join("testmall-gamma.toml"))?;
    let start = text
        .find("[[sources]]\nkind = \"embedded_json\"")
        .ok_or_else(|| anyhow::anyhow!("the gamma profile has no embedded_json source"))?;
    let end = start
        + 1
        + text[start + 1..]
            .find("[[sources]]")
            .ok_or_else(|| anyhow::anyhow!("the gamma profile has no second source"))?;
    let dom = format!("{}{}", &text[..start], &text[end..])
        .replace("id = \"testmall-gamma\"", &format!("id = \"{DOM_MALL}\""));
    std::fs::write(dir.join(format!("{DOM_MALL}.toml")), dom)?;
    Ok(())
}

/// One source's figures over its rounds.
#[derive(Debug, Default)]
struct Figures {
    searches: usize,
    seconds: f64,
    bytes: Vec<f64>,
    pages: Vec<f64>,
    right: usize,
    outcomes: Vec<(String, i64)>,
}

/// Runs `rounds` rounds of every gamma product on both profiles (JSON, DOM, JSON, …) on
/// one node with one slot, and prints the table.
pub async fn run(bench: &Bench, rounds: usize) -> anyhow::Result<()> {
    let catalog = Catalog::builtin();
    let products: Vec<(String, String)> = catalog
        .products()
        .iter()
        .filter_map(|p| {
            let truth = p.truth(MallStyle::Gamma)?.lowest?;
            Some((p.name.clone(), truth.listing.path.clone()))
        })
        .collect();
    let names: Vec<String> = products.iter().map(|(n, _)| n.clone()).collect();
    let profiles = bench.dir.join("profiles-gamma");
    let node = bench.node("bench-gamma", 1, true, &profiles);
    // Warm-up: the browser's launch is not the pages' cost.
    let warmup = bench.enqueue(&names[..1], &[JSON_MALL]).await?;
    bench.wait_final(&warmup).await?;
    let mut figures = [Figures::default(), Figures::default()];
    for _ in 0..rounds {
        for (i, mall) in [JSON_MALL, DOM_MALL].into_iter().enumerate() {
            let started = Instant::now();
            let jobs = bench.enqueue(&names, &[mall]).await?;
            bench.wait_final(&jobs).await?;
            let f = &mut figures[i];
            f.seconds += started.elapsed().as_secs_f64();
            f.searches += jobs.len();
            let rows: Vec<(String, i64, i64, Option<String>)> = sqlx::query_as(
                "select j.product_name, j.bytes,
                        coalesce((select sum((r->>'pages')::bigint) from jsonb_array_elements(j.rounds) r), 0)::bigint,
                        (select o.url from offer o
                          where o.job_id = j.job_id and o.shipping_status <> 'unknown'
                          order by o.effective_price, o.shipping_fee, o.rank limit 1)
                   from job j where j.job_id = any($1)",
            )
            .bind(&jobs)
            .fetch_all(&bench.pool)
            .await?;
            for (name, bytes, pages, best) in rows {
                f.bytes.push(bytes as f64);
                f.pages.push(pages as f64);
                let truth = products.iter().find(|(n, _)| *n == name).map(|(_, p)| p);
                if let (Some(truth), Some(best)) = (truth, best)
                    && best.ends_with(truth.as_str())
                {
                    f.right += 1;
                }
            }
            f.outcomes.extend(bench.results(&jobs).await?);
        }
    }
    node.stop().await?;
    println!();
    println!(
        "| gamma source | searches | outcomes | seconds | searches per node-minute | relay bytes per search, mean | p50 | result pages per search | answers = the catalog's truth |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---:|---:|");
    let labels = [
        "inline JSON (`testmall-gamma`)",
        "DOM, scrolled (`testmall-gamma-dom`)",
    ];
    for (label, f) in labels.into_iter().zip(figures.iter_mut()) {
        f.bytes.sort_by(f64::total_cmp);
        println!(
            "| {label} | {} | {} | {:.1} | {:.1} | {:.0} | {:.0} | {:.2} | {} of {} |",
            f.searches,
            super::outcome_counts(&f.outcomes),
            f.seconds,
            f.searches as f64 / (f.seconds / 60.0),
            mean(&f.bytes),
            percentile(&f.bytes, 0.5),
            mean(&f.pages),
            f.right,
            f.searches
        );
    }
    Ok(())
}
