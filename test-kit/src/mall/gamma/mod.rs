//! 감마마켓 (style `gamma`): the test mall with every trap of a real result page.
//!
//! Alpha and beta render one flat list from a fetched JSON API; gamma is built like a
//! modern mall, so each thing a crawler has to get right shows up at least once:
//!
//! - **Inline JSON first.** `GET /search?q=…[&page=N]` serves the page's items in
//!   `<script id="__NEXT_DATA__" type="application/json">` (`<`, `>`, `&` escaped as
//!   `\u003c`…) and a renderer script that builds the cards from it after `load`.
//! - **Placeholders first.** The served HTML holds [`SKELETONS`] skeleton cards
//!   (`li.g-card.g-skeleton`: the real card's element and class, empty inner elements, no
//!   text); the renderer replaces them [`SKELETON_DELAY`] after `load`.
//! - **Lazy loading.** The renderer shows [`BATCH`] cards, then the next [`BATCH`] each
//!   time the sentinel `div.g-sentinel` comes within 200 px of the viewport (an
//!   `IntersectionObserver` plus a scroll listener), [`BATCH_DELAY`] later. With
//!   `&more=button` in the search URL a `button.g-more` ("더보기") shows the next batch
//!   per click instead (scrolling loads nothing), until every item of the page is shown.
//! - **Pages.** [`PAGE_SIZE`] items a page; `a.g-next` (`href` = `/search?q=…&page=N+1`)
//!   only when another page exists. A page past the last is a no-result page.
//! - **Result order** ([`results`]): ads first, then the other full matches, then up to
//!   [`MAX_RELATED`](crate::catalog::MAX_RELATED) related listings, each group in file
//!   order — so the catalog decides on which card and page each listing lands.
//! - **No results.** The renderer shows `div.g-empty` `일치하는 상품을 찾지 못했습니다`
//!   after the same delay; the text is in the page only when the page has no items.
//!
//! # A card
//!
//! ```html
//! <li class="g-card [is-ad] [is-soldout]" data-gid="g402">
//!   <div class="g-badges">[<span class="g-badge g-badge-ad">광고</span>]
//!     [<span class="g-badge g-badge-global">해외직구</span>]
//!     [<span class="g-badge g-badge-used">중고</span>] [<span class="g-badge g-badge-soldout">품절</span>]</div>
//!   <a class="g-link" href="http://HOST/p/g402"><img class="g-thumb" src="/img/g402.jpg" alt="">
//!     <p class="g-title" [title="full title"]>title or cut title…</p></a>
//!   <div class="g-price">[<del class="g-list-price">31,800원</del> ]<strong class="g-sale">23,500</strong>원[~]</div>
//!   [<div class="g-ship">배송비 3,000원 | 무료배송 | 2만원 이상 무료배송 | 배송비 3,000원 (2만원 이상 무료)</div>]
//!   <span class="g-shop">seller</span> [<span class="g-sellers">판매처 12</span>]
//! </li>
//! ```
//!
//! `HOST` is the mall's bound address (the request's `Host` when it listens on `0.0.0.0`).
//! An ad's link is the click redirect `http://HOST/adcr?u=%2Fp%2Fg301&q=…` (302 to the
//! listing); an option listing's price ends in `원~`; the `title` attribute is set only on
//! a cut title. The whole list is `ul#g-results`. Selectors as data:
//! [`markup(MallStyle::Gamma)`](crate::mall::markup::markup) and
//! [`GAMMA_MARKUP`](crate::mall::markup::GAMMA_MARKUP).
//!
//! # One JSON item (inline blob and API alike)
//!
//! `id`, `title` (full), `displayTitle` (as the card shows it), `price`, `listPrice` (time
//! deals only), `priceFrom` (option listing), `delivery` (the card's shipping text; absent
//! when the card shows none), `link` (absolute), `mallName`, `image`, `ad`, `overseas`,
//! `used`, `soldOut`, `catalog` (booleans, always present), `sellerCount` (catalog cards
//! only). The blob is `{"props":{"pageProps":{"query","page","pages","total","items"}},
//! "page":"/search","buildId":…}`.
//!
//! # Routes (besides the common ones in [`crate::mall`])
//!
//! | route | what |
//! |---|---|
//! | `GET /search?q=…[&page=N][&slow_ms=N]` | the result page above; or the exit-IP block page (HTTP 200, `div#g-captcha`), the restriction page (HTTP 418), the challenge interstitial or the redesigned layout, as the controls say |
//! | `GET /openapi/v1/search.json?query=…[&start=S][&display=D]` | `{"total","start","display","items":[…]}`: the same items in the same order without ads; `start` 1..=1000 (default 1), `display` 1..=100 (default 10); header `X-Gamma-Key` required (401 JSON without or with a wrong key); a blocked exit IP gets 429 JSON; counts toward the exit IP's search budget |
//! | `GET /adcr?u=<path>[&q=…]` | an ad click: 302 to `u` when it is a listing path of this mall, else 404 |
//! | `GET /search/more?…` | where a page that fails when scrolled asks for its next batch: always HTTP 429 JSON |
//!
//! # Controls (gamma only; see [`crate::mall`] for the endpoints)
//!
//! - **Challenge**: the next N search page requests without a valid clearance cookie get
//!   a small interstitial (`div#g-challenge` `잠시만 기다려 주세요`, HTTP 200) whose script
//!   sets the cookie `g_clear=<token>` and reloads after the set delay (default
//!   [`CHALLENGE_CLEARS_AFTER`]); a request carrying a token the mall issued always gets
//!   results, so the challenge clears for that browser.
//! - **Restriction**: every search page answers HTTP 418 with `div#g-restricted`
//!   `쇼핑 서비스 접속이 일시적으로 제한되었습니다` (as Naver does), until lifted.
//! - **Failing half-way**: the next N result pages fail when scrolled — the renderer asks
//!   [`MORE_PATH`] for its next batch, gets 429 and shows `div.g-error`
//!   ([`GAMMA_ERROR_TEXT`]) instead of more cards; or result page P answers HTTP S with that
//!   error box the next N times it is asked for.
//! - **Changed layout**: search pages are rendered server-side in another markup
//!   (`article.pc-item`, `h3.pc-name`, `span.pc-amount`, `span.pc-fee`, `span.pc-store`,
//!   `a.pc-go`, `a.pc-more`, `p.pc-none`), with no inline JSON, no placeholders and no
//!   `g-` class at all — a redesign.
//!
//! Order of decisions for a search page: the exit-IP budget (counted, as for alpha and
//! beta), then the restriction, then the challenge, then the page in the current layout.

