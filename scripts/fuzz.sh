#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz (clang, AddressSanitizer, UBSan) and runs them.
#
#   scripts/fuzz.sh TARGET SECONDS   fuzz one harness (e.g. config, or fuzz_config) for SECONDS,
#                                    starting from its committed corpus
#   scripts/fuzz.sh all SECONDS      every harness in turn, SECONDS each
#   scripts/fuzz.sh all 0            replay every committed corpus once (a regression run)
#   scripts/fuzz.sh list             the harnesses
#   scripts/fuzz.sh tests            the unit tests that need no plugin (tests/unit, tests/ir),
#                                    built in the same tree, run under ASan (leaks included)
#                                    and UBSan
#
# The committed corpus (tests/fuzz/corpus/NAME) is only read; what a run discovers goes to a
# scratch corpus under the build directory, and a crashing input is written there as
# crash-* and reported with the command that reproduces it. FUZZ_BUILD_DIR (default
# build-fuzz) is reused when present. Exit status: non-zero when a harness found a crash or
# a test failed.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir="${FUZZ_BUILD_DIR:-build-fuzz}"
corpus_root=tests/fuzz/corpus

if [[ $# -lt 1 ]]; then
  sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi

harnesses() {
  for f in tests/fuzz/fuzz_*.cc; do basename "$f" .cc; done
}
if [[ "$1" == "list" ]]; then
  harnesses | sed 's/^fuzz_//'
  exit 0
fi
target=$1 seconds=${2:-}
if [[ "$target" == "tests" ]]; then
  [[ $# -eq 1 ]] || { echo "usage: $0 tests" >&2; exit 2; }
elif [[ $# -ne 2 || ! "$seconds" =~ ^[0-9]+$ ]]; then
  echo "usage: $0 TARGET|all SECONDS, or $0 tests|list" >&2
  exit 2
fi

if [[ "$target" == "tests" ]]; then
  targets=(fleet_sanitized_unit_tests fleet_sanitized_ir_tests)
elif [[ "$target" == "all" ]]; then
  mapfile -t targets < <(harnesses)
else
  targets=("fuzz_${target#fuzz_}")
  [[ -f "tests/fuzz/${targets[0]}.cc" ]] || {
    echo "fuzz.sh: no harness '$target'; have: $(harnesses | sed 's/^fuzz_//' | tr '\n' ' ')" >&2
    exit 2
  }
fi

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # Paths relative to the checkout, so that a clone elsewhere (a CI checkout) reuses the cache.
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
fi
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$build_dir" -G Ninja -DFLEET_FUZZ=ON -DCMAKE_BUILD_TYPE=None \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    "-DCMAKE_CXX_FLAGS=-O1 -gline-tables-only" "-DCMAKE_C_FLAGS=-O1 -gline-tables-only" \
    "${launcher[@]}" >/dev/null
fi
cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}"

if [[ "$target" == "tests" ]]; then
  # Unlike a harness, a test binary must free what it allocated: leaks are findings here.
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  failed=0
  for t in "${targets[@]}"; do
    log="$build_dir/sanitized/$t.log"
    if "$build_dir/sanitized/$t" >"$log" 2>&1; then
      echo "sanitized: $t: $(grep -E '^\[==========\] .* ran' "$log" | tail -n 1 |
                             sed 's/^\[==========\] //'), no finding"
    else
      failed=1
      echo "sanitized: $t: FAILED (log: $log)" >&2
      grep -E "^\[  FAILED  \]|ERROR: |runtime error|SUMMARY" "$log" | head -n 12 >&2 || true
    fi
  done
  exit "$failed"
fi

failed=0
for t in "${targets[@]}"; do
  name=${t#fuzz_}
  seeds="$corpus_root/$name"
  work="$build_dir/fuzz-work/$name"
  mkdir -p "$work/corpus"
  # Reports halt on the first finding; leaks from a harness's static state are not findings.
  export ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:allocator_may_return_null=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  log="$work/log.txt"
  if [[ "$seconds" == 0 ]]; then
    args=(-runs=0 "$seeds")
  else
    args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536
          -print_final_stats=1 "-artifact_prefix=$work/" "$work/corpus" "$seeds")
  fi
  if "$build_dir/fuzz/$t" "${args[@]}" >"$log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    files=$(find "$seeds" -type f | wc -l)
    if [[ "$seconds" == 0 ]]; then
      echo "fuzz: $name: replayed $files corpus inputs, no finding"
    else
      echo "fuzz: $name: ${execs:-?} executions in ${seconds} s, no finding"
    fi
  else
    failed=1
    echo "fuzz: $name: FINDING (log: $log)" >&2
    grep -E "ERROR: |runtime error|SUMMARY|Test unit written" "$log" | head -n 8 >&2 || true
    crash=$(ls -t "$work"/crash-* "$work"/timeout-* "$work"/oom-* 2>/dev/null | head -n 1 || true)
    [[ -n "$crash" ]] && echo "fuzz: reproduce with: $build_dir/fuzz/$t $crash" >&2
  fi
done
exit "$failed"
