#!/usr/bin/env bash
# The Python client's checks, as CI runs them (any cwd):
#   1. check_fresh.sh: the committed client is what generate.sh makes from openapi/coreserve.yaml;
#   2. pytest clients/python/tests: the installed client (generated, and the coreserve layer on
#      it) against a live `coreserve serve` (in-memory store) that the tests start, and the
#      example scripts.
# Both run; the exit status is non-zero if either failed. Extra arguments go to pytest.
#
#   CORESERVE_BIN      the coreserve binary (default target/release/coreserve of this repository;
#                      CI: $CARGO_TARGET_DIR/release/coreserve); it is not built here
#   CORESERVE_PY_VENV  the virtualenv (default clients/python/.venv), made and kept up to date
#                      from clients/python/requirements.txt (PyPI on the first run)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# Relative paths given by the caller are relative to the caller's cwd.
if [ -n "${CORESERVE_BIN:-}" ]; then
  CORESERVE_BIN=$(realpath -m -- "$CORESERVE_BIN")
  export CORESERVE_BIN
fi
# shellcheck source=clients/python/venv.sh
. "$here/venv.sh"
export CORESERVE_PY_VENV=$venv
cd "$here/../.."

say() { echo "clients/python/run_tests.sh: $*" >&2; }

ensure_venv
# The generated package and the hand-written layer on it (coreserve) as a user installs them
# (their build backend is pinned in the venv, so no build isolation); their dependencies are the
# venv's pinned ones, and pip check proves they fit.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation \
  --force-reinstall clients/python/coreserve-client clients/python/coreserve
"$venv/bin/python" -m pip check --disable-pip-version-check >/dev/null ||
  { "$venv/bin/python" -m pip check; exit 1; }

status=0
clients/python/check_fresh.sh || status=1
# No cache dir in the tree: -p no:cacheprovider.
"$venv/bin/python" -m pytest -p no:cacheprovider -ra clients/python/tests "$@" || status=1

if [ "$status" -ne 0 ]; then
  say "FAILED"
fi
exit "$status"
