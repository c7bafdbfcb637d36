//! Resolving a card's relative link against the page URL, the way a browser would for
//! the common forms (`https://…`, `//host/x`, `/path`, `?q`, `#f`, `path`). Nothing else
//! is rewritten: dot segments stay (the browser that follows the link folds them).

/// `href` made absolute against `base`; `href` as it is when it is already absolute (any
/// scheme), empty, or `base` is not an absolute URL.
pub fn resolve_url(base: &str, href: &str) -> String {
    let href = href.trim();
    if href.is_empty() || has_scheme(href) {
        return href.to_owned();
    }
    let Some((scheme, rest)) = base
        .split_once("://")
        .filter(|(s, _)| has_scheme(&format!("{s}:")))
    else {
        return href.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let origin = &base[..scheme.len() + 3 + authority_end];
    if href.starts_with("//") {
        return format!("{scheme}:{href}");
    }
    if href.starts_with('/') {
        return format!("{origin}{href}");
    }
    let without_fragment = base.split('#').next().unwrap_or(base);
    if href.starts_with('#') {
        return format!("{without_fragment}{href}");
    }
    let without_query = without_fragment
        .split('?')
        .next()
        .unwrap_or(without_fragment);
    if href.starts_with('?') {
        return format!("{without_query}{href}");
    }
    let path = &without_query[origin.len()..];
    match path.rfind('/') {
        Some(slash) => format!("{origin}{}{href}", &path[..=slash]),
        None => format!("{origin}/{href}"),
    }
}

/// `scheme:` at the start (RFC 3986: a letter, then letters, digits, `+`, `-`, `.`).
fn has_scheme(text: &str) -> bool {
    let Some((scheme, _)) = text.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links() {
        let base = "https://www.example.com/search/all?q=%ED%96%87%EB%B0%98#top";
        for (href, want) in [
            ("https://m.example.com/p/1", "https://m.example.com/p/1"),
            ("HTTP://x.test/a", "HTTP://x.test/a"),
            ("javascript:void(0)", "javascript:void(0)"),
            ("//cdn.example.com/p/2", "https://cdn.example.com/p/2"),
            ("/products/3?x=1", "https://www.example.com/products/3?x=1"),
            ("item/4", "https://www.example.com/search/item/4"),
            ("../item/5", "https://www.example.com/search/../item/5"),
            ("?q=b", "https://www.example.com/search/all?q=b"),
            (
                "#reviews",
                "https://www.example.com/search/all?q=%ED%96%87%EB%B0%98#reviews",
            ),
            ("  /p/6  ", "https://www.example.com/p/6"),
            ("", ""),
        ] {
            assert_eq!(resolve_url(base, href), want, "{href:?}");
        }
        assert_eq!(
            resolve_url("https://shop.test", "p/7"),
            "https://shop.test/p/7"
        );
        assert_eq!(
            resolve_url("https://shop.test?x", "/p/8"),
            "https://shop.test/p/8"
        );
        assert_eq!(resolve_url("", "/p/9"), "/p/9");
        assert_eq!(resolve_url("not a url", "p/10"), "p/10");
        assert_eq!(resolve_url("://x", "p/11"), "p/11");
    }
}
