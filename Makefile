# The two commands of the README: `make demo` and `make test`. Both set up what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

## demo: apply the example project (jaffle_shop) to prod on local Spark, test and query it
demo: export SPARK_LOCAL_IP = 127.0.0.1
demo: $(STAMP)
	bash scripts/ensure-java.sh
	$(BIN)/sluice apply --project examples/jaffle_shop --end 2018-04-30
	$(BIN)/sluice test --project examples/jaffle_shop
	$(BIN)/sluice query prod "SELECT customer_id, first_name, number_of_orders, customer_lifetime_value FROM jaffle.customers ORDER BY customer_lifetime_value DESC" --limit 5 --project examples/jaffle_shop

## test: lint, type-check and run every test (starts its own PostgreSQL)
test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	bash scripts/ensure-java.sh
	bash scripts/ensure-postgres.sh
	SPARK_LOCAL_IP=127.0.0.1 $(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python bench/plan_bench.py
	$(BIN)/python bench/apply_bench.py
	bash scripts/ensure-postgres.sh
	$(BIN)/python bench/webhook_bench.py

clean:
	rm -rf $(VENV) .sluice examples/*/.sluice
