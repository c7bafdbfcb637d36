//! Schedules (watchlists) as `lpsctl schedule list|show|add|pause|resume|delete` show them:
//! a table of schedules, one schedule in full (products, rules, next and last run), or
//! JSON; and the price-move rules as `lpsctl schedule add` reads them (`--below`,
//! `--move-percent`).

use std::{fmt::Write as _, time::Duration};

use lps_proto::pb;
use serde_json::{Value, json};

use super::{seconds, table::Table, table::clean, timestamp};

/// How often it runs: `every 1h` or `cron 0 6 * * *`.
pub fn cadence(s: &pb::Schedule) -> String {
    match &s.interval {
        Some(d) if s.cron.is_empty() => {
            let secs = u64::try_from(d.seconds).unwrap_or_default();
            format!(
                "every {}",
                humantime::format_duration(Duration::from_secs(secs))
            )
        }
        _ => format!("cron {}", s.cron),
    }
}

/// One rule as a person reads it: `#2 below 9,900`, `any move ≥ 5%`.
pub fn rule(r: &pb::PriceMoveRule) -> String {
    let mut parts = Vec::new();
    if let Some(below) = r.below {
        parts.push(format!("below {}", super::table::money(below)));
    }
    if let Some(pct) = r.move_percent {
        parts.push(format!("move ≥ {pct}%"));
    }
    let whom = match r.product_index {
        Some(i) => format!("product {}", i + 1),
        None => "every product".to_owned(),
    };
    format!("{whom}: {}", parts.join(", "))
}

/// Schedules as a table.
pub fn text_list(list: &[pb::Schedule]) -> String {
    if list.is_empty() {
        return "no schedules\n".to_owned();
    }
    let mut t = Table::new(&[
        "ID",
        "CLIENT",
        "PRODUCTS",
        "CADENCE",
        "STATE",
        "RUNS",
        "NEXT RUN",
        "LAST SEARCH",
    ]);
    for s in list {
        t.row(vec![
            s.schedule_id.to_string(),
            s.client.clone(),
            s.products.len().to_string(),
            cadence(s),
            state(s).to_owned(),
            s.runs.to_string(),
            timestamp(s.next_run_at.as_ref()).unwrap_or_default(),
            if s.last_search_id == 0 {
                String::new()
            } else {
                s.last_search_id.to_string()
            },
        ]);
    }
    t.render()
}

fn state(s: &pb::Schedule) -> &'static str {
    if s.paused { "paused" } else { "active" }
}

/// One schedule in full.
pub fn text(s: &pb::Schedule) -> String {
    let mut out = String::new();
    let malls = if s.malls.is_empty() {
        "every enabled mall".to_owned()
    } else {
        s.malls.join(", ")
    };
    let _ = writeln!(
        out,
        "schedule {} of {} ({})",
        s.schedule_id,
        clean(&s.client),
        state(s)
    );
    let _ = writeln!(
        out,
        "runs:         {} {}",
        cadence(s),
        format_args!("at priority {}", s.priority)
    );
    let _ = writeln!(out, "malls:        {malls}");
    let destinations = if s.destinations.is_empty() {
        "none".to_owned()
    } else {
        s.destinations.join(", ")
    };
    let _ = writeln!(out, "destinations: {destinations}");
    let _ = writeln!(
        out,
        "next run:     {}",
        timestamp(s.next_run_at.as_ref()).unwrap_or_else(|| "-".into())
    );
    let last = match timestamp(s.last_run_at.as_ref()) {
        Some(at) => format!("run {} at {at}, search {}", s.runs, s.last_search_id),
        None => "none yet".to_owned(),
    };
    let _ = writeln!(out, "last run:     {last}");
    if !s.last_error.is_empty() {
        let _ = writeln!(out, "last error:   {}", clean(&s.last_error));
    }
    let _ = writeln!(out, "products:");
    for (i, p) in s.products.iter().enumerate() {
        let code = if p.code.is_empty() {
            String::new()
        } else {
            format!(" [{}]", clean(&p.code))
        };
        let _ = writeln!(out, "  {}. {}{code}", i + 1, clean(&p.name));
    }
    let _ = writeln!(out, "rules:");
    if s.rules.is_empty() {
        let _ = writeln!(out, "  none (runs refresh prices, nothing is notified)");
    }
    for r in &s.rules {
        let _ = writeln!(out, "  {}", rule(r));
    }
    out
}

pub fn json(s: &pb::Schedule) -> Value {
    json!({
        "schedule_id": s.schedule_id,
        "client": s.client,
        "products": s.products.iter().map(|p| json!({"name": p.name, "code": p.code})).collect::<Vec<_>>(),
        "malls": s.malls,
        "interval_seconds": s.interval.as_ref().map(|d| seconds(Some(d))),
        "cron": (!s.cron.is_empty()).then_some(&s.cron),
        "priority": s.priority,
        "destinations": s.destinations,
        "rules": s.rules.iter().map(|r| json!({
            "product_index": r.product_index,
            "below": r.below,
            "move_percent": r.move_percent,
        })).collect::<Vec<_>>(),
        "paused": s.paused,
        "next_run_at": timestamp(s.next_run_at.as_ref()),
        "runs": s.runs,
        "last_search_id": (s.last_search_id != 0).then_some(s.last_search_id),
        "last_run_at": timestamp(s.last_run_at.as_ref()),
        "last_error": (!s.last_error.is_empty()).then_some(&s.last_error),
        "created_at": timestamp(s.created_at.as_ref()),
        "updated_at": timestamp(s.updated_at.as_ref()),
    })
}

