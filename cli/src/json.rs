//! JSON for scripts: each `pb::` answer as a `serde_json::Value` with short lowercase enum
//! names (`"done"`, `"not_found"`), RFC 3339 times, durations in seconds, and `null` for
//! unset optional fields.

use lps_proto::pb;
use serde_json::{Value, json};

use super::{
    disposition, effective_price, error_class, flags, job_state, outcome, seconds, shipping,
    timestamp,
};

fn non_empty(s: &str) -> Value {
    if s.is_empty() {
        Value::Null
    } else {
        Value::String(s.to_owned())
    }
}

/// A product: `code` (null without one) and `name`, and its hints `brand`, `model_code`
/// and `gtin` only when it has them.
fn product(p: Option<&pb::Product>) -> Value {
    p.map_or(Value::Null, |p| {
        let mut out = json!({ "code": non_empty(&p.code), "name": p.name });
        for (key, hint) in [
            ("brand", &p.brand),
            ("model_code", &p.model_code),
            ("gtin", &p.gtin),
        ] {
            if !hint.is_empty() {
                out[key] = Value::String(hint.clone());
            }
        }
        out
    })
}

/// An f32 as the f64 with the same shortest decimal form (`0.9`, not `0.8999999761581421`).
fn score(x: f32) -> f64 {
    x.to_string().parse().unwrap_or_else(|_| f64::from(x))
}

/// An offer. `shipping` is `free`, `paid`, `free_by_threshold` or `unknown`; with
/// `unknown` the fee is 0 and `effective_price` is `null` (what the buyer pays is not
/// known). `list_price` is `null` when the card showed none.
pub fn offer(o: &pb::Offer) -> Value {
    json!({
        "mall": o.mall,
        "title": o.title,
        "price": o.price,
        "shipping": shipping(o).as_str(),
        "shipping_fee": o.shipping_fee,
        "effective_price": effective_price(o),
        "list_price": (o.list_price > 0).then_some(o.list_price),
        "flags": flags(o),
        "url": o.url,
        "seller": o.seller,
        "match_score": score(o.match_score),
    })
}

pub fn search_response(r: &pb::SearchResponse) -> Value {
    json!({
        "search_id": r.search_id,
        "version": r.version,
        "replayed": r.replayed,
        "items": r.items.iter().map(|i| json!({
            "product_index": i.product_index,
            "mall": i.mall,
            "disposition": disposition(i.disposition),
            "job_id": i.job_id,
        })).collect::<Vec<_>>(),
    })
}

