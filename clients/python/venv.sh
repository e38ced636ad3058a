# Sourced by generate.sh, check_fresh.sh and run_tests.sh (not run on its own): the virtualenv
# of clients/python, with exactly the packages of requirements.txt.
#
# Before sourcing, set `here` (clients/python, absolute) and keep the caller's cwd: a relative
# CORESERVE_PY_VENV is taken relative to it. Defines `venv` (absolute) and `ensure_venv`.
#
#   CORESERVE_PY_VENV  the virtualenv (default clients/python/.venv, git-ignored)
#   PYTHON             the interpreter that makes it (default python3; 3.11 or newer)

if [ -n "${CORESERVE_PY_VENV:-}" ]; then
  venv=$(realpath -m -- "$CORESERVE_PY_VENV")
else
  venv=$here/.venv
fi

# Creates the virtualenv if needed and installs requirements.txt into it whenever that file
# changed since the last install (a stamp in the venv holds its SHA-256).
ensure_venv() {
  local req=$here/requirements.txt stamp=$venv/.coreserve-requirements.sha256 want python
  want=$(sha256sum "$req" | cut -d' ' -f1)
  if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  python=${PYTHON:-python3}
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null ||
    { echo "clients/python: $python is missing or older than 3.11 (the generated client needs 3.11+); set PYTHON" >&2; return 1; }
  if [ -f "$stamp" ]; then
    # Ours, made from an older requirements.txt: start afresh so nothing stale stays.
    echo "clients/python: requirements.txt changed; recreating $venv" >&2
    "$python" -m venv --clear "$venv"
  elif [ ! -x "$venv/bin/python" ]; then
    echo "clients/python: creating $venv" >&2
    "$python" -m venv "$venv"
  fi
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
  echo "$want" >"$stamp"
}
