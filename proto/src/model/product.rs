//! The product a caller asks about: its code, its name and the caller's hints (brand,
//! model code, GTIN), validated once on receive — by the coordinator from a search or a
//! schedule, by the node from an Assign — so queue and judge code never re-check them.
//!
//! A product has two keys (DESIGN §2 "Identity"). [`ProductSpec::identity`] (code, else
//! the folded name) names the product within its client: with the client it keys what a
//! caller sees (its searches' products, price history). [`ProductSpec::crawl_key`] (the
//! folded name) names the crawl: with [`ProductSpec::hints_key`], which changes how cards
//! are judged, the queue builds dedupe keys, and so the fresh-result and negative caches,
//! from it (DESIGN §2 "Dedupe"). So crawl work is shared across clients only when it is
//! the same crawl, never because two codes are equal, and an answer judged under one set
//! of hints never answers a request with another.

use super::{FieldError, MAX_PRODUCT_CODE_CHARS, MAX_PRODUCT_NAME_CHARS, check_len};
use crate::pb;

/// Longest brand hint, in characters.
pub const MAX_BRAND_CHARS: usize = 64;
/// Longest model-code hint, in characters.
pub const MAX_MODEL_CODE_CHARS: usize = 64;

/// The product someone wants the lowest price of.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProductSpec {
    code: Option<String>,
    name: String,
    hints: ProductHints,
}

impl ProductSpec {
    /// `name`: 1..=200 characters after trimming; `code`: optional, 1..=64 characters of
    /// `[A-Za-z0-9._:-]`. No hints (see [`with_hints`](Self::with_hints)).
    pub fn new(code: Option<&str>, name: &str) -> Result<Self, FieldError> {
        let name = name.trim();
        check_len("name", name, MAX_PRODUCT_NAME_CHARS)?;
        if name.chars().any(char::is_control) {
            return Err(FieldError::new(
                "name",
                "must not contain control characters",
            ));
        }
        // NB: zero-width spaces, joiners, BOMs and direction marks are not white space to
        // `trim`, and a name of them (or of punctuation alone) leaves nothing to search for.
        if !name.chars().any(char::is_alphanumeric) {
            return Err(FieldError::new(
                "name",
                "must contain a letter or a digit (it holds only spaces, invisible characters or punctuation)",
            ));
        }
        let code = match code.map(str::trim) {
            None | Some("") => None,
            Some(code) => {
                check_len("code", code, MAX_PRODUCT_CODE_CHARS)?;
                if !code
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
                {
                    return Err(FieldError::new(
                        "code",
                        "only letters, digits, '.', '_', ':' and '-' are allowed",
                    ));
                }
                Some(code.to_owned())
            }
        };
        Ok(Self {
            code,
            name: name.to_owned(),
            hints: ProductHints::default(),
        })
    }

    /// The same product with the caller's hints.
    #[must_use]
    pub fn with_hints(mut self, hints: ProductHints) -> Self {
        self.hints = hints;
        self
    }

    pub fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn hints(&self) -> &ProductHints {
        &self.hints
    }

    /// The stable identity of the product within its client: `code:<code>` when it has a
    /// code, else `name:<name>` with case folded and white space collapsed. A client's
    /// price history is keyed by it, so a product whose name a client changes keeps its
    /// history under its code.
    pub fn identity(&self) -> String {
        match &self.code {
            Some(code) => format!("code:{code}"),
            None => self.crawl_key(),
        }
    }

    /// What is crawled for the product: `name:<name>` with case folded and white space
    /// collapsed, whatever its code (the identity of a product without one). With
    /// [`hints_key`](Self::hints_key) it makes the job's dedupe key.
    pub fn crawl_key(&self) -> String {
        format!("name:{}", fold(&self.name))
    }

    /// The hints' part of the job identity (see [`ProductHints::key`]).
    pub fn hints_key(&self) -> Option<String> {
        self.hints.key()
    }
}

impl TryFrom<&pb::Product> for ProductSpec {
    type Error = FieldError;

