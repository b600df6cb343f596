#!/usr/bin/env bash
# Installs what is missing, builds everything and runs the whole test suite. This is the
# README's test command and what CI runs. BUILD_DIR (default: build) is reused when present.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
build_dir="${BUILD_DIR:-build}"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLEET_WERROR=ON
cmake --build "$build_dir" -j "$(nproc)"
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" --timeout 300 "$@"
# Every fuzz harness (tests/fuzz) under ASan and UBSan: it replays its committed corpus, then
# fuzzes for FUZZ_SECONDS (default 10). FLEET_SKIP_FUZZ=1 leaves it out.
if [[ "${FLEET_SKIP_FUZZ:-0}" != 1 ]]; then
  scripts/fuzz.sh all "${FUZZ_SECONDS:-10}"
fi
