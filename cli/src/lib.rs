//! What `lpsctl` prints: plain-text tables for people ([`text`]) and JSON for scripts
//! ([`json`]), both built from the `pb::` answers of the coordinator. Pure functions that
//! return strings; the binary does the printing and the calls.
//!
//! Everything a mall wrote (titles, sellers, URLs) is untrusted: the text renderer replaces
//! control characters, so a crafted title cannot send escape sequences to a terminal.

// NB: the ops snapshot is one `json!` literal with many fields.
#![recursion_limit = "256"]

pub mod csv;
pub mod delivery;
pub mod evidence;
pub mod json;
pub mod schedule;
pub mod table;
pub mod text;

use lps_proto::{
    model::{CardClass, ShippingStatus},
    pb,
};

/// A protobuf enum value as a short lowercase name: `JOB_STATE_NOT_FOUND` → `not_found`.
/// Unknown values read `unknown(<n>)`; the unspecified value reads as the empty string.
fn enum_name(name: Option<&str>, prefix: &str, value: i32) -> String {
    match name {
        Some(n) if n.ends_with("_UNSPECIFIED") => String::new(),
        Some(n) => n.strip_prefix(prefix).unwrap_or(n).to_ascii_lowercase(),
        None => format!("unknown({value})"),
    }
}

pub fn job_state(v: i32) -> String {
    enum_name(
        pb::JobState::try_from(v).ok().map(|e| e.as_str_name()),
        "JOB_STATE_",
        v,
    )
}

pub fn outcome(v: i32) -> String {
    enum_name(
        pb::Outcome::try_from(v).ok().map(|e| e.as_str_name()),
        "OUTCOME_",
        v,
    )
}

pub fn error_class(v: i32) -> String {
    enum_name(
        pb::ErrorClass::try_from(v).ok().map(|e| e.as_str_name()),
        "ERROR_CLASS_",
        v,
    )
}

pub fn disposition(v: i32) -> String {
    enum_name(
        pb::Disposition::try_from(v).ok().map(|e| e.as_str_name()),
        "DISPOSITION_",
        v,
    )
}

/// A round's kind name; from a coordinator that sends only the older string, that.
#[allow(deprecated)]
pub fn round_kind(r: &pb::RoundReport) -> String {
    match enum_name(
        pb::RoundKind::try_from(r.round_kind)
            .ok()
            .map(|e| e.as_str_name()),
        "ROUND_KIND_",
        r.round_kind,
    ) {
        name if name.is_empty() => r.kind.clone(),
        name => name,
    }
}

/// A proxy port's state name; from a coordinator that sends only the older string, that.
#[allow(deprecated)]
pub fn port_state(p: &pb::ProxyPortInfo) -> String {
    match enum_name(
        pb::PortState::try_from(p.port_state)
            .ok()
            .map(|e| e.as_str_name()),
        "PORT_STATE_",
        p.port_state,
    ) {
        name if name.is_empty() => p.state.clone(),
        name => name,
    }
}

/// How an offer's shipping was read. An offer from a coordinator before protocol
/// version 2 (UNSPECIFIED) reads as the model reads it off the wire: paid with a fee, else
/// unknown.
pub fn shipping(o: &pb::Offer) -> ShippingStatus {
    ShippingStatus::from_pb(o.shipping, o.shipping_fee)
}

/// What a buyer pays for an offer (price + shipping) when its shipping is known; `None`
/// when it is not (the wire then leaves `effective_price` out; a coordinator before that
/// sent the price alone, which this ignores).
pub fn effective_price(o: &pb::Offer) -> Option<i64> {
    shipping(o)
        .is_known()
        .then(|| o.effective_price.unwrap_or(o.price + o.shipping_fee))
}

/// The offer a mall's row shows: its lowest with known shipping (the coordinator's
/// `MallStatus.lowest`, or read off the offers from a coordinator before it sent one),
/// else its cheapest at all.
pub fn mall_offer(m: &pb::MallStatus) -> Option<&pb::Offer> {
    m.lowest
        .as_ref()
        .or_else(|| {
            m.offers
                .iter()
                .filter_map(|o| Some((effective_price(o)?, o)))
                .min_by_key(|(effective, _)| *effective)
                .map(|(_, o)| o)
        })
        .or_else(|| m.offers.iter().min_by_key(|o| o.price))
}

/// An offer's flags by name (`overseas`, `catalog`); unknown values are left out.
pub fn flags(o: &pb::Offer) -> Vec<&'static str> {
    o.flags
        .iter()
        .filter_map(|&f| CardClass::from_pb(f))
        .map(CardClass::as_str)
        .collect()
}

/// A protobuf timestamp as RFC 3339 UTC with seconds (`2026-05-01T10:00:00Z`).
pub fn timestamp(t: Option<&prost_types::Timestamp>) -> Option<String> {
    let t = t?;
    let nanos = u32::try_from(t.nanos).unwrap_or(0);
    chrono::DateTime::from_timestamp(t.seconds, nanos)
        .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

/// A protobuf duration in seconds.
pub fn seconds(d: Option<&prost_types::Duration>) -> f64 {
    d.map_or(0.0, |d| d.seconds as f64 + f64::from(d.nanos) / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enum_names_are_short() {
        assert_eq!(job_state(pb::JobState::Queued as i32), "queued");
        assert_eq!(outcome(pb::Outcome::NotFound as i32), "not_found");
        assert_eq!(
            error_class(pb::ErrorClass::PageBlocked as i32),
            "page_blocked"
        );
        assert_eq!(error_class(pb::ErrorClass::Layout as i32), "layout");
        assert_eq!(
            disposition(pb::Disposition::CachedNotFound as i32),
            "cached_not_found"
        );
        assert_eq!(outcome(0), "");
        assert_eq!(job_state(99), "unknown(99)");
    }

    #[test]
    fn shipping_of_older_coordinators_reads_as_the_model_does() {
        let mut o = pb::Offer {
            shipping_fee: 3000,
            ..Default::default()
        };
        assert_eq!(shipping(&o), ShippingStatus::Paid);
        o.shipping_fee = 0;
        assert_eq!(shipping(&o), ShippingStatus::Unknown);
        o.shipping = pb::ShippingStatus::Free as i32;
        assert_eq!(shipping(&o), ShippingStatus::Free);
        o.flags = vec![
            pb::CardClass::Overseas as i32,
            99,
            pb::CardClass::Catalog as i32,
        ];
        assert_eq!(flags(&o), ["overseas", "catalog"]);
    }

    #[test]
    fn timestamps_are_rfc3339() {
        let t = prost_types::Timestamp {
            seconds: 1_777_629_600,
            nanos: 5,
        };
        assert_eq!(timestamp(Some(&t)).unwrap(), "2026-05-01T10:00:00Z");
        assert_eq!(timestamp(None), None);
    }
}