    /// Fields are named as the message spells them (`name`, `gtin`); a caller adds the
    /// path above (`products[3]`).
    fn try_from(p: &pb::Product) -> Result<Self, FieldError> {
        let hints = ProductHints::new(&p.brand, &p.model_code, &p.gtin)?;
        Ok(Self::new(Some(&p.code), &p.name)?.with_hints(hints))
    }
}

impl From<&ProductSpec> for pb::Product {
    fn from(p: &ProductSpec) -> Self {
        p.hints.to_pb(p.code().unwrap_or_default(), p.name())
    }
}

/// A caller's hints about a product (all optional): what a catalog knows and a title may
/// not say. Valid by construction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ProductHints {
    brand: Option<String>,
    model_code: Option<String>,
    gtin: Option<String>,
}

impl ProductHints {
    /// Each argument is the wire's string: empty (after trimming) means not given.
    /// - `brand`: 1..=64 characters, no control characters, a letter or a digit;
    /// - `model_code`: 1..=64 characters of letters, digits, spaces and `-_./+()`, a
    ///   letter or a digit;
    /// - `gtin`: see [`Gtin::parse`]; stored as its digits (spaces and hyphens dropped).
    pub fn new(brand: &str, model_code: &str, gtin: &str) -> Result<Self, FieldError> {
        let brand = match collapse(brand) {
            b if b.is_empty() => None,
            b => {
                check_len("brand", &b, MAX_BRAND_CHARS)?;
                if brand.trim().chars().any(char::is_control) {
                    return Err(FieldError::new(
                        "brand",
                        "must not contain control characters",
                    ));
                }
                if !b.chars().any(char::is_alphanumeric) {
                    return Err(FieldError::new("brand", "must contain a letter or a digit"));
                }
                Some(b)
            }
        };
        let model_code = match collapse(model_code) {
            m if m.is_empty() => None,
            m => {
                check_len("model_code", &m, MAX_MODEL_CODE_CHARS)?;
                if model_code.trim().chars().any(char::is_control) {
                    return Err(FieldError::new(
                        "model_code",
                        "must not contain control characters",
                    ));
                }
                if let Some(c) = m
                    .chars()
                    .find(|&c| !(c.is_alphanumeric() || " -_./+()".contains(c)))
                {
                    return Err(FieldError::new(
                        "model_code",
                        format!(
                            "{c:?} is not allowed (letters, digits, spaces and \"-_./+()\" are)"
                        ),
                    ));
                }
                if !m.chars().any(char::is_alphanumeric) {
                    return Err(FieldError::new(
                        "model_code",
                        "must contain a letter or a digit",
                    ));
                }
                Some(m)
            }
        };
        let gtin = match gtin.trim() {
            "" => None,
            g => Some(
                Gtin::validate(g)
                    .map_err(|reason| FieldError::new("gtin", reason))?
                    .digits,
            ),
        };
        Ok(Self {
            brand,
            model_code,
            gtin,
        })
    }

    pub fn brand(&self) -> Option<&str> {
        self.brand.as_deref()
    }

    pub fn model_code(&self) -> Option<&str> {
        self.model_code.as_deref()
    }

    /// The GTIN's digits as the caller wrote them (8, 12, 13 or 14).
    pub fn gtin(&self) -> Option<&str> {
        self.gtin.as_deref()
    }

    pub fn is_empty(&self) -> bool {
        self.brand.is_none() && self.model_code.is_none() && self.gtin.is_none()
    }

    /// The hints' part of a job's identity, `None` without hints (so the keys of jobs
    /// without hints are what they always were): `brand=…;model=…;gtin=…` with only the
    /// given parts, brand and model code case-folded with white space collapsed, the GTIN
    /// in its 14-digit form (a UPC-A and its EAN-13 are one barcode).
    pub fn key(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(brand) = &self.brand {
            parts.push(format!("brand={}", fold(brand)));
        }
        if let Some(model) = &self.model_code {
            parts.push(format!("model={}", fold(model)));
        }
        if let Some(gtin) = self.gtin.as_deref().and_then(Gtin::parse) {
            parts.push(format!("gtin={}", gtin.as_str()));
        }
        (!parts.is_empty()).then(|| parts.join(";"))
    }

