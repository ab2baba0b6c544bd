#!/usr/bin/env bash
# Makes (once) and prints the path of the pinned Python environment that tests
# and peer benchmarks use: a virtual environment of Debian's python3 holding
# exactly scripts/python-requirements.txt, from PyPI (--no-deps: that file pins
# every package of the environment, dependencies included).
#   PY=$(scripts/python-env.sh)      # then: "$PY" some_test.py
# It is cached under ${ZAYA_PYENV_CACHE:-${XDG_CACHE_HOME:-~/.cache}/zaya}, one
# folder per version of the requirements (named by their hash), so a clean
# clone reuses it and a changed pin builds a new one beside it. Made in
# place and stamped complete only at the end, so an interrupted install is
# made again rather than used; a lock serialises concurrent callers.
# Exits non-zero, saying why, when PyPI cannot be reached or python3-venv is
# missing (scripts/setup-debian.sh installs it).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
requirements=$root/scripts/python-requirements.txt
python=${ZAYA_PYTHON_BASE:-/usr/bin/python3}
cache=${ZAYA_PYENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/zaya}
key=$( (cat "$requirements"; "$python" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-16)
env=$cache/pyenv-$key

# The stamp is written last: a folder without it is a broken earlier try, made again.
if [[ ! -f $env/complete ]]; then
  mkdir -p "$cache"
  exec 9>"$cache/pyenv.lock"
  flock 9
  if [[ ! -f $env/complete ]]; then
    rm -rf "$env"
    log=$cache/pyenv-$key.log
    "$python" -m venv "$env" >"$log" 2>&1 ||
      { echo "python-env.sh: '$python -m venv' failed (apt-get install python3-venv): $(tail -3 "$log")" >&2; exit 1; }
    timeout 1800 "$env/bin/python" -m pip install --disable-pip-version-check --no-input -q --no-deps -r "$requirements" >"$log" 2>&1 ||
      { echo "python-env.sh: pip install -r $requirements failed (is PyPI reachable?): $(tail -5 "$log")" >&2; exit 1; }
    date -u +%FT%TZ >"$env/complete"
  fi
fi
echo "$env/bin/python"
