//! Text a result card shows, turned into numbers; and the search URL of a query.
//!
//! Pure functions that take any string without panicking:
//! - [`parse_price`]: the first amount in a price cell (`12,900원`, `₩12,900`, `12,900`,
//!   full-width digits, `1.234.000원`);
//! - [`parse_shipping`]: a shipping cell (`배송비 3,000원`, `배송비 ₩3,000`) or one of the
//!   profile's free-shipping texts (`무료배송`) → 0;
//! - [`search_url`]: the profile's `search_url_template` with `{query}` percent-encoded.

use unicode_normalization::UnicodeNormalization as _;

/// How a shipping cell was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shipping {
    /// A fee in KRW.
    Fee(u64),
    /// One of the free-shipping texts.
    Free,
    /// No shipping cell, or no amount in it: counted as 0.
    Unknown,
}

impl Shipping {
    /// The fee to add to the price (0 unless a fee was read).
    pub fn krw(self) -> u64 {
        match self {
            Self::Fee(krw) => krw,
            Self::Free | Self::Unknown => 0,
        }
    }
}

/// The first amount in `text`, in whole KRW: digits with `,` (or `.` before exactly three
/// digits) as thousands separators. `None` when the text holds no digit or the amount
/// overflows.
pub fn parse_price(text: &str) -> Option<u64> {
    let text: Vec<char> = text.nfkc().collect();
    let start = text.iter().position(char::is_ascii_digit)?;
    let mut amount: u64 = 0;
    let mut i = start;
    while i < text.len() {
        let c = text[i];
        if let Some(d) = c.to_digit(10) {
            amount = amount.checked_mul(10)?.checked_add(u64::from(d))?;
            i += 1;
            continue;
        }
        let thousands = text.get(i + 1..i + 4).is_some_and(|next| {
            next.iter().all(char::is_ascii_digit)
                && !text.get(i + 4).is_some_and(char::is_ascii_digit)
        });
        match c {
            ',' if text.get(i + 1).is_some_and(char::is_ascii_digit) => i += 1,
            '.' if thousands => i += 1,
            _ => break,
        }
    }
    Some(amount)
}

/// Reads a shipping cell: a free-shipping text wins, then the first amount.
pub fn parse_shipping(text: Option<&str>, free_texts: &[String]) -> Shipping {
    let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
        return Shipping::Unknown;
    };
    let normalized: String = text.nfkc().collect::<String>().split_whitespace().collect();
    let free = free_texts.iter().any(|free| {
        let free: String = free.nfkc().collect::<String>().split_whitespace().collect();
        !free.is_empty() && normalized.contains(&free)
    });
    if free {
        return Shipping::Free;
    }
    match parse_price(text) {
        Some(0) => Shipping::Free,
        Some(krw) => Shipping::Fee(krw),
        None => Shipping::Unknown,
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters (space → `%20`).
pub fn encode_query(query: &str) -> String {
    let mut out = String::with_capacity(query.len() * 3);
    for byte in query.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The search URL of `query`: `{query}` in `template` replaced by the encoded query.
pub fn search_url(template: &str, query: &str) -> String {
    template.replace("{query}", &encode_query(query))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices() {
        let cases: &[(&str, Option<u64>)] = &[
            ("12,900원", Some(12_900)),
            ("₩12,900", Some(12_900)),
            ("12,900", Some(12_900)),
            (" 4,480 원 ", Some(4_480)),
            ("１２,９００원", Some(12_900)),
            ("1.234.000원", Some(1_234_000)),
            ("12.5", Some(12)),
            ("최저 9,900원~", Some(9_900)),
            ("12,900원 3,000원", Some(12_900)),
            ("1,", Some(1)),
            ("가격문의", None),
            ("", None),
            ("99999999999999999999999", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_price(text), *want, "{text:?}");
        }
    }

    #[test]
    fn shipping() {
        let free = vec!["무료배송".to_owned(), "배송비 무료".to_owned()];
        assert_eq!(
            parse_shipping(Some("배송비 3,000원"), &free),
            Shipping::Fee(3_000)
        );
        assert_eq!(
            parse_shipping(Some("배송비 ₩2,500"), &free),
            Shipping::Fee(2_500)
        );
        assert_eq!(parse_shipping(Some("무료배송"), &free), Shipping::Free);
        assert_eq!(parse_shipping(Some("배송비무료"), &free), Shipping::Free);
        assert_eq!(parse_shipping(Some("배송비 0원"), &free), Shipping::Free);
        assert_eq!(parse_shipping(Some("착불"), &free), Shipping::Unknown);
        assert_eq!(parse_shipping(None, &free), Shipping::Unknown);
        assert_eq!(parse_shipping(Some("  "), &free), Shipping::Unknown);
        assert_eq!(Shipping::Fee(3_000).krw(), 3_000);
        assert_eq!(Shipping::Unknown.krw(), 0);
    }

    #[test]
    fn urls() {
        assert_eq!(
            search_url("http://127.0.0.1:18081/search?q={query}", "삼다수 2L x 12"),
            "http://127.0.0.1:18081/search?q=%EC%82%BC%EB%8B%A4%EC%88%98%202L%20x%2012"
        );
        assert_eq!(encode_query("a&b=c/d?"), "a%26b%3Dc%2Fd%3F");
        assert_eq!(encode_query("A-z_0.9~"), "A-z_0.9~");
    }
}
