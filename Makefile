# Everything a new machine needs: `make run` to try it, `make test` to prove it.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint docs bench bench-memory faults soak clean

# The install step: the virtual environment, the package, and the pinned Apache Kafka's jars (fetched
# once from Maven Central into ~/.cache/callscreen, shared by every clone).
$(STAMP): pyproject.toml deploy/kafka/pom.xml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "needs $(PYTHON)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/python -m callscreen.localkafka
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/callscreen run --demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# docs/rules.md and the layers picture in docs/architecture.md, from the code.
docs: $(STAMP)
	$(BIN)/python -m infra.docs

test: $(STAMP) lint
	$(BIN)/pytest -q

# The fault-injection kill test at full strength: 50 kills spread over the four steps of a fold.
faults: $(STAMP)
	CALLSCREEN_TEST_FAULT_KILLS=50 $(BIN)/pytest -q tests/hostile/test_fault_kills.py

# Read-your-writes at full strength: 2,000 calls from 8 clients, three runs.
soak: $(STAMP)
	CALLSCREEN_TEST_RYW_CALLS=2000 CALLSCREEN_TEST_RYW_RUNS=3 $(BIN)/pytest -q tests/hostile/test_read_your_writes.py

bench: $(STAMP)
	$(BIN)/python -m bench.run

bench-memory: $(STAMP)
	$(BIN)/python -m bench.memory

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache
