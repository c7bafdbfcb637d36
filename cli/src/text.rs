//! Plain-text output for people: tables and `key: value` blocks.

use std::fmt::Write as _;

use lps_proto::{model::ShippingStatus, pb};

use super::{
    disposition, effective_price, error_class, flags, job_state, mall_offer, outcome, seconds,
    shipping,
    table::{Table, clean, money, truncate},
    timestamp,
};

const TITLE_COLUMNS: usize = 40;
const LINK_COLUMNS: usize = 60;

fn or_dash(s: Option<String>) -> String {
    s.filter(|s| !s.is_empty())
        .unwrap_or_else(|| "-".to_owned())
}

/// `name [code] (brand B, model M, gtin G)`, each part only when the product has it.
fn product_label(p: Option<&pb::Product>) -> String {
    let Some(p) = p else {
        return "?".to_owned();
    };
    let mut label = p.name.clone();
    if !p.code.is_empty() {
        label.push_str(&format!(" [{}]", p.code));
    }
    let hints: Vec<String> = [
        ("brand", &p.brand),
        ("model", &p.model_code),
        ("gtin", &p.gtin),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .map(|(k, v)| format!("{k} {v}"))
    .collect();
    if !hints.is_empty() {
        label.push_str(&format!(" ({})", hints.join(", ")));
    }
    label
}

/// What Search answered, per item.
pub fn accepted(r: &pb::SearchResponse) -> String {
    let mut out = format!(
        "search {} {} (version {})\n",
        r.search_id,
        if r.replayed { "replayed" } else { "accepted" },
        r.version
    );
    let mut t = Table::new(&["PRODUCT#", "MALL", "DISPOSITION", "JOB"]);
    for i in &r.items {
        t.row(vec![
            i.product_index.to_string(),
            i.mall.clone(),
            disposition(i.disposition),
            i.job_id.to_string(),
        ]);
    }
    out.push_str(&t.render());
    out
}

/// One line about where a search stands (for progress on stderr).
pub fn progress(s: &pb::SearchStatus) -> String {
    let mut counts = [0usize; 5];
    let mut total = 0;
    for m in s.products.iter().flat_map(|p| &p.malls) {
        total += 1;
        if let Ok(state) = pb::JobState::try_from(m.state) {
            let i = match state {
                pb::JobState::Queued => 0,
                pb::JobState::Running => 1,
                pb::JobState::Done => 2,
                pb::JobState::Dead => 3,
                pb::JobState::Cancelled => 4,
                pb::JobState::Unspecified => continue,
            };
            counts[i] += 1;
        }
    }
    let finished = counts[2] + counts[3] + counts[4];
    let mut line = format!(
        "search {} v{}: {finished}/{total} finished (queued {}, running {}, done {}, dead {}, cancelled {})",
        s.search_id, s.version, counts[0], counts[1], counts[2], counts[3], counts[4]
    );
    if s.cancelled {
        line.push_str(", search cancelled");
    }
    if s.r#final {
        line.push_str(", final");
    }
    line
}

fn mall_state(m: &pb::MallStatus) -> String {
    let state = job_state(m.state);
    match pb::JobState::try_from(m.state) {
        Ok(pb::JobState::Done) => format!("{state}/{}", outcome(m.outcome)),
        Ok(pb::JobState::Dead) => format!("{state}/{}", error_class(m.error_class)),
        Ok(pb::JobState::Queued) if m.attempts > 0 => {
            format!("{state} (retry {})", m.attempts)
        }
        _ => state,
    }
}

/// An offer's shipping as people read it: `무료` (free), the fee (`3,000`), `무료(조건)`
/// (free because the price reaches the mall's threshold), or `?` (not shown or not
/// readable: the effective price is then only a lower bound).
pub fn shipping_cell(o: &pb::Offer) -> String {
    match shipping(o) {
        ShippingStatus::Free => "무료".to_owned(),
        ShippingStatus::Paid => money(o.shipping_fee),
        ShippingStatus::FreeByThreshold => "무료(조건)".to_owned(),
        ShippingStatus::Unknown => "?".to_owned(),
    }
}

/// The effective price, or `12,900+?` when shipping is unknown.
fn effective_cell(o: &pb::Offer) -> String {
    if let Some(effective) = effective_price(o) {
        money(effective)
    } else {
        format!("{}+?", money(o.price))
    }
}

fn lowest_line(lowest: Option<&pb::Offer>, possibly_lower: bool) -> String {
    match lowest {
        Some(o) => format!(
            "lowest: {} ({} + {} shipping) at {}: {} {}",
            money(effective_price(o).unwrap_or(o.price + o.shipping_fee)),
            money(o.price),
            shipping_cell(o),
            o.mall,
            clean(&truncate(&o.title, TITLE_COLUMNS * 2)),
            clean(&o.url),
        ),
        None if possibly_lower => "lowest: no offer with known shipping found".to_owned(),
        None => "lowest: no offer found".to_owned(),
    }
}

