# Everything a new machine needs: `make run` to try it, `make test` to prove it.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint lock fuzz docs email-example dashboard-shots bench bench-profile bench-gate bench-adapters bench-soak bench-overload bench-memory bench-crash bench-isolation bench-shadow faults soak clean

# The install step: the virtual environment, every dependency at the hash-checked version of the dev
# lock (pip, setuptools and wheel too, so the editable build downloads nothing unpinned), the package
# itself, and the pinned Apache Kafka's jars (fetched once from Maven Central into ~/.cache/callscreen,
# shared by every clone).
$(STAMP): pyproject.toml deploy/requirements-dev.lock callscreen/kafka/pom.xml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "needs $(PYTHON)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --require-hashes -r deploy/requirements-dev.lock
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m callscreen.localkafka
	touch $(STAMP)

# What the browser tests need beyond the venv: Debian's Chromium (installed when missing and run as
# root) and axe-core at the version deploy/browser/package-lock.json pins, checked by npm ci.
BROWSER_STAMP := deploy/browser/node_modules/.installed
$(BROWSER_STAMP): deploy/browser/package-lock.json
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
		{ echo "the browser tests need Chromium: apt-get install chromium"; exit 1; }
	cd deploy/browser && npm ci --silent --no-audit --no-fund
	touch $(BROWSER_STAMP)

# Both locks, from pyproject.toml, for Python 3.11 on Linux (the venv's interpreter). The runtime lock
# starts from the dev lock's pins, so the image runs the versions the tests ran. `make lock
# LOCK_ARGS=--upgrade` moves every pin to the newest release that fits.
LOCK_FLAGS := --quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-find-links --no-emit-index-url
lock: export CUSTOM_COMPILE_COMMAND = make lock
lock: $(STAMP)
	$(BIN)/pip-compile $(LOCK_FLAGS) $(LOCK_ARGS) --extra dev --output-file deploy/requirements-dev.lock pyproject.toml
	cp deploy/requirements-dev.lock deploy/requirements.lock
	$(BIN)/pip-compile $(LOCK_FLAGS) --output-file deploy/requirements.lock pyproject.toml

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

# The README's dashboard screenshots, from the browser test that checks every page at both widths.
dashboard-shots: $(STAMP) $(BROWSER_STAMP)
	CALLSCREEN_SCREENSHOTS=docs/dashboard $(BIN)/pytest -q tests/browser -k phone

# The README's example alert email, from the real templates (needs Chromium).
email-example: $(STAMP)
	$(BIN)/python -m callscreen.email_example

# Three pytest workers, each with its own Kafka and services, one test file per worker at a time: the
# pipeline tests mostly wait on the broker; with two the cores were busy 70% of the time.
# Files go out in collection order, the slow ones first (tests/conftest.py), not by their number of tests.
test: $(STAMP) $(BROWSER_STAMP) lint
	$(BIN)/pytest -q -n 3 --dist loadfile --no-loadscope-reorder --durations=15

# The fault-injection kill test at full strength: 50 kills spread over the four steps of a fold. Then the
# three-broker cluster with 50 broker SIGKILLs under load, each down 30 s (about 45 minutes; its figures
# in data/test-reports/broker-kills.json).
faults: $(STAMP)
	CALLSCREEN_TEST_FAULT_KILLS=50 $(BIN)/pytest -q -m faults tests/hostile/test_fault_kills.py
	CALLSCREEN_TEST_BROKER_KILLS=50 CALLSCREEN_TEST_BROKER_KILL_WINDOW_S=30 $(BIN)/pytest -q -s -m faults tests/test_broker_cluster.py

# Read-your-writes at full strength: 2,000 calls from 8 clients, three runs.
soak: $(STAMP)
	CALLSCREEN_TEST_RYW_CALLS=2000 CALLSCREEN_TEST_RYW_RUNS=3 $(BIN)/pytest -q tests/hostile/test_read_your_writes.py

# Schemathesis against a real service: 10,000 generated requests, none may get a 5xx or an undocumented
# answer (tests/fuzz/run.py). A few minutes; not part of `make test`.
fuzz: $(STAMP)
	$(BIN)/python -m tests.fuzz.run

bench: $(STAMP)
	$(BIN)/python -m bench.run
	$(BIN)/python -m bench.gate
	$(BIN)/python -m bench.adapters

# make bench with py-spy on the edge and the worker (and on the worker folding a backlog): top functions,
# and where the fold's CPU went, in bench/out/profile.md; flame graphs in bench/out/profiles/.
bench-profile: $(STAMP)
	$(BIN)/python -m bench.run --profile
	$(BIN)/python -m bench.gate --out bench/out/profile.md

# Only the carrier gate's section of docs/benchmarks.md (about a minute).
bench-gate: $(STAMP)
	$(BIN)/python -m bench.gate

# Only the platform adapters' section: Vapi's signed webhooks beside the same events on /v1/events, full calls
# at 250 requests/s each, three rounds (about a minute and a half; bench/out/adapters.json).
bench-adapters: $(STAMP)
	$(BIN)/python -m bench.adapters

# Ten minutes at half the sustainable turn rate the last `make bench` found (docs/benchmarks.md), on a store
# of 40,000 calls: p99, lag and RSS per minute (bench/out/soak.md, bench/out/soak.png).
bench-soak: $(STAMP)
	$(BIN)/python -m bench.soak --phase soak

# Twice that sustainable turn rate for a minute, then half: how soon p99 recovers, and that nothing
# acknowledged was lost (about three minutes; bench/out/soak.md, bench/out/overload.png).
bench-overload: $(STAMP)
	$(BIN)/python -m bench.soak --phase overload

bench-memory: $(STAMP)
	$(BIN)/python -m bench.memory

# A worker SIGKILLed with 20,000 and then 100,000 calls in its tables: the seconds until a start is scored
# again, and the gate's answers meanwhile (bench/out/crash.json; docs/hostile-runs.md, "Crash recovery").
bench-crash: $(STAMP)
	$(BIN)/python -m bench.crash

# A victim's call.started at 50/s, quiet and beside other accounts' floods: reads, hung forwards, black-holed
# webhook DNS, invalid keys, sign-ins (bench/out/isolation.json; docs/hostile-runs.md, "Tenant isolation").
# Folding the default million-call index takes an hour here: ISOLATION_ARGS=--index-calls=100000 is shorter.
bench-isolation: $(STAMP)
	$(BIN)/python -m bench.isolation $(ISOLATION_ARGS)

# Live call.started p99 at 200/s with no shadow run and while one reads the log of 100,000 calls, and the
# run's own rate (bench/out/shadow.json; docs/benchmarks.md, "Shadow runs"). SHADOW_ARGS="--calls 20000" for less.
bench-shadow: $(STAMP)
	$(BIN)/python -m bench.shadow $(SHADOW_ARGS)

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache
