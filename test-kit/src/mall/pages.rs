//! HTML of the mall: the search shell of alpha and beta (cards rendered later by its
//! script), and for every style the block page, detail pages, the home page and the 404
//! page. Gamma's result pages are [`crate::mall::gamma`]'s.
//!
//! The search shell deliberately contains no result and no no-result marker: its script
//! fetches `/api/search` with the page's own query string and builds the DOM, so a plain
//! HTTP fetch sees only the loading placeholder. Every page but the block page loads the
//! web font `/fonts/mall.woff2`; the block page is small static HTML, as real ones are.

use crate::catalog::{Listing, MallStyle};
use crate::mall::markup::{Markup, block_marker_html, delivery_text, format_price, markup};
use crate::util::escape_html;

/// Path of the web font every page uses.
pub const FONT_PATH: &str = "/fonts/mall.woff2";

pub(crate) const FONT_CSS: &str = r#"@font-face{font-family:"MallSans";src:url("/fonts/mall.woff2") format("woff2");font-display:block}
body{font-family:"MallSans",sans-serif;margin:0}"#;

const ALPHA_CSS: &str = ".alpha-header{background:#1e6bff;color:#fff;padding:12px}\
.product-list{list-style:none;padding:0}.product-item{display:flex;gap:12px;padding:8px;border-bottom:1px solid #ddd}\
.product-thumb{width:120px;height:120px}.product-price strong{font-size:18px}";

const BETA_CSS: &str = ".beta-top{background:#ff5a1e;color:#fff;padding:10px}\
#srp-list{display:grid;grid-template-columns:repeat(4,1fr);gap:10px}.srp-card{border:1px solid #eee;padding:6px}\
.srp-thumb img{width:160px;height:160px}.srp-price{font-weight:bold}";

const GAMMA_CSS: &str = ".g-top{background:#00a37a;color:#fff;padding:12px}\
.g-list{list-style:none;margin:0;padding:0 12px}.g-card{display:block;min-height:160px;border-bottom:1px solid #e5e5e5;padding:8px 0}\
.g-link{display:flex;gap:12px;color:inherit;text-decoration:none}.g-thumb{display:block;width:120px;height:120px;background:#f2f2f2}\
.g-skeleton .g-title{height:14px;width:60%;background:#eee}.g-badge{font-size:11px;padding:1px 4px;margin-right:4px;border:1px solid #ccc}\
.g-price strong{font-size:18px}.g-price del{color:#999;margin-right:4px}.g-sentinel{height:1px}.g-empty{padding:40px;text-align:center}";

/// Alpha's renderer. Placeholders: `__NO_RESULT_TEXT__`.
const ALPHA_SCRIPT: &str = r#"(function () {
  var root = document.getElementById('content');
  function won(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ','); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }
  function card(it) {
    var li = el('li', 'product-item');
    li.setAttribute('data-id', it.id);
    var a = el('a', 'product-link');
    a.href = it.url;
    var img = el('img', 'product-thumb');
    img.src = it.image;
    img.alt = it.title;
    a.appendChild(img);
    a.appendChild(el('div', 'product-title', it.title));
    li.appendChild(a);
    var price = el('div', 'product-price');
    price.appendChild(el('strong', 'price-value', won(it.price)));
    price.appendChild(document.createTextNode('원'));
    li.appendChild(price);
    li.appendChild(el('div', 'product-shipping',
      it.shipping === 0 ? '무료배송' : '배송비 ' + won(it.shipping) + '원'));
    li.appendChild(el('span', 'product-seller', it.seller));
    return li;
  }
  function render(data) {
    if (data.blocked) { document.body.innerHTML = data.block_html; return; }
    root.innerHTML = '';
    if (!data.items.length) { root.appendChild(el('div', 'no-result', '__NO_RESULT_TEXT__')); return; }
    var list = el('ul', 'product-list');
    list.id = 'search-results';
    data.items.forEach(function (it) { list.appendChild(card(it)); });
    root.appendChild(list);
  }
  fetch('/api/search' + location.search, { credentials: 'same-origin' })
    .then(function (r) { return r.json(); })
    .then(render, function () { root.innerHTML = '<div class="error">일시적인 오류가 발생했습니다</div>'; });
})();"#;

