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

/// What the event is about: `search` or `product <index>`.
fn about(d: &pb::Delivery) -> String {
    match d.product_index {
        Some(i) => format!("product {i}"),
        None => "search".to_owned(),
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
            d.search_id.to_string(),
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
        "search_id": d.search_id,
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
