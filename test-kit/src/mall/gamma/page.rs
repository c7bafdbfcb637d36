//! Gamma's HTML: the result page (placeholders, inline JSON, renderer), the redesigned
//! layout, the challenge interstitial and the restriction page. Pure functions of what
//! [`super::routes`] decided; the markup contract is in [`super`] and
//! [`GAMMA_MARKUP`](crate::mall::markup::GAMMA_MARKUP).

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::catalog::{ListingKind, MallStyle};
use crate::mall::gamma::{BATCH, BATCH_DELAY, Item, SKELETON_DELAY, SKELETONS};
use crate::mall::markup::{GAMMA_MARKUP, format_price, markup};
use crate::mall::pages::{self, FONT_CSS};
use crate::util::{encode_query_value, escape_html};

/// One result page as the routes computed it.
#[derive(Debug)]
pub(crate) struct ResultsView<'a> {
    pub(crate) query: &'a str,
    /// 1-based.
    pub(crate) page: usize,
    pub(crate) pages: usize,
    /// Results over all pages.
    pub(crate) total: usize,
    /// This page's items.
    pub(crate) items: Vec<Item<'a>>,
    /// Scrolled, the page asks [`super::MORE_PATH`] for its next batch and shows the error
    /// box instead.
    pub(crate) scroll_fails: bool,
}

impl ResultsView<'_> {
    fn next_href(&self) -> Option<String> {
        (self.page < self.pages).then(|| {
            format!(
                "/search?q={}&page={}",
                encode_query_value(self.query),
                self.page + 1
            )
        })
    }
}

