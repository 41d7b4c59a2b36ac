# Two commands: `make up` runs Pressroom on embedded defaults; `make test` runs every test.
# `make image` builds the image and its SBOM; `make lock` updates requirements/ after
# pyproject.toml changed (docs/deploy.md, "Building the image"); `make docs` builds the
# documentation site (mkdocs.yml, docs/) into site/, `make docs-serve` serves it while you edit.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TAG ?= localhost/pressroom:dev
STAMP := $(VENV)/.installed

.PHONY: up test bench soak lint typecheck chromium clean image lock docs docs-serve

# The development tools and every dependency from the lock (sha256 checked), then the
# project itself, editable.
$(STAMP): pyproject.toml requirements/dev.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is needed"'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements/dev.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# chromiumly, a Gotenberg client from npm, pinned by its package-lock.json, for
# tests/integration/test_gotenberg_clients.py.
CHROMIUMLY := tests/integration/chromiumly/node_modules/.installed
$(CHROMIUMLY): tests/integration/chromiumly/package-lock.json
	cd tests/integration/chromiumly && npm ci --no-audit --no-fund --silent
	touch $@

lock: $(STAMP)
	scripts/lock.sh

image: $(STAMP)
	PYTHON=$(BIN)/python scripts/build-image.sh $(TAG)

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --strict

chromium:
	@scripts/ensure-chromium.sh

up: $(STAMP) chromium
	$(BIN)/pressroom dev

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint typecheck chromium $(CHROMIUMLY)
	$(BIN)/pytest -q --durations=25 -n 2 --dist loadfile -m "not serial"
	$(BIN)/pytest -q --durations=10 -m serial

bench: $(STAMP) chromium
	@scripts/ensure-wrk.sh
	$(BIN)/python bench/render_throughput.py
	$(BIN)/python bench/scale_out.py
	$(BIN)/python bench/batch_run.py
	$(BIN)/python bench/nats_durability.py
	$(BIN)/python bench/finishing_cost.py
	$(BIN)/python bench/sign_cost.py
	$(BIN)/python bench/print_options_cost.py
	$(BIN)/python bench/pdftools_cost.py
	$(BIN)/python bench/pdfjobs_e2e.py
	$(BIN)/python bench/gotenberg_cost.py

soak: $(STAMP) chromium
	$(BIN)/python bench/soak.py --plots docs/img

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache site
