-- LPS schema, part 23: a caller's hints about a product (lps.v1.Product brand, model_code,
-- gtin) are stored with the job, so the node that leases it judges cards with them.
-- Validated on receive (lps_proto::model::ProductHints); the checks repeat the limits a
-- writer cannot get wrong without a bug. All null for jobs of older writers and of
-- requests without hints, which is what those jobs always meant.
--
-- The hints are part of the job's dedupe key ('<mall>|<product identity>|<hints key>',
-- the suffix only when a hint is given: keys of jobs without hints are unchanged), and so
-- of the fresh-result and negative caches, which are looked up by that key. The product
-- identity (`product_key`, price history's key) does not include them.

alter table job
    add column product_brand text
        check (char_length(product_brand) between 1 and 64),
    add column product_model_code text
        check (char_length(product_model_code) between 1 and 64),
    -- The barcode's digits as the caller wrote them: GTIN-8, UPC-A, EAN-13 or GTIN-14.
    add column product_gtin text
        check (product_gtin ~ '^([0-9]{8}|[0-9]{12,14})$');
