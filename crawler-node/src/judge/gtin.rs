//! GTINs (barcodes: EAN-8, UPC-A, EAN-13, GTIN-14) as the judge compares them.
//!
//! A GTIN names one trade item — brand, line, variant and amount — so when both the query
//! (a caller's catalog, `lps.v1.Product.gtin`) and a card (a mall's page data) carry one,
//! they settle the wording rules: equal GTINs are the same product whatever the title's
//! words, different valid GTINs are another product. Listing rules still hold (an option
//! listing or a bundle carries its main item's barcode).
//!
//! The type and its reading rules live in the model (`lps_proto::model::Gtin`), so a
//! caller's GTIN is validated on receive by the same rules a card's is read with here.

pub use lps_proto::model::Gtin;
