//! The fixture catalog: what the test malls sell, and how a mall searches it.
//!
//! Owns the catalog file format (TOML, see `test-kit/catalog.toml`), its validation and
//! the mall-side search. A [`Catalog`] is immutable once loaded; malls share it by `Arc`.
//!
//! Invariants checked on load: listing ids are unique over the catalog and made of
//! `[A-Za-z0-9_-]`; detail paths start with `/`, are unique per mall and do not collide
//! with the mall's own routes; `decoy_of` names an existing product; prices are positive;
//! the gamma-only marks (kind, delivery, list price, cut title, seller count) appear only on
//! gamma listings, each with its companion fields.
//!
//! **Truth** ([`Catalog::truth`], per mall style and product): the lowest effective price
//! (price + stated shipping fee) over the listings that [count](Listing::counts_for_lowest)
//! — normal offers with known shipping; ads, option listings, overseas, used, sold-out and
//! catalog cards never count, and neither does a listing whose card states no fee — plus
//! the cheapest normal listing with unknown shipping priced below it ("possibly lower").
//! [`Product::lowest`] is the same rule over all malls.
//!
//! Search (as a mall does it, not as the LPS client judges): the query and every title are
//! normalised (NFKC, lowercase); a listing is a **full match** when every query token
//! (whitespace-separated, multiplication signs `x`/`*`/`×` dropped) occurs in its title,
//! either as written or with the title's spaces removed. Like a real mall, results also
//! carry up to [`MAX_RELATED`] **related** listings that share at least one significant
//! token (two or more characters, not only digits) without being full matches.

use std::collections::HashSet;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;

/// The catalog shipped with the crate (`test-kit/catalog.toml`).
pub const BUILTIN_CATALOG_TOML: &str = include_str!("../catalog.toml");

/// At most this many loosely related listings are appended to a search's full matches.
pub const MAX_RELATED: usize = 4;

/// Paths a listing may not use because the mall serves them itself.
const RESERVED_PREFIXES: [&str; 7] = [
    "/search",
    "/api/",
    "/img/",
    "/fonts/",
    "/_control",
    "/openapi/",
    "/adcr",
];

/// Errors loading or validating a catalog.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The catalog file could not be read.
    #[error("cannot read catalog {path}: {source}")]
    Read {
        /// The file that was read.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The catalog is not valid TOML for this format.
    #[error("catalog is not valid: {0}")]
    Parse(#[from] toml::de::Error),
    /// The catalog parsed but breaks an invariant.
    #[error("catalog is invalid: {0}")]
    Invalid(String),
}

/// The mall markups the test kit can serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MallStyle {
    /// `알파몰`: list items, prices as `12,900원`.
    Alpha,
    /// `베타마켓`: cards, prices as `₩12,900`.
    Beta,
    /// `감마마켓`: inline JSON, placeholder cards, lazy loading, two pages and every card
    /// class of a real result page (see the `mall::gamma` module).
    Gamma,
}

impl MallStyle {
    /// Every style, in a fixed order.
    pub const ALL: [MallStyle; 3] = [MallStyle::Alpha, MallStyle::Beta, MallStyle::Gamma];

    /// The styles whose search page is a script shell that fetches `/api/search` (alpha,
    /// beta); gamma builds its page from inline JSON instead.
    pub const SHELL: [MallStyle; 2] = [MallStyle::Alpha, MallStyle::Beta];

    /// The lowercase name used in the catalog, on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            MallStyle::Alpha => "alpha",
            MallStyle::Beta => "beta",
            MallStyle::Gamma => "gamma",
        }
    }
}

impl fmt::Display for MallStyle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mall style name that is not `alpha`, `beta` or `gamma`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown mall style {0:?} (expected \"alpha\", \"beta\" or \"gamma\")")]
pub struct UnknownStyle(pub String);

impl FromStr for MallStyle {
    type Err = UnknownStyle;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "alpha" => Ok(MallStyle::Alpha),
            "beta" => Ok(MallStyle::Beta),
            "gamma" => Ok(MallStyle::Gamma),
            _ => Err(UnknownStyle(s.to_owned())),
        }
    }
}