fn possibly_lower_line(o: &pb::Offer) -> String {
    format!(
        "possibly lower, shipping unknown: {} {} {} {}",
        o.mall,
        money(o.price),
        clean(&truncate(&o.title, TITLE_COLUMNS * 2)),
        clean(&o.url),
    )
}

/// A search's status: per product a table of its malls (the cheapest offer of each), a
/// line with the product's lowest (over offers whose shipping is known) and, when an offer
/// whose shipping is unknown is cheaper, a "possibly lower" line after it.
pub fn search_status(s: &pb::SearchStatus) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "search {} (version {}{}{})",
        s.search_id,
        s.version,
        if s.r#final { ", final" } else { "" },
        if s.cancelled { ", cancelled" } else { "" }
    );
    for p in &s.products {
        let _ = writeln!(
            out,
            "\nproduct: {}",
            clean(&product_label(p.product.as_ref()))
        );
        let mut t = Table::new(&[
            "MALL",
            "STATE",
            "TITLE",
            "PRICE",
            "SHIPPING",
            "EFFECTIVE",
            "LINK",
        ]);
        for m in &p.malls {
            let best = mall_offer(m);
            let title = match (best, pb::JobState::try_from(m.state)) {
                (Some(o), _) => truncate(&o.title, TITLE_COLUMNS),
                (None, Ok(pb::JobState::Dead)) => truncate(&m.error, TITLE_COLUMNS),
                (None, _) => "-".to_owned(),
            };
            t.row(vec![
                m.mall.clone(),
                mall_state(m),
                title,
                or_dash(best.map(|o| money(o.price))),
                or_dash(best.map(shipping_cell)),
                or_dash(best.map(effective_cell)),
                or_dash(best.map(|o| truncate(&o.url, LINK_COLUMNS))),
            ]);
        }
        out.push_str(&t.render());
        out.push_str(&lowest_line(p.lowest.as_ref(), p.possibly_lower.is_some()));
        out.push('\n');
        if let Some(o) = &p.possibly_lower {
            out.push_str(&possibly_lower_line(o));
            out.push('\n');
        }
    }
    if !s.deliveries.is_empty() {
        out.push_str("\ndeliveries:\n");
        out.push_str(&super::delivery::text(&s.deliveries));
    }
    out
}

pub fn cancel(search_id: i64, r: &pb::CancelSearchResponse) -> String {
    format!(
        "search {search_id}: {} queued jobs cancelled, {} running jobs told to stop, {} kept for other searches\n",
        r.cancelled_queued, r.cancelling_running, r.kept_shared
    )
}

fn offers_table(offers: &[pb::Offer]) -> String {
    let mut t = Table::new(&[
        "TITLE",
        "PRICE",
        "SHIPPING",
        "EFFECTIVE",
        "LIST",
        "FLAGS",
        "SELLER",
        "SCORE",
        "LINK",
    ]);
    for o in offers {
        t.row(vec![
            truncate(&o.title, TITLE_COLUMNS),
            money(o.price),
            shipping_cell(o),
            effective_cell(o),
            if o.list_price > 0 {
                money(o.list_price)
            } else {
                "-".to_owned()
            },
            or_dash(Some(flags(o).join(","))),
            truncate(&o.seller, 20),
            format!("{:.2}", o.match_score),
            truncate(&o.url, LINK_COLUMNS),
        ]);
    }
    t.render()
}

/// A round's excluded cards by reason, `ad 3, placeholder 1`, largest first; `-` for none.
fn excluded_cell(excluded: &std::collections::HashMap<String, u32>) -> String {
    let mut by_count: Vec<(&String, &u32)> = excluded.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let parts: Vec<String> = by_count
        .into_iter()
        .map(|(reason, n)| format!("{reason} {n}"))
        .collect();
    or_dash(Some(parts.join(", ")))
}

