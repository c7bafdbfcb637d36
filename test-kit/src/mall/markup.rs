//! The two mall markups as data: CSS selectors, marker texts and price/shipping formats.
//!
//! This is the contract a site profile for the test malls is written against; the pages
//! and the in-page JavaScript are generated from these constants, so a selector named here
//! is exactly what the browser DOM contains.

use crate::catalog::MallStyle;
use crate::util::thousands;

/// Selectors and markers of one mall style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Markup {
    /// Which style this describes.
    pub style: MallStyle,
    /// The mall's display name.
    pub mall_name: &'static str,
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

/// The markup of a style.
pub fn markup(style: MallStyle) -> &'static Markup {
    match style {
        MallStyle::Alpha => &ALPHA,
        MallStyle::Beta => &BETA,
    }
}

/// The exact snippet of the block page a client can look for, e.g.
/// `<div id="captcha">비정상적인 접근이 감지되었습니다</div>`.
pub fn block_marker_html(style: MallStyle) -> String {
    match style {
        MallStyle::Alpha => format!(r#"<div id="captcha">{}</div>"#, ALPHA.block_text),
        MallStyle::Beta => format!(
            r#"<div id="px-captcha" class="px-captcha">{}</div>"#,
            BETA.block_text
        ),
    }
}

/// The price text in a card: alpha `12,900원`, beta `₩12,900`.
pub fn format_price(style: MallStyle, krw: u64) -> String {
    match style {
        MallStyle::Alpha => format!("{}원", thousands(krw)),
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
    }
}
