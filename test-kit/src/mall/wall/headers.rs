//! The wall's server-side check: request headers a real Korean desktop or mobile browser
//! sends consistently (see the table in [`super`]). Pure functions of the header map.

use axum::http::{HeaderMap, header};

/// The header signals a request shows, in [`HEADER_SIGNALS`](super::HEADER_SIGNALS)
/// order. Client hints (`sec-ch-ua*`) are only compared when present: browsers send them
/// only to secure contexts, and non-Chromium browsers never.
pub fn header_signals(headers: &HeaderMap) -> Vec<&'static str> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let ua = text(header::USER_AGENT.as_str()).unwrap_or_default();
    let ua_major = chrome_major(ua);
    let ua_os = ua_platform(ua);
    let mut signals = Vec::new();
    if ua.to_ascii_lowercase().contains("headless") {
        signals.push("ua_headless");
    }
    let korean = text(header::ACCEPT_LANGUAGE.as_str())
        .map(str::trim_start)
        .is_some_and(|v| v.get(..2).is_some_and(|p| p.eq_ignore_ascii_case("ko")));
    if !korean {
        signals.push("accept_language");
    }
    if let Some(ch_ua) = text("sec-ch-ua") {
        let brands = parse_brands(ch_ua);
        if ch_ua.contains("HeadlessChrome") {
            signals.push("ch_ua_headless");
        }
        let chromium: Vec<&str> = brands
            .iter()
            .filter(|(brand, _)| brand == "Chromium" || brand == "Google Chrome")
            .map(|(_, version)| major_of(version))
            .collect();
        let disagrees = !chromium.is_empty()
            && ua_major.is_none_or(|major| chromium.iter().any(|v| *v != major));
        if disagrees {
            signals.push("ch_ua_version");
        }
    }
    let hinted = text("sec-ch-ua-platform")
        .map(|v| v.trim().trim_matches('"'))
        .and_then(known_platform);
    if let (Some(hinted), Some(os)) = (hinted, ua_os)
        && hinted != os
    {
        signals.push("ch_ua_platform");
    }
    let mobile_hint = text("sec-ch-ua-mobile").is_some_and(|v| v.trim() == "?1");
    let desktop = ua_os.is_some_and(|os| matches!(os, "Windows" | "macOS" | "Linux" | "Chrome OS"));
    if ua_major.is_some() && mobile_hint && desktop {
        signals.push("ch_ua_mobile");
    }
    signals
}

/// The `NN` of `Chrome/NN` in a user agent (`HeadlessChrome/NN` too).
fn chrome_major(ua: &str) -> Option<&str> {
    let rest = &ua[ua.find("Chrome/")? + "Chrome/".len()..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// `124` of `124.0.6367.60`.
fn major_of(version: &str) -> &str {
    version.split('.').next().unwrap_or_default()
}

/// The platform a user agent names, as `sec-ch-ua-platform` spells it.
fn ua_platform(ua: &str) -> Option<&'static str> {
    if ua.contains("Windows") {
        Some("Windows")
    } else if ua.contains("Android") {
        Some("Android")
    } else if ua.contains("iPhone") || ua.contains("iPad") || ua.contains("iPod") {
        Some("iOS")
    } else if ua.contains("CrOS") {
        Some("Chrome OS")
    } else if ua.contains("Macintosh") || ua.contains("Mac OS X") {
        Some("macOS")
    } else if ua.contains("Linux") || ua.contains("X11") {
        Some("Linux")
    } else {
        None
    }
}

/// A `sec-ch-ua-platform` value the UA comparison knows (`Unknown`, `Fuchsia`, … are not
/// compared).
fn known_platform(value: &str) -> Option<&'static str> {
    ["Windows", "Android", "iOS", "Chrome OS", "macOS", "Linux"]
        .into_iter()
        .find(|p| p.eq_ignore_ascii_case(value))
}

/// The `(brand, version)` pairs of a `sec-ch-ua` structured-field list such as
/// `"Chromium";v="124", "Google Chrome";v="124", "Not-A.Brand";v="99"`. Brands may
/// contain `;`, `,` or `=` (GREASE), so strings are read with their quotes and escapes;
/// a malformed member is skipped.
fn parse_brands(value: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = value.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace() || *c == ',') {
            chars.next();
        }
        if chars.peek().is_none() {
            return out;
        }
        let brand = quoted(&mut chars);
        let mut version = None;
        // Parameters up to the next top-level comma.
        while let Some(&c) = chars.peek() {
            match c {
                ',' => break,
                ';' => {
                    chars.next();
                    let name: String =
                        std::iter::from_fn(|| chars.next_if(|c| c.is_ascii_alphanumeric()))
                            .collect();
                    if chars.next_if_eq(&'=').is_some() {
                        let v = if chars.peek() == Some(&'"') {
                            quoted(&mut chars)
                        } else {
                            Some(
                                std::iter::from_fn(|| {
                                    chars.next_if(|c| !matches!(c, ',' | ';') && !c.is_whitespace())
                                })
                                .collect(),
                            )
                        };
                        if name == "v" {
                            version = v;
                        }
                    }
                }
                _ => {
                    chars.next();
                }
            }
        }
        if let (Some(brand), Some(version)) = (brand, version) {
            out.push((brand, version));
        }
    }
}