/// One job as `key: value` lines, then its offers and query rounds.
pub fn job(j: &pb::Job) -> String {
    let mut out = String::new();
    let mut kv = |k: &str, v: String| {
        let _ = writeln!(out, "{k:<15} {}", clean(&v));
    };
    kv("job:", j.job_id.to_string());
    kv("product:", product_label(j.product.as_ref()));
    kv("mall:", j.mall.clone());
    let mut state = job_state(j.state);
    if j.outcome != 0 {
        state = format!("{state}/{}", outcome(j.outcome));
    }
    kv("state:", state);
    kv("priority:", j.priority.to_string());
    kv(
        "runs:",
        format!(
            "{} ({} failed of {} allowed, {} reclaimed)",
            j.runs.len(),
            j.attempts,
            j.max_attempts,
            j.reclaims
        ),
    );
    kv("node:", or_dash(Some(j.node_id.clone())));
    if let Some(retry) = timestamp(j.next_retry_at.as_ref()) {
        kv("next retry:", retry);
    }
    if !j.trace_id.is_empty() {
        kv("trace:", j.trace_id.clone());
    }
    kv("created:", or_dash(timestamp(j.created_at.as_ref())));
    kv("run after:", or_dash(timestamp(j.run_after.as_ref())));
    kv("started:", or_dash(timestamp(j.run_started_at.as_ref())));
    kv("deadline:", or_dash(timestamp(j.deadline_at.as_ref())));
    kv("finished:", or_dash(timestamp(j.finished_at.as_ref())));
    if j.error_class != 0 || !j.last_error.is_empty() {
        kv(
            "error:",
            format!("{}: {}", error_class(j.error_class), j.last_error),
        );
    }
    kv(
        "cost:",
        format!(
            "{} bytes, {:.4} USD",
            money(i64::try_from(j.bytes).unwrap_or(i64::MAX)),
            j.cost_usd
        ),
    );
    if !j.runs.is_empty() {
        out.push_str("\nruns:\n");
        let mut t = Table::new(&[
            "#", "NODE", "STARTED", "ENDED", "HOW", "ERROR", "BYTES", "USD", "EVIDENCE",
        ]);
        for r in &j.runs {
            let how = enum_label(
                pb::AttemptEnd::try_from(r.ended)
                    .ok()
                    .map(|e| e.as_str_name()),
                "ATTEMPT_END_",
            );
            let error = match (r.error_class, r.error.as_str()) {
                (0, "") => String::new(),
                (class, "") => error_class(class),
                (class, text) => format!("{}: {text}", error_class(class)),
            };
            let evidence = r.evidence.as_ref().map(|e| {
                let shot = if e.screenshot_jpeg.is_empty() {
                    ""
                } else {
                    " +jpeg"
                };
                format!("{} ({} B html{shot})", e.marker, e.html.len())
            });
            t.row(vec![
                r.lease_epoch.to_string(),
                or_dash(Some(r.node_id.clone())),
                or_dash(timestamp(r.started_at.as_ref())),
                or_dash(timestamp(r.ended_at.as_ref())),
                how,
                or_dash(Some(truncate(&error, TITLE_COLUMNS))),
                money(i64::try_from(r.bytes).unwrap_or(i64::MAX)),
                format!("{:.4}", r.cost_usd),
                or_dash(evidence),
            ]);
        }
        out.push_str(&t.render());
    }
    if !j.offers.is_empty() {
        out.push_str("\noffers:\n");
        out.push_str(&offers_table(&j.offers));
    }
    if !j.rounds.is_empty() {
        out.push_str("\nrounds:\n");
        let mut t = Table::new(&[
            "KIND", "QUERY", "SOURCE", "PAGES", "CARDS", "MATCHES", "EXCLUDED", "ELAPSED",
        ]);
        for r in &j.rounds {
            t.row(vec![
                super::round_kind(r),
                truncate(&r.query, TITLE_COLUMNS),
                or_dash(Some(r.source.clone())),
                r.pages.to_string(),
                r.cards_seen.to_string(),
                r.matches.to_string(),
                excluded_cell(&r.excluded),
                format!("{:.1}s", seconds(r.elapsed.as_ref())),
            ]);
        }
        out.push_str(&t.render());
    }
    out
}

pub fn price_history(h: &pb::PriceHistory) -> String {
    let mut out = format!(
        "price history of {}\n",
        clean(&product_label(h.product.as_ref()))
    );
    let mut t = Table::new(&["OBSERVED", "LOWEST", "MALL", "SEARCH", "COMPLETE", "MALLS"]);
    for e in &h.entries {
        let malls: Vec<String> = e
            .malls
            .iter()
            .map(|m| {
                let cached = if m.cached { " (stored)" } else { "" };
                format!("{} {}{cached}", m.mall, money(m.effective_price))
            })
            .collect();
        t.row(vec![
            or_dash(timestamp(e.observed_at.as_ref().or(e.at.as_ref()))),
            money(e.lowest_effective_price),
            e.lowest_mall.clone(),
            or_dash((e.search_id > 0).then(|| e.search_id.to_string())),
            if e.complete {
                "yes".to_owned()
            } else {
                format!("no (answered: {})", e.covered_malls.join(","))
            },
            malls.join(", "),
        ]);
    }
    if t.is_empty() {
        out.push_str("no entries\n");
    } else {
        out.push_str(&t.render());
    }
    out
}

/// The ops snapshot: the figures, then one row per mall, then the alerts.
/// A client token's snapshot: that client's own figures alone.
fn client_ops(s: &pb::OpsSnapshot) -> String {
    let mut out = format!(
        "at: {}\nclient {} (a client token sees its own figures only)\n\n",
        or_dash(timestamp(s.at.as_ref())),
        s.scope_client
    );
    out.push_str(&clients_table(&s.clients));
    out
}

