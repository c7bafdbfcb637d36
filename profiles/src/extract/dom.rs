//! DOM cards: a card element's outer HTML parsed back into a tree, and its text read the
//! way a person sees it.
//!
//! NB: a card is parsed on its own, so selectors within it (fields, classes) see the card
//! and what is inside it, never its ancestors or siblings: `li.card span.price` matches,
//! `ul.ads li.card span` does not.

use scraper::{ElementRef, Html, Node, Selector};

/// Elements whose text runs on with the text around them (no space at their edges).
const INLINE: &[&str] = &[
    "a", "abbr", "b", "bdi", "bdo", "cite", "code", "data", "del", "dfn", "em", "font", "i", "ins",
    "kbd", "label", "mark", "q", "s", "samp", "small", "span", "strike", "strong", "sub", "sup",
    "time", "u", "var", "wbr",
];

/// Elements whose text is never shown.
const HIDDEN: &[&str] = &["script", "style", "template", "noscript"];

/// One card's markup, parsed.
pub(super) struct Fragment {
    html: Html,
    tag: Option<String>,
}

impl Fragment {
    /// Parses a card element's outer HTML. Table parts (`<tr>`, `<td>`, …) are parsed
    /// inside a table, where the HTML parser keeps them.
    pub(super) fn parse(outer_html: &str) -> Self {
        let tag = leading_tag(outer_html);
        let (before, after) = match tag.as_deref() {
            Some("tr") => ("<table><tbody>", "</tbody></table>"),
            Some("td" | "th") => ("<table><tbody><tr>", "</tr></tbody></table>"),
            Some("tbody" | "thead" | "tfoot" | "caption" | "colgroup") => ("<table>", "</table>"),
            _ => ("", ""),
        };
        let html = if before.is_empty() {
            Html::parse_fragment(outer_html)
        } else {
            Html::parse_fragment(&format!("{before}{outer_html}{after}"))
        };
        Self { html, tag }
    }

    /// The card element: the first element named like the markup's first tag, else the
    /// first element.
    pub(super) fn card(&self) -> Option<ElementRef<'_>> {
        let mut elements = self
            .html
            .tree
            .root()
            .descendants()
            .filter_map(ElementRef::wrap)
            .filter(|e| e.value().name() != "html");
        match &self.tag {
            Some(tag) => elements
                .clone()
                .find(|e| e.value().name() == tag)
                .or_else(|| elements.next()),
            None => elements.next(),
        }
    }
}

/// The lower-cased name of the tag `markup` starts with.
fn leading_tag(markup: &str) -> Option<String> {
    let rest = markup.trim_start().strip_prefix('<')?;
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    name.starts_with(|c: char| c.is_ascii_alphabetic())
        .then(|| name.to_ascii_lowercase())
}

/// The first element in `card` that `selector` matches, the card itself included.
pub(super) fn first_match<'a>(card: ElementRef<'a>, selector: &Selector) -> Option<ElementRef<'a>> {
    if selector.matches(&card) {
        return Some(card);
    }
    card.select(selector).next()
}

/// Whether `selector` matches the card or an element in it.
pub(super) fn contains(card: ElementRef<'_>, selector: &Selector) -> bool {
    first_match(card, selector).is_some()
}

/// The element's text as a person sees it: white space folded, inline elements joined
/// without a space, other element boundaries as a space, hidden elements and `exclude`'s
/// matches (below the element) left out.
pub(super) fn visible_text(element: ElementRef<'_>, exclude: Option<&Selector>) -> String {
    text_of(element, exclude, true)
}

/// The element's text with every element's text apart, inline ones too: what the card's
/// class patterns also look at, so that a badge (`<span>광고</span>`) joined to the title
/// (`광고제주삼다수 2L`) still reads as a word of its own.
pub(super) fn separate_words(element: ElementRef<'_>) -> String {
    text_of(element, None, false)
}

fn text_of(element: ElementRef<'_>, exclude: Option<&Selector>, join_inline: bool) -> String {
    enum Step<'a> {
        Open(ElementRef<'a>),
        Text(&'a str),
        Space,
    }
    // An explicit stack, not recursion: a page may nest elements arbitrarily deep.
    let mut out = String::new();
    let mut stack = vec![Step::Open(element)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Text(text) => out.push_str(text),
            Step::Space => out.push(' '),
            Step::Open(e) => {
                let name = e.value().name();
                if HIDDEN.contains(&name)
                    || (e != element && exclude.is_some_and(|x| x.matches(&e)))
                {
                    continue;
                }
                if !join_inline || !INLINE.contains(&name) {
                    out.push(' ');
                    stack.push(Step::Space);
                }
                for child in e.children().rev() {
                    match child.value() {
                        Node::Text(text) => stack.push(Step::Text(text)),
                        Node::Element(_) => stack.extend(ElementRef::wrap(child).map(Step::Open)),
                        _ => {}
                    }
                }
            }
        }
    }
    fold(&out)
}

