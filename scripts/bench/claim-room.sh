#!/usr/bin/env bash
# Execution time of the claim statements (generic plans, as the coordinator runs them) on a
# scratch database: 10 malls x 2,000 queued jobs (5 without limits for claim_unlimited.sql,
# 5 with max_running = 1000 for claim.sql), 200 running jobs and 2,000 ledger ports (10 %
# cooling, some cooling for one mall); then the same with no enabled port (no ledger).
# Usage: scripts/bench/claim-room.sh [GIT-REV to compare with]   (honours DATABASE_URL)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/postgres.sh
lps_pg_ensure
url=$(lps_pg_url_with_db "$DATABASE_URL" lps_claimbench)
psql "$DATABASE_URL" -qc 'drop database if exists lps_claimbench' -qc 'create database lps_claimbench'
# One transaction per migration, as sqlx applies them.
for f in migrations/*.sql; do psql "$url" -1 -v ON_ERROR_STOP=1 -q -f "$f"; done
psql "$url" -v ON_ERROR_STOP=1 -q <<'SQL'
insert into mall (mall_id, enabled, max_running, min_start_gap_ms)
select 'm' || g, true, case when g >= 5 then 1000 end, 0 from generate_series(0, 9) g;
insert into mall_slot (mall_id, slot_no)
select 'm' || g, s from generate_series(5, 9) g, generate_series(1, 1000) s;
insert into job (dedupe_key, mall, product_name, product_key, priority)
select 'm' || g || '|' || i, 'm' || g, 'p' || i, 'name:p' || i, 50
from generate_series(0, 9) g, generate_series(1, 2000) i;
update job set state = 'running', node_id = 'n', lease_epoch = 1,
       lease_until = now() + interval '1 hour', deadline_at = now() + interval '1 hour',
       run_started_at = now()
where job_id in (select job_id from (select job_id, row_number() over (partition by mall order by job_id) rn
                                     from job) x where rn <= 20);
insert into proxy_port (host, port) select 'h', 30000 + p from generate_series(1, 2000) p;
update proxy_port set cooldown_until = now() + interval '1 hour' where port % 10 = 0;
insert into proxy_port_cooldown (host, port, mall, cooldown_until)
select 'h', 30000 + p, 'm1', now() + interval '1 hour' from generate_series(1, 200) p where p % 7 = 0;
SQL
psql "$url" -qc 'analyze job' -qc 'analyze proxy_port' -qc 'analyze mall' -qc 'analyze mall_slot'

measure() { # label, statement text
  {
    echo "set plan_cache_mode = force_generic_plan; set jit = off;"
    echo "prepare c(text[], text[], int[], bigint, timestamptz, float8) as $(sed 's/--.*$//' <<<"$2");"
    for _ in $(seq 1 30); do
      echo "begin; explain (analyze, timing off, summary on) execute c(array['n'],
            array['m0','m1','m2','m3','m4','m5','m6','m7','m8','m9'], array[10], 30000, null, null); rollback;"
    done
  } | psql "$url" -qAt | grep 'Execution Time' | awk '{print $3}' | tail -25 | sort -n |
    awk -v l="$1" '{a[NR]=$1} END {printf "%-45s median %.2f ms, p90 %.2f ms\n", l, a[int(NR/2)+1], a[int(NR*0.9)]}'
}
sql_of() { # rev ("" = working tree), file
  if [[ -z "$1" ]]; then cat "coordinator/src/queue/sql/$2"; else git show "$1:coordinator/src/queue/sql/$2"; fi
}
for rev in "" ${1:+"$1"}; do
  for ledger in true false; do
    psql "$url" -qc "update proxy_port set enabled = $ledger"
    for f in claim_unlimited.sql claim.sql; do
      measure "${rev:-HEAD} $f (ledger: $ledger)" "$(sql_of "$rev" "$f")"
    done
  done
done
psql "$DATABASE_URL" -qc 'drop database lps_claimbench'