/// Clients: searches, the jobs they wait for, spend, and where each stands against its
/// limits (`3.0/5 per 1m`: calls its rate admits now of the bucket; `1/2`: calls in
/// progress of the most allowed; `-`: no limit).
fn clients_table(clients: &[pb::ClientOps]) -> String {
    let mut t = Table::new(&[
        "CLIENT",
        "SEARCHES 1H",
        "ACTIVE",
        "QUEUED",
        "RUNNING",
        "SPEND 1H",
        "RATE",
        "IN PROGRESS",
    ]);
    for c in clients {
        let limits = c.limits.unwrap_or_default();
        let rate = (limits.rate_calls > 0).then(|| {
            format!(
                "{:.1}/{} per {}",
                limits.rate_available,
                limits.rate_calls,
                humantime::format_duration(std::time::Duration::from_secs_f64(seconds(
                    limits.rate_per.as_ref()
                )))
            )
        });
        let calls = (limits.max_calls_in_progress > 0).then(|| {
            format!(
                "{}/{}",
                limits.calls_in_progress, limits.max_calls_in_progress
            )
        });
        t.row(vec![
            or_dash(Some(c.client.clone())),
            c.searches_last_hour.to_string(),
            c.active_searches.to_string(),
            c.queued_jobs.to_string(),
            c.running_jobs.to_string(),
            format!("{:.4}", c.spend_usd_last_hour),
            or_dash(rate),
            or_dash(calls),
        ]);
    }
    t.render()
}

pub fn ops(s: &pb::OpsSnapshot) -> String {
    if !s.scope_client.is_empty() {
        return client_ops(s);
    }
    let mut out = String::new();
    let jobs: Vec<String> = s
        .jobs
        .iter()
        .map(|c| format!("{} {}", job_state(c.state), c.count))
        .collect();
    let mut kv = |k: &str, v: String| {
        let _ = writeln!(out, "{k:<28} {v}");
    };
    kv("at:", or_dash(timestamp(s.at.as_ref())));
    kv("jobs:", jobs.join(", "));
    kv(
        "oldest queued:",
        format!("{:.0}s", seconds(s.oldest_queued_age.as_ref())),
    );
    kv("dead in 1h:", s.dead_last_hour.to_string());
    kv("stuck running:", s.stuck_running.to_string());
    kv(
        "deadline kills in 1h:",
        s.deadline_kills_last_hour.to_string(),
    );
    kv(
        "cost in 1h:",
        format!(
            "{:.4} USD{}",
            s.cost_usd_last_hour,
            spend_cap(s.spend_cap_hourly_usd, s.spend_capped)
        ),
    );
    let capped: Vec<String> = std::iter::once("deployment")
        .filter(|_| s.spend_capped)
        .chain(
            s.malls
                .iter()
                .filter(|m| m.spend_capped)
                .map(|m| m.mall.as_str()),
        )
        .map(str::to_owned)
        .collect();
    kv(
        "spend caps reached:",
        or_dash(Some(if capped.is_empty() {
            String::new()
        } else {
            format!("{} (no claims until the hour frees up)", capped.join(", "))
        })),
    );
    kv("blocks in 1h:", s.blocks_last_hour.to_string());
    kv(
        "proxy ports available:",
        format!(
            "{}/{} ({:.0}%)",
            s.proxy_ports_available, s.proxy_ports_total, s.proxy_ports_available_pct
        ),
    );
    // NB: the figure above ignores per-mall cooldowns; this is what a crawl can count on.
    if !s.proxy_ports_available_min_mall.is_empty() {
        kv(
            "lowest for a mall:",
            format!(
                "{}/{} ({:.0}%) {}",
                s.proxy_ports_available_min,
                s.proxy_ports_total,
                s.proxy_ports_available_min_pct,
                s.proxy_ports_available_min_mall
            ),
        );
    }
    kv(
        "block-ended sessions in 6h:",
        s.block_ended_sessions_6h.to_string(),
    );
    kv(
        "nodes connected:",
        format!("{} ({} free slots)", s.nodes_connected, s.free_slots),
    );
    if s.nodes_quarantined > 0 {
        kv(
            "nodes quarantined:",
            format!(
                "{} (they kept dropping their jobs; lpsctl nodes)",
                s.nodes_quarantined
            ),
        );
    }
    kv(
        "deliveries:",
        format!(
            "{} pending (oldest {:.0}s), {} dead, {} delivered in 1h",
            s.deliveries_pending,
            seconds(s.oldest_pending_delivery_age.as_ref()),
            s.deliveries_dead,
            s.deliveries_delivered_last_hour
        ),
    );
    kv(
        "schedules:",
        format!(
            "{} active, {} paused, {} waiting for their previous run, {} failing",
            s.schedules_active, s.schedules_paused, s.schedules_waiting, s.schedules_failing
        ),
    );
    // An edit of a replica's profile directory it refused: it still serves `revision`.
    for p in &s.profile_sets {
        let refused = if p.refused_error.is_empty() {
            String::new()
        } else {
            format!(
                "; REFUSED edit {}: {}",
                or_dash(Some(p.refused_revision.clone())),
                p.refused_error
            )
        };
        kv(
            "site profiles:",
            format!("{} serves {}{refused}", p.coordinator_id, p.revision),
        );
    }
    let layout: Vec<String> = s
        .malls
        .iter()
        .filter(|m| m.layout_share_15m > 0.0)
        .map(|m| {
            format!(
                "{} {}/{} ({:.0}%)",
                m.mall,
                m.layout_failures_15m,
                m.finished_attempts_15m,
                m.layout_share_15m * 100.0
            )
        })
        .collect();
    kv("layout failures in 15m:", or_dash(Some(layout.join(", "))));
    if !s.malls.is_empty() {
        out.push('\n');
        let mut t = Table::new(&[
            "MALL",
            "QUEUED",
            "RUNNING",
            "CAP",
            "GAP",
            "BLOCKS/1H",
            "COOLING",
            "PORTS",
            "SPEND/1H",
        ]);
        for m in &s.malls {
            t.row(vec![
                m.mall.clone(),
                m.queued.to_string(),
                m.running.to_string(),
                if m.max_running == 0 {
                    "-".to_owned()
                } else {
                    m.max_running.to_string()
                },
                format!("{:.1}s", seconds(m.min_start_gap.as_ref())),
                m.blocks_last_hour.to_string(),
                m.ports_cooling.to_string(),
                m.ports_available.to_string(),
                format!(
                    "{:.4}{}",
                    m.spend_usd_last_hour,
                    spend_cap(m.spend_cap_hourly_usd, m.spend_capped)
                ),
            ]);
        }
        out.push_str(&t.render());
    }
    if !s.clients.is_empty() {
        out.push('\n');
        out.push_str(&clients_table(&s.clients));
    }
    if !s.alerts.is_empty() {
        out.push('\n');
        let mut t = Table::new(&["ALERT", "STATE", "VALUE", "THRESHOLD", "SINCE"]);
        for a in &s.alerts {
            t.row(vec![
                a.rule.clone(),
                if a.firing { "FIRING" } else { "ok" }.to_owned(),
                format!("{:.2}", a.value),
                format!("{:.2}", a.threshold),
                or_dash(timestamp(a.since.as_ref())),
            ]);
        }
        out.push_str(&t.render());
    }
    out
}