/// Only the element's own text nodes, folded.
pub(super) fn own_text(element: ElementRef<'_>) -> String {
    let text: String = element
        .children()
        .filter_map(|child| child.value().as_text().map(|t| &**t))
        .collect();
    fold(&text)
}

/// White space runs as one space, none at the ends.
pub(super) fn fold(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What the node's page script gives for `html`: each DOM source's card elements and each
/// embedded source's script text (for the probe's `--html` and for tests).
pub(super) fn snapshot_of(
    profile: &crate::compiled::CompiledProfile,
    url: &str,
    html: &str,
) -> super::PageSnapshot {
    use crate::compiled::SourceKind;
    let document = Html::parse_document(html);
    let mut snapshot = super::PageSnapshot {
        url: url.to_owned(),
        ..Default::default()
    };
    for source in profile.sources() {
        let (cards, script) = match &source.kind {
            SourceKind::Dom { cards } => (document.select(cards).map(|e| e.html()).collect(), None),
            SourceKind::EmbeddedJson { script, .. } => (
                Vec::new(),
                document.select(script).next().map(|e| e.text().collect()),
            ),
            SourceKind::CapturedJson { .. } | SourceKind::HttpApi { .. } => (Vec::new(), None),
        };
        snapshot.dom.push(cards);
        snapshot.scripts.push(script);
    }
    snapshot
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(html: &str) -> String {
        let fragment = Fragment::parse(html);
        visible_text(fragment.card().expect("a card"), None)
    }

    #[test]
    fn text_as_a_person_sees_it() {
        assert_eq!(
            text_of("<div><span>12,900</span><span>원</span><div>무료배송</div></div>"),
            "12,900원 무료배송"
        );
        assert_eq!(
            text_of("<li><p>햇반</p><p>210g</p>x<br>12<b>개</b></li>"),
            "햇반 210g x 12개"
        );
        assert_eq!(
            text_of(
                "<div>a<script>var x = 1;</script><style>.a{}</style>b<template>t</template></div>"
            ),
            "ab"
        );
        assert_eq!(
            text_of("<div>\n  제주\u{a0} 삼다수 \t 2L </div>"),
            "제주 삼다수 2L"
        );
        assert_eq!(text_of("<div>긴<wbr>제목</div>"), "긴제목");
        assert_eq!(text_of("<div><!-- a comment -->x</div>"), "x");
    }

    #[test]
    fn exclusions_and_own_text() {
        let fragment = Fragment::parse(
            r#"<div class="price"><del>39,800원</del> 29,900<em>원</em><s>1</s></div>"#,
        );
        let card = fragment.card().unwrap();
        let exclude = Selector::parse("del, s").unwrap();
        assert_eq!(visible_text(card, Some(&exclude)), "29,900원");
        assert_eq!(visible_text(card, None), "39,800원 29,900원1");
        assert_eq!(own_text(card), "29,900");
        // The element read is never excluded itself.
        let fragment = Fragment::parse("<del>39,800원</del>");
        assert_eq!(
            visible_text(fragment.card().unwrap(), Some(&exclude)),
            "39,800원"
        );
    }

    #[test]
    fn card_elements() {
        let li = Fragment::parse(r#"<li class="card"><a href="/p/1">x</a></li>"#);
        assert_eq!(li.card().unwrap().value().name(), "li");
        let tr = Fragment::parse("<tr class=\"row\"><td>햇반</td><td>12,900원</td></tr>");
        let card = tr.card().unwrap();
        assert_eq!(card.value().name(), "tr");
        assert_eq!(visible_text(card, None), "햇반 12,900원");
        let td = Fragment::parse("<td>햇반</td>");
        assert_eq!(td.card().unwrap().value().name(), "td");
        let text = Fragment::parse("just text");
        assert!(text.card().is_none());
        let empty = Fragment::parse("");
        assert!(empty.card().is_none());
        let sel = Selector::parse("li.card").unwrap();
        assert!(contains(li.card().unwrap(), &sel));
        let a = Selector::parse("a").unwrap();
        assert_eq!(
            first_match(li.card().unwrap(), &a).unwrap().value().name(),
            "a"
        );
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let depth = 20_000;
        let html = format!("{}x{}", "<span>".repeat(depth), "</span>".repeat(depth));
        let fragment = Fragment::parse(&format!("<div>{html}</div>"));
        let text = visible_text(fragment.card().unwrap(), None);
        assert_eq!(text, "x");
    }
}
