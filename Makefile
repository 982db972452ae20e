# Every target sets itself up: a fresh clone needs only Python >= 3.11 with pip (and, for
# `make test`, Node with npm: the JavaScript consumers in tests/js).
# `make demo` installs what robowire needs to run; test, lint, typecheck and bench add the
# development tools (pytest, mypy, the interop clients). A venv with the tools has both.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.runtime
DEV := $(VENV)/.installed

.PHONY: test demo bench fuzz lint typecheck check clean proto soak reliability docs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# the runtime dependencies only; nothing to do when the development install is up to date
$(RUNTIME): pyproject.toml | $(BIN)/python
	if [ ! $(DEV) -nt pyproject.toml ]; then $(BIN)/pip install --quiet -e .; fi
	touch $@

$(DEV): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@ $(RUNTIME)

# the third-party JavaScript consumers the tests check outputs with (@foxglove/ws-protocol,
# @mcap/core), exactly as tests/js/package-lock.json pins them
NODE_MODULES := tests/js/node_modules/.package-lock.json
$(NODE_MODULES): tests/js/package.json tests/js/package-lock.json
	cd tests/js && npm ci --no-audit --no-fund --loglevel=error
	touch $@

test: $(DEV) $(NODE_MODULES)
	$(BIN)/python -m pytest

demo: $(RUNTIME)
	$(BIN)/robowire demo

# one table per protocol at the end, also bench-results.json and bench-latency.png (~10 min);
# `make bench BENCH_ARGS=--quick` for the table alone with short windows (~3 min)
bench: $(DEV)
	$(BIN)/python -m bench $(BENCH_ARGS)

# coverage-guided fuzzing (atheris) of every decoder and session, FUZZ_TIME seconds each;
# crashes land in tests/data/fuzz/<target>/ and fail `make test` until fixed.
# One target: $(BIN)/python -m fuzz vrpn-session-client --time 600
FUZZ_TIME ?= 30
FUZZ := $(VENV)/.fuzz-installed
$(FUZZ): pyproject.toml $(DEV)
	$(BIN)/pip install --quiet -e '.[dev,fuzz]'
	touch $@

fuzz: $(FUZZ)
	$(BIN)/python -m fuzz --all --time $(FUZZ_TIME)

# Issue 14: the 10-minute soak at the target loads, and the churn test at 10x the cycles
soak: $(DEV)
	PYTHONPATH=src $(BIN)/python -m tests.reliability.soak --duration 600

reliability: $(DEV)
	ROBOWIRE_CHURN_CYCLES=10000 $(BIN)/python -m pytest tests/reliability -s
	ROBOWIRE_FAULT_MATRIX=full ROBOWIRE_FAULT_CYCLES=1000 ROBOWIRE_FAULT_RESTARTS=1000 \
		ROBOWIRE_FAULT_STALL=30 \
		$(BIN)/python -m pytest tests/faults -s

# lint-imports: the layers contract in pyproject.toml (docs/architecture.md's diagram)
lint: $(DEV)
	$(BIN)/ruff check src tests bench tools fuzz examples
	$(BIN)/ruff format --check src tests bench tools fuzz examples
	$(BIN)/lint-imports

typecheck: $(DEV)
	$(BIN)/mypy

check: lint typecheck test

# The Python API reference (HTML) from the docstrings of the library face; warnings fail it
# (tests/api/test_docs.py builds it too, so `make test` checks it)
API_MODULES := robowire robowire.live robowire.publisher robowire.background \
	robowire.protocols.ugcs.vsm robowire.protocols.ugcs.vehicle robowire.protocols.ugcs.client \
	robowire.protocols.xrp.client robowire.protocols.xrp.robot
docs: $(DEV)
	$(BIN)/python -W error -m pdoc -o build/docs $(API_MODULES)
	@echo "API reference: build/docs/index.html"

# The UgCS VSM schema and the recorder's world channel (robowire.Update): regenerate the
# committed *_pb2.py/.pyi after editing a .proto (tests/ugcs/test_schema.py and
# tests/core/test_recording_format.py fail while they are stale).
UGCS_PROTO := src/robowire/protocols/ugcs/proto
proto: $(DEV)
	$(BIN)/python -m grpc_tools.protoc -Isrc --python_out=src --mypy_out=src \
		--plugin=protoc-gen-mypy=$(BIN)/protoc-gen-mypy \
		$(UGCS_PROTO)/ucs_vsm_defs.proto $(UGCS_PROTO)/ucs_vsm.proto $(UGCS_PROTO)/frames.proto \
		src/robowire/recording/update.proto

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache .import_linter_cache tests/js/node_modules