/// An enum value's name without its prefix, lowercase (`ATTEMPT_END_LEASE_EXPIRED` →
/// `lease_expired`); unknown values read `?`.
fn enum_label(name: Option<&str>, prefix: &str) -> String {
    name.map_or_else(
        || "?".to_owned(),
        |n| n.strip_prefix(prefix).unwrap_or(n).to_ascii_lowercase(),
    )
}

/// Searches, newest first: who made them and how far they got.
pub fn searches(list: &[pb::SearchSummary]) -> String {
    let mut t = Table::new(&[
        "SEARCH", "CLIENT", "CALLER", "CREATED", "PRODUCTS", "FINAL", "STATE",
    ]);
    for s in list {
        let state = match (s.r#final, s.cancelled) {
            (_, true) => "cancelled",
            (true, false) => "final",
            (false, false) => "running",
        };
        t.row(vec![
            s.search_id.to_string(),
            or_dash(Some(s.client.clone())),
            or_dash(Some(s.caller.clone())),
            or_dash(timestamp(s.created_at.as_ref())),
            s.products.to_string(),
            format!("{}/{}", s.final_items, s.items),
            state.to_owned(),
        ]);
    }
    if t.is_empty() {
        "no searches\n".to_owned()
    } else {
        t.render()
    }
}

/// ` (cap N USD/h)`, `reached` when capped; nothing without a cap (0).
fn spend_cap(cap: f64, capped: bool) -> String {
    match (cap > 0.0, capped) {
        (false, _) => String::new(),
        (true, false) => format!(" (cap {cap:.2} USD/h)"),
        (true, true) => format!(" (cap {cap:.2} USD/h reached)"),
    }
}

