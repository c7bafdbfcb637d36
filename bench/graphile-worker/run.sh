#!/usr/bin/env bash
# The reference queue of the queue benchmark (BENCHMARKS.md): graphile-worker draining no-op
# jobs, each mode RUNS times. Installs the pinned package from the npm registry on first use.
# Usage: DATABASE_URL=postgres://…/lps_bench_graphile bench/graphile-worker/run.sh
# (the database is created if missing; N and RUNS from the environment, default 20000 and 3)
set -euo pipefail
cd "$(dirname "$0")"
export DATABASE_URL="${DATABASE_URL:-postgres://lps:lps@127.0.0.1:5432/lps_bench_graphile}"
N="${N:-20000}"
RUNS="${RUNS:-3}"
if [[ ! -d node_modules/graphile-worker ]]; then
  npm install --no-save --no-audit --no-fund graphile-worker@0.18.0 pg@8 >/dev/null
fi
VER=$(node -p "require('./node_modules/graphile-worker/package.json').version")
echo "graphile-worker $VER, node $(node -v), N=$N"
# label | bench mode | concurrency
MODES=("defaults,c8 a 8" "prefetch500+batched,c8 b 8" "prefetch500+batched,c24 b 24")
echo "| mode | run | jobs | seconds | jobs/s |"
echo "|---|---:|---:|---:|---:|"
for m in "${MODES[@]}"; do
  read -r label mode conc <<<"$m"
  for r in $(seq 1 "$RUNS"); do
    line=$(node bench.mjs "$mode" "$conc" "$N" | grep '^RESULT')
    secs=$(sed -E 's/.* seconds=([0-9.]+).*/\1/' <<<"$line")
    rate=$(sed -E 's/.* jobs_per_s=([0-9]+).*/\1/' <<<"$line")
    echo "| $label | $r | $N | $secs | $rate |"
  done
done
