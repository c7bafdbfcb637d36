#!/usr/bin/env bash
# Checks that every LPS_* environment variable the Helm chart sets is one the binary it is
# set for reads: the chart is rendered with the default values and each
# helm/lps/ci/*-values.yaml, and every LPS_* name in a container's `env` (plain
# values, Secret references, the TLS file names, extraEnv) must appear as `[env: NAME]` in
# that binary's --help: `coordinator --help` for the coordinator Deployment and the
# migrations Job, `crawler-node --help` for the nodes. A misspelt or retired name would
# otherwise be ignored silently by the service.
#
#   scripts/check-chart-env.sh [BIN_DIR]   # default: target/debug, built when missing
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source scripts/lib/chart-tools.sh

bin=${1:-${CARGO_TARGET_DIR:-$ROOT/target}/debug}
if [ $# -eq 0 ] && { [ ! -x "$bin/coordinator" ] || [ ! -x "$bin/crawler-node" ]; }; then
  cargo build --locked -q -p lps-coordinator -p lps-crawler-node --bin coordinator --bin crawler-node
fi
lps_chart_tools_ensure "$ROOT"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin/coordinator" --help >"$work/coordinator.help"
"$bin/crawler-node" --help >"$work/crawler-node.help"

scenarios=("default:")
for f in helm/lps/ci/*-values.yaml; do
  scenarios+=("$(basename "$f" -values.yaml):-f $f")
done
for s in "${scenarios[@]}"; do
  name=${s%%:*}
  # shellcheck disable=SC2086 # the flags are words
  "$HELM" template lps helm/lps --namespace lps-ci ${s#*:} >"$work/$name.yaml"
done

python3 - "$work" "${scenarios[@]%%:*}" <<'PY'
import os, re, sys
import yaml

work, names = sys.argv[1], sys.argv[2:]
helps = {}
for binary in ("coordinator", "crawler-node"):
    with open(os.path.join(work, f"{binary}.help")) as f:
        helps[binary] = set(re.findall(r"\[env: ([A-Z0-9_]+)", f.read()))
    if len(helps[binary]) < 10:
        sys.exit(f"{binary} --help lists only {sorted(helps[binary])}: not clap's env help?")
# component label -> the binary its container runs
BINARY = {"coordinator": "coordinator", "migrations": "coordinator", "crawler-node": "crawler-node"}
errors, checked = [], 0
for name in names:
    with open(os.path.join(work, f"{name}.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for d in docs:
        spec = d.get("spec", {}).get("template", {}).get("spec")
        if d.get("kind") not in ("Deployment", "StatefulSet", "Job") or not spec:
            continue
        comp = d["metadata"].get("labels", {}).get("app.kubernetes.io/component")
        if comp not in BINARY:
            errors.append(f"{name}: {d['kind']}/{d['metadata']['name']}: unknown component {comp!r}")
            continue
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            for e in c.get("env", []):
                if not e["name"].startswith("LPS_"):
                    continue
                checked += 1
                if e["name"] not in helps[BINARY[comp]]:
                    errors.append(f"{name}: {d['kind']}/{d['metadata']['name']} sets {e['name']}, "
                                  f"which `{BINARY[comp]} --help` does not list")
for e in errors:
    print("ERROR", e)
print(f"chart env: {checked} LPS_* settings in {len(names)} renderings checked against "
      f"coordinator --help ({len(helps['coordinator'])} names) and crawler-node --help "
      f"({len(helps['crawler-node'])} names): {len(errors)} unknown")
sys.exit(1 if errors else 0)
PY