/// What kind of offer a listing is. The names are LPS's card classes. Alpha and beta list
/// only [`ListingKind::Normal`]; gamma marks the others on its cards and in its JSON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ListingKind {
    /// An ordinary offer.
    #[default]
    Normal,
    /// A paid placement (`광고`), shown first, linked through a click redirect.
    Ad,
    /// An option listing (`[택1]`, `골라담기`): the price is the cheapest option's, `5,900원~`.
    OptionListing,
    /// Overseas direct purchase (`해외직구`).
    Overseas,
    /// Used or refurbished (`중고`, `리퍼`).
    Used,
    /// Sold out (`품절`): shown, but cannot be bought.
    SoldOut,
    /// A catalog (price-comparison) card: one product over several sellers (`판매처 12`),
    /// priced at the lowest of them.
    Catalog,
}

impl ListingKind {
    /// Every kind but [`ListingKind::Normal`].
    pub const MARKED: [ListingKind; 6] = [
        ListingKind::Ad,
        ListingKind::OptionListing,
        ListingKind::Overseas,
        ListingKind::Used,
        ListingKind::SoldOut,
        ListingKind::Catalog,
    ];

    /// The catalog's (and LPS's card class) name, e.g. `sold_out`.
    pub fn as_str(self) -> &'static str {
        match self {
            ListingKind::Normal => "normal",
            ListingKind::Ad => "ad",
            ListingKind::OptionListing => "option_listing",
            ListingKind::Overseas => "overseas",
            ListingKind::Used => "used",
            ListingKind::SoldOut => "sold_out",
            ListingKind::Catalog => "catalog",
        }
    }
}

/// How a card states its shipping. Alpha and beta state only [`Delivery::Fee`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// `무료배송` when `shipping` is 0, else `배송비 3,000원`.
    #[default]
    Fee,
    /// `2만원 이상 무료배송`, no fee stated: free when the price reaches `free_over`,
    /// unknown below it.
    FreeOver,
    /// `배송비 3,000원 (2만원 이상 무료)`: free when the price reaches `free_over`, else
    /// `shipping`.
    FeeFreeOver,
    /// No shipping on the card at all: unknown.
    Missing,
}

/// One product as one mall lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listing {
    /// Unique over the catalog; also the image name `/img/<id>.jpg`.
    pub id: String,
    /// Which mall style lists it.
    pub mall: MallStyle,
    /// Title as the mall shows it (in full; see `title_cut`).
    pub title: String,
    /// Price in KRW (the sale price of a time deal; an option listing's cheapest option).
    pub price: u64,
    /// Shipping fee in KRW as the card states it; 0 means free shipping (`무료배송`).
    /// 0 (the default) when `delivery` states no fee.
    #[serde(default)]
    pub shipping: u64,
    /// Seller name.
    pub seller: String,
    /// Detail page path on the mall, e.g. `/goods/a101`.
    pub path: String,
    /// What kind of offer this is (gamma only; default `normal`).
    #[serde(default)]
    pub kind: ListingKind,
    /// Struck-out list price of a time deal, above `price` (gamma only).
    #[serde(default)]
    pub list_price: Option<u64>,
    /// How the card states shipping (gamma only; default `fee`).
    #[serde(default)]
    pub delivery: Delivery,
    /// Free-shipping threshold in KRW of a `free_over` or `fee_free_over` delivery.
    #[serde(default)]
    pub free_over: Option<u64>,
    /// The card shows only this many characters of the title and `…`, the full title in
    /// the element's `title` attribute (gamma only).
    #[serde(default)]
    pub title_cut: Option<usize>,
    /// Number of sellers of a `catalog` card (`판매처 12`).
    #[serde(default)]
    pub seller_count: Option<u32>,
}

impl Listing {
    /// The shipping fee the card states for this price: `None` when it states none
    /// (`free_over` below the threshold, `missing`).
    pub fn shipping_fee(&self) -> Option<u64> {
        let reaches = self.free_over.is_some_and(|t| self.price >= t);
        match self.delivery {
            Delivery::Fee => Some(self.shipping),
            Delivery::FreeOver => reaches.then_some(0),
            Delivery::FeeFreeOver => Some(if reaches { 0 } else { self.shipping }),
            Delivery::Missing => None,
        }
    }

    /// Price plus the stated shipping fee: what the buyer pays. An unknown fee counts as 0
    /// here (the too-low reading); [`Listing::counts_for_lowest`] says whether to trust it.
    pub fn effective_price(&self) -> u64 {
        self.price + self.shipping_fee().unwrap_or(0)
    }