pub fn json_list(list: &[pb::Schedule]) -> Value {
    Value::Array(list.iter().map(json).collect())
}

/// A rule flag's value: `VALUE` for every product, or `N=VALUE` for the N-th product of
/// the schedule (1 = the first, as `schedule show` numbers them).
fn split_rule(flag: &str, arg: &str) -> Result<(Option<u32>, String), String> {
    match arg.split_once('=') {
        None => Ok((None, arg.trim().to_owned())),
        Some((n, value)) => {
            let n: u32 = n.trim().parse().ok().filter(|&n| n >= 1).ok_or_else(|| {
                format!("{flag} {arg:?}: the product number before '=' counts from 1")
            })?;
            Ok((Some(n - 1), value.trim().to_owned()))
        }
    }
}

/// `--below 9900` or `--below 2=9900`: a below-target rule (KRW). The coordinator checks
/// the range; this only reads the number.
pub fn below_rule(arg: &str) -> Result<pb::PriceMoveRule, String> {
    let (product_index, value) = split_rule("--below", arg)?;
    let below = value
        .replace(',', "")
        .parse::<i64>()
        .map_err(|_| format!("--below {arg:?}: not a whole price"))?;
    Ok(pb::PriceMoveRule {
        product_index,
        below: Some(below),
        move_percent: None,
    })
}

/// `--move-percent 5` or `--move-percent 1=2.5`: a move rule (percent, either way).
pub fn move_rule(arg: &str) -> Result<pb::PriceMoveRule, String> {
    let (product_index, value) = split_rule("--move-percent", arg)?;
    let pct = value
        .trim_end_matches('%')
        .parse::<f64>()
        .map_err(|_| format!("--move-percent {arg:?}: not a number"))?;
    Ok(pb::PriceMoveRule {
        product_index,
        below: None,
        move_percent: Some(pct),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule() -> pb::Schedule {
        pb::Schedule {
            schedule_id: 7,
            client: "pricing".into(),
            products: vec![
                pb::Product {
                    code: "SKU-1".into(),
                    name: "제주 삼다수 2L x 12".into(),
                    ..Default::default()
                },
                pb::Product {
                    code: String::new(),
                    name: "햇반 210g 12개".into(),
                    ..Default::default()
                },
            ],
            malls: vec!["naver".into()],
            interval: Some(prost_types::Duration {
                seconds: 3600,
                nanos: 0,
            }),
            priority: 50,
            destinations: vec!["hooks".into()],
            rules: vec![
                pb::PriceMoveRule {
                    product_index: Some(1),
                    below: Some(9_900),
                    move_percent: None,
                },
                pb::PriceMoveRule {
                    product_index: None,
                    below: None,
                    move_percent: Some(5.0),
                },
            ],
            runs: 3,
            last_search_id: 42,
            last_run_at: Some(prost_types::Timestamp {
                seconds: 1_780_000_000,
                nanos: 0,
            }),
            next_run_at: Some(prost_types::Timestamp {
                seconds: 1_780_003_600,
                nanos: 0,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_schedule_shows_its_cadence_products_and_rules() {
        let s = schedule();
        let text = text(&s);
        assert!(
            text.starts_with("schedule 7 of pricing (active)\n"),
            "{text}"
        );
        assert!(
            text.contains("runs:         every 1h at priority 50"),
            "{text}"
        );
        assert!(text.contains("  1. 제주 삼다수 2L x 12 [SKU-1]"), "{text}");
        assert!(text.contains("  product 2: below 9,900"), "{text}");
        assert!(text.contains("  every product: move ≥ 5%"), "{text}");
        assert!(
            text.contains("last run:     run 3 at 2026-05-28T"),
            "{text}"
        );
        let list = text_list(std::slice::from_ref(&s));
        assert!(list.lines().nth(1).unwrap().contains("every 1h"), "{list}");
        let v = json(&s);
        assert_eq!(v["interval_seconds"], 3600.0);
        assert_eq!(v["cron"], Value::Null);
        assert_eq!(v["rules"][0]["product_index"], 1);
        let cron = pb::Schedule {
            interval: None,
            cron: "0 6 * * *".into(),
            paused: true,
            ..s
        };
        assert_eq!(cadence(&cron), "cron 0 6 * * *");
        assert!(text_list(&[cron]).contains("paused"));
    }

    #[test]
    fn rule_flags_read_a_value_or_a_numbered_product() {
        let r = below_rule("9,900").unwrap();
        assert_eq!((r.product_index, r.below), (None, Some(9_900)));
        let r = below_rule("2=12000").unwrap();
        assert_eq!((r.product_index, r.below), (Some(1), Some(12_000)));
        let r = move_rule("5%").unwrap();
        assert_eq!(r.move_percent, Some(5.0));
        let r = move_rule("1=2.5").unwrap();
        assert_eq!((r.product_index, r.move_percent), (Some(0), Some(2.5)));
        assert!(below_rule("cheap").unwrap_err().contains("--below"));
        assert!(below_rule("0=100").unwrap_err().contains("counts from 1"));
        assert!(move_rule("x=1").is_err());
    }
}
