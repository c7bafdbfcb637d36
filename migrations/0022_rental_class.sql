-- LPS schema, part 22: the `rental` card class (monthly-payment listings: 월 12,900원,
-- 렌탈, 월납). Excluded by default, but a profile may flag it instead, so an offer's flags
-- may name it: the check of 0010 is widened to CardClass::as_str's names, `rental` added.
-- Widening first is safe during a rolling upgrade: every old writer's flags still pass.

alter table offer drop constraint offer_flags_known_names;
alter table offer add constraint offer_flags_known_names check (
    flags <@ array['ad', 'option_listing', 'overseas', 'used', 'sold_out', 'catalog', 'rental']::text[]
);
