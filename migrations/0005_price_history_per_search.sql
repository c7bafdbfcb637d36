-- One price-history entry per product of a search: recorded once, when the last of the
-- product's malls reaches a final state (see queue/sql/record_price_history.sql).
create unique index price_history_search_product
    on price_history (search_id, product_key) where search_id is not null;
