//! Page tokens for list calls, as Google's AIP-158 describes them: opaque to the client
//! (URL-safe base64), naming where the next page starts, and bound to the request they
//! came from: a token passed back with other filters is INVALID_ARGUMENT naming
//! `page_token`, rather than a page of some other list.
//!
//! A token is `v1.<list>.<filter digest>.<position>`, base64url without padding. Positions
//! are keys of the list's order (keyset paging), so a page never repeats or skips an
//! entry because entries were added before it.

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use lps_proto::model::FieldError;
use sha2::{Digest as _, Sha256};

/// A list's page size: 0 is `default`, anything above `max` is `max`.
pub fn page_size(requested: u32, default: u32, max: u32) -> u32 {
    match requested {
        0 => default,
        n => n.min(max),
    }
}

/// The token for the page after `position` of list `list` queried with `filter` (every
/// request field except the page size and token, in a fixed form).
pub fn encode(list: &str, filter: &str, position: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("v1.{list}.{}.{position}", digest(filter)))
}

/// The position a `page_token` names (`None` for an empty token: the first page).
pub fn decode(token: &str, list: &str, filter: &str) -> Result<Option<String>, FieldError> {
    if token.is_empty() {
        return Ok(None);
    }
    let refused = || FieldError::new("page_token", "is not a token this list gave out");
    let raw = URL_SAFE_NO_PAD.decode(token).map_err(|_| refused())?;
    let raw = String::from_utf8(raw).map_err(|_| refused())?;
    let mut parts = raw.splitn(4, '.');
    let (Some("v1"), Some(l), Some(d), Some(position)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(refused());
    };
    if l != list {
        return Err(refused());
    }
    if d != digest(filter) {
        return Err(FieldError::new(
            "page_token",
            "belongs to a request with other filters; pass the same fields as for the first page",
        ));
    }
    Ok(Some(position.to_owned()))
}

/// [`decode`] for a list whose positions are ids (keyset on the id alone).
pub fn decode_id(token: &str, list: &str, filter: &str) -> Result<Option<i64>, FieldError> {
    decode(token, list, filter)?
        .map(|p| {
            p.parse::<i64>()
                .map_err(|_| FieldError::new("page_token", "is not a token this list gave out"))
        })
        .transpose()
}

fn digest(filter: &str) -> String {
    Sha256::digest(filter.as_bytes())[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_round_trips_and_is_bound_to_its_request() {
        let t = encode("searches", "client=a", "42");
        assert_eq!(
            decode(&t, "searches", "client=a").unwrap().as_deref(),
            Some("42")
        );
        assert_eq!(decode("", "searches", "x").unwrap(), None);
        let other = decode(&t, "searches", "client=b").unwrap_err();
        assert_eq!(other.field, "page_token");
        assert!(other.reason.contains("other filters"), "{other}");
        assert!(decode(&t, "nodes", "client=a").is_err());
        assert!(decode("!!not base64", "searches", "client=a").is_err());
        assert!(decode(&URL_SAFE_NO_PAD.encode("v2.x"), "searches", "").is_err());
    }

    #[test]
    fn page_sizes_default_and_clamp() {
        assert_eq!(page_size(0, 50, 500), 50);
        assert_eq!(page_size(7, 50, 500), 7);
        assert_eq!(page_size(10_000, 50, 500), 500);
    }
}
