-- Alert rules' firing state, shared by every coordinator replica so that a rule is
-- announced once when it fires and once when it resolves, whichever replica evaluates.
create table alert_state (
    rule      text primary key check (char_length(rule) between 1 and 64),
    firing    boolean not null,
    value     double precision not null,
    threshold double precision not null,
    -- When the rule last changed between firing and resolved.
    since     timestamptz not null default now()
);
