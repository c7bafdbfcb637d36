-- LPS schema, part 27: site profiles change without a restart (DESIGN §5 "Profile
-- revisions").
--
-- A coordinator watches its profile directory and, when an edit validates, sends the new
-- set to its nodes; a revision is a hash of the profile files. Two things are recorded,
-- each by one module (coordinator/src/profiles):

-- What each replica serves, and the last edit it refused (an operator sees it in
-- `lpsctl ops`; the replica keeps serving `revision`). One row per replica process,
-- rewritten on each load or refusal; `seen_at` is renewed every minute while the process
-- runs, so the ops snapshot shows live replicas only and rows of processes long gone are
-- deleted when a replica starts.
create table profile_set (
    coordinator_id   text primary key,
    revision         text not null check (revision ~ '^[0-9a-f]{16}$'),
    loaded_at        timestamptz not null default now(),
    seen_at          timestamptz not null default now(),
    refused_revision text check (refused_revision ~ '^[0-9a-f]{16}$'),
    refused_error    text,
    refused_at       timestamptz,
    -- A refusal has its error and time; its revision is null only when the directory
    -- could not be read at all.
    constraint profile_set_refusal check (
        (refused_error is null) = (refused_at is null)
        and (refused_revision is null or refused_error is not null))
);

-- The profile revision each lease of a job ran with: written when the coordinator assigns
-- the lease, with the revision it last sent on that node's stream (the node uses that set
-- for every job assigned after it, and a running job keeps its own). Goes with the job.
create table job_profile_revision (
    job_id      bigint not null references job (job_id) on delete cascade,
    lease_epoch bigint not null check (lease_epoch > 0),
    revision    text not null check (revision ~ '^[0-9a-f]{16}$'),
    primary key (job_id, lease_epoch)
);
