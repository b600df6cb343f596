#!/usr/bin/env bash
# End-to-end: the plugin author's kit as an outsider gets it, from an *installed* Fleet.
#
#   1. `cmake --install` into a temporary prefix; the prefix has the kit (fleet-conformance, its
#      suites and NumPy references) and the documentation (plugins.md, the annotated
#      fleet.toml, the ABI changelog);
#   2. builds examples/third_party_pass (a C99 pass with an option) against the prefix;
#   3. the installed fleet-host runs it with [passes.loss_scale] factor from --set and shows
#      what it did; a wrong option type is refused with the key named;
#   4. the installed fleet-conformance checks the example pass, and (a few tests each) the
#      installed cpu device and gloo communicator; a partial run ends in a table and exit 0.
#
# Usage: plugin_kit.sh BUILD_DIR EXAMPLE_DIR CMAKE GENERATOR BINDIR LIBDIR DATADIR PROGRAM
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ $# -ne 8 ]]; then
  echo "usage: $0 BUILD_DIR EXAMPLE_DIR CMAKE GENERATOR BINDIR LIBDIR DATADIR PROGRAM" >&2
  exit 2
fi
build_dir=$1 example_dir=$2 cmake=$3 generator=$4 bindir=$5 libdir=$6 datadir=$7 program=$8

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fleet_kit_e2e.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cd "$tmp"


# ---- 1. install ----------------------------------------------------------------------------------
run_logged "$tmp/install.log" "$cmake" --install "$build_dir" --prefix "$prefix"
for f in "$bindir/fleet-conformance" \
         "libexec/fleet/conformance/fleet_conformance_tests" \
         "libexec/fleet/conformance/fleet_comm_conformance_tests" \
         "libexec/fleet/conformance/fleet_transport_conformance_tests" \
         "libexec/fleet/conformance/fleet_pass_conformance_tests" \
         "$datadir/fleet/conformance/ref/run_reference.py" \
         "$datadir/doc/fleet/plugins.md" "$datadir/doc/fleet/ABI-CHANGELOG.md" \
         "$datadir/fleet/fleet.toml"; do
  [[ -f "$prefix/$f" ]] || fail "the install lacks $f"
done
host="$prefix/$bindir/fleet-host"
kit="$prefix/$bindir/fleet-conformance"

# ---- 2. build the example pass -------------------------------------------------------------------
run_logged "$tmp/configure.log" "$cmake" -S "$example_dir" -B "$tmp/build" -G "$generator" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF
run_logged "$tmp/build.log" "$cmake" --build "$tmp/build"
pass=$(find "$tmp/build" -name libfleet_loss_scale.so -type f | head -n 1)
[[ -n "$pass" ]] || fail "the example build produced no libfleet_loss_scale.so"
pass_dir=$(dirname "$pass")

# ---- 3. the installed host runs it with an option ------------------------------------------------
sets=(--set "plugins.dirs=[\"$pass_dir\"]" --set 'plugins.load=["loss_scale"]'
      --set 'strategy.passes=["loss_scale"]')
env -u FLEET_PLUGIN_PATH "$host" "${sets[@]}" --set passes.loss_scale.factor=128 \
  show "$program" --stage transpiled --program main >"$tmp/show.txt" 2>"$tmp/show.err" \
  || { cat "$tmp/show.err" >&2; fail "show with the pass failed"; }
grep -q '^#   loss_scale {factor = 128.0}' "$tmp/show.txt" \
  || fail "show does not list the pass with its option: $(head -3 "$tmp/show.txt")"
grep -q 'op fill_constant() -> (Out=\[.*@GRAD\]) {.*value=128.0f}' "$tmp/show.txt" \
  || fail "the pass did not scale the loss gradient: $(grep fill_constant "$tmp/show.txt")"
if env -u FLEET_PLUGIN_PATH "$host" "${sets[@]}" --set 'passes.loss_scale.factor="big"' \
     show "$program" --stage transpiled >/dev/null 2>"$tmp/bad.err"; then
  fail "a string for the double option factor was accepted"
fi
grep -q 'passes.loss_scale.factor' "$tmp/bad.err" || fail "the refusal does not name the key: $(cat "$tmp/bad.err")"
echo "e2e: the installed fleet-host ran loss_scale with factor = 128"

# ---- 4. the installed kit ------------------------------------------------------------------------
"$kit" "$pass" >"$tmp/kit_pass.txt" 2>&1 || { cat "$tmp/kit_pass.txt" >&2; fail "kit: the example pass does not conform"; }
grep -q '^== pass suite: loss_scale' "$tmp/kit_pass.txt" || fail "no pass table: $(cat "$tmp/kit_pass.txt")"
env -u FLEET_PLUGIN_PATH "$kit" cpu --filter 'MathConformance.Scale*' >"$tmp/kit_cpu.txt" 2>&1 \
  || { cat "$tmp/kit_cpu.txt" >&2; fail "kit: the installed cpu plugin failed"; }
grep -q '^scale  *float32  *passed' "$tmp/kit_cpu.txt" || fail "no scale row: $(cat "$tmp/kit_cpu.txt")"
env -u FLEET_PLUGIN_PATH "$kit" comm_gloo --filter '*AllReduce*' --json >"$tmp/kit_gloo.json" \
  || { cat "$tmp/kit_gloo.json" >&2; fail "kit: the installed gloo communicator failed"; }
python3 - "$tmp/kit_gloo.json" <<'PY' || fail "kit: unexpected gloo report"
import json, sys
doc = json.load(open(sys.argv[1]))
rows = {(r["subject"], r["variant"]): r["result"] for s in doc["suites"] for r in s["rows"]}
assert rows.get(("all_reduce", "world 2")) == "passed", rows
assert doc["exit_code"] == 0, doc
PY
echo "e2e: OK"
