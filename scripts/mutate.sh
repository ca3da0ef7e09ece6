#!/usr/bin/env bash
# `make mutate`: mutation testing of the pure core (pyproject's [tool.mutmut]: the modules, and
# tests/unit as the suite that must kill the mutants), then the score and every surviving mutant
# in mutants/report.md (scripts/mutation_report.py; docs/testing.md). Incremental: a re-run
# tests only mutants of functions that changed. MUTATE_MIN: the lowest acceptable score (90).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
"$PY" -c "import mutmut" 2>/dev/null || "$PY" -m pip install -q "mutmut>=3.8.1,<3.9"
# mutmut copies the tree into mutants/ and runs the unit tests there, once per mutant (forked).
.venv/bin/mutmut run --max-children "${MUTATE_JOBS:-$(nproc)}" "$@" || true
"$PY" scripts/mutation_report.py --min "${MUTATE_MIN:-90}"