mod page;
mod routes;

use std::time::Duration;

use serde::Serialize;

use crate::catalog::{Catalog, Listing, ListingKind, MallStyle, Relevance};
use crate::mall::markup::delivery_text;
use crate::util::encode_query_value;

pub(crate) use routes::routes;

/// Items per result page.
pub const PAGE_SIZE: usize = 24;

/// Cards the renderer adds at a time (the first batch at once, the others on scrolling).
pub const BATCH: usize = 10;

/// Placeholder cards in the served HTML.
pub const SKELETONS: usize = 6;

/// How long after `load` the placeholders stay before the renderer replaces them.
pub const SKELETON_DELAY: Duration = Duration::from_millis(700);

/// How long after the sentinel comes into view the next batch appears.
pub const BATCH_DELAY: Duration = Duration::from_millis(300);

/// The challenge interstitial's default delay before it sets its cookie and reloads.
pub const CHALLENGE_CLEARS_AFTER: Duration = Duration::from_secs(3);

/// The longest challenge delay the control accepts.
pub const MAX_CHALLENGE_DELAY: Duration = Duration::from_secs(60);

/// The API key gamma's JSON API accepts unless [`MallConfig`](crate::mall::MallConfig)
/// sets another.
pub const GAMMA_API_KEY: &str = "lps-gamma-test-key";

