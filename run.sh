#!/usr/bin/env bash
# ./run.sh [SCENARIO_DIR] [flags]   run a scenario (default: scenarios/llama31_8b_decode_h100)
# ./run.sh --test [pytest args]     run the test suite
# ./run.sh mapshard ARGS...         any mapshard subcommand (hardware list, sweep, ...)
# First use creates .venv and installs MapShard into it; later runs are quiet.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"
stamp="$venv/.mapshard-installed"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
  echo "run.sh: creating $venv (first use)" >&2
  "$python" -m venv "$venv"
fi
if [ ! -f "$stamp" ] || [ "$here/pyproject.toml" -nt "$stamp" ]; then
  echo "run.sh: installing MapShard and its dependencies into .venv (about a minute)" >&2
  "$venv/bin/python" -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
  "$venv/bin/python" -m pip install --quiet -e "$here[test,cluster]"
  # bytecode for every module now: an editable install leaves the sources uncompiled, and
  # where PYTHONDONTWRITEBYTECODE is set (common in containers) each process would compile
  # them again (~0.4 CPU-s of a run's start); Python reads the files either way
  "$venv/bin/python" -m compileall -q -j 0 "$here"/{schema,mapshard,generator,hardware,solver} \
    >/dev/null || true
  touch "$stamp"
fi

if [ "${1:-}" = "--test" ]; then
  shift
  cd "$here"
  # one worker per core (pytest-xdist), a test file to a worker: the suite is CPU-bound
  exec "$venv/bin/python" -m pytest -n auto --dist loadfile "$@"
fi
if [ "${1:-}" = "mapshard" ]; then
  shift
  exec "$venv/bin/mapshard" "$@"
fi
if [ $# -eq 0 ] || [[ "${1:-}" == -* ]]; then
  set -- "$here/scenarios/llama31_8b_decode_h100" "$@"
fi
exec "$venv/bin/mapshard" run "$@"
