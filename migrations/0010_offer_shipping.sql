-- LPS schema, part 10: how an offer's shipping was read, its list price and its card-class
-- flags (lps.v1.Offer fields 9-11).
--
-- A product's lowest is taken only over offers whose shipping is known; an offer whose
-- shipping could not be read is shown beside it ("possibly lower, shipping unknown"),
-- never as the answer. The offer table's one writer is queue/sql/complete.sql.

-- How shipping was read: 'free', 'paid', 'free_by_threshold' (the offer's own price reaches
-- a stated "N원 이상 무료" threshold) or 'unknown' (not shown, or not readable). The names
-- are ShippingStatus::as_str. Added without a default so that no writer can leave it out.
alter table offer add column shipping_status text;

-- Backfill, honestly: a stored fee above 0 was read from the page ('paid'); a fee of 0 is
-- not known to be free, because nodes before protocol version 2 stored a missing shipping
-- cell as 0 ('unknown'). The same rule reads such offers off the wire
-- (ShippingStatus::from_pb for SHIPPING_STATUS_UNSPECIFIED).
update offer set shipping_status = case when shipping_fee > 0 then 'paid' else 'unknown' end;

alter table offer alter column shipping_status set not null;

-- Only the four names.
alter table offer add constraint offer_shipping_status_known_name check (
    shipping_status in ('free', 'paid', 'free_by_threshold', 'unknown')
);

-- An offer whose shipping is unknown has no fee: its effective price (price + fee) is then
-- only a lower bound, and a made-up fee must not pass for a read one.
alter table offer add constraint offer_unknown_shipping_has_no_fee check (
    shipping_status <> 'unknown' or shipping_fee = 0
);

-- The struck-out list price the card showed; 0 = none shown. Kept, never used as the price.
alter table offer add column list_price bigint not null default 0
    constraint offer_list_price_not_negative check (list_price >= 0);

-- Card classes the mall's profile keeps but flags (CardClass::as_str names, e.g. 'overseas',
-- 'catalog'); '{}' for a plain offer. `<@` is false for an array holding a null, so the
-- check also keeps nulls out.
alter table offer add column flags text[] not null default '{}'
    constraint offer_flags_known_names check (
        flags <@ array['ad', 'option_listing', 'overseas', 'used', 'sold_out', 'catalog']::text[]
    );

-- Expand, then contract: while a rolling upgrade runs, coordinators of the previous release
-- still insert offers without shipping_status. This fills it for them by the backfill's
-- rule, so their completions keep working and stay honest. Every current writer
-- (complete.sql) sets the column, so the trigger does not fire for it (the WHEN test is
-- evaluated without calling the function). Drop it in a later release.
create function offer_shipping_status_of_old_writer() returns trigger language plpgsql as $$
begin
    new.shipping_status := case when new.shipping_fee > 0 then 'paid' else 'unknown' end;
    return new;
end $$;

create trigger offer_shipping_status_of_old_writer before insert on offer
    for each row when (new.shipping_status is null)
    execute function offer_shipping_status_of_old_writer();