/// Header carrying the API key.
pub const API_KEY_HEADER: &str = "x-gamma-key";

/// Path of gamma's JSON API.
pub const API_PATH: &str = "/openapi/v1/search.json";

/// Path of the ad click redirect.
pub const AD_REDIRECT_PATH: &str = "/adcr";

/// `display` of an API request that gives none, and the most it may ask for.
pub const API_DISPLAY: (usize, usize) = (10, 100);

/// The highest `start` the API accepts.
pub const API_MAX_START: usize = 1000;

/// Gamma's result list for `query`: ads first, then the other full matches, then the
/// related listings, each group in catalog file order. Card N (1-based) of the list is
/// on page `(N - 1) / PAGE_SIZE + 1`.
pub fn results<'a>(catalog: &'a Catalog, query: &str) -> Vec<&'a Listing> {
    let hits = catalog.search(MallStyle::Gamma, query);
    let rank = |ad: bool, relevance: Relevance| match (relevance, ad) {
        (Relevance::Full, true) => 0,
        (Relevance::Full, false) => 1,
        (Relevance::Related, _) => 2,
    };
    let mut ranked: Vec<_> = hits
        .iter()
        .map(|h| {
            (
                rank(h.listing.kind == ListingKind::Ad, h.relevance),
                h.listing,
            )
        })
        .collect();
    // NB: a stable sort keeps file order inside each group.
    ranked.sort_by_key(|(rank, _)| *rank);
    ranked.into_iter().map(|(_, listing)| listing).collect()
}

/// The error box a failing result page shows (`div.g-error`), as malls show one when
/// the request for more results is refused.
pub const GAMMA_ERROR_TEXT: &str = "일시적인 오류가 발생했습니다. 잠시 후 다시 시도해 주세요.";

/// Where a result page that fails when scrolled asks for its next batch (always 429).
pub const MORE_PATH: &str = "/search/more";

/// Number of pages for `total` results (at least 1: an empty search has one empty page).
pub fn page_count(total: usize) -> usize {
    total.div_ceil(PAGE_SIZE).max(1)
}

/// Gamma's result page without results (its no-result page).
pub(crate) fn empty_page(query: &str) -> String {
    page::results_page(&page::ResultsView {
        query,
        page: 1,
        pages: 1,
        total: 0,
        items: Vec::new(),
        scroll_fails: false,
    })
}

/// One result as gamma's JSON carries it (see the module doc).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Item<'a> {
    id: &'a str,
    title: &'a str,
    display_title: String,
    price: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    list_price: Option<u64>,
    price_from: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    delivery: Option<String>,
    link: String,
    mall_name: &'a str,
    image: String,
    ad: bool,
    overseas: bool,
    used: bool,
    sold_out: bool,
    catalog: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    seller_count: Option<u32>,
    /// The listing itself, for the server-side renderings.
    #[serde(skip)]
    listing: &'a Listing,
}

