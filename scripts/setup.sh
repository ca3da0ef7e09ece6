#!/usr/bin/env bash
# Idempotent set-up: creates .venv at the repository root and installs ragscale with
# its extras. torch is installed FIRST and pinned to the CPU build (see docs), so that no
# later requirement can pull a multi-GB CUDA build onto a CPU machine.
# Re-running is cheap: it does nothing when pyproject.toml and this script are unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
TORCH_SPEC=${RAGSCALE_TORCH_SPEC:-torch==2.13.0}
EXTRAS=${RAGSCALE_EXTRAS:-models,reference,test}
stamp=.venv/.ragscale-setup
want=$( (cat pyproject.toml scripts/setup.sh; echo "$TORCH_SPEC $EXTRAS") | sha256sum | cut -c1-16)

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && .venv/bin/python -c "import ragscale" 2>/dev/null; then
  exit 0
fi
echo "[setup] creating/updating .venv with $($PY --version)"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=(.venv/bin/python -m pip --disable-pip-version-check -q)
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  echo "[setup] installing $TORCH_SPEC (CPU) first"
  "${PIP[@]}" install "$TORCH_SPEC"
fi
echo "[setup] installing ragscale[$EXTRAS]"
"${PIP[@]}" install -e ".[$EXTRAS]"
.venv/bin/python -c "import ragscale, ray, torch; print('[setup] ok: ragscale', ragscale.__version__, 'ray', ray.__version__, 'torch', torch.__version__)"
echo "$want" > "$stamp"
