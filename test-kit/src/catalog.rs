//! The fixture catalog: what the test malls sell, and how a mall searches it.
//!
//! Owns the catalog file format (TOML, see `test-kit/catalog.toml`), its validation and
//! the mall-side search. A [`Catalog`] is immutable once loaded; malls share it by `Arc`.
//!
//! Invariants checked on load: listing ids are unique over the catalog and made of
//! `[A-Za-z0-9_-]`; detail paths start with `/`, are unique per mall and do not collide
//! with the mall's own routes; `decoy_of` names an existing product; prices are positive.
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
const RESERVED_PREFIXES: [&str; 5] = ["/search", "/api/", "/img/", "/fonts/", "/_control"];

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

/// The two mall markups the test kit can serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MallStyle {
    /// `알파몰`: list items, prices as `12,900원`.
    Alpha,
    /// `베타마켓`: cards, prices as `₩12,900`.
    Beta,
}

impl MallStyle {
    /// Both styles, in a fixed order.
    pub const ALL: [MallStyle; 2] = [MallStyle::Alpha, MallStyle::Beta];

    /// The lowercase name used in the catalog, on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            MallStyle::Alpha => "alpha",
            MallStyle::Beta => "beta",
        }
    }
}

impl fmt::Display for MallStyle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mall style name that is neither `alpha` nor `beta`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown mall style {0:?} (expected \"alpha\" or \"beta\")")]
pub struct UnknownStyle(pub String);

impl FromStr for MallStyle {
    type Err = UnknownStyle;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "alpha" => Ok(MallStyle::Alpha),
            "beta" => Ok(MallStyle::Beta),
            _ => Err(UnknownStyle(s.to_owned())),
        }
    }
}

/// One product as one mall lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listing {
    /// Unique over the catalog; also the image name `/img/<id>.jpg`.
    pub id: String,
    /// Which mall style lists it.
    pub mall: MallStyle,
    /// Title as the mall shows it.
    pub title: String,
    /// Price in KRW.
    pub price: u64,
    /// Shipping fee in KRW; 0 means free shipping (`무료배송`).
    pub shipping: u64,
    /// Seller name.
    pub seller: String,
    /// Detail page path on the mall, e.g. `/goods/a101`.
    pub path: String,
}

impl Listing {
    /// Price plus shipping: what the buyer pays.
    pub fn effective_price(&self) -> u64 {
        self.price + self.shipping
    }

    /// Path of the listing's product image.
    pub fn image_path(&self) -> String {
        format!("/img/{}.jpg", self.id)
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
    /// The product in each mall that lists it.
    pub listings: Vec<Listing>,
}

impl Product {
    /// The listing of this product in `mall`, if that mall lists it.
    pub fn listing(&self, mall: MallStyle) -> Option<&Listing> {
        self.listings.iter().find(|l| l.mall == mall)
    }

    /// The listing with the lowest effective price over all malls.
    pub fn lowest(&self) -> Option<&Listing> {
        self.listings.iter().min_by_key(|l| l.effective_price())
    }
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
        assert!("gamma".parse::<MallStyle>().is_err());
    }
}
