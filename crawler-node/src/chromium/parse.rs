//! A profile's templates filled in: search and page URLs, and `${env:NAME}` in API
//! header values.
//!
//! Amounts and shipping texts are read by `lps_profiles::price` (the same code the
//! coordinator validates profiles with).

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

/// Page `page` (1-based) of a paged template: `{query}`, `{page}`, and `{start}`, the
/// 1-based index of the page's first item when pages hold `per_page` items.
pub fn page_url(template: &str, query: &str, page: u32, per_page: u32) -> String {
    let start = u64::from(page.saturating_sub(1)) * u64::from(per_page) + 1;
    search_url(template, query)
        .replace("{page}", &page.to_string())
        .replace("{start}", &start.to_string())
}

/// `${env:NAME}` in `value` replaced through `lookup`; the first unset name is the error.
pub fn fill_env(value: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${env:") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 6..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let name = &after[..end];
        out.push_str(&lookup(name).ok_or_else(|| name.to_owned())?);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_references_are_filled_in_or_named() {
        let env = |name: &str| (name == "KEY").then(|| "s3cret".to_owned());
        assert_eq!(fill_env("${env:KEY}", env).unwrap(), "s3cret");
        assert_eq!(
            fill_env("Bearer ${env:KEY}!", env).unwrap(),
            "Bearer s3cret!"
        );
        assert_eq!(fill_env("plain", env).unwrap(), "plain");
        assert_eq!(fill_env("${env:NOPE}", env).unwrap_err(), "NOPE");
    }

    #[test]
    fn urls() {
        assert_eq!(
            search_url("http://127.0.0.1:18081/search?q={query}", "삼다수 2L x 12"),
            "http://127.0.0.1:18081/search?q=%EC%82%BC%EB%8B%A4%EC%88%98%202L%20x%2012"
        );
        assert_eq!(encode_query("a&b=c/d?"), "a%26b%3Dc%2Fd%3F");
        assert_eq!(encode_query("A-z_0.9~"), "A-z_0.9~");
        assert_eq!(
            page_url(
                "http://m/s?q={query}&page={page}&start={start}",
                "a b",
                3,
                24
            ),
            "http://m/s?q=a%20b&page=3&start=49"
        );
    }
}