/// A `"…"` string with `\` escapes, or `None` (and the rest of the member skipped) when
/// the next character is not a quote or the string is not closed.
fn quoted(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<String> {
    chars.next_if_eq(&'"')?;
    let mut s = String::new();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(s),
            '\\' => s.push(chars.next()?),
            _ => s.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    const CHROME_WIN: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36";
    const HEADLESS: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/124.0.6367.60 Safari/537.36";
    const FIREFOX: &str =
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:125.0) Gecko/20100101 Firefox/125.0";
    const ANDROID: &str = "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36";

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).expect("value"));
        }
        map
    }

    fn person(ua: &str) -> Vec<(&'static str, String)> {
        vec![
            ("user-agent", ua.to_owned()),
            ("accept-language", "ko-KR,ko;q=0.9,en-US;q=0.8".to_owned()),
        ]
    }

    fn signals(pairs: &[(&'static str, String)]) -> Vec<&'static str> {
        let borrowed: Vec<(&'static str, &str)> =
            pairs.iter().map(|(n, v)| (*n, v.as_str())).collect();
        header_signals(&headers(&borrowed))
    }

    #[test]
    fn real_browsers_pass() {
        let mut chrome = person(CHROME_WIN);
        chrome.extend([
            (
                "sec-ch-ua",
                r#""Chromium";v="124", "Google Chrome";v="124", "Not-A.Brand";v="99""#.to_owned(),
            ),
            ("sec-ch-ua-mobile", "?0".to_owned()),
            ("sec-ch-ua-platform", r#""Windows""#.to_owned()),
        ]);
        assert!(signals(&chrome).is_empty(), "{:?}", signals(&chrome));
        assert!(signals(&person(FIREFOX)).is_empty(), "no client hints");
        let mut phone = person(ANDROID);
        phone.extend([
            (
                "sec-ch-ua",
                r#""Not;A=Brand";v="8", "Chromium";v="124""#.to_owned(),
            ),
            ("sec-ch-ua-mobile", "?1".to_owned()),
            ("sec-ch-ua-platform", r#""Android""#.to_owned()),
        ]);
        assert!(signals(&phone).is_empty(), "{:?}", signals(&phone));
        let mut ko = person(CHROME_WIN);
        ko[1].1 = "ko".to_owned();
        assert!(signals(&ko).is_empty());
    }

    #[test]
    fn default_headless_chromium_is_caught() {
        let pairs = vec![
            ("user-agent", HEADLESS.to_owned()),
            ("accept-language", "en-US,en;q=0.9".to_owned()),
            (
                "sec-ch-ua",
                r#""HeadlessChrome";v="124", "Chromium";v="124", "Not-A.Brand";v="99""#.to_owned(),
            ),
            ("sec-ch-ua-platform", r#""Linux""#.to_owned()),
        ];
        assert_eq!(
            signals(&pairs),
            ["ua_headless", "accept_language", "ch_ua_headless"]
        );
        assert_eq!(
            header_signals(&HeaderMap::new()),
            ["accept_language"],
            "no UA is no signal of its own, no language is"
        );
    }

    #[test]
    fn inconsistent_client_hints_are_caught() {
        let with = |extra: &[(&'static str, &str)]| {
            let mut pairs = person(CHROME_WIN);
            pairs.extend(extra.iter().map(|(n, v)| (*n, (*v).to_owned())));
            signals(&pairs)
        };
        assert_eq!(
            with(&[(
                "sec-ch-ua",
                r#""Chromium";v="120", "Google Chrome";v="120""#
            )]),
            ["ch_ua_version"]
        );
        assert_eq!(
            with(&[("sec-ch-ua-platform", r#""Linux""#)]),
            ["ch_ua_platform"]
        );
        assert!(with(&[("sec-ch-ua-platform", r#""Unknown""#)]).is_empty());
        assert_eq!(with(&[("sec-ch-ua-mobile", "?1")]), ["ch_ua_mobile"]);
        assert_eq!(
            with(&[("accept-language", "en-US")]),
            ["accept_language"],
            "the later header wins in the test map"
        );
        let mut firefox = person(FIREFOX);
        firefox.push(("sec-ch-ua", r#""Chromium";v="124""#.to_owned()));
        assert_eq!(
            signals(&firefox),
            ["ch_ua_version"],
            "hints of Chromium behind a Firefox UA"
        );
    }

    #[test]
    fn brands_parse_with_grease() {
        assert_eq!(
            parse_brands(r#""Not;A=Brand";v="8", "Chromium";v="124.0.1", "Go\"ogle";v=99"#),
            [
                ("Not;A=Brand".to_owned(), "8".to_owned()),
                ("Chromium".to_owned(), "124.0.1".to_owned()),
                ("Go\"ogle".to_owned(), "99".to_owned()),
            ]
        );
        assert!(parse_brands("garbage, \"open").is_empty());
        assert_eq!(chrome_major(HEADLESS), Some("124"));
        assert_eq!(chrome_major(FIREFOX), None);
        assert_eq!(ua_platform(ANDROID), Some("Android"));
    }
}
