#!/usr/bin/env bash
# Builds the Python example: a virtualenv in examples/python/.venv with requirements.txt,
# and the lps.v1 stubs generated from proto/lps/v1/*.proto into examples/python/gen/
# (neither is committed). Installs python3 and python3-venv with apt-get when missing.
#
#   examples/python/build.sh
#   examples/python/.venv/bin/python examples/python/lowest_price.py "삼다수 2L x 12"
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=$here/.venv

if ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  printf '[lps] %s\n' "installing python3 and python3-venv (apt-get)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq python3 python3-venv >/dev/null
fi

# A venv whose installed requirements differ from requirements.txt is refreshed; an
# unchanged one is reused (pip install of pinned, installed versions is a no-op).
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$here/requirements.txt"

rm -rf "$here/gen" && mkdir -p "$here/gen"
(cd "$root/proto" && "$venv/bin/python" -m grpc_tools.protoc -I . \
  --python_out="$here/gen" --pyi_out="$here/gen" --grpc_python_out="$here/gen" \
  lps/v1/*.proto)
printf '[lps] %s\n' "python example built: $venv, stubs in $here/gen" >&2
