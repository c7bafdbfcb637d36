# shellcheck shell=bash
# The outside checkers the tests and the chart checks run (promtool from Debian's
# `prometheus` package, node from `nodejs`), got the one way: on PATH, else installed with
# apt-get. A check never passes by skipping in CI: when a checker cannot be had, CI=true
# (or CI=1) makes that a failure; elsewhere it is a loud warning naming what goes unchecked.
# Sourced by scripts/test.sh and scripts/check-helm.sh; the Rust tests apply the same rule
# through lps_test_kit::checks::tool.
#
#   lps_checker_ensure TOOL PACKAGE WHAT   # 0: TOOL is there; 1: missing under CI; 2: missing elsewhere
#   lps_checkers_ensure                    # every checker of LPS_CHECKERS; non-zero under CI when one is missing
#
# LPS_CHECKERS_NO_INSTALL=1 only looks (no apt-get), e.g. where nothing may be installed.

# TOOL:PACKAGE:what it checks, one a line.
LPS_CHECKERS="promtool:prometheus:both services' /metrics and the chart's alerting rules
node:nodejs:the test mall's wall script (syntax and behaviour)"

lps_ci() { [ "${CI:-}" = true ] || [ "${CI:-}" = 1 ]; }

lps_checker_ensure() {
  local tool=$1 package=$2 what=$3
  command -v "$tool" >/dev/null 2>&1 && return 0
  if [ "${LPS_CHECKERS_NO_INSTALL:-}" != 1 ] && command -v apt-get >/dev/null 2>&1; then
    printf '[lps] installing %s (apt-get install %s)\n' "$tool" "$package" >&2
    { apt-get update -qq \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$package"; } \
      >/dev/null 2>&1 || true
    command -v "$tool" >/dev/null 2>&1 && return 0
  fi
  if lps_ci; then
    printf '[lps] %s is missing (apt-get install %s) and CI=true: %s cannot be checked, which is a failure\n' \
      "$tool" "$package" "$what" >&2
    return 1
  fi
  printf '[lps] !!!!! WARNING: %s is missing (apt-get install %s): %s NOT checked !!!!!\n' \
    "$tool" "$package" "$what" >&2
  return 2
}

lps_checkers_ensure() {
  local line tool package what rc status=0
  while IFS= read -r line; do
    tool=${line%%:*}; line=${line#*:}
    package=${line%%:*}; what=${line#*:}
    rc=0
    lps_checker_ensure "$tool" "$package" "$what" || rc=$?
    [ "$rc" = 1 ] && status=1
  done <<<"$LPS_CHECKERS"
  return "$status"
}