/// The renderer. Placeholders: `__BATCH__`, `__SKELETON_MS__`, `__BATCH_MS__`,
/// `__EMPTY_TEXT__`, `__ERROR_TEXT__`, `__MORE_URL__` (JS string literals) and
/// `__SCROLL_FAILS__` (a boolean).
const RENDERER: &str = r#"(function () {
  'use strict';
  var BATCH = __BATCH__, SKELETON_MS = __SKELETON_MS__, BATCH_MS = __BATCH_MS__;
  var EMPTY_TEXT = __EMPTY_TEXT__, ERROR_TEXT = __ERROR_TEXT__, MORE_URL = __MORE_URL__;
  var SCROLL_FAILS = __SCROLL_FAILS__;
  var items = JSON.parse(document.getElementById('__NEXT_DATA__').textContent).props.pageProps.items;
  var list = document.getElementById('g-results');
  var sentinel = document.querySelector('.g-sentinel');
  var shown = 0, pending = false, observer = null;
  function won(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ','); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }
  function card(it) {
    var li = el('li', 'g-card' + (it.ad ? ' is-ad' : '') + (it.soldOut ? ' is-soldout' : ''));
    li.setAttribute('data-gid', it.id);
    var badges = el('div', 'g-badges');
    if (it.ad) { badges.appendChild(el('span', 'g-badge g-badge-ad', '광고')); }
    if (it.overseas) { badges.appendChild(el('span', 'g-badge g-badge-global', '해외직구')); }
    if (it.used) { badges.appendChild(el('span', 'g-badge g-badge-used', '중고')); }
    if (it.soldOut) { badges.appendChild(el('span', 'g-badge g-badge-soldout', '품절')); }
    li.appendChild(badges);
    var a = el('a', 'g-link');
    a.href = it.link;
    var img = el('img', 'g-thumb');
    img.src = it.image;
    img.alt = '';
    a.appendChild(img);
    var title = el('p', 'g-title', it.displayTitle);
    if (it.displayTitle !== it.title) { title.setAttribute('title', it.title); }
    a.appendChild(title);
    li.appendChild(a);
    var price = el('div', 'g-price');
    if (it.listPrice) {
      price.appendChild(el('del', 'g-list-price', won(it.listPrice) + '원'));
      price.appendChild(document.createTextNode(' '));
    }
    price.appendChild(el('strong', 'g-sale', won(it.price)));
    price.appendChild(document.createTextNode(it.priceFrom ? '원~' : '원'));
    li.appendChild(price);
    if (it.delivery) { li.appendChild(el('div', 'g-ship', it.delivery)); }
    li.appendChild(el('span', 'g-shop', it.mallName));
    if (it.catalog) { li.appendChild(el('span', 'g-sellers', '판매처 ' + it.sellerCount)); }
    return li;
  }
  function nearBottom() { return sentinel.getBoundingClientRect().top < window.innerHeight + 200; }
  function stop() {
    if (observer) { observer.disconnect(); }
    window.removeEventListener('scroll', onScroll);
  }
  function failed() {
    stop();
    list.parentNode.insertBefore(el('div', 'g-error', ERROR_TEXT), list.nextSibling);
  }
  function more() {
    if (SCROLL_FAILS && shown > 0) {
      // The next batch is refused (429): the page shows its error box and loads no more.
      stop();
      fetch(MORE_URL + location.search).then(function (r) { if (!r.ok) { failed(); } }, failed);
      return;
    }
    pending = false;
    var end = Math.min(shown + BATCH, items.length);
    for (; shown < end; shown++) { list.appendChild(card(items[shown])); }
    if (shown >= items.length) { stop(); } else if (nearBottom()) { schedule(); }
  }
  function schedule() {
    if (!pending && shown < items.length) { pending = true; setTimeout(more, BATCH_MS); }
  }
  function onScroll() { if (nearBottom()) { schedule(); } }
  function withButton() {
    // `&more=button`: a "더보기" button instead of loading on scroll.
    var button = el('button', 'g-more', '더보기');
    button.type = 'button';
    button.addEventListener('click', function () {
      button.disabled = true;
      setTimeout(function () {
        var end = Math.min(shown + BATCH, items.length);
        for (; shown < end; shown++) { list.appendChild(card(items[shown])); }
        button.disabled = false;
        if (shown >= items.length) { button.parentNode.removeChild(button); }
      }, BATCH_MS);
    });
    list.parentNode.insertBefore(button, list.nextSibling);
  }
  function render() {
    list.innerHTML = '';
    if (!items.length) { list.parentNode.insertBefore(el('div', 'g-empty', EMPTY_TEXT), list); return; }
    if (/[?&]more=button(&|$)/.test(location.search)) {
      var end = Math.min(BATCH, items.length);
      for (; shown < end; shown++) { list.appendChild(card(items[shown])); }
      if (shown < items.length) { withButton(); }
      return;
    }
    if ('IntersectionObserver' in window) {
      observer = new IntersectionObserver(function (entries) {
        if (entries.some(function (e) { return e.isIntersecting; })) { schedule(); }
      }, { rootMargin: '0px 0px 200px 0px' });
    }
    window.addEventListener('scroll', onScroll, { passive: true });
    more();
    if (observer && shown < items.length) { observer.observe(sentinel); }
  }
  function later() { setTimeout(render, SKELETON_MS); }
  if (document.readyState === 'complete') { later(); } else { window.addEventListener('load', later); }
})();"#;

const REDESIGN_CSS: &str = ".pc-head{background:#111;color:#fff;padding:14px}\
.pc-grid{display:grid;grid-template-columns:repeat(3,1fr);gap:16px;padding:16px}\
.pc-item{border-radius:8px;box-shadow:0 1px 4px #0003;padding:10px}.pc-img{width:100%;height:180px}\
.pc-amount{font-size:20px;font-weight:700}.pc-tag{font-style:normal;background:#eee;margin-right:4px}";

/// The inline blob, escaped so that no string in it can end the `<script>` element.
fn next_data_json(view: &ResultsView<'_>) -> String {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct PageProps<'v, 'a> {
        query: &'v str,
        page: usize,
        pages: usize,
        total: usize,
        items: &'v [Item<'a>],
    }
    #[derive(Serialize)]
    struct Props<'v, 'a> {
        #[serde(rename = "pageProps")]
        page_props: PageProps<'v, 'a>,
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct NextData<'v, 'a> {
        props: Props<'v, 'a>,
        page: &'static str,
        build_id: &'static str,
    }
    let blob = NextData {
        props: Props {
            page_props: PageProps {
                query: view.query,
                page: view.page,
                pages: view.pages,
                total: view.total,
                items: &view.items,
            },
        },
        page: "/search",
        build_id: "lps-gamma",
    };
    // NB: serializing plain structs of strings and numbers cannot fail.
    let json = serde_json::to_string(&blob).unwrap_or_else(|_| "{}".to_owned());
    script_safe(&json)
}

