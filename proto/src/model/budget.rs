//! Request budgets: the most bytes, and the most elements of each repeated field, a valid
//! request of each method can have on the wire. The coordinator refuses a larger request
//! before decoding it (`coordinator/src/grpc/admission.rs`) and sets tonic's
//! `max_decoding_message_size` of each service from the same constants; the proto files
//! document them. Each is derived from the validation limits, so a request the model would
//! accept always fits.

use super::{
    MAX_BRAND_CHARS, MAX_DESTINATION_NAME_CHARS, MAX_DESTINATIONS_PER_SEARCH,
    MAX_IDEMPOTENCY_KEY_CHARS, MAX_MALL_ID_CHARS, MAX_MALLS_PER_SEARCH, MAX_MODEL_CODE_CHARS,
    MAX_PRODUCT_CODE_CHARS, MAX_PRODUCT_NAME_CHARS, MAX_PRODUCTS_PER_SEARCH,
    MAX_RULES_PER_SCHEDULE,
};

/// The most bytes a string field of at most `chars` characters takes: its tag, a length of
/// up to 3 varint bytes, and 4 bytes a character (UTF-8's longest).
pub const fn string_field_bytes(chars: usize) -> usize {
    1 + 3 + 4 * chars
}

/// Characters budgeted for a `gtin` (a valid one has 8 to 14 digits, with spaces or hyphens
/// between them).
const GTIN_BUDGET_CHARS: usize = 64;

/// The largest valid `Product` on the wire, with its own tag and length.
pub const MAX_PRODUCT_BYTES: usize = 1
    + 3
    + string_field_bytes(MAX_PRODUCT_CODE_CHARS)
    + string_field_bytes(MAX_PRODUCT_NAME_CHARS)
    + string_field_bytes(MAX_BRAND_CHARS)
    + string_field_bytes(MAX_MODEL_CODE_CHARS)
    + string_field_bytes(GTIN_BUDGET_CHARS);

/// Room for a request's scalar fields (priority, max_age, interval, flags).
const SCALARS_BYTES: usize = 256;

/// `SearchService.Search`: the most bytes of a `SearchRequest` (about 370 KiB).
pub const SEARCH_REQUEST_MAX_BYTES: usize = MAX_PRODUCTS_PER_SEARCH * MAX_PRODUCT_BYTES
    + MAX_MALLS_PER_SEARCH * string_field_bytes(MAX_MALL_ID_CHARS)
    + MAX_DESTINATIONS_PER_SEARCH * string_field_bytes(MAX_DESTINATION_NAME_CHARS)
    + string_field_bytes(MAX_IDEMPOTENCY_KEY_CHARS)
    + SCALARS_BYTES;

/// The most bytes of a `PriceMoveRule` (three scalars, its tag and length).
const MAX_RULE_BYTES: usize = 1 + 3 + 3 * 11;

/// `ScheduleService.CreateSchedule`: a search's budget plus its cron and rules.
pub const SCHEDULE_REQUEST_MAX_BYTES: usize = SEARCH_REQUEST_MAX_BYTES
    + string_field_bytes(super::MAX_CRON_CHARS)
    + MAX_RULES_PER_SCHEDULE * MAX_RULE_BYTES;

/// Every other client and operator call (ids, page tokens, a product, a few names).
pub const SMALL_REQUEST_MAX_BYTES: usize = 64 * 1024;

/// `NodeService.Connect`: the most bytes of one `NodeMessage` frame (a result carries up to
/// `MAX_OFFERS_PER_RESULT` offers and its evidence, a 256 KiB screenshot at most).
pub const NODE_FRAME_MAX_BYTES: usize = 4 * 1024 * 1024;

/// A repeated field of a request and the most elements it may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElementLimit {
    /// The field's number in its message.
    pub field: u32,
    /// The field's name, as an INVALID_ARGUMENT names it.
    pub name: &'static str,
    pub max: usize,
}

/// `SearchRequest`'s repeated fields.
pub const SEARCH_REQUEST_ELEMENTS: &[ElementLimit] = &[
    ElementLimit {
        field: 1,
        name: "products",
        max: MAX_PRODUCTS_PER_SEARCH,
    },
    ElementLimit {
        field: 2,
        name: "malls",
        max: MAX_MALLS_PER_SEARCH,
    },
    ElementLimit {
        field: 7,
        name: "destinations",
        max: MAX_DESTINATIONS_PER_SEARCH,
    },
];

/// `CreateScheduleRequest`'s repeated fields.
pub const SCHEDULE_REQUEST_ELEMENTS: &[ElementLimit] = &[
    ElementLimit {
        field: 1,
        name: "products",
        max: MAX_PRODUCTS_PER_SEARCH,
    },
    ElementLimit {
        field: 2,
        name: "malls",
        max: MAX_MALLS_PER_SEARCH,
    },
    ElementLimit {
        field: 6,
        name: "destinations",
        max: MAX_DESTINATIONS_PER_SEARCH,
    },
    ElementLimit {
        field: 7,
        name: "rules",
        max: MAX_RULES_PER_SCHEDULE,
    },
];

#[cfg(test)]
mod tests {
    use prost::Message as _;

    use super::*;
    use crate::pb;

    #[test]
    fn the_largest_valid_search_fits_its_budget() {
        let long = |n: usize| "𝔸".repeat(n);
        let req = pb::SearchRequest {
            products: (0..MAX_PRODUCTS_PER_SEARCH)
                .map(|_| pb::Product {
                    code: long(MAX_PRODUCT_CODE_CHARS),
                    name: long(MAX_PRODUCT_NAME_CHARS),
                    brand: long(MAX_BRAND_CHARS),
                    model_code: long(MAX_MODEL_CODE_CHARS),
                    gtin: long(GTIN_BUDGET_CHARS),
                })
                .collect(),
            malls: vec![long(MAX_MALL_ID_CHARS); MAX_MALLS_PER_SEARCH],
            priority: Some(99),
            max_age: Some(prost_types::Duration {
                seconds: i64::MAX,
                nanos: 999_999_999,
            }),
            idempotency_key: long(MAX_IDEMPOTENCY_KEY_CHARS),
            destinations: vec![long(MAX_DESTINATION_NAME_CHARS); MAX_DESTINATIONS_PER_SEARCH],
            notify_each_product: true,
            ..Default::default()
        };
        let len = req.encoded_len();
        assert!(
            len <= SEARCH_REQUEST_MAX_BYTES,
            "{len} > {SEARCH_REQUEST_MAX_BYTES}"
        );
        const { assert!(SEARCH_REQUEST_MAX_BYTES < 400 * 1024) };
    }
}
