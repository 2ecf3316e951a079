#!/usr/bin/env bash
# Builds the Attest container image from deploy/Dockerfile with docker or podman (whichever is installed;
# ATTEST_CONTAINER_TOOL=podman to choose), tagged attest:<workspace version> unless an image name is given.
#
# Usage: scripts/build-image.sh [IMAGE] [extra build arguments...]
#   scripts/build-image.sh                                  # attest:0.1.0
#   scripts/build-image.sh registry.example/attest:0.1.0 --build-arg CARGO_FEATURES=...
#
# Needs a registry the base images (rust, python, debian:bookworm-slim) can be pulled from, and PyPI for the model.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

die() {
    printf 'build-image: error: %s\n' "$*" >&2
    exit 1
}

tool="${ATTEST_CONTAINER_TOOL:-}"
if [[ -z "$tool" ]]; then
    for candidate in docker podman; do
        if command -v "$candidate" >/dev/null 2>&1; then
            tool="$candidate"
            break
        fi
    done
fi
[[ -n "$tool" ]] || die "neither docker nor podman is installed"
command -v "$tool" >/dev/null 2>&1 || die "$tool is not installed"

version="$(awk -F'"' '/^\[workspace.package\]/ { in_pkg = 1; next } /^\[/ { in_pkg = 0 } in_pkg && /^version *=/ { print $2; exit }' Cargo.toml)"
[[ -n "$version" ]] || die "no [workspace.package] version in Cargo.toml"
image="${1:-attest:$version}"
shift || true

# BuildKit for the cache mounts of the builder stage (podman/buildah support them natively).
if [[ "$tool" == docker ]]; then
    export DOCKER_BUILDKIT=1
fi

printf 'build-image: %s build -t %s -f deploy/Dockerfile .\n' "$tool" "$image" >&2
"$tool" build -f deploy/Dockerfile -t "$image" "$@" .
printf 'build-image: built %s\n' "$image" >&2
"$tool" run --rm "$image" attest --version
