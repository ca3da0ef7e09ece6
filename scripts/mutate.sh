#!/usr/bin/env bash
# `make mutate`: mutation testing (pyproject's [tool.mutmut]: the modules whose output is data or a
# decision, and tests/unit as the suite that must kill the mutants), then the score per module and
# every surviving mutant in mutants/report.md (scripts/mutation_report.py; docs/testing.md).
# Incremental: a re-run tests only mutants of functions that changed.
#   MODULES="ragscale/secrets.py ragscale.io.output"  only these modules (paths or dotted names)
#   MODULES=changed     the modules in scope that differ from BASE (default origin/main, else main),
#                       committed or not: what to run before stopping
#   RECHECK=1           only the mutants not caught in the last run (of MODULES, if given): after
#                       adding tests (mutmut re-tests a mutant only when its function changed)
#   MUTATE_FLOOR=95     the lowest score a module may have (tests/mutation_floors.json may set a
#                       module's own, each with its reason); MUTATE_JOBS=n: the parallelism
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
"$PY" -c "import mutmut" 2>/dev/null || "$PY" -m pip install -q "mutmut>=3.8.1,<3.9"
sel=()
if [ -n "${MODULES:-}" ]; then
  picked=$("$PY" scripts/mutation_report.py --select "$MODULES" --base "${BASE:-}")  # exits 1 on a name outside the scope
  mapfile -t sel < <(printf '%s' "$picked" | sed '/^$/d')
  if [ "${#sel[@]}" -eq 0 ]; then
    echo "make mutate: no module in the mutation scope matches MODULES=$MODULES: nothing to run"
    exit 0
  fi
  echo "make mutate: ${#sel[@]} module(s): ${sel[*]}"
fi
# mutmut copies the tree into mutants/ and runs the unit tests there, once per mutant (forked); the
# tests that read ../shared find it from there too (else they would skip under mutation only)
if [ -z "${RAGSCALE_SHARED:-}" ] && [ -d ../shared ]; then export RAGSCALE_SHARED="$(cd ../shared && pwd)"; fi
patterns=()
for m in "${sel[@]}"; do patterns+=("$m.*"); done
run=1
if [ -n "${RECHECK:-}" ]; then
  left=$("$PY" scripts/mutation_report.py --survivors ${sel[@]:+--modules "${sel[@]}"})
  mapfile -t patterns < <(printf '%s' "$left" | sed '/^$/d')
  if [ "${#patterns[@]}" -eq 0 ]; then
    # mutmut given no name runs every mutant of the scope: only the last run's report
    echo "make mutate: no mutant left to re-check"
    run=0
  else
    echo "make mutate: re-checking ${#patterns[@]} mutant(s) not caught in the last run"
  fi
fi
if [ "$run" -eq 1 ]; then .venv/bin/mutmut run --max-children "${MUTATE_JOBS:-$(nproc)}" "${patterns[@]}" || true; fi
"$PY" scripts/mutation_report.py --floor "${MUTATE_FLOOR:-95}" ${sel[@]:+--modules "${sel[@]}"}
