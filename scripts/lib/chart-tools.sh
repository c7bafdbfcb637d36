# shellcheck shell=bash
# The tools the chart checks use, offline and without touching anything global: helm
# (HELM, else .tools/bin/helm, else helm on PATH, else fetched with get-helm.sh into
# .tools/bin) and kubernetes-validate with PyYAML (pinned, pip-installed into
# .tools/python). Sourced by scripts/check-helm.sh and scripts/test-images.sh.
#
#   lps_chart_tools_ensure ROOT   # sets HELM, exports PYTHONPATH; non-zero with a message

LPS_KV_PIN="kubernetes-validate==1.37.0"

lps_chart_tools_ensure() {
  local root=$1 tools=$1/.tools log
  log=$(mktemp)
  if [[ -z "${HELM:-}" ]]; then
    if [[ -x "$tools/bin/helm" ]]; then
      HELM="$tools/bin/helm"
    elif command -v helm >/dev/null 2>&1; then
      HELM=$(command -v helm)
    else
      local getter="" g
      for g in "$root/../shared/tools/get-helm.sh" /work/shared/tools/get-helm.sh; do
        [[ -f "$g" ]] && { getter=$g; break; }
      done
      [[ -n "$getter" ]] || { echo "no helm on PATH and no get-helm.sh found" >&2; rm -f "$log"; return 1; }
      echo "getting helm into $tools/bin ..." >&2
      bash "$getter" "$tools/bin" >"$log" 2>&1 \
        || { cat "$log" >&2; rm -f "$log"; echo "get-helm.sh failed" >&2; return 1; }
      HELM="$tools/bin/helm"
    fi
  fi
  [[ -x "$HELM" ]] || { echo "helm not executable: $HELM" >&2; rm -f "$log"; return 1; }

  command -v python3 >/dev/null 2>&1 || { echo "python3 is required" >&2; rm -f "$log"; return 1; }
  export PYTHONPATH="$tools/python${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONDONTWRITEBYTECODE=1
  if ! python3 -c 'import sys, yaml, kubernetes_validate.version as v; sys.exit(v.__version__ != sys.argv[1])' \
      "${LPS_KV_PIN#*==}" 2>/dev/null; then
    echo "installing $LPS_KV_PIN into $tools/python ..." >&2
    # --target: works on PEP 668 (externally managed) Pythons and touches nothing global.
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check \
      --upgrade --target "$tools/python" "$LPS_KV_PIN" >"$log" 2>&1 \
      || { cat "$log" >&2; rm -f "$log"; echo "pip install $LPS_KV_PIN failed" >&2; return 1; }
  fi
  rm -f "$log"
}
