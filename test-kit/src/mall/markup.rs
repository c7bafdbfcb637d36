//! The mall markups as data: CSS selectors, marker texts and price/shipping formats (gamma's
//! extra elements — badges, placeholders, paging, challenge, restriction, the redesigned
//! layout — are in [`GammaMarkup`]).
//!
//! This is the contract a site profile for the test malls is written against; the pages
//! and the in-page JavaScript are generated from these constants, so a selector named here
//! is exactly what the browser DOM contains.

use crate::catalog::{Delivery, Listing, MallStyle};
use crate::util::thousands;

/// Selectors and markers of one mall style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Markup {
    /// Which style this describes.
    pub style: MallStyle,
    /// The mall's display name.
    pub mall_name: &'static str,
    /// The search input of the header form on every page (home page included): a GET
    /// `form[action="/search"]` that submits on Enter without JavaScript, field `q`.
    pub search_input: &'static str,
    /// Placeholder shown until the script has rendered (present in the raw HTML).
    pub loading: &'static str,
    /// Container of the result cards.
    pub results: &'static str,
    /// One result card.
    pub card: &'static str,
    /// Attribute on the card holding the listing id.
    pub card_id_attr: &'static str,
    /// Product title inside a card.
    pub title: &'static str,
    /// Price inside a card (text as [`format_price`]).
    pub price: &'static str,
    /// Shipping inside a card (text as [`format_shipping`]).
    pub shipping: &'static str,
    /// Link to the detail page inside a card (`href` = listing path).
    pub link: &'static str,
    /// Seller inside a card.
    pub seller: &'static str,
    /// Product image inside a card.
    pub image: &'static str,
    /// Element shown when nothing was found.
    pub no_result: &'static str,
    /// Text inside [`Markup::no_result`].
    pub no_result_text: &'static str,
    /// Element of the block (captcha) page.
    pub block: &'static str,
    /// Text inside [`Markup::block`].
    pub block_text: &'static str,
    /// Title on the detail page.
    pub detail_title: &'static str,
    /// Price on the detail page.
    pub detail_price: &'static str,
}

/// Text the malls show for free shipping.
pub const FREE_SHIPPING_TEXT: &str = "무료배송";

const ALPHA: Markup = Markup {
    style: MallStyle::Alpha,
    mall_name: "알파몰",
    search_input: "input#search-keyword",
    loading: "div.loading",
    results: "ul#search-results",
    card: "li.product-item",
    card_id_attr: "data-id",
    title: "div.product-title",
    price: "div.product-price",
    shipping: "div.product-shipping",
    link: "a.product-link",
    seller: "span.product-seller",
    image: "img.product-thumb",
    no_result: "div.no-result",
    no_result_text: "검색결과가 없습니다",
    block: "div#captcha",
    block_text: "비정상적인 접근이 감지되었습니다",
    detail_title: "h1.goods-title",
    detail_price: "span.goods-price",
};

const BETA: Markup = Markup {
    style: MallStyle::Beta,
    mall_name: "베타마켓",
    search_input: "input#srp-query",
    loading: "div.srp-loading",
    results: "section#srp-list",
    card: "div.srp-card",
    card_id_attr: "data-product-id",
    title: "a.srp-name",
    price: "span.srp-price",
    shipping: "span.srp-delivery",
    link: "a.srp-name",
    seller: "span.srp-vendor",
    image: "div.srp-thumb img",
    no_result: "p.srp-empty",
    no_result_text: "검색 결과가 없습니다",
    block: "div#px-captcha",
    block_text: "보안 문자를 입력해 주세요",
    detail_title: "h2.prod-title",
    detail_price: "span.prod-price",
};