    /// Whether the listing can be a product's true lowest: a normal offer (not an ad,
    /// option listing, overseas, used, sold-out or catalog card) with known shipping.
    pub fn counts_for_lowest(&self) -> bool {
        self.kind == ListingKind::Normal && self.shipping_fee().is_some()
    }

    /// The title as the card shows it: cut to `title_cut` characters and `…`, or in full.
    pub fn display_title(&self) -> String {
        match self.title_cut {
            Some(n) if n < self.title.chars().count() => {
                let mut cut: String = self.title.chars().take(n).collect();
                cut.push('…');
                cut
            }
            _ => self.title.clone(),
        }
    }

    /// Path of the listing's product image.
    pub fn image_path(&self) -> String {
        format!("/img/{}.jpg", self.id)
    }

    fn priced(&self) -> PricedListing<'_> {
        PricedListing {
            listing: self,
            effective_price: self.effective_price(),
        }
    }
}

/// One real-world product and its listings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Product {
    /// Stable key, e.g. `samdasoo-2l-12`.
    pub key: String,
    /// Brand name.
    pub brand: String,
    /// Canonical name, the query a client starts with.
    pub name: String,
    /// Set on near-miss decoys: the key of the product they imitate.
    #[serde(default)]
    pub decoy_of: Option<String>,
    /// The product in each mall that lists it (gamma: several sellers).
    pub listings: Vec<Listing>,
}

impl Product {
    /// The first listing of this product in `mall`, if that mall lists it.
    pub fn listing(&self, mall: MallStyle) -> Option<&Listing> {
        self.listings.iter().find(|l| l.mall == mall)
    }

    /// The listings of this product in `mall`, in file order.
    pub fn listings_in(&self, mall: MallStyle) -> impl Iterator<Item = &Listing> {
        self.listings.iter().filter(move |l| l.mall == mall)
    }

    /// The listing with the lowest effective price over all malls, among the listings
    /// that [count](Listing::counts_for_lowest).
    pub fn lowest(&self) -> Option<&Listing> {
        lowest_of(self.listings.iter()).map(|p| p.listing)
    }

    /// The truth about this product in one mall; `None` when that mall does not list it.
    pub fn truth(&self, mall: MallStyle) -> Option<Truth<'_>> {
        self.listing(mall)?;
        let lowest = lowest_of(self.listings_in(mall));
        let possibly_lower = self
            .listings_in(mall)
            .filter(|l| l.kind == ListingKind::Normal && l.shipping_fee().is_none())
            .filter(|l| lowest.is_none_or(|low| l.price < low.effective_price))
            .min_by_key(|l| l.price)
            .map(Listing::priced);
        Some(Truth {
            lowest,
            possibly_lower,
        })
    }
}

fn lowest_of<'a>(listings: impl Iterator<Item = &'a Listing>) -> Option<PricedListing<'a>> {
    listings
        .filter(|l| l.counts_for_lowest())
        .min_by_key(|l| l.effective_price())
        .map(Listing::priced)
}

/// A listing and its effective price (for unknown shipping: the price alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PricedListing<'a> {
    /// The listing.
    pub listing: &'a Listing,
    /// [`Listing::effective_price`].
    pub effective_price: u64,
}

/// What a correct reading of one mall must report for one product ([`Catalog::truth`];
/// the rules are in the header of `catalog.toml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truth<'a> {
    /// The lowest effective price over the listings that
    /// [count](Listing::counts_for_lowest); `None` when none does.
    pub lowest: Option<PricedListing<'a>>,
    /// The cheapest normal listing with unknown shipping whose price is below `lowest`:
    /// "possibly lower, shipping unknown", never the answer.
    pub possibly_lower: Option<PricedListing<'a>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    products: Vec<Product>,
}

/// How a search result relates to the query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Relevance {
    /// Every query token is in the title.
    Full,
    /// Shares a significant token only (what real malls pad results with).
    Related,
}

/// One search result.
#[derive(Debug, Clone, Copy)]
pub struct SearchHit<'a> {
    /// The listing found.
    pub listing: &'a Listing,
    /// Full match or related.
    pub relevance: Relevance,
}

/// A validated, immutable catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    products: Vec<Product>,
}

impl Catalog {
    /// The catalog shipped with the crate.
    pub fn builtin() -> Catalog {
        // NB: the builtin file is a compile-time constant; the unit test
        // `builtin_catalog_is_valid` guarantees this cannot fail.
        Catalog::from_toml_str(BUILTIN_CATALOG_TOML).expect("builtin catalog.toml is valid")
    }

