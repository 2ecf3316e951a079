# Attest — the two set-up commands are `make demo` and `make test` (see README.md).
SHELL := /bin/bash
# Outside the checkout, so that builds (FAISS and RocksDB take ~25 min the first time) are reused.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/attest-target
ATTEST := $(CARGO_TARGET_DIR)/debug/attest
# FAISS runs inside OpenMP regions and calls OpenBLAS: with both thread pools spinning on 2 cores and tests
# running in parallel, training slows down a hundredfold. One BLAS thread and passive OpenMP waiting fix it.
export OPENBLAS_NUM_THREADS ?= 1
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: setup build demo test lint models

setup:
	scripts/setup.sh

models:
	scripts/install-model.sh
	scripts/install-llm.sh

build: setup
	cargo build -p attest-cli

demo: build
	ATTEST_BIN=$(ATTEST) scripts/demo.sh

test: setup
	cargo test --workspace --no-fail-fast

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
