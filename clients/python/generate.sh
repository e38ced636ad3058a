#!/usr/bin/env bash
# Regenerates the Python client coreserve_client from openapi/coreserve.yaml with the pinned
# openapi-python-client (requirements.txt) and the committed openapi-python-client.yaml.
#
#   clients/python/generate.sh [OUT_DIR]
#
# OUT_DIR defaults to clients/python/coreserve-client (committed; check_fresh.sh generates into
# a temporary one and compares). Any cwd works. The output depends only on the document, the
# config file and the pinned versions: running it twice gives identical files.
#
# It fails (and leaves OUT_DIR alone) when the generator warns about the document: a warning
# means an endpoint or a model was skipped or degraded, which a client must not hide.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

say() { echo "clients/python/generate.sh: $*" >&2; }
die() {
  say "$*"
  exit 1
}

if [ $# -gt 1 ]; then
  die "usage: $0 [OUT_DIR]"
fi
out=$(realpath -m -- "${1:-$here/coreserve-client}")
# OUT_DIR is replaced whole: refuse anything that is not (or not yet) a generated client.
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ] && [ ! -d "$out/coreserve_client" ]; then
  die "$out exists and is not a generated coreserve client; refusing to replace it"
fi

# shellcheck source=clients/python/venv.sh
. "$here/venv.sh"
ensure_venv

work=$(mktemp -d "${TMPDIR:-/tmp}/coreserve-pygen.XXXXXXXX")
trap 'rm -rf "$work"' EXIT

# PATH: the generator's post hooks call `ruff` by name; it must be the pinned one.
if ! (cd "$work" && PATH="$venv/bin:$PATH" "$venv/bin/openapi-python-client" generate \
  --path "$root/openapi/coreserve.yaml" \
  --config "$here/openapi-python-client.yaml" \
  --meta pdm \
  --output-path "$work/coreserve-client" \
  --fail-on-warning) >"$work/log" 2>&1; then
  cat "$work/log" >&2
  die "openapi-python-client failed or warned about openapi/coreserve.yaml (above); the client was not changed"
fi
# Belt and braces: the generator prints warnings it does not count as such (e.g. a missing ruff).
if grep -qi 'warning' "$work/log"; then
  cat "$work/log" >&2
  die "openapi-python-client printed warnings (above); the client was not changed"
fi
[ -f "$work/coreserve-client/coreserve_client/client.py" ] || die "no client was generated"

rm -rf "$out"
mkdir -p "$(dirname "$out")"
cp -R "$work/coreserve-client" "$out"
say "generated $(find "$out" -name '*.py' | wc -l) Python files in $out"
