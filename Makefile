# Two commands on a fresh machine: `make run` and `make test`. Both build .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-quick bench clean venv cli bytecode

venv: $(STAMP)

INSTALL_LOG := .run/install.log

# One line while .venv is built; pip's and setuptools' own output goes to .run/install.log, which
# the line names (with its last lines) when the install fails (docs/operating.md).
$(STAMP): pyproject.toml
	@mkdir -p .run; start=$$(date +%s); : >$(INSTALL_LOG); \
	printf 'make: installing the bot into $(VENV) (details in $(INSTALL_LOG)) ... '; \
	if { test -x $(BIN)/python || $(PYTHON) -m venv $(VENV); } >>$(INSTALL_LOG) 2>&1 \
		&& $(BIN)/python -m pip install --disable-pip-version-check --upgrade pip >>$(INSTALL_LOG) 2>&1 \
		&& $(BIN)/python -m pip install --disable-pip-version-check -e '.[dev]' >>$(INSTALL_LOG) 2>&1; then \
		touch $(STAMP); echo "done in $$(( $$(date +%s) - start )) s"; \
	else \
		echo "FAILED after $$(( $$(date +%s) - start )) s"; echo "--- last lines of $(INSTALL_LOG):"; \
		tail -n 15 $(INSTALL_LOG); echo "--- the whole log: $(INSTALL_LOG)"; exit 1; \
	fi

## run: the bot (web + worker from the Procfile); embedded Redis and stand-in model when unset
run: $(STAMP) bytecode
	$(BIN)/python -m bot.dev.runner

## test: every test, unit and integration, with the real local embedding model (first pass); then the
## tests marked `cluster` again with user state on a 3-master Redis Cluster and RQ on a standalone Redis
## (the fixtures start both): tests of keys, scripts and slots, and one end-to-end path of each kind; the
## pass fails if any function of bot/storage/ or Lua script did not run on the cluster (docs/testing.md).
## PYTEST_FLAGS reaches both passes (.ci/run gives --durations=25).
test: $(STAMP) bytecode
	@start=$$(date +%s); $(BIN)/python -m pytest -q $(PYTEST_FLAGS); code=$$?; \
		echo "make test: first pass (every test, one Redis): $$(( $$(date +%s) - start )) s"; exit $$code
	@start=$$(date +%s); TEST_REDIS_TOPOLOGY=cluster TEST_EMBEDDINGS=off TEST_STORAGE_COVERAGE=required \
		$(BIN)/python -m pytest -q -p no:cacheprovider -m cluster --ignore=tests/dev --ignore=tests/browser $(PYTEST_FLAGS); \
		code=$$?; echo "make test: cluster pass (tests marked cluster, 3-master cluster): $$(( $$(date +%s) - start )) s"; \
		exit $$code

## test-quick: the unit tests and the tests of whatever changed since main (BASE=<ref> to compare with
## another), on one Redis: the developer's loop; `make test` stays the one command CI and a newcomer run
test-quick: $(STAMP) bytecode
	@$(BIN)/python -m tests.quick $(PYTEST_FLAGS)

## bytecode: compile our modules once, so every process the tests and `make run` start loads
## them instead of compiling them again (the environment may set PYTHONDONTWRITEBYTECODE)
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q bot workers >/dev/null

## cli: the command-line tools, as .venv/bin/whatsapp-bot (make cli ARGS="chat")
cli: $(STAMP)
	$(BIN)/whatsapp-bot $(ARGS)

## bench: the benchmarks in bench/ (figures, not pass/fail)
bench: $(STAMP)
	$(BIN)/python bench/bench_webhook.py

clean:
	rm -rf $(VENV) .run .pytest_cache