    /// Parses and validates a catalog from TOML text.
    pub fn from_toml_str(text: &str) -> Result<Catalog, CatalogError> {
        let file: CatalogFile = toml::from_str(text)?;
        let catalog = Catalog {
            products: file.products,
        };
        catalog.validate()?;
        Ok(catalog)
    }

    /// Reads, parses and validates a catalog file.
    pub fn load(path: impl AsRef<Path>) -> Result<Catalog, CatalogError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| CatalogError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Catalog::from_toml_str(&text)
    }

    /// All products, decoys included, in file order.
    pub fn products(&self) -> &[Product] {
        &self.products
    }

    /// The product with this key.
    pub fn product(&self, key: &str) -> Option<&Product> {
        self.products.iter().find(|p| p.key == key)
    }

    /// All listings of one mall, in file order.
    pub fn listings(&self, mall: MallStyle) -> impl Iterator<Item = &Listing> {
        self.products
            .iter()
            .flat_map(|p| p.listings.iter())
            .filter(move |l| l.mall == mall)
    }

    /// The listing of `mall` with this id.
    pub fn listing_by_id(&self, mall: MallStyle, id: &str) -> Option<&Listing> {
        self.listings(mall).find(|l| l.id == id)
    }

    /// The listing of `mall` whose detail page is `path`.
    pub fn listing_by_path(&self, mall: MallStyle, path: &str) -> Option<&Listing> {
        self.listings(mall).find(|l| l.path == path)
    }

    /// The truth about product `key` in `mall` (see [`Truth`]); `None` when there is no
    /// such product or `mall` does not list it.
    pub fn truth(&self, mall: MallStyle, key: &str) -> Option<Truth<'_>> {
        self.product(key)?.truth(mall)
    }

    /// The product a listing belongs to.
    pub fn product_of(&self, listing_id: &str) -> Option<&Product> {
        self.products
            .iter()
            .find(|p| p.listings.iter().any(|l| l.id == listing_id))
    }

    /// Searches one mall the way the mall itself does (see the module doc): full matches
    /// first, then up to [`MAX_RELATED`] related listings, each group in file order.
    pub fn search(&self, mall: MallStyle, query: &str) -> Vec<SearchHit<'_>> {
        let tokens = query_tokens(query);
        if tokens.is_empty() {
            return Vec::new();
        }
        let mut full = Vec::new();
        let mut related = Vec::new();
        for listing in self.listings(mall) {
            let title = NormalizedTitle::new(&listing.title);
            if tokens.iter().all(|t| title.contains(t)) {
                full.push(SearchHit {
                    listing,
                    relevance: Relevance::Full,
                });
            } else if related.len() < MAX_RELATED
                && tokens
                    .iter()
                    .any(|t| is_significant(t) && title.contains(t))
            {
                related.push(SearchHit {
                    listing,
                    relevance: Relevance::Related,
                });
            }
        }
        full.extend(related);
        full
    }

    fn validate(&self) -> Result<(), CatalogError> {
        let mut ids = HashSet::new();
        let mut paths = HashSet::new();
        let keys: HashSet<&str> = self.products.iter().map(|p| p.key.as_str()).collect();
        if keys.len() != self.products.len() {
            return invalid("product keys are not unique".to_owned());
        }
        for product in &self.products {
            validate_product(product, &keys)?;
            for listing in &product.listings {
                validate_listing(listing)?;
                if !ids.insert(listing.id.as_str()) {
                    return invalid(format!("listing id {:?} is used twice", listing.id));
                }
                if !paths.insert((listing.mall, listing.path.as_str())) {
                    return invalid(format!("path {:?} is used twice", listing.path));
                }
            }
        }
        Ok(())
    }
}

fn invalid<T>(message: String) -> Result<T, CatalogError> {
    Err(CatalogError::Invalid(message))
}

fn validate_product(product: &Product, keys: &HashSet<&str>) -> Result<(), CatalogError> {
    if product.key.trim().is_empty() {
        return invalid("a product has an empty key".to_owned());
    }
    if product.listings.is_empty() {
        return invalid(format!("product {:?} has no listings", product.key));
    }
    match &product.decoy_of {
        Some(of) if !keys.contains(of.as_str()) => invalid(format!(
            "product {:?} is decoy_of unknown product {of:?}",
            product.key
        )),
        _ => Ok(()),
    }
}

