#!/usr/bin/env bash
# Fails when the committed Python client (clients/python/coreserve-client) is not what
# generate.sh makes from the current openapi/coreserve.yaml: it regenerates into a temporary
# directory and compares every file. Exit 0: fresh; 1: stale (or generation failed).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/coreserve-pyfresh.XXXXXXXX")
trap 'rm -rf "$tmp"' EXIT

if ! "$here/generate.sh" "$tmp/coreserve-client" 2>"$tmp/generate.log"; then
  cat "$tmp/generate.log" >&2
  echo "check_fresh: the Python client could not be generated from openapi/coreserve.yaml (above)" >&2
  exit 1
fi

# Caches that installing, importing or testing the package may leave in the committed tree
# (all git-ignored) are not part of the client.
if ! diff -r -u -N \
  --exclude=__pycache__ --exclude='*.pyc' --exclude=.ruff_cache --exclude=.pytest_cache \
  --exclude=.mypy_cache --exclude=build --exclude=dist --exclude='*.egg-info' \
  "$here/coreserve-client" "$tmp/coreserve-client" >"$tmp/diff"; then
  head -n 200 "$tmp/diff" >&2
  lines=$(wc -l <"$tmp/diff")
  if [ "$lines" -gt 200 ]; then
    echo "... ($lines lines of diff in all)" >&2
  fi
  echo "the Python client is stale: run clients/python/generate.sh" >&2
  exit 1
fi
echo "check_fresh: clients/python/coreserve-client matches openapi/coreserve.yaml"