pub fn search_status(s: &pb::SearchStatus) -> Value {
    json!({
        "search_id": s.search_id,
        "version": s.version,
        "created_at": timestamp(s.created_at.as_ref()),
        "final": s.r#final,
        "cancelled": s.cancelled,
        "products": s.products.iter().map(|p| json!({
            "product": product(p.product.as_ref()),
            "final": p.r#final,
            "lowest": p.lowest.as_ref().map(offer),
            "possibly_lower": p.possibly_lower.as_ref().map(offer),
            "malls": p.malls.iter().map(|m| json!({
                "mall": m.mall,
                "job_id": m.job_id,
                "disposition": disposition(m.disposition),
                "state": job_state(m.state),
                "outcome": non_empty(&outcome(m.outcome)),
                "attempts": m.attempts,
                "error_class": non_empty(&error_class(m.error_class)),
                "error": non_empty(&m.error),
                "offers": m.offers.iter().map(offer).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "deliveries": super::delivery::json_list(&s.deliveries),
    })
}

pub fn cancel(r: &pb::CancelSearchResponse) -> Value {
    json!({
        "cancelled_queued": r.cancelled_queued,
        "cancelling_running": r.cancelling_running,
        "kept_shared": r.kept_shared,
    })
}

pub fn job(j: &pb::Job) -> Value {
    json!({
        "job_id": j.job_id,
        "product": product(j.product.as_ref()),
        "mall": j.mall,
        "state": job_state(j.state),
        "priority": j.priority,
        "attempts": j.attempts,
        "max_attempts": j.max_attempts,
        "reclaims": j.reclaims,
        "lease_epoch": j.lease_epoch,
        "node_id": non_empty(&j.node_id),
        "trace_id": non_empty(&j.trace_id),
        "next_retry_at": timestamp(j.next_retry_at.as_ref()),
        "runs": j.runs.iter().map(|r| json!({
            "lease_epoch": r.lease_epoch,
            "node_id": non_empty(&r.node_id),
            "started_at": timestamp(r.started_at.as_ref()),
            "ended_at": timestamp(r.ended_at.as_ref()),
            "ended": pb::AttemptEnd::try_from(r.ended)
                .map(|e| e.as_str_name().trim_start_matches("ATTEMPT_END_").to_ascii_lowercase())
                .unwrap_or_default(),
            "error_class": non_empty(&error_class(r.error_class)),
            "error": non_empty(&r.error),
            "bytes": r.bytes,
            "cost_usd": r.cost_usd,
            "evidence": r.evidence.as_ref().map(|e| json!({
                "url": e.url,
                "title": e.title,
                "marker": e.marker,
                "html_bytes": e.html.len(),
                "screenshot_bytes": e.screenshot_jpeg.len(),
                "captured_at": timestamp(e.captured_at.as_ref()),
            })),
        })).collect::<Vec<_>>(),
        "created_at": timestamp(j.created_at.as_ref()),
        "run_after": timestamp(j.run_after.as_ref()),
        "run_started_at": timestamp(j.run_started_at.as_ref()),
        "deadline_at": timestamp(j.deadline_at.as_ref()),
        "finished_at": timestamp(j.finished_at.as_ref()),
        "outcome": non_empty(&outcome(j.outcome)),
        "offers": j.offers.iter().map(offer).collect::<Vec<_>>(),
        "error_class": non_empty(&error_class(j.error_class)),
        "last_error": non_empty(&j.last_error),
        "rounds": j.rounds.iter().map(|r| json!({
            "kind": super::round_kind(r),
            "query": r.query,
            "cards_seen": r.cards_seen,
            "matches": r.matches,
            "elapsed_secs": seconds(r.elapsed.as_ref()),
            "source": non_empty(&r.source),
            "excluded": r.excluded.iter().collect::<std::collections::BTreeMap<_, _>>(),
            "pages": r.pages,
        })).collect::<Vec<_>>(),
        "bytes": j.bytes,
        "cost_usd": j.cost_usd,
    })
}

pub fn price_history(h: &pb::PriceHistory) -> Value {
    json!({
        "product": product(h.product.as_ref()),
        "entries": h.entries.iter().map(|e| json!({
            "observed_at": timestamp(e.observed_at.as_ref().or(e.at.as_ref())),
            "search_id": (e.search_id > 0).then_some(e.search_id),
            "schedule_id": (e.schedule_id > 0).then_some(e.schedule_id),
            "client": e.client,
            "searched": e.product.as_ref().map(|p| product(Some(p))),
            "complete": e.complete,
            "covered_malls": e.covered_malls,
            "currency": non_empty(&e.currency),
            "lowest_effective_price": e.lowest_effective_price,
            "lowest_mall": e.lowest_mall,
            "malls": e.malls.iter().map(|m| json!({
                "mall": m.mall,
                "price": m.price,
                "shipping_fee": m.shipping_fee,
                "effective_price": m.effective_price,
                "url": m.url,
                "title": m.title,
                "observed_at": timestamp(m.observed_at.as_ref()),
                "cached": m.cached,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

pub fn ops(s: &pb::OpsSnapshot) -> Value {
    let schedules = json!({
        "active": s.schedules_active,
        "paused": s.schedules_paused,
        "waiting": s.schedules_waiting,
        "failing": s.schedules_failing,
    });
    let jobs: serde_json::Map<String, Value> = s
        .jobs
        .iter()
        .map(|c| (job_state(c.state), json!(c.count)))
        .collect();
    let profile_sets: Vec<Value> = s
        .profile_sets
        .iter()
        .map(|p| {
            json!({
                "coordinator_id": p.coordinator_id,
                "revision": p.revision,
                "loaded_at": timestamp(p.loaded_at.as_ref()),
                "refused_revision": (!p.refused_revision.is_empty()).then_some(&p.refused_revision),
                "refused_error": (!p.refused_error.is_empty()).then_some(&p.refused_error),
                "refused_at": timestamp(p.refused_at.as_ref()),
            })
        })
        .collect();
    json!({
        "at": timestamp(s.at.as_ref()),
        "profile_sets": profile_sets,
        "jobs": jobs,
        "oldest_queued_age_secs": seconds(s.oldest_queued_age.as_ref()),
        "dead_last_hour": s.dead_last_hour,
        "stuck_running": s.stuck_running,
        "deadline_kills_last_hour": s.deadline_kills_last_hour,
        "cost_usd_last_hour": s.cost_usd_last_hour,
        "spend_cap_hourly_usd": s.spend_cap_hourly_usd,
        "spend_capped": s.spend_capped,
        "blocks_last_hour": s.blocks_last_hour,
        "proxy_ports_total": s.proxy_ports_total,
        "proxy_ports_available": s.proxy_ports_available,
        "proxy_ports_available_pct": s.proxy_ports_available_pct,
        "proxy_ports_available_min": s.proxy_ports_available_min,
        "proxy_ports_available_min_mall": s.proxy_ports_available_min_mall,
        "proxy_ports_available_min_pct": s.proxy_ports_available_min_pct,
        "block_ended_sessions_6h": s.block_ended_sessions_6h,
        "nodes_connected": s.nodes_connected,
        "nodes_quarantined": s.nodes_quarantined,
        "free_slots": s.free_slots,
        "deliveries_pending": s.deliveries_pending,
        "deliveries_dead": s.deliveries_dead,
        "deliveries_delivered_last_hour": s.deliveries_delivered_last_hour,
        "oldest_pending_delivery_age_secs": seconds(s.oldest_pending_delivery_age.as_ref()),
        "schedules": schedules,
        "malls": s.malls.iter().map(|m| json!({
            "mall": m.mall,
            "queued": m.queued,
            "running": m.running,
            "max_running": m.max_running,
            "min_start_gap_secs": seconds(m.min_start_gap.as_ref()),
            "blocks_last_hour": m.blocks_last_hour,
            "ports_cooling": m.ports_cooling,
            "ports_available": m.ports_available,
            "ports_available_pct": m.ports_available_pct,
            "enabled": m.enabled,
            "finished_attempts_15m": m.finished_attempts_15m,
            "layout_failures_15m": m.layout_failures_15m,
            "layout_share_15m": m.layout_share_15m,
            "spend_usd_last_hour": m.spend_usd_last_hour,
            "spend_cap_hourly_usd": m.spend_cap_hourly_usd,
            "spend_capped": m.spend_capped,
        })).collect::<Vec<_>>(),
        "clients": s.clients.iter().map(|c| json!({
            "client": c.client,
            "searches_last_hour": c.searches_last_hour,
            "active_searches": c.active_searches,
            "queued_jobs": c.queued_jobs,
            "running_jobs": c.running_jobs,
            "spend_usd_last_hour": c.spend_usd_last_hour,
            "limits": c.limits.as_ref().map(|l| json!({
                "rate_calls": (l.rate_calls > 0).then_some(l.rate_calls),
                "rate_per_seconds": (l.rate_calls > 0).then(|| seconds(l.rate_per.as_ref())),
                "rate_available": (l.rate_calls > 0).then_some(l.rate_available),
                "max_calls_in_progress": (l.max_calls_in_progress > 0).then_some(l.max_calls_in_progress),
                "calls_in_progress": l.calls_in_progress,
            })),
        })).collect::<Vec<_>>(),
        "scope_client": non_empty(&s.scope_client),
        "alerts": s.alerts.iter().map(|a| json!({
            "rule": a.rule,
            "firing": a.firing,
            "value": a.value,
            "threshold": a.threshold,
            "since": timestamp(a.since.as_ref()),
        })).collect::<Vec<_>>(),
    })
}

pub fn searches(list: &[pb::SearchSummary]) -> Value {
    Value::Array(
        list.iter()
            .map(|s| {
                json!({
                    "search_id": s.search_id,
                    "client": s.client,
                    "caller": non_empty(&s.caller),
                    "created_at": timestamp(s.created_at.as_ref()),
                    "products": s.products,
                    "items": s.items,
                    "final_items": s.final_items,
                    "final": s.r#final,
                    "cancelled": s.cancelled,
                    "version": s.version,
                })
            })
            .collect(),
    )
}

pub fn nodes(r: &pb::ListNodesResponse) -> Value {
    Value::Array(
        r.nodes
            .iter()
            .map(|n| {
                json!({
                    "node_id": n.node_id,
                    "session_id": n.session_id,
                    "version": n.version,
                    "slots": n.slots,
                    "free_slots": n.free_slots,
                    "running_jobs": n.running_jobs,
                    "malls": n.malls,
                    "connected_at": timestamp(n.connected_at.as_ref()),
                    "last_seen_at": timestamp(n.last_seen_at.as_ref()),
                    "draining": n.draining,
                    "coordinator": n.coordinator,
                    "quarantined_until": timestamp(n.quarantined_until.as_ref()),
                    "quarantine_reason": n.quarantine_reason,
                })
            })
            .collect(),
    )
}

pub fn ports(r: &pb::ListProxyPortsResponse) -> Value {
    Value::Array(
        r.ports
            .iter()
            .map(|p| {
                json!({
                    "host": p.host,
                    "port": p.port,
                    "state": super::port_state(p),
                    "holder_node": non_empty(&p.holder_node),
                    "leased_until": timestamp(p.leased_until.as_ref()),
                    "rest_until": timestamp(p.rest_until.as_ref()),
                    "cooldown_until": timestamp(p.cooldown_until.as_ref()),
                    "cooling_malls": p.cooling_malls,
                    "last_used_at": timestamp(p.last_used_at.as_ref()),
                    "use_count": p.use_count,
                    "burn_count": p.burn_count,
                    "last_reason": non_empty(&p.last_reason),
                })
            })
            .collect(),
    )
}

/// `lpsctl ports advise --json`.
pub fn advice(a: &pb::BudgetAdvice) -> serde_json::Value {
    serde_json::json!({
        "mall": a.mall,
        "current_budget": a.current_budget,
        "suggested_budget": a.suggested_budget,
        "sessions": a.sessions,
        "blocked_sessions": a.blocked_sessions,
        "threshold": a.threshold,
        "min_sessions": a.min_sessions,
        "steps": a.steps.iter().map(|s| serde_json::json!({
            "request_no": s.request_no,
            "reached": s.reached,
            "blocked_at": s.blocked_at,
            "block_rate": s.block_rate,
            "cumulative_block_share": s.cumulative_block_share,
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_keep_their_short_form() {
        assert_eq!(score(0.9), 0.9);
        assert_eq!(score(1.0), 1.0);
        let v = search_status(&pb::SearchStatus::default());
        assert_eq!(v["final"], false);
        assert!(v["products"].as_array().unwrap().is_empty());
    }

    #[test]
    fn a_product_shows_its_hints_only_when_it_has_them() {
        let plain = pb::Product {
            name: "햇반 210g".into(),
            ..Default::default()
        };
        assert_eq!(
            product(Some(&plain)),
            json!({ "code": null, "name": "햇반 210g" })
        );
        let hinted = pb::Product {
            gtin: "8801234567893".into(),
            brand: "CJ".into(),
            ..plain
        };
        assert_eq!(
            product(Some(&hinted)),
            json!({ "code": null, "name": "햇반 210g", "brand": "CJ", "gtin": "8801234567893" })
        );
    }

    #[test]
    fn offers_and_rounds_carry_every_field() {
        let o = pb::Offer {
            mall: "alpha".into(),
            title: "t".into(),
            price: 9_000,
            effective_price: None,
            shipping: pb::ShippingStatus::Unknown as i32,
            list_price: 12_000,
            flags: vec![pb::CardClass::Overseas as i32],
            ..Default::default()
        };
        let v = offer(&o);
        assert_eq!(v["shipping"], "unknown");
        assert_eq!(v["list_price"], 12_000);
        assert_eq!(v["flags"], json!(["overseas"]));
        assert_eq!(offer(&pb::Offer::default())["list_price"], Value::Null);
        let s = pb::SearchStatus {
            products: vec![pb::ProductStatus {
                possibly_lower: Some(o),
                ..Default::default()
            }],
            ..Default::default()
        };
        let v = search_status(&s);
        assert_eq!(v["products"][0]["possibly_lower"]["price"], 9_000);
        assert_eq!(v["products"][0]["lowest"], Value::Null);
        let j = pb::Job {
            rounds: vec![pb::RoundReport {
                round_kind: pb::RoundKind::Original as i32,
                source: "embedded_json".into(),
                excluded: [("ad".to_owned(), 3), ("placeholder".to_owned(), 1)].into(),
                pages: 2,
                ..Default::default()
            }],
            ..Default::default()
        };
        let r = &job(&j)["rounds"][0];
        assert_eq!(r["source"], "embedded_json");
        assert_eq!(r["excluded"], json!({"ad": 3, "placeholder": 1}));
        assert_eq!(r["pages"], 2);
    }
}