impl<'a> Item<'a> {
    /// `base` is `http://host:port` (links are absolute); `query` goes into ad links.
    pub(crate) fn new(listing: &'a Listing, base: &str, query: &str) -> Item<'a> {
        let kind = listing.kind;
        let link = if kind == ListingKind::Ad {
            format!(
                "{base}{AD_REDIRECT_PATH}?u={}&q={}",
                encode_query_value(&listing.path),
                encode_query_value(query)
            )
        } else {
            format!("{base}{}", listing.path)
        };
        Item {
            id: &listing.id,
            title: &listing.title,
            display_title: listing.display_title(),
            price: listing.price,
            list_price: listing.list_price,
            price_from: kind == ListingKind::OptionListing,
            delivery: delivery_text(MallStyle::Gamma, listing),
            link,
            mall_name: &listing.seller,
            image: listing.image_path(),
            ad: kind == ListingKind::Ad,
            overseas: kind == ListingKind::Overseas,
            used: kind == ListingKind::Used,
            sold_out: kind == ListingKind::SoldOut,
            catalog: kind == ListingKind::Catalog,
            seller_count: listing.seller_count,
            listing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ads_come_first_and_related_last() {
        let catalog = Catalog::builtin();
        let ids: Vec<&str> = results(&catalog, "햇반 210g 12개")
            .iter()
            .map(|l| l.id.as_str())
            .collect();
        assert_eq!(ids.first(), Some(&"g301"), "{ids:?}");
        let decoy = ids
            .iter()
            .position(|id| *id == "g903")
            .expect("related decoy");
        let organic = ids
            .iter()
            .position(|id| *id == "g307")
            .expect("true lowest");
        assert!(organic < decoy, "{ids:?}");
    }

    fn position(list: &[&Listing], id: &str) -> usize {
        1 + list
            .iter()
            .position(|l| l.id == id)
            .unwrap_or_else(|| panic!("{id}"))
    }

    /// The cheapest counted listing of `key` among `list` (decoys are other products).
    fn cheapest<'a>(catalog: &Catalog, key: &str, list: &[&'a Listing]) -> &'a str {
        let product = catalog.product(key).expect(key);
        list.iter()
            .filter(|l| l.counts_for_lowest() && product.listings.contains(l))
            .min_by_key(|l| l.effective_price())
            .map(|l| l.id.as_str())
            .expect("a counted listing")
    }

    #[test]
    fn lazy_and_second_page_products_land_where_the_catalog_says() {
        let catalog = Catalog::builtin();
        let samdasoo = results(&catalog, "삼다수 2L x 12");
        assert!(samdasoo.len() > BATCH && samdasoo.len() <= PAGE_SIZE);
        assert_eq!(position(&samdasoo, "g113"), 13);
        let key = "samdasoo-2l-12";
        assert_eq!(cheapest(&catalog, key, &samdasoo), "g113");
        assert_eq!(
            cheapest(&catalog, key, &samdasoo[..BATCH]),
            "g108",
            "first batch only"
        );

        let shin = results(&catalog, "신라면 120g 5개입");
        assert_eq!(page_count(shin.len()), 2, "{}", shin.len());
        assert_eq!(position(&shin, "g225"), PAGE_SIZE + 1);
        let key = "shin-ramyun-120g-5";
        assert_eq!(cheapest(&catalog, key, &shin), "g225");
        assert_eq!(
            cheapest(&catalog, key, &shin[..PAGE_SIZE]),
            "g205",
            "page 1 only"
        );
        assert_eq!(position(&shin, "g902"), PAGE_SIZE + 3, "40-pack decoy");
    }

    #[test]
    fn pages_are_page_size_long() {
        assert_eq!(page_count(0), 1);
        assert_eq!(page_count(PAGE_SIZE), 1);
        assert_eq!(page_count(PAGE_SIZE + 1), 2);
    }

    #[test]
    fn item_json_keys() {
        let catalog = Catalog::builtin();
        let ad = catalog.listing_by_id(MallStyle::Gamma, "g301").expect("ad");
        let json = serde_json::to_value(Item::new(ad, "http://h:1", "햇반 210g")).expect("json");
        assert_eq!(json["ad"], true);
        assert_eq!(json["catalog"], false);
        assert_eq!(json["delivery"], "무료배송");
        assert_eq!(
            json["link"],
            "http://h:1/adcr?u=%2Fp%2Fg301&q=%ED%96%87%EB%B0%98+210g"
        );
        assert!(json.get("listPrice").is_none());
        let deal = catalog
            .listing_by_id(MallStyle::Gamma, "g402")
            .expect("deal");
        let json = serde_json::to_value(Item::new(deal, "http://h:1", "")).expect("json");
        assert_eq!(json["price"], 23500);
        assert_eq!(json["listPrice"], 31800);
        assert_eq!(json["link"], "http://h:1/p/g402");
        let missing = catalog
            .listing_by_id(MallStyle::Gamma, "g602")
            .expect("missing");
        let json = serde_json::to_value(Item::new(missing, "http://h:1", "")).expect("json");
        assert!(json.get("delivery").is_none());
    }
}