    /// A wire `Product` of `code`, `name` and these hints.
    pub fn to_pb(&self, code: &str, name: &str) -> pb::Product {
        pb::Product {
            code: code.to_owned(),
            name: name.to_owned(),
            brand: self.brand.clone().unwrap_or_default(),
            model_code: self.model_code.clone().unwrap_or_default(),
            gtin: self.gtin.clone().unwrap_or_default(),
        }
    }
}

/// White space collapsed to single spaces, trimmed.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Case folded, white space collapsed.
fn fold(text: &str) -> String {
    collapse(&text.to_lowercase())
}

/// Digits of a GTIN-14.
const GTIN14: usize = 14;

/// A validated GTIN (barcode: EAN-8, UPC-A, EAN-13, GTIN-14), held as its 14-digit form.
///
/// Forms: 8, 12, 13 or 14 digits after dropping spaces and hyphens, with a valid GS1
/// check digit; compared as GTIN-14 (left-padded with zeros, so a UPC-A `036000291452`
/// equals the EAN-13 `0036000291452`). The judge reads cards' GTINs with the same rules.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Gtin(String);

/// A GTIN as read: its digits and its 14-digit form.
struct ReadGtin {
    digits: String,
    gtin: Gtin,
}

impl Gtin {
    /// Reads a GTIN (see the type docs); `None` when the text is none.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        Self::validate(text).ok().map(|read| read.gtin)
    }

    /// Reads a GTIN or says why the text is none (for a caller's field error).
    fn validate(text: &str) -> Result<ReadGtin, &'static str> {
        let digits: String = text.chars().filter(|c| !matches!(c, ' ' | '-')).collect();
        if !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err("only digits are allowed (spaces and hyphens between them are dropped)");
        }
        if !matches!(digits.len(), 8 | 12 | 13 | 14) {
            return Err("must have 8, 12, 13 or 14 digits (GTIN-8, UPC-A, EAN-13, GTIN-14)");
        }
        let padded = format!("{digits:0>GTIN14$}");
        if !check_digit_holds(&padded) {
            return Err("the check digit (the last digit) does not match the others");
        }
        Ok(ReadGtin {
            digits,
            gtin: Self(padded),
        })
    }

    /// The 14-digit form.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The GS1 check: weights 3 and 1 alternate from the right, the check digit included