fn validate_listing(listing: &Listing) -> Result<(), CatalogError> {
    let id_ok = !listing.id.is_empty()
        && listing
            .id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !id_ok {
        return invalid(format!("listing id {:?} is not [A-Za-z0-9_-]+", listing.id));
    }
    if listing.title.trim().is_empty() || listing.seller.trim().is_empty() {
        return invalid(format!(
            "listing {:?} has an empty title or seller",
            listing.id
        ));
    }
    if listing.price == 0 {
        return invalid(format!("listing {:?} has price 0", listing.id));
    }
    let path_ok = listing.path.starts_with('/')
        && listing.path.len() > 1
        && !listing.path.contains(['?', '#', ' '])
        && !RESERVED_PREFIXES
            .iter()
            .any(|p| listing.path.starts_with(p));
    if !path_ok {
        return invalid(format!(
            "listing {:?} has an unusable path {:?}",
            listing.id, listing.path
        ));
    }
    validate_marks(listing)
}

/// Kinds, deliveries, list prices, cut titles and seller counts: only gamma shows them,
/// and each needs its companion fields.
fn validate_marks(l: &Listing) -> Result<(), CatalogError> {
    let id = &l.id;
    let marked = l.kind != ListingKind::Normal
        || l.delivery != Delivery::Fee
        || l.list_price.is_some()
        || l.free_over.is_some()
        || l.title_cut.is_some()
        || l.seller_count.is_some();
    if marked && l.mall != MallStyle::Gamma {
        return invalid(format!(
            "listing {id:?}: kind, delivery, list_price, free_over, title_cut and seller_count are gamma-only"
        ));
    }
    if l.list_price.is_some_and(|lp| lp <= l.price) {
        return invalid(format!("listing {id:?}: list_price must exceed price"));
    }
    if l.title_cut
        .is_some_and(|n| n == 0 || n >= l.title.chars().count())
    {
        return invalid(format!("listing {id:?}: title_cut must be 1..title length"));
    }
    if (l.kind == ListingKind::Catalog) != l.seller_count.is_some_and(|n| n >= 2) {
        return invalid(format!(
            "listing {id:?}: a catalog card, and only one, has seller_count >= 2"
        ));
    }
    let threshold = matches!(l.delivery, Delivery::FreeOver | Delivery::FeeFreeOver);
    if threshold != l.free_over.is_some_and(|t| t > 0) {
        return invalid(format!(
            "listing {id:?}: free_over (> 0) goes with delivery free_over or fee_free_over"
        ));
    }
    let fee_stated = match l.delivery {
        Delivery::Fee => true,
        Delivery::FeeFreeOver => l.shipping > 0,
        Delivery::FreeOver | Delivery::Missing => l.shipping == 0,
    };
    if !fee_stated {
        return invalid(format!(
            "listing {id:?}: shipping must be > 0 for fee_free_over and 0 when no fee is stated"
        ));
    }
    Ok(())
}

/// NFKC then lowercase: the mall's (and a reasonable client's) first normalisation step.
pub fn normalize(text: &str) -> String {
    text.nfkc().collect::<String>().to_lowercase()
}

/// The query tokens a mall matches on: normalised, whitespace-separated, with bare
/// multiplication signs dropped.
pub fn query_tokens(query: &str) -> Vec<String> {
    normalize(query)
        .split_whitespace()
        .filter(|t| !matches!(*t, "x" | "*" | "×"))
        .map(str::to_owned)
        .collect()
}

fn is_significant(token: &str) -> bool {
    token.chars().count() >= 2 && !token.chars().all(|c| c.is_ascii_digit())
}

struct NormalizedTitle {
    spaced: String,
    compact: String,
}

impl NormalizedTitle {
    fn new(title: &str) -> NormalizedTitle {
        let spaced = normalize(title);
        let compact = spaced.split_whitespace().collect();
        NormalizedTitle { spaced, compact }
    }

