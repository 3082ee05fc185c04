#!/usr/bin/env bash
# Runs every test suite except benchmarks: unit, golden, e2e and gpu (gpu tests skip, saying why,
# on a machine without a usable GPU). Builds first so the tests never run against stale binaries.
#   scripts/test.sh              all of them
#   scripts/test.sh -L unit      only one label (any extra arguments go to ctest)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${FT_BUILD_DIR:-build}
[ -f "$BUILD_DIR/build.ninja" ] || { echo "test: no build in $BUILD_DIR; run scripts/setup.sh first" >&2; exit 2; }
cmake --build "$BUILD_DIR" -j"$(nproc)"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" -LE bench "$@"
