//! JSON items: parsing a script's or a response's text, and reading an item's texts.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// `text` as JSON. Text around one JSON value is tolerated — a `)]}'` guard line before a
/// response, or `window.__STATE__ = {…};` in a script — by trying the span from the first
/// `{`/`[` to the last `}`/`]`. `None` when that is not JSON either.
pub(super) fn parse_lenient(text: &str) -> Option<Value> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if let Ok(value) = serde_json::from_str(text) {
        return Some(value);
    }
    let start = text.find(['{', '['])?;
    let end = text.rfind(['}', ']'])?;
    serde_json::from_str(text.get(start..=end)?).ok()
}

static TAG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"</?[A-Za-z][^<>]*>").expect("a valid regex"));

/// A JSON string as a person would read it: markup some APIs put in titles removed
/// (`<b>햇반</b>` → `햇반`) and the five common entities decoded.
pub(super) fn clean_markup(text: &str) -> String {
    if !text.contains(['<', '&']) {
        return text.to_owned();
    }
    let text = TAG.replace_all(text, "");
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// Every string in `value`, in document order, cleaned, joined by spaces.
pub(super) fn all_strings(value: &Value) -> String {
    let mut out = Vec::new();
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::String(s) => out.push(clean_markup(s)),
            Value::Array(items) => stack.extend(items.iter().rev()),
            Value::Object(map) => stack.extend(map.values().rev()),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn lenient_parsing() {
        assert_eq!(parse_lenient(r#"{"a":1}"#), Some(json!({"a": 1})));
        assert_eq!(parse_lenient(")]}'\n[1,2]"), Some(json!([1, 2])));
        assert_eq!(
            parse_lenient(r#"window.__STATE__ = {"items":[]};"#),
            Some(json!({"items": []}))
        );
        assert_eq!(parse_lenient("not json"), None);
        assert_eq!(parse_lenient("} {"), None);
        assert_eq!(parse_lenient(""), None);
        assert_eq!(parse_lenient("{\"a\":"), None);
    }

    #[test]
    fn markup_and_strings() {
        assert_eq!(
            clean_markup("<b>햇반</b> 210g &amp; 12개"),
            "햇반 210g & 12개"
        );
        assert_eq!(clean_markup("3 < 5 & 7"), "3 < 5 & 7");
        assert_eq!(clean_markup("&lt;b&gt;"), "<b>");
        let item = json!({"t": "a", "n": 1, "in": {"x": ["b", null, "c"]}, "z": "d"});
        let all = all_strings(&item);
        for s in ["a", "b", "c", "d"] {
            assert!(all.split(' ').any(|w| w == s), "{all}");
        }
        assert!(!all.contains('1'));
    }
}