    fn contains(&self, token: &str) -> bool {
        self.spaced.contains(token) || self.compact.contains(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(hits: &[SearchHit<'_>], relevance: Relevance) -> Vec<String> {
        hits.iter()
            .filter(|h| h.relevance == relevance)
            .map(|h| h.listing.id.clone())
            .collect()
    }

    #[test]
    fn builtin_catalog_is_valid() {
        let catalog = Catalog::from_toml_str(BUILTIN_CATALOG_TOML).expect("valid");
        let real = catalog
            .products()
            .iter()
            .filter(|p| p.decoy_of.is_none())
            .count();
        assert!(real >= 12, "at least 12 real products, got {real}");
        for product in catalog.products().iter().filter(|p| p.decoy_of.is_none()) {
            assert!(
                product.listing(MallStyle::Alpha).is_some(),
                "{}",
                product.key
            );
            assert!(
                product.listing(MallStyle::Beta).is_some(),
                "{}",
                product.key
            );
        }
    }

    #[test]
    fn builtin_has_free_and_paid_shipping_in_both_malls() {
        let catalog = Catalog::builtin();
        for mall in MallStyle::ALL {
            assert!(catalog.listings(mall).any(|l| l.shipping == 0));
            assert!(catalog.listings(mall).any(|l| l.shipping > 0));
        }
    }

    #[test]
    fn full_match_needs_every_token() {
        let catalog = Catalog::builtin();
        let hits = catalog.search(MallStyle::Alpha, "삼다수 2L x 12");
        assert_eq!(ids(&hits, Relevance::Full), ["a101"]);
        let related = ids(&hits, Relevance::Related);
        assert!(related.contains(&"a151".to_owned()), "{related:?}");
        assert!(related.contains(&"a152".to_owned()), "{related:?}");
    }

    #[test]
    fn matching_is_nfkc_and_case_insensitive() {
        let catalog = Catalog::builtin();
        // Full-width letters and a lowercase unit.
        let hits = catalog.search(MallStyle::Beta, "코카콜라 ５００ＭＬ 24개");
        assert_eq!(ids(&hits, Relevance::Full), ["b202"]);
    }

    #[test]
    fn spaces_in_titles_do_not_hide_a_token() {
        let catalog = Catalog::builtin();
        let hits = catalog.search(MallStyle::Beta, "테크 액체세제 3L");
        assert_eq!(ids(&hits, Relevance::Full), ["b207"]);
    }

    #[test]
    fn unknown_product_finds_nothing() {
        let catalog = Catalog::builtin();
        assert!(
            catalog
                .search(MallStyle::Alpha, "존재하지않는상품")
                .is_empty()
        );
        assert!(catalog.search(MallStyle::Alpha, "   ").is_empty());
    }

    #[test]
    fn related_is_capped() {
        let catalog = Catalog::builtin();
        let hits = catalog.search(MallStyle::Alpha, "zzz 120g");
        assert!(ids(&hits, Relevance::Full).is_empty());
        assert!(ids(&hits, Relevance::Related).len() <= MAX_RELATED);
        assert!(!hits.is_empty());
    }

    #[test]
    fn lowest_uses_effective_price() {
        let catalog = Catalog::builtin();
        let product = catalog.product("samdasoo-2l-12").expect("product");
        // beta is cheaper before shipping, alpha after.
        assert_eq!(product.lowest().map(|l| l.id.as_str()), Some("a101"));
    }

    #[test]
    fn rejects_duplicate_ids_and_reserved_paths() {
        let dup = r#"
            [[products]]
            key = "p"
            brand = "b"
            name = "n"
            [[products.listings]]
            id = "x1"
            mall = "alpha"
            title = "t"
            price = 1
            shipping = 0
            seller = "s"
            path = "/p/1"
            [[products.listings]]
            id = "x1"
            mall = "beta"
            title = "t"
            price = 1
            shipping = 0
            seller = "s"
            path = "/p/1"
        "#;
        assert!(matches!(
            Catalog::from_toml_str(dup),
            Err(CatalogError::Invalid(_))
        ));
        let reserved = dup.replacen("x1", "x2", 1).replacen("/p/1", "/search/x", 1);
        assert!(matches!(
            Catalog::from_toml_str(&reserved),
            Err(CatalogError::Invalid(_))
        ));
    }

    #[test]
    fn style_parses() {
        assert_eq!("Alpha".parse::<MallStyle>().ok(), Some(MallStyle::Alpha));
        assert_eq!(" gamma".parse::<MallStyle>().ok(), Some(MallStyle::Gamma));
        assert!("delta".parse::<MallStyle>().is_err());
    }

    fn gamma(catalog: &Catalog, id: &str) -> Listing {
        catalog
            .listing_by_id(MallStyle::Gamma, id)
            .unwrap_or_else(|| panic!("{id}"))
            .clone()
    }

    #[test]
    fn shipping_fee_follows_the_stated_delivery() {
        let catalog = Catalog::builtin();
        let fee = |id: &str| gamma(&catalog, id).shipping_fee();
        assert_eq!(fee("g103"), Some(3000), "fixed fee");
        assert_eq!(fee("g307"), Some(0), "free");
        assert_eq!(fee("g601"), None, "2만원 이상 무료배송 on 4,200원");
        assert_eq!(fee("g504"), Some(0), "2만원 이상 무료배송 on 29,500원");
        assert_eq!(
            fee("g501"),
            Some(0),
            "배송비 3,000원 (2만원 이상 무료) on 27,900원"
        );
        assert_eq!(fee("g605"), Some(3000), "the same on 4,800원");
        assert_eq!(fee("g602"), None, "no shipping on the card");
        let missing = gamma(&catalog, "g602");
        assert_eq!(missing.effective_price(), 3700, "unknown counts as 0 there");
        assert!(!missing.counts_for_lowest());
    }

    #[test]
    fn gamma_truths_are_as_the_catalog_comments_say() {
        let catalog = Catalog::builtin();
        let expected = [
            ("samdasoo-2l-12", "g113", 13_200, None),
            ("shin-ramyun-120g-5", "g225", 7_400, None),
            ("hetbahn-210g-12", "g307", 14_900, None),
            ("coca-cola-500ml-24", "g402", 23_500, None),
            ("kleenex-3ply-30roll", "g501", 27_900, None),
            (
                "jin-ramen-mild-120g-5",
                "g603",
                4_500,
                Some(("g602", 3_700)),
            ),
            ("spam-classic-200g-10", "g701", 33_500, None),
        ];
        for (key, id, price, possibly) in expected {
            let truth = catalog.truth(MallStyle::Gamma, key).expect(key);
            let lowest = truth.lowest.expect(key);
            assert_eq!(
                (lowest.listing.id.as_str(), lowest.effective_price),
                (id, price),
                "{key}"
            );
            let possibly_lower = truth
                .possibly_lower
                .map(|p| (p.listing.id.as_str(), p.effective_price));
            assert_eq!(possibly_lower, possibly, "{key}");
        }
        assert!(catalog.truth(MallStyle::Gamma, "seoul-milk-1l-2").is_none());
        assert!(catalog.truth(MallStyle::Gamma, "no-such-product").is_none());
        let alpha = catalog
            .truth(MallStyle::Alpha, "samdasoo-2l-12")
            .expect("alpha");
        assert_eq!(alpha.lowest.map(|l| l.listing.id.as_str()), Some("a101"));
    }

    #[test]
    fn gamma_never_changes_the_cross_mall_lowest() {
        // NB: other crates' browser tests compare what they read from alpha and beta with
        // Product::lowest, so gamma must never hold the cross-mall lowest.
        let catalog = Catalog::builtin();
        for product in catalog.products() {
            let Some(gamma) = product.truth(MallStyle::Gamma) else {
                continue;
            };
            let classic = lowest_of(
                product
                    .listings
                    .iter()
                    .filter(|l| l.mall != MallStyle::Gamma),
            );
            if let (Some(classic), Some(gamma)) = (classic, gamma.lowest) {
                assert!(
                    gamma.effective_price > classic.effective_price,
                    "{}",
                    product.key
                );
                assert_eq!(product.lowest(), Some(classic.listing));
            }
        }
    }

    /// The lowest a reader arrives at when it reads every gamma listing of `key` as
    /// `read` says (None = leaves it out).
    fn naive(catalog: &Catalog, key: &str, read: impl Fn(&Listing) -> Option<u64>) -> String {
        let product = catalog.product(key).expect(key);
        product
            .listings_in(MallStyle::Gamma)
            .filter_map(|l| read(l).map(|price| (price, l.id.clone())))
            .min()
            .map(|(_, id)| id)
            .expect("some listing")
    }

    fn honest(l: &Listing) -> Option<u64> {
        l.counts_for_lowest().then(|| l.effective_price())
    }

    #[test]
    fn every_trap_is_the_naive_answer_of_a_product() {
        let catalog = Catalog::builtin();
        let key = "hetbahn-210g-12";
        assert_eq!(naive(&catalog, key, honest), "g307");
        for (kind, trap) in [
            (ListingKind::Ad, "g301"),
            (ListingKind::OptionListing, "g302"),
            (ListingKind::Used, "g303"),
            (ListingKind::SoldOut, "g304"),
        ] {
            let counted = |l: &Listing| {
                (l.kind == kind)
                    .then(|| l.effective_price())
                    .or_else(|| honest(l))
            };
            assert_eq!(naive(&catalog, key, counted), trap, "{kind:?}");
        }
        for kind in [ListingKind::Overseas, ListingKind::Catalog] {
            let flagged = |l: &Listing| {
                (l.kind == kind)
                    .then(|| l.effective_price())
                    .or_else(|| honest(l))
            };
            assert_eq!(naive(&catalog, key, flagged), "g307", "{kind:?} is dearer");
        }
        let unknown_as_free = |l: &Listing| {
            (l.kind == ListingKind::Normal).then(|| l.price + l.shipping_fee().unwrap_or(0))
        };
        assert_eq!(
            naive(&catalog, "jin-ramen-mild-120g-5", unknown_as_free),
            "g602"
        );
        let threshold_as_free = |l: &Listing| match l.delivery {
            Delivery::FreeOver => Some(l.price),
            Delivery::Missing => None,
            _ => honest(l),
        };
        assert_eq!(
            naive(&catalog, "jin-ramen-mild-120g-5", threshold_as_free),
            "g601"
        );
        let fee_ignored = |l: &Listing| l.counts_for_lowest().then_some(l.price);
        assert_eq!(naive(&catalog, "samdasoo-2l-12", fee_ignored), "g103");
        let fee_always_added = |l: &Listing| honest(l).map(|_| l.price + l.shipping);
        assert_eq!(
            naive(&catalog, "kleenex-3ply-30roll", fee_always_added),
            "g502"
        );
        let list_price_read = |l: &Listing| honest(l).map(|p| l.list_price.unwrap_or(p));
        assert_eq!(
            naive(&catalog, "coca-cola-500ml-24", list_price_read),
            "g403"
        );
        let spam = catalog.product("spam-classic-200g-10").expect("spam");
        let cut_read = |l: &Listing| {
            let shown = NormalizedTitle::new(&l.display_title());
            let matches = query_tokens(&spam.name).iter().all(|t| shown.contains(t));
            honest(l).filter(|_| matches)
        };
        assert_eq!(naive(&catalog, &spam.key, cut_read), "g702");
    }

    #[test]
    fn display_title_cuts_at_a_character() {
        let catalog = Catalog::builtin();
        assert_eq!(
            gamma(&catalog, "g701").display_title(),
            "CJ 스팸 클래식 200g x 1…"
        );
        assert_eq!(
            gamma(&catalog, "g703").display_title(),
            "스팸 클래식 200g 10개…"
        );
        assert_eq!(
            gamma(&catalog, "g702").display_title(),
            "스팸 클래식 200g 10개"
        );
    }

    #[test]
    fn gamma_marks_are_checked() {
        let base = r#"
            [[products]]
            key = "p"
            brand = "b"
            name = "n"
            [[products.listings]]
            id = "x1"
            mall = "MALL"
            title = "a long enough title"
            price = 1000
            shipping = 0
            seller = "s"
            path = "/p/1"
            EXTRA
        "#;
        let load = |mall: &str, extra: &str| {
            Catalog::from_toml_str(&base.replace("MALL", mall).replace("EXTRA", extra))
        };
        assert!(load("gamma", "kind = \"ad\"\nlist_price = 2000\ntitle_cut = 5").is_ok());
        for extra in [
            "kind = \"ad\"",
            "list_price = 2000",
            "delivery = \"missing\"",
            "title_cut = 3",
        ] {
            assert!(
                matches!(load("alpha", extra), Err(CatalogError::Invalid(_))),
                "alpha with {extra}"
            );
        }
        for extra in [
            "list_price = 1000",
            "title_cut = 99",
            "kind = \"catalog\"",
            "seller_count = 3",
            "delivery = \"free_over\"",
            "free_over = 20000",
            "delivery = \"fee_free_over\"\nfree_over = 20000",
            "kind = \"coupon\"",
        ] {
            assert!(load("gamma", extra).is_err(), "gamma with {extra}");
        }
        assert!(load("gamma", "kind = \"catalog\"\nseller_count = 3").is_ok());
        assert!(load("gamma", "delivery = \"free_over\"\nfree_over = 20000").is_ok());
    }
}
