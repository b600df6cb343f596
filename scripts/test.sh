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
# The clang tree under ASan and UBSan (scripts/fuzz.sh): first the unit tests that need no
# plugin (FLEET_SKIP_SANITIZED_TESTS=1 leaves them out; on 2 cores they add about 1.5 min of
# cold build to the tree's and 10 s of run), then every fuzz harness, which replays its
# committed corpus and fuzzes for FUZZ_SECONDS (default 10). FLEET_SKIP_FUZZ=1 leaves out the
# whole tree.
if [[ "${FLEET_SKIP_FUZZ:-0}" != 1 ]]; then
  if [[ "${FLEET_SKIP_SANITIZED_TESTS:-0}" != 1 ]]; then
    scripts/fuzz.sh tests
  fi
  scripts/fuzz.sh all "${FUZZ_SECONDS:-10}"
fi