pub fn nodes(r: &pb::ListNodesResponse) -> String {
    let mut t = Table::new(&[
        "NODE",
        "VERSION",
        "SLOTS",
        "FREE",
        "RUNNING",
        "MALLS",
        "DRAINING",
        "QUARANTINED UNTIL",
        "COORDINATOR",
        "LAST SEEN",
    ]);
    let mut reasons = Vec::new();
    for n in &r.nodes {
        t.row(vec![
            n.node_id.clone(),
            or_dash(Some(n.version.clone())),
            n.slots.to_string(),
            n.free_slots.to_string(),
            n.running_jobs.len().to_string(),
            if n.malls.is_empty() {
                "*".to_owned()
            } else {
                n.malls.join(",")
            },
            if n.draining { "yes" } else { "no" }.to_owned(),
            or_dash(timestamp(n.quarantined_until.as_ref())),
            n.coordinator.clone(),
            or_dash(timestamp(n.last_seen_at.as_ref())),
        ]);
        if n.quarantined_until.is_some() {
            reasons.push(format!(
                "{} is quarantined (no new jobs): {}\n",
                n.node_id, n.quarantine_reason
            ));
        }
    }
    if t.is_empty() {
        "no nodes connected\n".to_owned()
    } else {
        t.render() + &reasons.concat()
    }
}

pub fn ports(r: &pb::ListProxyPortsResponse) -> String {
    let mut t = Table::new(&[
        "PORT",
        "STATE",
        "HOLDER",
        "UNTIL",
        "COOLING MALLS",
        "USES",
        "BURNS",
        "LAST REASON",
    ]);
    for p in &r.ports {
        let state = super::port_state(p);
        let until = match state.as_str() {
            "leased" => timestamp(p.leased_until.as_ref()),
            "cooling" => timestamp(p.cooldown_until.as_ref()),
            "resting" => timestamp(p.rest_until.as_ref()),
            _ => None,
        };
        t.row(vec![
            format!("{}:{}", p.host, p.port),
            state,
            or_dash(Some(p.holder_node.clone())),
            or_dash(until),
            or_dash(Some(p.cooling_malls.join(","))),
            p.use_count.to_string(),
            p.burn_count.to_string(),
            or_dash(Some(p.last_reason.clone())),
        ]);
    }
    if t.is_empty() {
        "no proxy ports\n".to_owned()
    } else {
        t.render()
    }
}

