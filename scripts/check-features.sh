#!/usr/bin/env bash
# Fails when `cargo build --bin attest` (what `make demo` builds) would resolve a dependency with other features
# than the whole workspace with every target (what `make test` builds): each such crate, and everything above it,
# would then be compiled twice on a fresh machine. Mend by naming the missing features in
# crates/attest-cli/Cargo.toml, as that file does for bytemuck and simd-adler32.
set -euo pipefail
cd "$(dirname "$0")/.."
features() { cargo tree --offline -f '{p} [{f}]' --prefix none "$@" | sed 's/ (\*)$//' | sort -u; }
# Normal (and dev) edges only: with build edges, cargo tree shows a build script's dependencies merged with the
# same crates' target features, which cargo itself keeps apart (a false alarm on getrandom through prost-build).
binary="$(features -p attest-cli -e normal)"
workspace="$(features --workspace -e normal,dev)"
# Crates of the binary whose features differ in the workspace's resolution.
drift="$(comm -23 <(echo "$binary") <(echo "$workspace") | grep -v '^attest-' || true)"
if [ -n "$drift" ]; then
  echo "check-features: the attest binary resolves these crates with other features than the workspace:" >&2
  while read -r line; do
    crate="${line%% \[*}"
    echo "  binary:    $line" >&2
    echo "  workspace: $(echo "$workspace" | grep -F "$crate [" | head -1)" >&2
  done <<<"$drift"
  exit 1
fi
echo "check-features: the attest binary and the workspace resolve $(echo "$binary" | wc -l) crates alike"