/// at weight 1, and the sum is a multiple of 10.
fn check_digit_holds(digits: &str) -> bool {
    let sum: u32 = digits
        .bytes()
        .rev()
        .enumerate()
        .map(|(i, b)| {
            let d = u32::from(b - b'0');
            if i % 2 == 1 { d * 3 } else { d }
        })
        .sum();
    sum.is_multiple_of(10)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hinted(brand: &str, model: &str, gtin: &str) -> Result<ProductSpec, FieldError> {
        ProductSpec::try_from(&pb::Product {
            code: "SKU-1".into(),
            name: "갤럭시 S24 울트라 256GB".into(),
            brand: brand.into(),
            model_code: model.into(),
            gtin: gtin.into(),
        })
    }

    #[test]
    fn identity_is_stable_across_spacing_and_case() {
        let a = ProductSpec::new(None, "  Coca Cola  500ml ").unwrap();
        let b = ProductSpec::new(None, "coca cola 500ML").unwrap();
        assert_eq!(a.identity(), b.identity());
        assert_eq!(a.identity(), "name:coca cola 500ml");
        let c = ProductSpec::new(Some("SKU-1"), "whatever").unwrap();
        assert_eq!(c.identity(), "code:SKU-1");
        assert_eq!(c.hints_key(), None);
    }

    #[test]
    fn the_crawl_key_is_the_name_whatever_the_code() {
        let a = ProductSpec::new(Some("A-1"), "Coca Cola 500ml").unwrap();
        let b = ProductSpec::new(Some("B-7"), " coca  cola 500ML").unwrap();
        let c = ProductSpec::new(Some("A-1"), "Pepsi 500ml").unwrap();
        assert_eq!(a.crawl_key(), b.crawl_key());
        assert_eq!(a.crawl_key(), "name:coca cola 500ml");
        assert_ne!(a.crawl_key(), c.crawl_key());
        assert_eq!(a.identity(), c.identity());
    }

    #[test]
    fn gtins_of_every_length_are_read_and_the_check_digit_holds() {
        assert_eq!(
            Gtin::parse("8801234567893").map(|g| g.as_str().to_owned()),
            Some("08801234567893".to_owned())
        );
        assert_eq!(Gtin::parse("036000291452"), Gtin::parse("0036000291452"));
        assert!(Gtin::parse("96385074").is_some());
        assert!(Gtin::parse("8801 2345 6789 3").is_some());
        assert!(Gtin::parse("8801234567894").is_none());
        assert!(Gtin::parse("880123456789").is_none());
        assert!(Gtin::parse("88012345678a3").is_none());
        assert!(Gtin::parse("").is_none());
    }

    #[test]
    fn hints_are_kept_and_key_the_job_apart() {
        let p = hinted(" Samsung ", "SM-S928N", "8801-2345-6789-3").unwrap();
        assert_eq!(p.hints().brand(), Some("Samsung"));
        assert_eq!(p.hints().model_code(), Some("SM-S928N"));
        assert_eq!(p.hints().gtin(), Some("8801234567893"));
        assert_eq!(
            p.identity(),
            "code:SKU-1",
            "hints never change the identity"
        );
        assert_eq!(
            p.hints_key().as_deref(),
            Some("brand=samsung;model=sm-s928n;gtin=08801234567893")
        );
        // Case and spacing of a hint, or the barcode's form, make no other job.
        let upc = hinted("", "", "036000291452").unwrap();
        let ean = hinted("", "", "0036000291452").unwrap();
        assert_eq!(upc.hints_key(), ean.hints_key());
        assert_eq!(
            hinted("SAMSUNG", "sm-s928n", "").unwrap().hints_key(),
            hinted("samsung", "SM-S928N", "").unwrap().hints_key()
        );
        assert_ne!(
            hinted("", "", "8801234567893").unwrap().hints_key(),
            hinted("", "", "036000291452").unwrap().hints_key()
        );
        // Empty is not given; the wire form round-trips.
        let plain = hinted(" ", "", "").unwrap();
        assert!(plain.hints().is_empty());
        assert_eq!(plain.hints_key(), None);
        let wire = pb::Product::from(&p);
        assert_eq!(ProductSpec::try_from(&wire).unwrap(), p);
    }

    #[test]
    fn bad_hints_name_their_field() {
        let long = "가".repeat(MAX_BRAND_CHARS + 1);
        let cases = [
            (hinted("", "", "8801234567894"), "gtin", "check digit"),
            (hinted("", "", "88012345678"), "gtin", "8, 12, 13 or 14"),
            (hinted("", "", "88012345678a3"), "gtin", "only digits"),
            (hinted(&long, "", ""), "brand", "longer than 64"),
            (hinted("삼성\u{7}", "", ""), "brand", "control"),
            (hinted("---", "", ""), "brand", "letter or a digit"),
            (
                hinted("", &"A".repeat(65), ""),
                "model_code",
                "longer than 64",
            ),
            (hinted("", "SM\tS928N\u{0}", ""), "model_code", "control"),
            (
                hinted("", "SM*S928N", ""),
                "model_code",
                "'*' is not allowed",
            ),
        ];
        for (result, field, reason) in cases {
            let err = result.expect_err(field);
            assert_eq!(err.field, field, "{err}");
            assert!(err.reason.contains(reason), "{err}");
        }
    }
}
