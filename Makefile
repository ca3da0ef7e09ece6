# Quickstart: `make run` (set up + evaluate the bundled sample), `make test` (set up + tests).
PY := .venv/bin/python
ARGS ?=
PYTEST_ARGS ?=

.PHONY: setup run test bench clean

setup:
	@bash scripts/setup.sh

run: setup
	$(PY) -m ragscale.run +scenario=mtrag $(ARGS)

test: setup
	$(PY) -m pytest -q -rs $(PYTEST_ARGS)

bench: setup
	$(PY) benchmarks/algorithmic.py

clean:
	rm -rf outputs multirun .pytest_cache
