//! Chromium's error page recognised by its markup (`error_pages.toml`, compiled in): the
//! markers the page script checks, where the `ERR_…` code is, and which codes make the exit
//! IP suspect. The data is the knowledge; [`recognise`] and the page script are the
//! mechanism (the same markers, in Rust for saved pages and tests, in JavaScript live).

use std::sync::OnceLock;

use scraper::{Html, Selector};
use serde::Deserialize;

/// The data file, compiled in.
pub const ERROR_PAGES_FILE: &str = include_str!("error_pages.toml");

/// What `error_pages.toml` says.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorPages {
    pub markers: Vec<String>,
    pub code_selector: String,
    pub suspect_codes: Vec<String>,
}

impl ErrorPages {
    /// Whether `code` makes the exit IP suspect.
    pub fn is_suspect(&self, code: &str) -> bool {
        self.suspect_codes.iter().any(|c| c == code)
    }
}

/// The compiled-in rules. NB: checked by a unit test, so a bad file fails the build's
/// tests, never a node.
pub fn rules() -> &'static ErrorPages {
    static RULES: OnceLock<ErrorPages> = OnceLock::new();
    RULES.get_or_init(|| {
        toml::from_str(ERROR_PAGES_FILE)
            .unwrap_or_else(|e| panic!("crawler-node/src/chromium/error_pages.toml: {e}"))
    })
}

/// `Some(code)` when `html` is Chromium's error page (`code`: its `ERR_…` name, if shown).
pub fn recognise(html: &str) -> Option<Option<String>> {
    let rules = rules();
    let doc = Html::parse_document(html);
    let matches = rules.markers.iter().any(|m| {
        Selector::parse(m)
            .ok()
            .is_some_and(|s| doc.select(&s).next().is_some())
    });
    if !matches {
        return None;
    }
    let shown = Selector::parse(&rules.code_selector)
        .ok()
        .and_then(|s| doc.select(&s).next())
        .map(|e| e.text().collect::<String>());
    let all = || doc.root_element().text().collect::<String>();
    Some(
        shown
            .and_then(|t| err_code(&t))
            .or_else(|| err_code(&all())),
    )
}

/// The first `ERR_…` word of `text`.
fn err_code(text: &str) -> Option<String> {
    let start = text.find("ERR_")?;
    let code: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
        .collect();
    (code.len() > 4).then_some(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chromium's neterror page as a proxy serves it (trimmed from a saved page).
    fn neterror(code: &str) -> String {
        format!(
            r#"<!DOCTYPE html><html dir="ltr" lang="ko"><head><title>www.coupang.com</title></head>
<body class="neterror" id="t" jstcache="0"><div id="main-frame-error" class="interstitial-wrapper" jstcache="0">
<div id="main-content" jstcache="0"><div class="icon icon-generic" jstcache="0"></div>
<div id="main-message" jstcache="0"><h1 jstcache="0"><span jstcache="20">사이트에 연결할 수 없음</span></h1>
<p jstcache="0">응답 없음</p><div class="error-code" jscontent="errorCode" jstcache="7">{code}</div></div></div></div></body></html>"#
        )
    }

    #[test]
    fn the_rules_file_parses_and_every_marker_is_a_selector() {
        let rules = rules();
        assert!(!rules.markers.is_empty());
        for m in &rules.markers {
            Selector::parse(m).unwrap_or_else(|e| panic!("{m}: {e}"));
        }
        for code in [
            "ERR_HTTP2_PROTOCOL_ERROR",
            "ERR_TUNNEL_CONNECTION_FAILED",
            "ERR_TIMED_OUT",
        ] {
            assert!(rules.is_suspect(code), "{code}");
        }
        assert!(!rules.is_suspect("ERR_NAME_NOT_RESOLVED"));
    }

    #[test]
    fn a_served_error_page_is_recognised_by_its_markup_with_its_code() {
        for code in [
            "ERR_HTTP2_PROTOCOL_ERROR",
            "ERR_CONNECTION_RESET",
            "ERR_TUNNEL_CONNECTION_FAILED",
            "ERR_EMPTY_RESPONSE",
            "ERR_CONNECTION_CLOSED",
            "ERR_TIMED_OUT",
        ] {
            assert_eq!(
                recognise(&neterror(code)),
                Some(Some(code.to_owned())),
                "{code}"
            );
        }
        // A mall's page that merely mentions an error is not one.
        let mall = r#"<html><body><ul class="search-product-list"><li>ERR_ 코드 안내 티셔츠</li></ul></body></html>"#;
        assert_eq!(recognise(mall), None);
        // The marker without a code element: the code from the text.
        let bare = r#"<html><body class="neterror"><p>ERR_CONNECTION_RESET</p></body></html>"#;
        assert_eq!(recognise(bare), Some(Some("ERR_CONNECTION_RESET".into())));
    }
}
