//! The signature of a delivery request, in the scheme of well-known webhook senders:
//! `LPS-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`.
//!
//! The timestamp is signed with the body, so a receiver that refuses a `t` outside its
//! tolerance window refuses a replayed request; `v1` names the scheme, so a later one can
//! be sent beside it (a receiver ignores keys it does not know). [`verify`] is the
//! receiver's check (search.proto "Delivery", DESIGN §6), for receivers written in Rust and
//! for LPS's own tests.

use std::time::Duration;

use hmac::{Hmac, KeyInit as _, Mac as _};
use sha2::Sha256;

/// The header that carries the signature.
pub const SIGNATURE_HEADER: &str = "LPS-Signature";
/// The header that carries the event id (the receiver's dedupe key).
pub const EVENT_ID_HEADER: &str = "LPS-Event-Id";
/// How far a receiver should let `t` be from its own clock (either way) by default.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);

type HmacSha256 = Hmac<Sha256>;

fn mac(secret: &[u8], timestamp: i64, body: &[u8]) -> HmacSha256 {
    // NB: HMAC takes a key of any length; `new_from_slice` cannot fail for it.
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC accepts any key length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The `LPS-Signature` value for `body` sent at `timestamp` (unix seconds).
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let digest = mac(secret, timestamp, body).finalize().into_bytes();
    format!("t={timestamp},v1={}", hex::encode(digest))
}

/// Why a signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("signature header is malformed: {0}")]
    Malformed(&'static str),
    #[error("signature timestamp {timestamp} is {skew_secs}s away from now, beyond the tolerance")]
    OutsideTolerance { timestamp: i64, skew_secs: u64 },
    #[error("no v1 signature matches the body")]
    Mismatch,
}

/// The receiver's check of a request: the header's `t` within `tolerance` of `now` (unix
/// seconds), and one of its `v1` values the HMAC-SHA256 of `"<t>.<body>"` under `secret`
/// (compared in constant time). `body` is the raw request body as received.
pub fn verify(
    secret: &[u8],
    header: &str,
    body: &[u8],
    now: i64,
    tolerance: Duration,
) -> Result<(), SignatureError> {
    let mut timestamp = None;
    let mut candidates = Vec::new();
    for item in header.split(',') {
        let (key, value) = item
            .trim()
            .split_once('=')
            .ok_or(SignatureError::Malformed("an item is not key=value"))?;
        match key {
            "t" => {
                let t = value
                    .parse::<i64>()
                    .map_err(|_| SignatureError::Malformed("t is not an integer"))?;
                if timestamp.replace(t).is_some() {
                    return Err(SignatureError::Malformed("t is given twice"));
                }
            }
            "v1" => candidates.push(value),
            // Another scheme's signature: not ours to check.
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or(SignatureError::Malformed("no t"))?;
    if candidates.is_empty() {
        return Err(SignatureError::Malformed("no v1 signature"));
    }
    let skew_secs = now.abs_diff(timestamp);
    if skew_secs > tolerance.as_secs() {
        return Err(SignatureError::OutsideTolerance {
            timestamp,
            skew_secs,
        });
    }
    let matches = candidates.iter().any(|c| {
        hex::decode(c).is_ok_and(|bytes| mac(secret, timestamp, body).verify_slice(&bytes).is_ok())
    });
    if matches {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"whsec-for-tests-0123456789";
    const BODY: &[u8] = br#"{"eventId":"e1"}"#;
    const T: i64 = 1_764_619_200;

    #[test]
    fn hmac_sha256_is_the_rfc_4231_one() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        let mut mac = HmacSha256::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(mac.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_signature_verifies_and_forgeries_and_replays_do_not() {
        let header = sign(SECRET, T, BODY);
        assert!(header.starts_with(&format!("t={T},v1=")));
        assert_eq!(
            verify(SECRET, &header, BODY, T + 10, DEFAULT_TOLERANCE),
            Ok(())
        );
        // Another body, another secret, another timestamp with the same v1.
        assert_eq!(
            verify(
                SECRET,
                &header,
                br#"{"eventId":"e2"}"#,
                T,
                DEFAULT_TOLERANCE
            ),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(b"another-secret", &header, BODY, T, DEFAULT_TOLERANCE),
            Err(SignatureError::Mismatch)
        );
        let v1 = header.split_once(",v1=").unwrap().1;
        assert_eq!(
            verify(
                SECRET,
                &format!("t={},v1={v1}", T + 1),
                BODY,
                T,
                DEFAULT_TOLERANCE
            ),
            Err(SignatureError::Mismatch)
        );
        // A replay after the tolerance, and a clock far ahead.
        assert!(matches!(
            verify(SECRET, &header, BODY, T + 301, DEFAULT_TOLERANCE),
            Err(SignatureError::OutsideTolerance { skew_secs: 301, .. })
        ));
        assert!(matches!(
            verify(SECRET, &header, BODY, T - 301, DEFAULT_TOLERANCE),
            Err(SignatureError::OutsideTolerance { .. })
        ));
        // Unknown schemes are ignored, a second v1 (a rotated secret) may match.
        let other = sign(b"old-secret", T, BODY);
        let old_v1 = other.split_once(",v1=").unwrap().1;
        let rotated = format!("t={T},v2=abc,v1={old_v1},v1={v1}");
        assert_eq!(verify(SECRET, &rotated, BODY, T, DEFAULT_TOLERANCE), Ok(()));
        for (bad, why) in [
            ("", "an item is not key=value"),
            (&format!("v1={v1}") as &str, "no t"),
            (&format!("t={T}"), "no v1 signature"),
            (&format!("t=x,v1={v1}"), "t is not an integer"),
        ] {
            assert_eq!(
                verify(SECRET, bad, BODY, T, DEFAULT_TOLERANCE),
                Err(SignatureError::Malformed(why)),
                "{bad:?}"
            );
        }
        assert_eq!(
            verify(SECRET, &format!("t={T},v1=zz"), BODY, T, DEFAULT_TOLERANCE),
            Err(SignatureError::Mismatch)
        );
    }
}
