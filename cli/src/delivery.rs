//! Deliveries as `lpsctl deliveries`, `lpsctl delivery retry` and `lpsctl status` show
//! them: a table (or JSON) per delivery with its state, attempts, last error and next try.

use lps_proto::pb;
use serde_json::{Value, json};

use super::{enum_name, table::Table, timestamp};

pub fn state(v: i32) -> String {
    enum_name(
        pb::DeliveryState::try_from(v).ok().map(|e| e.as_str_name()),
        "DELIVERY_STATE_",
        v,
    )
}

/// What the event is about: `search`, `product <index>`, `price move` or `alert <rule>`.
fn about(d: &pb::Delivery) -> String {
    if !d.alert_rule.is_empty() {
        return format!("alert {}", d.alert_rule);
    }
    match (d.schedule_id, d.product_index) {
        (0, Some(i)) => format!("product {i}"),
        (_, Some(i)) => format!("price move {i}"),
        (_, None) => "search".to_owned(),
    }
}

/// The search an event is of (`-` for an alert's announcement).
fn search(d: &pb::Delivery) -> String {
    if d.alert_rule.is_empty() {
        d.search_id.to_string()
    } else {
        "-".to_owned()
    }
}

/// When the next attempt is, for deliveries that have one.
fn next_try(d: &pb::Delivery) -> String {
    match pb::DeliveryState::try_from(d.state) {
        Ok(pb::DeliveryState::Pending | pb::DeliveryState::Delivering) => {
            timestamp(d.next_attempt_at.as_ref()).unwrap_or_default()
        }
        _ => String::new(),
    }
}

/// Deliveries as a table.
pub fn text(list: &[pb::Delivery]) -> String {
    if list.is_empty() {
        return "no deliveries\n".to_owned();
    }
    let mut t = Table::new(&[
        "ID",
        "SEARCH",
        "EVENT",
        "DESTINATION",
        "STATE",
        "ATTEMPTS",
        "NEXT TRY",
        "LAST ERROR",
    ]);
    for d in list {
        t.row(vec![
            d.delivery_id.to_string(),
            search(d),
            about(d),
            d.destination.clone(),
            state(d.state),
            d.attempts.to_string(),
            next_try(d),
            d.last_error.clone(),
        ]);
    }
    t.render()
}

pub fn json(d: &pb::Delivery) -> Value {
    json!({
        "delivery_id": d.delivery_id,
        "event_id": d.event_id,
        "search_id": (d.alert_rule.is_empty()).then_some(d.search_id),
        "alert_rule": (!d.alert_rule.is_empty()).then_some(&d.alert_rule),
        "search_version": d.search_version,
        "product_index": d.product_index,
        "destination": d.destination,
        "state": state(d.state),
        "attempts": d.attempts,
        "last_status": (d.last_status != 0).then_some(d.last_status),
        "last_error": (!d.last_error.is_empty()).then_some(&d.last_error),
        "next_attempt_at": timestamp(d.next_attempt_at.as_ref()),
        "created_at": timestamp(d.created_at.as_ref()),
        "delivered_at": timestamp(d.delivered_at.as_ref()),
    })
}

pub fn json_list(list: &[pb::Delivery]) -> Value {
    Value::Array(list.iter().map(json).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_alert_delivery_names_its_rule_and_no_search() {
        let alert = pb::Delivery {
            delivery_id: 9,
            destination: "alert-webhook".into(),
            kind: pb::DeliveryEventKind::Alert as i32,
            alert_rule: "proxy_ports_available_pct".into(),
            state: pb::DeliveryState::Pending as i32,
            attempts: 2,
            ..Default::default()
        };
        let out = text(std::slice::from_ref(&alert));
        assert!(out.contains("alert proxy_ports_available_pct"), "{out}");
        assert!(!out.contains(" 0 "), "no search id 0: {out}");
        let j = json(&alert);
        assert_eq!(j["alert_rule"], "proxy_ports_available_pct");
        assert!(j["search_id"].is_null(), "{j}");
    }

    #[test]
    fn a_dead_delivery_shows_its_error_and_no_next_try() {
        let dead = pb::Delivery {
            delivery_id: 7,
            search_id: 42,
            destination: "orders".into(),
            state: pb::DeliveryState::Dead as i32,
            attempts: 3,
            last_error: "HTTP 503 Service Unavailable".into(),
            last_status: 503,
            next_attempt_at: Some(prost_types::Timestamp {
                seconds: 1_764_619_200,
                nanos: 0,
            }),
            ..Default::default()
        };
        let out = text(std::slice::from_ref(&dead));
        assert!(out.contains("dead"), "{out}");
        assert!(out.contains("HTTP 503"), "{out}");
        assert!(
            !out.contains("2025-12-01"),
            "a dead delivery has no next try: {out}"
        );
        let v = json(&dead);
        assert_eq!(v["state"], "dead");
        assert_eq!(v["last_status"], 503);
        assert_eq!(text(&[]), "no deliveries\n");
    }
}
