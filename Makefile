# Attest — the two set-up commands are `make demo` and `make test` (see README.md).
SHELL := /bin/bash
# Outside the checkout, so that builds are reused (a fresh machine needs ~10 min for the binary, FAISS included).
export CARGO_TARGET_DIR ?= $(HOME)/.cache/attest-target
ATTEST := $(CARGO_TARGET_DIR)/debug/attest
# Evaluation, benchmarks and training (kept out of the production binary).
ATTEST_LAB := $(CARGO_TARGET_DIR)/debug/attest-lab
# onnx, onnxruntime and numpy, pinned (scripts/install-onnxruntime.sh, run by `setup`): the reader's graph tests.
ONNX_PYTHON := $${ATTEST_ONNX_VENV:-$(HOME)/.cache/attest-onnx-venv}/bin/python
# FAISS runs inside OpenMP regions and calls OpenBLAS: with both thread pools spinning on 2 cores and tests
# running in parallel, training slows down a hundredfold. One BLAS thread and passive OpenMP waiting fix it.
export OPENBLAS_NUM_THREADS ?= 1
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: config-doc setup build demo test feature-check proto-lint chart-test console-test client-test ts-client-test api-fuzz lint models eval-gate eval-baseline openapi

setup:
	scripts/setup.sh

models:
	scripts/install-model.sh
	scripts/install-bge.sh
	scripts/install-llm.sh

# The whole workspace with every target. The `attest` binary alone resolves the same features
# (scripts/check-features.sh keeps it so), so `make demo` builds only it and `make test` adds the rest without
# compiling anything twice.
build: setup
	cargo build --workspace --all-targets

# cargo leaves the binary in its target directory, not on PATH: the last lines say where it is and how to reach it.
demo: setup
	cargo build -p attest-cli --bin attest
	ATTEST_BIN=$(ATTEST) scripts/demo.sh
	@echo
	@echo "The attest binary is $(abspath $(ATTEST)) (not on PATH). To run it as \`attest\` in this shell:"
	@echo '    export PATH="$(abspath $(dir $(ATTEST))):$$PATH"'

# `build` first: the suites of tests/ run the `attest` binary of the same build, which `cargo test` alone does
# not build for another package's tests (and the chart tests check the chart's flags against it).
test: build feature-check proto-lint chart-test console-test client-test ts-client-test api-fuzz
	$(ONNX_PYTHON) -m unittest discover -s scripts/reader -p 'test_*.py'
	python3 -m unittest discover -s data/company-nearmiss -p 'test_*.py'
	python3 -m unittest discover -s scripts/embedders -p 'test_*.py'
	cargo test --workspace --no-fail-fast

feature-check:
	scripts/check-features.sh

# The Helm chart and the image contract, offline (helm/tests; a pinned Python environment in ~/.cache).
chart-test:
	ATTEST_BIN=$(ATTEST) scripts/chart-test.sh

# The web console in Debian's headless Chromium against `attest dev` (tests/browser; Playwright in a pinned Python
# environment in ~/.cache). `scripts/console-test.sh --screenshots docs/console` refreshes the README's screenshots.
console-test:
	ATTEST_BIN=$(ATTEST) scripts/console-test.sh

# The Python client (clients/python) and its LangChain / LlamaIndex adapters: the wheel built offline by
# `python -m build`, installed with both extras into a pinned Python environment in ~/.cache, tested against `attest dev`.
client-test:
	ATTEST_BIN=$(ATTEST) scripts/python-client-test.sh

# The TypeScript client (clients/typescript): `npm ci` with the pinned devDependencies (npm's cache in
# ~/.cache/attest-npm), its generated API types checked against docs/openapi.json, built with tsc, tested with
# Node's test runner against `attest dev`, then packed with `npm pack` and installed from the tarball.
ts-client-test:
	ATTEST_BIN=$(ATTEST) scripts/typescript-client-test.sh

# HTTP API v1 fuzzed from the OpenAPI document `attest dev` serves (Schemathesis, pinned in tests/fuzz): every
# operation, valid and invalid requests, against an open dev and one with keys; fails on any 5xx or any response
# the document does not describe.
api-fuzz:
	ATTEST_BIN=$(ATTEST) scripts/api-fuzz.sh

lint: proto-lint
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

# The .proto files are the gRPC contract: protoc (which the build already needs) checks them with warnings fatal
# (part of `make test`).
proto-lint:
	protoc --fatal_warnings -I proto --descriptor_set_out=/dev/null proto/attest/v1/*.proto

# The OpenAPI document of HTTP API v1, generated from the handlers (what `attest dev` serves at /v1/openapi.json);
# tests/cli.rs fails when the committed file differs.
openapi: build
	$(ATTEST) openapi --out docs/openapi.json

# Every configuration key with its default (docs/config.yaml); tests/cli.rs fails when the committed file differs.
config-doc: build
	scripts/config-doc.sh $(ATTEST)

# The quality gate CI runs after the tests: the bundled squad sample (301 paragraphs, 150 questions) through
# `attest-lab eval`, with 40 adversarial questions (the answer sentence removed from the gold paragraph) and the
# verifier on the held-out synthetic contrastive pairs, failing against the committed baseline when accuracy drops
# by more than 5 points, hallucination rises by more than 1 point (adversarial: 5), a citation is invalid, or the
# verifier's AUROC drops by more than 0.03 (refresh it with `make eval-baseline` after an intended change).
EVAL_BASELINE := docs/eval/squad-sample.json
EVAL_GATE_ARGS := --data data/squad-sample --adversarial 40 --verifier-data docs/eval/contrastive-heldout.jsonl --log-level warn

eval-gate: build
	$(ATTEST_LAB) eval $(EVAL_GATE_ARGS) --json $(CARGO_TARGET_DIR)/eval-squad-sample.json --baseline $(EVAL_BASELINE)

eval-baseline: build
	$(ATTEST_LAB) eval $(EVAL_GATE_ARGS) --json $(EVAL_BASELINE)