/// Beta's renderer. Placeholders: `__NO_RESULT_TEXT__`.
const BETA_SCRIPT: &str = r#"(function () {
  var root = document.getElementById('srp-root');
  function krw(n) { return '₩' + String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ','); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }
  function card(it) {
    var c = el('div', 'srp-card');
    c.setAttribute('data-product-id', it.id);
    var thumb = el('div', 'srp-thumb');
    var img = document.createElement('img');
    img.src = it.image;
    img.alt = '';
    thumb.appendChild(img);
    c.appendChild(thumb);
    var info = el('div', 'srp-info');
    var name = el('a', 'srp-name', it.title);
    name.href = it.url;
    info.appendChild(name);
    info.appendChild(el('span', 'srp-price', krw(it.price)));
    var ship = el('span', 'srp-delivery', it.shipping === 0 ? '무료배송' : '배송비 ' + krw(it.shipping));
    if (it.shipping === 0) { ship.className += ' free'; }
    info.appendChild(ship);
    info.appendChild(el('span', 'srp-vendor', it.seller));
    c.appendChild(info);
    return c;
  }
  function render(data) {
    if (data.blocked) { document.body.innerHTML = data.block_html; return; }
    root.innerHTML = '';
    if (!data.items.length) {
      root.appendChild(el('p', 'srp-empty', '"' + data.query + '"에 대한 __NO_RESULT_TEXT__.'));
      return;
    }
    var list = el('section');
    list.id = 'srp-list';
    data.items.forEach(function (it) { list.appendChild(card(it)); });
    root.appendChild(list);
  }
  fetch('/api/search' + location.search, { credentials: 'same-origin' })
    .then(function (r) { return r.json(); })
    .then(render, function () { root.innerHTML = '<p class="srp-error">잠시 후 다시 시도해 주세요</p>'; });
})();"#;

/// A whole page of a style: its CSS, the web font and `body`.
pub(crate) fn page(m: &Markup, title: &str, head_extra: &str, body: &str) -> String {
    let css = match m.style {
        MallStyle::Alpha => ALPHA_CSS,
        MallStyle::Beta => BETA_CSS,
        MallStyle::Gamma => GAMMA_CSS,
    };
    format!(
        "<!DOCTYPE html>\n<html lang=\"ko\"><head><meta charset=\"utf-8\">\
         <title>{title}</title><style>{FONT_CSS}\n{css}</style>{head_extra}</head>\n\
         <body>{body}</body></html>\n",
        title = escape_html(title),
    )
}

/// The style's header with its search form ([`Markup::search_input`]; Enter submits it
/// to `/search?q=…` without JavaScript).
pub(crate) fn header(m: &Markup, q: &str) -> String {
    let q = escape_html(q);
    match m.style {
        MallStyle::Alpha => format!(
            r#"<header class="alpha-header"><a href="/">{}</a><form action="/search" method="get"><input id="search-keyword" name="q" value="{q}" autocomplete="off"><button type="submit">검색</button></form></header>"#,
            m.mall_name
        ),
        MallStyle::Beta => format!(
            r#"<div class="beta-top"><a href="/">{}</a><form action="/search" method="get"><input id="srp-query" type="search" name="q" value="{q}" autocomplete="off"><button type="submit" class="srp-go">검색</button></form></div>"#,
            m.mall_name
        ),
        MallStyle::Gamma => format!(
            r#"<div class="g-top"><a class="g-logo" href="/">{}</a><form class="g-search" action="/search" method="get"><input id="g-query" name="q" value="{q}" autocomplete="off"><button type="submit">검색</button></form></div>"#,
            m.mall_name
        ),
    }
}

/// The search page as served: header, loading placeholder and the rendering script. Gamma
/// has no shell (its page carries its results, see [`crate::mall::gamma`]): for gamma this
/// is its result page without results.
pub fn search_shell(style: MallStyle, query: &str) -> String {
    let m = markup(style);
    let (body, script) = match style {
        MallStyle::Gamma => return crate::mall::gamma::empty_page(query),
        MallStyle::Alpha => (
            r#"<main id="content"><div class="loading">검색 중입니다...</div></main>"#,
            ALPHA_SCRIPT,
        ),
        MallStyle::Beta => (
            r#"<div id="srp-root"><div class="srp-loading">불러오는 중</div></div>"#,
            BETA_SCRIPT,
        ),
    };
    let script = script.replace("__NO_RESULT_TEXT__", m.no_result_text);
    let body = format!("{}{body}<script>{script}</script>", header(m, query));
    page(m, &format!("{query} : {}", m.mall_name), "", &body)
}

/// The block (captcha) page: small static HTML containing [`block_marker_html`].
pub fn block_page(style: MallStyle) -> String {
    let m = markup(style);
    let marker = block_marker_html(style);
    format!(
        "<!DOCTYPE html><html lang=\"ko\"><head><meta charset=\"utf-8\"><title>{}</title></head>\
         <body><h1>접근이 제한되었습니다</h1>{marker}<form><input name=\"captcha\"></form></body></html>\n",
        m.mall_name
    )
}