/// `lpsctl ports advise`: the per-request block table and the suggestion.
pub fn advice(a: &pb::BudgetAdvice) -> String {
    use std::fmt::Write as _;
    let mut out = format!(
        "mall {}: {} IP sessions, {} ended by a block; current budget {}\n",
        a.mall, a.sessions, a.blocked_sessions, a.current_budget
    );
    let _ = writeln!(
        out,
        "{:>8}  {:>8}  {:>8}  {:>10}  {:>12}",
        "request", "reached", "blocked", "block rate", "cumulative"
    );
    for s in &a.steps {
        let _ = writeln!(
            out,
            "{:>8}  {:>8}  {:>8}  {:>9.1}%  {:>11.1}%",
            s.request_no,
            s.reached,
            s.blocked_at,
            s.block_rate * 100.0,
            s.cumulative_block_share * 100.0
        );
    }
    let _ = match a.suggested_budget {
        Some(b) => writeln!(
            out,
            "suggested budget: {b} (largest k whose cumulative block share stays under {:.1}%, with at least {} sessions reaching it)",
            a.threshold * 100.0,
            a.min_sessions
        ),
        None => writeln!(
            out,
            "no suggestion yet: fewer than {} sessions reached a request number",
            a.min_sessions
        ),
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_products_label_names_its_code_and_hints() {
        let p = pb::Product {
            code: "HB-210".into(),
            name: "햇반 210g".into(),
            brand: "CJ".into(),
            gtin: "8801234567893".into(),
            ..Default::default()
        };
        assert_eq!(
            product_label(Some(&p)),
            "햇반 210g [HB-210] (brand CJ, gtin 8801234567893)"
        );
        let plain = pb::Product {
            name: "햇반 210g".into(),
            ..Default::default()
        };
        assert_eq!(product_label(Some(&plain)), "햇반 210g");
    }

    fn offer(mall: &str, price: i64, shipping: i64) -> pb::Offer {
        pb::Offer {
            mall: mall.into(),
            title: "제주 삼다수 2L x 12".into(),
            price,
            shipping_fee: shipping,
            effective_price: Some(price + shipping),
            url: "http://127.0.0.1/p/1".into(),
            seller: "s".into(),
            match_score: 0.9,
            currency: "KRW".into(),
            shipping: if shipping > 0 {
                pb::ShippingStatus::Paid
            } else {
                pb::ShippingStatus::Free
            } as i32,
            list_price: 0,
            flags: Vec::new(),
        }
    }

    fn unknown(mall: &str, price: i64) -> pb::Offer {
        pb::Offer {
            shipping: pb::ShippingStatus::Unknown as i32,
            ..offer(mall, price, 0)
        }
    }

    #[test]
    fn shipping_cells_name_the_status() {
        assert_eq!(shipping_cell(&offer("a", 1, 3_000)), "3,000");
        assert_eq!(shipping_cell(&offer("a", 1, 0)), "무료");
        let threshold = pb::Offer {
            shipping: pb::ShippingStatus::FreeByThreshold as i32,
            ..offer("a", 25_000, 0)
        };
        assert_eq!(shipping_cell(&threshold), "무료(조건)");
        assert_eq!(shipping_cell(&unknown("a", 1)), "?");
        assert_eq!(effective_cell(&unknown("a", 9_900)), "9,900+?");
        assert_eq!(effective_cell(&offer("a", 9_900, 100)), "10,000");
    }

    #[test]
    fn a_product_no_mall_found_says_so() {
        let s = pb::SearchStatus {
            search_id: 9,
            products: vec![pb::ProductStatus {
                product: Some(pb::Product {
                    code: String::new(),
                    name: "세상에 없는 상품".into(),
                    ..Default::default()
                }),
                malls: vec![pb::MallStatus {
                    mall: "alpha".into(),
                    state: pb::JobState::Done as i32,
                    outcome: pb::Outcome::NotFound as i32,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let text = search_status(&s);
        assert!(text.contains("lowest: no offer found"), "{text}");
        assert!(!text.contains("known shipping"), "{text}");
    }

    #[test]
    fn a_cheaper_offer_of_unknown_shipping_shows_beside_the_lowest() {
        let s = pb::SearchStatus {
            search_id: 8,
            products: vec![pb::ProductStatus {
                product: Some(pb::Product {
                    code: String::new(),
                    name: "제주 삼다수 2L x 12".into(),
                    ..Default::default()
                }),
                malls: vec![
                    pb::MallStatus {
                        mall: "alpha".into(),
                        state: pb::JobState::Done as i32,
                        outcome: pb::Outcome::Found as i32,
                        offers: vec![unknown("alpha", 9_000), offer("alpha", 12_000, 0)],
                        ..Default::default()
                    },
                    pb::MallStatus {
                        mall: "beta".into(),
                        state: pb::JobState::Dead as i32,
                        error_class: pb::ErrorClass::Layout as i32,
                        error: "no card source read the page".into(),
                        ..Default::default()
                    },
                ],
                lowest: Some(offer("alpha", 12_000, 0)),
                possibly_lower: Some(unknown("alpha", 9_000)),
                r#final: true,
            }],
            ..Default::default()
        };
        let out = search_status(&s);
        let lines: Vec<&str> = out.lines().collect();
        assert!(out.contains("dead/layout"), "{out}");
        let alpha: Vec<&str> = lines
            .iter()
            .find(|l| l.starts_with("alpha"))
            .unwrap()
            .split_whitespace()
            .collect();
        // A mall's row shows its lowest with known shipping (read off the offers when the
        // coordinator sent no MallStatus.lowest); the cheaper unknown one is beside it.
        assert!(
            alpha.ends_with(&["12,000", "무료", "12,000", "http://127.0.0.1/p/1"]),
            "{out}"
        );
        assert_eq!(
            lines[lines.len() - 2],
            "lowest: 12,000 (12,000 + 무료 shipping) at alpha: 제주 삼다수 2L x 12 http://127.0.0.1/p/1"
        );
        assert_eq!(
            lines[lines.len() - 1],
            "possibly lower, shipping unknown: alpha 9,000 제주 삼다수 2L x 12 http://127.0.0.1/p/1"
        );
    }

    #[test]
    fn job_rounds_show_source_pages_and_exclusions() {
        let j = pb::Job {
            job_id: 3,
            offers: vec![pb::Offer {
                list_price: 15_000,
                flags: vec![pb::CardClass::Overseas as i32],
                ..unknown("alpha", 9_000)
            }],
            rounds: vec![pb::RoundReport {
                round_kind: pb::RoundKind::Original as i32,
                query: "삼다수".into(),
                cards_seen: 12,
                matches: 2,
                source: "embedded_json".into(),
                excluded: [("placeholder".to_owned(), 1), ("ad".to_owned(), 3)].into(),
                pages: 2,
                ..Default::default()
            }],
            ..Default::default()
        };
        let out = job(&j);
        assert!(
            out.contains("KIND      QUERY   SOURCE         PAGES  CARDS  MATCHES  EXCLUDED"),
            "{out}"
        );
        assert!(
            out.contains(
                "original  삼다수  embedded_json  2      12     2        ad 3, placeholder 1"
            ),
            "{out}"
        );
        assert!(
            out.contains("?         9,000+?    15,000  overseas"),
            "{out}"
        );
    }

    #[test]
    fn ops_shows_the_spend_caps_and_what_they_stopped() {
        let s = pb::OpsSnapshot {
            cost_usd_last_hour: 1.25,
            spend_cap_hourly_usd: 5.0,
            malls: vec![
                pb::MallOps {
                    mall: "alpha".into(),
                    spend_usd_last_hour: 1.0,
                    spend_cap_hourly_usd: 1.0,
                    spend_capped: true,
                    ..Default::default()
                },
                pb::MallOps {
                    mall: "beta".into(),
                    spend_usd_last_hour: 0.25,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let out = ops(&s);
        assert!(
            out.contains("cost in 1h:                  1.2500 USD (cap 5.00 USD/h)\n"),
            "{out}"
        );
        assert!(
            out.contains(
                "spend caps reached:          alpha (no claims until the hour frees up)\n"
            ),
            "{out}"
        );
        assert!(out.contains("1.0000 (cap 1.00 USD/h reached)"), "{out}");
        assert!(out.contains("0.2500\n"), "{out}");
        let quiet = ops(&pb::OpsSnapshot::default());
        assert!(
            quiet.contains("cost in 1h:                  0.0000 USD\n"),
            "{quiet}"
        );
        assert!(
            quiet.contains("spend caps reached:          -\n"),
            "{quiet}"
        );
    }

    #[test]
    fn ops_shows_each_replica_s_profiles_and_a_refused_edit() {
        let out = ops(&pb::OpsSnapshot {
            profile_sets: vec![
                pb::ProfileSetOps {
                    coordinator_id: "c1".into(),
                    revision: "00112233aabbccdd".into(),
                    ..Default::default()
                },
                pb::ProfileSetOps {
                    coordinator_id: "c2".into(),
                    revision: "00112233aabbccdd".into(),
                    refused_revision: "ffeeddcc00112233".into(),
                    refused_error: "site profile /p/naver.toml: fields.price: bad".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        });
        let lines: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("site profiles:"))
            .collect();
        assert_eq!(
            lines,
            [
                "site profiles:               c1 serves 00112233aabbccdd",
                "site profiles:               c2 serves 00112233aabbccdd; REFUSED edit ffeeddcc00112233: site profile /p/naver.toml: fields.price: bad",
            ],
            "{out}"
        );
    }

    #[test]
    fn ops_counts_the_schedules() {
        let out = ops(&pb::OpsSnapshot {
            schedules_active: 4,
            schedules_paused: 1,
            schedules_waiting: 2,
            schedules_failing: 1,
            ..Default::default()
        });
        assert!(
            out.lines().any(|l| l
                == "schedules:                   4 active, 1 paused, 2 waiting for their previous run, 1 failing"),
            "{out}"
        );
    }

    #[test]
    fn ops_lists_the_malls_with_layout_failures() {
        let mall = |name: &str, finished, layout| pb::MallOps {
            mall: name.into(),
            finished_attempts_15m: finished,
            layout_failures_15m: layout,
            layout_share_15m: if finished > 0 {
                layout as f64 / finished as f64
            } else {
                0.0
            },
            ..Default::default()
        };
        let s = pb::OpsSnapshot {
            malls: vec![
                mall("alpha", 4, 3),
                mall("beta", 10, 0),
                mall("gamma", 0, 0),
            ],
            ..Default::default()
        };
        let out = ops(&s);
        let line = out
            .lines()
            .find(|l| l.starts_with("layout failures in 15m:"))
            .unwrap();
        assert_eq!(line, "layout failures in 15m:      alpha 3/4 (75%)");
        let quiet = ops(&pb::OpsSnapshot {
            malls: vec![mall("beta", 10, 0)],
            ..Default::default()
        });
        assert!(
            quiet.contains("layout failures in 15m:      -\n"),
            "{quiet}"
        );
    }

    #[test]
    fn status_table_ends_with_the_lowest() {
        let s = pb::SearchStatus {
            search_id: 7,
            version: 42,
            r#final: true,
            products: vec![pb::ProductStatus {
                product: Some(pb::Product {
                    code: String::new(),
                    name: "제주 삼다수 2L x 12".into(),
                    ..Default::default()
                }),
                malls: vec![
                    pb::MallStatus {
                        mall: "alpha".into(),
                        state: pb::JobState::Done as i32,
                        outcome: pb::Outcome::Found as i32,
                        offers: vec![offer("alpha", 12_000, 3_000)],
                        ..Default::default()
                    },
                    pb::MallStatus {
                        mall: "beta".into(),
                        state: pb::JobState::Dead as i32,
                        error_class: pb::ErrorClass::Blocked as i32,
                        error: "blocked twice".into(),
                        attempts: 3,
                        ..Default::default()
                    },
                ],
                lowest: Some(offer("alpha", 12_000, 3_000)),
                r#final: true,
                possibly_lower: None,
            }],
            ..Default::default()
        };
        let out = search_status(&s);
        assert!(out.contains("done/found"), "{out}");
        assert!(out.contains("dead/blocked"), "{out}");
        assert!(out.contains("15,000"), "{out}");
        assert_eq!(
            out.lines().last().unwrap(),
            "lowest: 15,000 (12,000 + 3,000 shipping) at alpha: 제주 삼다수 2L x 12 http://127.0.0.1/p/1"
        );
        assert!(
            progress(&s).ends_with(
                "2/2 finished (queued 0, running 0, done 1, dead 1, cancelled 0), final"
            )
        );
    }
}