const GAMMA: Markup = Markup {
    style: MallStyle::Gamma,
    mall_name: "감마마켓",
    search_input: "input#g-query",
    loading: "li.g-card.g-skeleton",
    results: "ul#g-results",
    card: "li.g-card",
    card_id_attr: "data-gid",
    title: "p.g-title",
    price: "div.g-price",
    shipping: "div.g-ship",
    link: "a.g-link",
    seller: "span.g-shop",
    image: "img.g-thumb",
    no_result: "div.g-empty",
    no_result_text: "일치하는 상품을 찾지 못했습니다",
    block: "div#g-captcha",
    block_text: "자동 접속이 감지되어 확인이 필요합니다",
    detail_title: "h1.g-detail-title",
    detail_price: "div.g-detail-price",
};

/// The markup of a style.
pub fn markup(style: MallStyle) -> &'static Markup {
    match style {
        MallStyle::Alpha => &ALPHA,
        MallStyle::Beta => &BETA,
        MallStyle::Gamma => &GAMMA,
    }
}

/// Gamma's elements beyond [`Markup`] (see [`crate::mall::gamma`] for when each shows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GammaMarkup {
    /// The inline JSON blob: `{"props":{"pageProps":{"query","page","pages","total","items"}}}`.
    pub next_data: &'static str,
    /// JSON path of the items in [`GammaMarkup::next_data`].
    pub next_data_items: &'static str,
    /// A placeholder card: the real card's element and class plus this one, no text.
    pub skeleton: &'static str,
    /// The element whose coming into view loads the next batch of cards.
    pub sentinel: &'static str,
    /// Link to the next result page (`href` has `&page=N+1`), only when there is one.
    pub next_page: &'static str,
    /// Struck-out list price inside [`Markup::price`] (time deals).
    pub list_price: &'static str,
    /// Badge `광고` of an ad card.
    pub badge_ad: &'static str,
    /// Badge `해외직구`.
    pub badge_overseas: &'static str,
    /// Badge `중고`.
    pub badge_used: &'static str,
    /// Badge `품절`.
    pub badge_sold_out: &'static str,
    /// `판매처 12` on a catalog card.
    pub sellers: &'static str,
    /// The self-clearing interstitial.
    pub challenge: &'static str,
    /// Text of [`GammaMarkup::challenge`].
    pub challenge_text: &'static str,
    /// Cookie the interstitial's script sets before it reloads.
    pub clearance_cookie: &'static str,
    /// The restriction page's element (HTTP 418).
    pub restricted: &'static str,
    /// Text of [`GammaMarkup::restricted`].
    pub restricted_text: &'static str,
    /// The redesigned layout's card.
    pub changed_card: &'static str,
    /// The redesigned layout's title (also the link's text).
    pub changed_title: &'static str,
    /// The redesigned layout's price.
    pub changed_price: &'static str,
    /// The redesigned layout's no-result element.
    pub changed_no_result: &'static str,
}

/// Gamma's extra markup.
pub const GAMMA_MARKUP: GammaMarkup = GammaMarkup {
    next_data: "script#__NEXT_DATA__",
    next_data_items: "$.props.pageProps.items[*]",
    skeleton: "li.g-card.g-skeleton",
    sentinel: "div.g-sentinel",
    next_page: "a.g-next",
    list_price: "div.g-price del",
    badge_ad: "span.g-badge-ad",
    badge_overseas: "span.g-badge-global",
    badge_used: "span.g-badge-used",
    badge_sold_out: "span.g-badge-soldout",
    sellers: "span.g-sellers",
    challenge: "div#g-challenge",
    challenge_text: "잠시만 기다려 주세요",
    clearance_cookie: "g_clear",
    restricted: "div#g-restricted",
    restricted_text: "쇼핑 서비스 접속이 일시적으로 제한되었습니다",
    changed_card: "article.pc-item",
    changed_title: "h3.pc-name",
    changed_price: "span.pc-amount",
    changed_no_result: "p.pc-none",
};

