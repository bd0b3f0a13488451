# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
DEMO_STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck proto docs docker clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The demo needs only the package; the suite and the linters need the dev extras too (a dev
# install satisfies the demo as well).
$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $(DEMO_STAMP)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP) $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/python -m lifeline_mesh.demo

# The whole suite, slow tests included: most of it on TEST_WORKERS pytest-xdist workers (whole
# files per worker, the files holding slow tests first), then the tests marked `serial` alone,
# one at a time. Both parts always run; either failing fails the target. See decision 0027.
TEST_WORKERS ?= 3
PARALLEL := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

test: $(STAMP)
	$(BIN)/ruff check lifeline lifeline_mesh tests bench
	$(BIN)/mypy
	$(BIN)/python -m pytest -q $(PARALLEL) -m "not serial"; parallel=$$?; \
	$(BIN)/python -m pytest -q -m serial; serial=$$?; \
	test $$parallel -eq 0 && test $$serial -eq 0

lint: $(STAMP)
	$(BIN)/ruff check lifeline lifeline_mesh tests bench
	$(BIN)/ruff format --check lifeline lifeline_mesh tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

proto: $(STAMP)
	$(BIN)/python scripts/gen_proto.py

docs: $(STAMP)
	$(BIN)/python scripts/gen_cli_doc.py

# The node and PostgreSQL images, built offline (base image by debootstrap, host-built
# wheels); needs a Docker engine. See docker/README.md.
docker:
	docker/build.sh --postgres

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
