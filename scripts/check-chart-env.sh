#!/usr/bin/env bash
# Checks that every LPS_* environment variable the Helm chart sets is one the binary it is
# set for reads: the chart is rendered with the default values and each
# helm/lps/ci/*-values.yaml, and every LPS_* name in a container's `env` (plain
# values, Secret references, the TLS file names, extraEnv) must appear as `[env: NAME]` in
# that binary's --help: `coordinator --help` for the coordinator Deployment and the
# migrations Job, `crawler-node --help` for the nodes. A misspelt or retired name would
# otherwise be ignored silently by the service. And every value the default rendering
# sets must be the binary's own default (`[default: …]` in --help) unless it is listed in
# INTENDED with its reason: the chart's values.yaml repeats the defaults for readers, and
# this keeps the two from drifting apart.
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
helps, defaults = {}, {}
for binary in ("coordinator", "crawler-node"):
    with open(os.path.join(work, f"{binary}.help")) as f:
        text = f.read()
    helps[binary] = set(re.findall(r"\[env: ([A-Z0-9_]+)", text))
    defaults[binary] = dict(re.findall(r"\[env: ([A-Z0-9_]+)[^\]]*\]\s*\[default: ([^\]]*)\]", text))
    if len(helps[binary]) < 10:
        sys.exit(f"{binary} --help lists only {sorted(helps[binary])}: not clap's env help?")
# component label -> the binary its container runs
BINARY = {"coordinator": "coordinator", "migrations": "coordinator", "crawler-node": "crawler-node"}
# Values the chart sets on purpose to something else than the binary's default, and why.
# Every other LPS_* value of the default rendering must equal the binary's default, so the
# two cannot drift apart.
INTENDED = {
    "LPS_LOG_FORMAT": "logs for a collector: json",
    "LPS_DEPLOYMENT": "the release name",
    "LPS_PROFILE_ROOT": "the pod's emptyDir",
    "LPS_HTTP_ADDR": "the chart's ports",
    "LPS_GRPC_ADDR": "the chart's ports",
    "LPS_COORDINATOR_URL": "the coordinator Service",
    "LPS_MALLS": "the chart's mall list",
    "LPS_CONFIG_REVISION": "the Helm release revision, so a newer release's settings win",
}
UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
def normal(v):
    """A duration as seconds (`5m` == `300s`), anything else as written."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)", v.strip())
    return float(m[1]) * UNITS[m[2]] if m else v.strip().lower()
errors, checked, compared = [], 0, 0
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
                    continue
                default = defaults[BINARY[comp]].get(e["name"])
                if name != "default" or "value" not in e or default is None or e["name"] in INTENDED:
                    continue
                compared += 1
                if normal(str(e["value"])) != normal(default):
                    errors.append(f"default values: {d['kind']}/{d['metadata']['name']} sets "
                                  f"{e['name']}={e['value']!r}, the binary's default is {default!r} "
                                  f"(change one, or list it in INTENDED with the reason)")
for e in errors:
    print("ERROR", e)
print(f"chart env: {checked} LPS_* settings in {len(names)} renderings checked against "
      f"coordinator --help ({len(helps['coordinator'])} names) and crawler-node --help "
      f"({len(helps['crawler-node'])} names), {compared} default values against the "
      f"binaries' defaults: {len(errors)} errors")
sys.exit(1 if errors else 0)
PY