/// The exact snippet of the block page a client can look for, e.g.
/// `<div id="captcha">비정상적인 접근이 감지되었습니다</div>`.
pub fn block_marker_html(style: MallStyle) -> String {
    match style {
        MallStyle::Alpha => format!(r#"<div id="captcha">{}</div>"#, ALPHA.block_text),
        MallStyle::Beta => format!(
            r#"<div id="px-captcha" class="px-captcha">{}</div>"#,
            BETA.block_text
        ),
        MallStyle::Gamma => format!(
            r#"<div id="g-captcha" class="g-captcha">{}</div>"#,
            GAMMA.block_text
        ),
    }
}

/// The price text in a card: alpha and gamma `12,900원`, beta `₩12,900`.
pub fn format_price(style: MallStyle, krw: u64) -> String {
    match style {
        MallStyle::Alpha | MallStyle::Gamma => format!("{}원", thousands(krw)),
        MallStyle::Beta => format!("₩{}", thousands(krw)),
    }
}

/// The shipping text in a card: `무료배송` for 0, else alpha `배송비 3,000원`,
/// beta `배송비 ₩3,000`.
pub fn format_shipping(style: MallStyle, krw: u64) -> String {
    if krw == 0 {
        return FREE_SHIPPING_TEXT.to_owned();
    }
    format!("배송비 {}", format_price(style, krw))
}

/// The shipping text a listing's card shows, `None` when it shows none: [`format_shipping`]
/// for a stated fee, `2만원 이상 무료배송`, `배송비 3,000원 (2만원 이상 무료)`.
pub fn delivery_text(style: MallStyle, listing: &Listing) -> Option<String> {
    let threshold = || format_threshold(listing.free_over.unwrap_or(0));
    match listing.delivery {
        Delivery::Fee => Some(format_shipping(style, listing.shipping)),
        Delivery::FreeOver => Some(format!("{} 이상 무료배송", threshold())),
        Delivery::FeeFreeOver => Some(format!(
            "배송비 {} ({} 이상 무료)",
            format_price(style, listing.shipping),
            threshold()
        )),
        Delivery::Missing => None,
    }
}

/// A free-shipping threshold as malls write it: `2만원` for whole ten-thousands, else
/// `15,500원`.
fn format_threshold(krw: u64) -> String {
    if krw > 0 && krw.is_multiple_of(10_000) {
        format!("{}만원", krw / 10_000)
    } else {
        format!("{}원", thousands(krw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_differ_per_style() {
        assert_eq!(format_price(MallStyle::Alpha, 12900), "12,900원");
        assert_eq!(format_price(MallStyle::Beta, 12900), "₩12,900");
        assert_eq!(format_shipping(MallStyle::Alpha, 3000), "배송비 3,000원");
        assert_eq!(format_shipping(MallStyle::Beta, 2500), "배송비 ₩2,500");
        assert_eq!(format_shipping(MallStyle::Beta, 0), "무료배송");
    }

    #[test]
    fn markers_differ_per_style() {
        assert_ne!(ALPHA.no_result_text, BETA.no_result_text);
        assert_ne!(ALPHA.block_text, BETA.block_text);
        assert_ne!(ALPHA.card, BETA.card);
        assert!(block_marker_html(MallStyle::Alpha).contains(ALPHA.block_text));
        for (a, b) in [(ALPHA, GAMMA), (BETA, GAMMA)] {
            assert_ne!(a.no_result_text, b.no_result_text);
            assert_ne!(a.block_text, b.block_text);
            assert_ne!(a.card, b.card);
        }
    }

    #[test]
    fn delivery_texts() {
        let catalog = crate::catalog::Catalog::builtin();
        let text = |id: &str| {
            let listing = catalog
                .listing_by_id(MallStyle::Gamma, id)
                .unwrap_or_else(|| panic!("{id}"));
            delivery_text(MallStyle::Gamma, listing)
        };
        assert_eq!(text("g601").as_deref(), Some("2만원 이상 무료배송"));
        assert_eq!(
            text("g501").as_deref(),
            Some("배송비 3,000원 (2만원 이상 무료)")
        );
        assert_eq!(text("g602"), None);
        assert_eq!(text("g307").as_deref(), Some("무료배송"));
        assert_eq!(format_threshold(15_500), "15,500원");
    }
}