/// JSON that may sit inside `<script>`: `<`, `>`, `&`, U+2028 and U+2029 as `\uXXXX`
/// (they can only occur inside JSON strings, where the escape means the same).
pub(crate) fn script_safe(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            _ => out.push(c),
        }
    }
    out
}

fn skeleton() -> &'static str {
    r#"<li class="g-card g-skeleton"><div class="g-badges"></div><a class="g-link"><span class="g-thumb"></span><p class="g-title"></p></a><div class="g-price"></div><div class="g-ship"></div><span class="g-shop"></span></li>"#
}

/// The result page as served: placeholders, the blob and the renderer (see [`super`]).
pub(crate) fn results_page(view: &ResultsView<'_>) -> String {
    let m = markup(MallStyle::Gamma);
    let empty_text = if view.items.is_empty() {
        format!("'{}'", m.no_result_text)
    } else {
        "''".to_owned()
    };
    let script = RENDERER
        .replace("__BATCH__", &BATCH.to_string())
        .replace("__SKELETON_MS__", &SKELETON_DELAY.as_millis().to_string())
        .replace("__BATCH_MS__", &BATCH_DELAY.as_millis().to_string())
        .replace("__EMPTY_TEXT__", &empty_text)
        .replace("__ERROR_TEXT__", &format!("'{}'", super::GAMMA_ERROR_TEXT))
        .replace("__MORE_URL__", &format!("'{}'", super::MORE_PATH))
        .replace(
            "__SCROLL_FAILS__",
            if view.scroll_fails { "true" } else { "false" },
        );
    let mut body = pages::header(m, view.query);
    body.push_str(r#"<main class="g-main"><ul class="g-list" id="g-results">"#);
    for _ in 0..SKELETONS {
        body.push_str(skeleton());
    }
    body.push_str(
        r#"</ul><div class="g-sentinel" aria-hidden="true"></div><nav class="g-paging">"#,
    );
    let _ = write!(
        body,
        r#"<span class="g-page-no">{} / {}</span>"#,
        view.page, view.pages
    );
    if let Some(href) = view.next_href() {
        let _ = write!(
            body,
            r#"<a class="g-next" href="{}">다음 페이지</a>"#,
            escape_html(&href)
        );
    }
    let _ = write!(
        body,
        "</nav></main><script id=\"__NEXT_DATA__\" type=\"application/json\">{}</script><script>{script}</script>",
        next_data_json(view)
    );
    pages::page(m, &format!("{} : {}", view.query, m.mall_name), "", &body)
}

/// The redesigned layout: server-rendered cards in other markup, no inline JSON.
pub(crate) fn redesigned_page(view: &ResultsView<'_>) -> String {
    let m = markup(MallStyle::Gamma);
    let q = escape_html(view.query);
    let mut body = format!(
        r#"<header class="pc-head"><a href="/">{}</a><form action="/search"><input name="q" value="{q}"></form></header>"#,
        m.mall_name
    );
    if view.items.is_empty() {
        body.push_str(r#"<p class="pc-none">검색어와 일치하는 상품이 없어요</p>"#);
    } else {
        body.push_str(r#"<section class="pc-grid">"#);
        for item in &view.items {
            redesigned_card(&mut body, item);
        }
        body.push_str("</section>");
    }
    if let Some(href) = view.next_href() {
        let _ = write!(
            body,
            r#"<a class="pc-more" href="{}">다음</a>"#,
            escape_html(&href)
        );
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"ko\"><head><meta charset=\"utf-8\"><title>{q} - {name}</title>\
         <style>{FONT_CSS}\n{REDESIGN_CSS}</style></head>\n<body>{body}</body></html>\n",
        name = m.mall_name
    )
}

fn redesigned_card(out: &mut String, item: &Item<'_>) {
    let l = item.listing;
    let tags: String = [
        (ListingKind::Ad, "광고"),
        (ListingKind::Overseas, "해외직구"),
        (ListingKind::Used, "중고"),
        (ListingKind::SoldOut, "품절"),
    ]
    .iter()
    .filter(|(kind, _)| l.kind == *kind)
    .map(|(_, text)| format!(r#"<i class="pc-tag">{text}</i>"#))
    .collect();
    let was = l
        .list_price
        .map(|lp| format!("<s>{}</s> ", format_price(MallStyle::Gamma, lp)))
        .unwrap_or_default();
    let from = if l.kind == ListingKind::OptionListing {
        "~"
    } else {
        ""
    };
    let _ = write!(
        out,
        r#"<article class="pc-item" data-item-no="{id}"><a class="pc-go" href="{link}"><img class="pc-img" src="{img}" alt=""><h3 class="pc-name">{title}</h3></a><div class="pc-tags">{tags}</div><span class="pc-amount">{was}{price}{from}</span>"#,
        id = escape_html(&l.id),
        link = escape_html(&item.link),
        img = l.image_path(),
        title = escape_html(&l.title),
        price = format_price(MallStyle::Gamma, item.price),
    );
    if let Some(delivery) = &item.delivery {
        let _ = write!(
            out,
            r#"<span class="pc-fee">{}</span>"#,
            escape_html(delivery)
        );
    }
    let _ = write!(
        out,
        r#"<span class="pc-store">{}</span>"#,
        escape_html(&l.seller)
    );
    if let Some(n) = l.seller_count {
        let _ = write!(out, r#"<span class="pc-count">판매처 {n}</span>"#);
    }
    out.push_str("</article>");
}

/// The self-clearing interstitial: sets the clearance cookie and reloads after `after`.
/// `token` is made of `[a-z0-9-]` (the mall issues it).
pub(crate) fn challenge_page(token: &str, after: Duration) -> String {
    let g = &GAMMA_MARKUP;
    format!(
        "<!DOCTYPE html><html lang=\"ko\"><head><meta charset=\"utf-8\"><title>{name}</title>\
         <style>body{{font-family:sans-serif;text-align:center;padding-top:80px}}</style></head>\
         <body><div id=\"g-challenge\" class=\"g-challenge\"><p class=\"g-challenge-title\">{text}</p>\
         <p>안전한 쇼핑을 위해 접속 환경을 확인하고 있습니다. 이 화면은 자동으로 넘어갑니다.</p></div>\
         <script>setTimeout(function () {{ document.cookie = '{cookie}={token}; path=/; max-age=3600; SameSite=Lax'; \
         location.reload(); }}, {ms});</script></body></html>\n",
        name = markup(MallStyle::Gamma).mall_name,
        text = g.challenge_text,
        cookie = g.clearance_cookie,
        ms = after.as_millis(),
    )
}

/// A result page that failed outright: the mall's error box and nothing else (served with
/// the failure's status).
pub(crate) fn error_page(query: &str) -> String {
    let m = markup(MallStyle::Gamma);
    let mut body = pages::header(m, query);
    let _ = write!(
        body,
        r#"<main class="g-main"><div class="g-error">{}</div></main>"#,
        super::GAMMA_ERROR_TEXT
    );
    pages::page(m, &format!("{query} : {}", m.mall_name), "", &body)
}

/// The restriction page (served with HTTP 418).
pub(crate) fn restricted_page() -> String {
    format!(
        "<!DOCTYPE html><html lang=\"ko\"><head><meta charset=\"utf-8\"><title>{name}</title></head>\
         <body><div id=\"g-restricted\" class=\"g-restricted\"><h1>{text}</h1>\
         <p>짧은 시간에 많은 요청이 있어 접속을 잠시 제한합니다. 잠시 후 다시 이용해 주세요.</p></div></body></html>\n",
        name = markup(MallStyle::Gamma).mall_name,
        text = GAMMA_MARKUP.restricted_text,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, Listing};

    fn view<'a>(
        query: &'a str,
        listings: &[&'a Listing],
        page: usize,
        pages: usize,
    ) -> ResultsView<'a> {
        ResultsView {
            query,
            page,
            pages,
            total: listings.len(),
            items: listings
                .iter()
                .map(|l| Item::new(l, "http://127.0.0.1:9", query))
                .collect(),
            scroll_fails: false,
        }
    }

    #[test]
    fn blob_cannot_close_the_script() {
        assert_eq!(
            script_safe(r#"{"t":"</script><b>&"}"#),
            r#"{"t":"\u003c/script\u003e\u003cb\u003e\u0026"}"#
        );
        let html = results_page(&view("</script><script>alert(1)</script>", &[], 1, 1));
        assert!(!html.contains("</script><script>alert(1)"), "{html}");
    }

    #[test]
    fn served_page_has_placeholders_and_no_card_text() {
        let catalog = Catalog::builtin();
        let deal = catalog
            .listing_by_id(MallStyle::Gamma, "g402")
            .expect("g402");
        let html = results_page(&view("코카콜라", &[deal], 1, 2));
        assert_eq!(
            html.matches(r#"<li class="g-card g-skeleton">"#).count(),
            SKELETONS
        );
        assert!(
            !html.contains("data-gid=\""),
            "cards come from the renderer"
        );
        assert!(html.contains(r#"<script id="__NEXT_DATA__" type="application/json">{"props":{"pageProps":{"query":"코카콜라","page":1,"pages":2,"#));
        assert!(html.contains(
            r#"<a class="g-next" href="/search?q=%EC%BD%94%EC%B9%B4%EC%BD%9C%EB%9D%BC&amp;page=2">"#
        ));
        assert!(!html.contains(markup(MallStyle::Gamma).no_result_text));
        assert!(
            !html.contains(&format_price(MallStyle::Gamma, 23_500)),
            "prices only in the blob, as numbers"
        );
        let last = results_page(&view("코카콜라", &[deal], 2, 2));
        assert!(!last.contains("g-next\""));
    }

    #[test]
    fn empty_page_carries_the_no_result_text() {
        let html = results_page(&view("없는상품", &[], 1, 1));
        assert!(html.contains(markup(MallStyle::Gamma).no_result_text));
        assert!(html.contains(r#""items":[]"#));
    }

    #[test]
    fn redesign_has_no_blob_and_no_gamma_classes() {
        let catalog = Catalog::builtin();
        let listings: Vec<&Listing> = ["g402", "g306", "g302"]
            .iter()
            .map(|id| {
                catalog
                    .listing_by_id(MallStyle::Gamma, id)
                    .expect("listing")
            })
            .collect();
        let html = redesigned_page(&view("x", &listings, 1, 1));
        assert!(!html.contains("__NEXT_DATA__"));
        assert!(!html.contains("class=\"g-"), "{html}");
        assert!(html.contains(r#"<span class="pc-amount"><s>31,800원</s> 23,500원</span>"#));
        assert!(html.contains(r#"<span class="pc-count">판매처 12</span>"#));
        assert!(html.contains("원~</span>"));
        assert!(redesigned_page(&view("x", &[], 1, 1)).contains(r#"<p class="pc-none">"#));
    }

    #[test]
    fn challenge_and_restriction_pages() {
        let html = challenge_page("c-1", Duration::from_millis(2500));
        assert!(html.contains(r#"<div id="g-challenge" class="g-challenge">"#));
        assert!(html.contains("g_clear=c-1; path=/"));
        assert!(html.contains("}, 2500);"));
        assert!(html.len() > 200 && html.len() < 2048, "{}", html.len());
        let html = restricted_page();
        assert!(html.contains(GAMMA_MARKUP.restricted_text));
        assert!(!html.contains(GAMMA_MARKUP.challenge_text));
    }
}