/// The product detail page of one listing (server-rendered).
pub fn detail_page(style: MallStyle, listing: &Listing) -> String {
    let m = markup(style);
    let title = escape_html(&listing.title);
    let price = format_price(style, listing.price);
    let shipping = delivery_text(style, listing).map_or_else(
        || "배송비는 판매자에게 문의하세요".to_owned(),
        |t| escape_html(&t),
    );
    let seller = escape_html(&listing.seller);
    let image = listing.image_path();
    let body = match style {
        MallStyle::Alpha => format!(
            r#"<div class="goods-detail" data-id="{id}"><img class="goods-image" src="{image}" alt=""><h1 class="goods-title">{title}</h1><span class="goods-price">{price}</span><span class="goods-shipping">{shipping}</span><span class="goods-seller">{seller}</span></div>"#,
            id = listing.id
        ),
        MallStyle::Beta => format!(
            r#"<div class="prod-detail" data-product-id="{id}"><h2 class="prod-title">{title}</h2><div class="prod-image"><img src="{image}" alt=""></div><span class="prod-price">{price}</span><span class="prod-delivery">{shipping}</span><span class="prod-vendor">{seller}</span></div>"#,
            id = listing.id
        ),
        MallStyle::Gamma => format!(
            r#"<div class="g-detail" data-gid="{id}"><h1 class="g-detail-title">{title}</h1><img class="g-detail-image" src="{image}" alt=""><div class="g-detail-price">{price}</div><div class="g-detail-ship">{shipping}</div><span class="g-detail-shop">{seller}</span></div>"#,
            id = listing.id
        ),
    };
    let body = format!("{}{body}", header(m, ""));
    page(
        m,
        &format!("{} : {}", listing.title, m.mall_name),
        "",
        &body,
    )
}

/// The home page: just the header's search form.
pub fn home_page(style: MallStyle) -> String {
    let m = markup(style);
    page(m, m.mall_name, "", &header(m, ""))
}

/// The 404 page.
pub fn not_found_page(style: MallStyle) -> String {
    let m = markup(style);
    let body = format!(
        "{}<p class=\"not-found\">페이지를 찾을 수 없습니다</p>",
        header(m, "")
    );
    page(m, m.mall_name, "", &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_has_no_results_yet() {
        for style in MallStyle::SHELL {
            let m = markup(style);
            let html = search_shell(style, "삼다수");
            assert!(html.contains("/api/search"));
            assert!(html.contains(FONT_PATH));
            // The no-result text lives only in the script, never as an element.
            assert!(!html.contains(&format!(
                "class=\"{}\"",
                m.no_result.split('.').nth(1).unwrap_or_default()
            )));
            assert!(
                html.contains(m.no_result_text),
                "script carries the marker text"
            );
            assert!(!html.contains("__NO_RESULT_TEXT__"));
        }
    }

    #[test]
    fn query_is_escaped() {
        let html = search_shell(MallStyle::Alpha, "<script>alert(1)</script>");
        assert!(!html.contains("<script>alert(1)"));
        assert!(html.contains("&lt;script&gt;"));
    }

    #[test]
    fn home_page_has_a_search_form_that_submits_on_enter() {
        for style in MallStyle::ALL {
            let m = markup(style);
            let html = home_page(style);
            let id = m
                .search_input
                .strip_prefix("input#")
                .expect("an id selector");
            let form_at = html
                .find(r#"<form "#)
                .unwrap_or_else(|| panic!("{style}: a form"));
            let form = &html[form_at
                ..html[form_at..]
                    .find("</form>")
                    .map_or(html.len(), |end| form_at + end)];
            assert!(
                form.contains(r#"action="/search" method="get""#),
                "{style}: {form}"
            );
            assert!(
                form.contains(&format!(r#"<input id="{id}""#)),
                "{style}: {form}"
            );
            assert!(form.contains(r#"name="q""#), "{style}: {form}");
            assert!(
                form.contains(r#"<button type="submit""#),
                "{style}: Enter submits"
            );
            assert_eq!(form.matches("<input").count(), 1, "{style}: one field");
        }
    }

    #[test]
    fn block_page_is_small_and_marked() {
        for style in MallStyle::ALL {
            let html = block_page(style);
            assert!(html.len() < 1024, "{} bytes", html.len());
            assert!(html.contains(&block_marker_html(style)));
            assert!(!html.contains(FONT_PATH));
        }
    }
}
