# Two commands on a fresh machine: `make run` and `make test`. Both build .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench clean venv cli bytecode

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## run: the bot (web + worker from the Procfile); embedded Redis and stand-in model when unset
run: $(STAMP) bytecode
	$(BIN)/python -m bot.dev.runner

## test: every test, unit and integration, with the real local embedding model; then again with
## user state on a 3-master Redis Cluster and RQ on a standalone Redis (the fixtures start both;
## tests/dev is topology-free, and the browser tests read pages the Flask-client tests already read
## on the cluster), the model only for the tests marked `embeddings`
test: $(STAMP) bytecode
	$(BIN)/python -m pytest -q
	TEST_REDIS_TOPOLOGY=cluster TEST_EMBEDDINGS=off $(BIN)/python -m pytest -q -p no:cacheprovider --ignore=tests/dev \
		--ignore=tests/browser

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
