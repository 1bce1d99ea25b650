# The two commands of the README: `make demo` and `make test`. Both set up what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Python's bytecode cache is written (gitignored __pycache__/) even where the environment
# turns it off: without it every test worker and every sandboxed child compiles Sluice's
# modules again, which took a test worker's collection from 6 s to 16-18 s of CPU.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-fast lint typecheck unit bench clean lock

# Every package from requirements/dev.lock (exact versions, hashes checked), then Sluice itself
# with no dependencies and the locked build backend: nothing unhashed is installed. pip
# installs only uv (its entry in the lock, hashes and all); uv installs the rest: it fetches
# in parallel and compiles no bytecode up front (Python writes it at first import), which on
# a clean machine took 3 min 10 s against pip's 5 min 27 s (docs/benchmarks.md, "CI").
$(STAMP): pyproject.toml requirements/dev.lock
	$(PYTHON) -m venv $(VENV)
	awk '/^uv==/{p=1} p{print} p && !/\\$$/{exit}' requirements/dev.lock > $(VENV)/uv.txt
	$(BIN)/pip install --quiet --require-hashes -r $(VENV)/uv.txt
	$(BIN)/uv pip install --quiet --python $(BIN)/python --require-hashes -r requirements/dev.lock
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps --no-build-isolation -e .
	touch $(STAMP)

## lock: rewrite requirements/dev.lock and runtime.lock from pyproject.toml's ranges (keeps the
## locked versions that still fit; `make lock UPGRADE=--upgrade` takes the newest that do)
LOCK := $(BIN)/uv pip compile --quiet --universal --python-version 3.11 --generate-hashes $(UPGRADE)
lock: $(STAMP)
	$(LOCK) pyproject.toml requirements/build.in --extra dev --extra projects -o requirements/dev.lock
	$(LOCK) pyproject.toml requirements/build.in --extra projects -c requirements/dev.lock -o requirements/runtime.lock

## demo: the whole flow on the example project (jaffle_shop), locally: build prod on local
## Spark, open a PR with a change on the local forge, approve, merge, promote, query prod;
## `make demo KEEP=1` keeps its repository (.sluice-demo/) and the PR comment to look at
demo: export SPARK_LOCAL_IP = 127.0.0.1
demo: $(STAMP)
	bash scripts/ensure-java.sh
	bash scripts/ensure-bwrap.sh
	$(BIN)/sluice demo$(if $(filter 1 yes true,$(KEEP)), --keep)

## test: lint, type-check and run every test (starts its own PostgreSQL)
test: lint typecheck unit

## test-fast: the tests that need neither Spark nor PostgreSQL and are not slow (the loop
## while editing; `make test` runs everything)
test-fast: $(STAMP)
	$(BIN)/pytest -q -n auto -m "not spark and not postgres and not slow" -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# The tests without Spark run on every core (pytest-xdist); the Spark tests after them on
# two workers, a test module per worker (its module-scoped prod is built once): a Spark
# test spends much of its time starting JVMs, waiting on a driver or a killed process.
unit: $(STAMP)
	bash scripts/ensure-java.sh
	bash scripts/ensure-bwrap.sh
	bash scripts/ensure-postgres.sh
	bash scripts/ensure-mermaid.sh
	$(BIN)/pytest -n auto -m "not spark"
	SPARK_LOCAL_IP=127.0.0.1 $(BIN)/pytest -m spark -n 2 --dist loadfile

bench: $(STAMP)
	$(BIN)/python bench/plan_bench.py
	$(BIN)/python bench/apply_bench.py
	bash scripts/ensure-postgres.sh
	$(BIN)/python bench/webhook_bench.py

clean:
	rm -rf $(VENV) .sluice .sluice-demo examples/*/.sluice
