-- LPS schema, part 19: the ops snapshot's job counts without counting the job table.
--
-- The snapshot counted every job per state on every replica every 15 s: the active states
-- read their partial indexes (bounded by the work in hand), but `done`, `dead` and
-- `cancelled` grew with history (a sequential scan of 73 ms at 200,000 done jobs). Their
-- counts are now kept in `job_tally`, maintained with the transitions in the statements
-- that make them:
--
-- * finishing (into done / dead / cancelled from an active state): the finishing marks
--   that job_mark_finished already sets (migration 0013) are counted once per statement by
--   the statement trigger job_finished_tally, which fires before job_price_history (same
--   event, name order) and leaves the marks to it;
-- * leaving a final state (RetryDead: dead → queued), or entering one from another: marked
--   by the row trigger job_mark_moved in the same way, counted by the same statement
--   trigger;
-- * a job inserted final, jobs deleted (retention), the table truncated: statement
--   triggers of their own.
--
-- A count is spread over 16 rows per state (`shard`, by backend), so that concurrent
-- finishing transactions do not queue on one row lock; the reader sums at most 48 rows.
-- NB: queued and running are still counted from their partial indexes: exact, cheap, and
-- a claim (queued → running) pays for no counter at all.

create table job_tally (
    state job_state not null check (state in ('done', 'dead', 'cancelled')),
    shard smallint not null check (shard between 0 and 15),
    n bigint not null,
    primary key (state, shard)
);

-- `delta` jobs more in `state`, on this backend's shard.
create function job_tally_add(job_state, bigint) returns void
language sql as $$
    insert into job_tally (state, shard, n)
    values ($1, (pg_backend_pid() % 16)::smallint, $2)
    on conflict on constraint job_tally_pkey do update set n = job_tally.n + excluded.n
$$;

-- A final job that changes state (RetryDead: dead → queued): marked like a finishing one
-- (`<old state>:<job id>,` in lps.moved_jobs), counted by the statement trigger below.
create function job_mark_moved() returns trigger language plpgsql as $$
begin
    perform set_config('lps.moved_jobs',
                       coalesce(current_setting('lps.moved_jobs', true), '')
                           || old.state || ':' || new.job_id || ',',
                       true);
    return null;
end $$;

create trigger job_mark_moved after update of state on job
    for each row
    when (old.state in ('done', 'dead', 'cancelled') and new.state is distinct from old.state)
    execute function job_mark_moved();

-- This statement's transitions, once per statement and state: finishing ones (the marks of
-- job_mark_finished) into their new state; moved ones out of their old state, and into the
-- new one if that is final too (no finishing mark is set for it).
create function job_finished_tally() returns trigger language plpgsql as $$
declare
    finished text := current_setting('lps.finished_jobs', true);
    moved text := current_setting('lps.moved_jobs', true);
begin
    if finished is not null and finished <> '' then
        perform job_tally_add(j.state, count(*))
        from job j
        where j.job_id = any(string_to_array(rtrim(finished, ','), ',')::bigint[])
        group by j.state;
    end if;
    if moved is not null and moved <> '' then
        perform set_config('lps.moved_jobs', '', true);
        perform job_tally_add(d.state, d.delta)
        from (
            select x.state, sum(x.delta)::bigint as delta
            from (
                select split_part(m, ':', 1)::job_state as state, -1 as delta
                from unnest(string_to_array(rtrim(moved, ','), ',')) m
                union all
                select j.state, 1
                from unnest(string_to_array(rtrim(moved, ','), ',')) m
                join job j on j.job_id = split_part(m, ':', 2)::bigint
                where j.state in ('done', 'dead', 'cancelled')
            ) x
            group by x.state
        ) d;
    end if;
    return null;
end $$;

-- NB: after-row triggers of a statement (the marks) fire before its after-statement
-- triggers, and same-event triggers fire in name order: this one before job_price_history,
-- which clears the finishing marks.
create trigger job_finished_tally after update on job
    for each statement execute function job_finished_tally();

-- Jobs inserted final (no path of the coordinator does; an operator's or a test's might),
-- and deleted jobs (retention), once per statement: the transition tables hold only the
-- inserted or deleted rows.
create function job_tally_inserted() returns trigger language plpgsql as $$
begin
    perform job_tally_add(a.state, count(*))
    from added a
    where a.state in ('done', 'dead', 'cancelled')
    group by a.state;
    return null;
end $$;

create trigger job_tally_inserted after insert on job
    referencing new table as added
    for each statement execute function job_tally_inserted();

create function job_tally_deleted() returns trigger language plpgsql as $$
begin
    perform job_tally_add(g.state, -count(*))
    from gone g
    where g.state in ('done', 'dead', 'cancelled')
    group by g.state;
    return null;
end $$;

create trigger job_tally_deleted after delete on job
    referencing old table as gone
    for each statement execute function job_tally_deleted();

create function job_tally_truncated() returns trigger language plpgsql as $$
begin
    delete from job_tally;
    return null;
end $$;

create trigger job_tally_truncated after truncate on job
    for each statement execute function job_tally_truncated();

-- The counts so far. The lock keeps every writer of `job` out until this migration
-- commits, so no transition falls between the count and the triggers.
lock table job in share row exclusive mode;
insert into job_tally (state, shard, n)
select state, 0, count(*) from job where state in ('done', 'dead', 'cancelled') group by state;
