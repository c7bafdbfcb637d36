-- LPS schema, part 24: a wrong "not found" does not stick (DESIGN §2, "Negative cache").
-- An entry says why the product was not found — the mall said so (`no_results`: its
-- no-results page, no card read) or the judge did (`judged`: cards were read, none was
-- accepted), remembered for the shorter LPS_NEGATIVE_TTL_JUDGED — and what judged it:
-- the node's judge version and the vocabulary revision of the job's mall. An entry
-- answers a request only while the coordinator runs that same judge version and
-- vocabulary revision (enqueue.sql), so a vocabulary or judge change retires every entry
-- written under another one at once; it is replaced by the next not-found or expires.
--
-- Entries written before this migration name no judge (null): a coordinator that knows
-- its judge never reuses them, which is the safe reading of an unknown judge. They read
-- as `judged`, the kind that may be wrong.

alter table negative_cache
    add column kind text not null default 'judged'
        check (kind in ('no_results', 'judged')),
    -- lps_proto::model::JUDGE_VERSION of the node that judged; null: it did not say.
    add column judge_version integer check (judge_version > 0),
    -- lps_proto::model::vocabulary_revision of the mall's words; null with judge_version.
    add column vocabulary_revision text
        check (char_length(vocabulary_revision) between 1 and 64),
    add constraint negative_cache_judged_with_both
        check ((judge_version is null) = (vocabulary_revision is null));
