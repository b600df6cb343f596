#!/usr/bin/env bash
# End-to-end: a third party builds examples/third_party_plugin against an *installed* Fleet and
# the host lists it.
#
#   1. `cmake --install` the Fleet build tree into a temporary prefix and check that the prefix
#      has what a plugin author needs (headers, CMake package, pkg-config file) and fleet-host;
#   2. configure and build the example with only -DCMAKE_PREFIX_PATH=<prefix>: no Fleet source
#      path may leak into its build;
#   3. run the already-built fleet-host with FLEET_PLUGIN_PATH=<dir of libfleet_toy.so> and check
#      `plugins --json toy` lists plugin "toy" with the component {"kind":"device","name":"toy"};
#   4. install the plugin into the same prefix and check that the *installed* fleet-host finds it
#      in its own plugin directory, without FLEET_PLUGIN_PATH;
#   5. run the installed conformance kit on it.
#
# Usage: third_party_plugin.sh BUILD_DIR EXAMPLE_DIR FLEET_HOST CMAKE GENERATOR BINDIR LIBDIR
#                              INCLUDEDIR
# (registered by tests/abi/CMakeLists.txt, which passes the build's own values).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ $# -ne 8 ]]; then
  echo "usage: $0 BUILD_DIR EXAMPLE_DIR FLEET_HOST CMAKE GENERATOR BINDIR LIBDIR INCLUDEDIR" >&2
  exit 2
fi
build_dir=$1 example_dir=$2 fleet_host=$3 cmake=$4 generator=$5
bindir=$6 libdir=$7 includedir=$8

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fleet_e2e.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
# Run everything from an empty directory: fleet-host reads ./fleet.toml when there is one.
cd "$tmp"


# ---- 1. install ----------------------------------------------------------------------------------
echo "e2e: installing $build_dir into $prefix"
run_logged "$tmp/install.log" "$cmake" --install "$build_dir" --prefix "$prefix"
for f in "$includedir/fleet/fleet_plugin.h" "$libdir/cmake/Fleet/FleetConfig.cmake" \
         "$libdir/cmake/Fleet/FleetConfigVersion.cmake" "$libdir/pkgconfig/fleet-plugin.pc" \
         "$bindir/fleet-host"; do
  [[ -f "$prefix/$f" ]] || fail "the install lacks $f (installed files: see below)
$(cd "$prefix" && find . -type f | sort)"
done
[[ -x "$prefix/$bindir/fleet-host" ]] || fail "installed fleet-host is not executable"
# Not fatal (yet): a .pc file written with the configure-time prefix is wrong after
# `cmake --install --prefix` elsewhere; ${pcfiledir} would make it relocatable.
pc_prefix=$(sed -n 's/^prefix=//p' "$prefix/$libdir/pkgconfig/fleet-plugin.pc")
if [[ "$pc_prefix" != "$prefix" && "$pc_prefix" != *'${pcfiledir}'* ]]; then
  echo "e2e: warning: fleet-plugin.pc says prefix=$pc_prefix, but it was installed into $prefix"
fi

# ---- 2. build the example against the installed package ------------------------------------------
echo "e2e: building $example_dir against the installed package"
run_logged "$tmp/configure.log" "$cmake" -S "$example_dir" -B "$tmp/build" -G "$generator" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
fleet_dir=$(sed -n 's/^Fleet_DIR:PATH=//p' "$tmp/build/CMakeCache.txt")
[[ "$fleet_dir" == "$prefix/"* ]] || fail "find_package(Fleet) used '$fleet_dir', not the prefix"
run_logged "$tmp/build.log" "$cmake" --build "$tmp/build" --parallel 2

# The plugin must have been compiled with the installed headers only.
python3 - "$tmp/build/compile_commands.json" "$prefix/$includedir" <<'EOF' \
  || fail "the example's compile commands do not use the installed headers"
import json, sys
commands = json.load(open(sys.argv[1]))
toy = [c for c in commands if c["file"].endswith("toy_plugin.c")]
assert len(toy) == 1, "toy_plugin.c is not in compile_commands.json"
command = toy[0].get("command") or " ".join(toy[0]["arguments"])
includes = [w[2:] for w in command.split() if w.startswith("-I")]
includes += [w for w in command.split() if w.startswith("/") and "include" in w]
assert any(i.startswith(sys.argv[2]) for i in includes), f"no -I{sys.argv[2]} in: {command}"
assert "plugin_api/include" not in command, f"a Fleet source path leaked: {command}"
assert "-std=c99" in command, f"not compiled as strict C99: {command}"
EOF

toy=$(find "$tmp/build" -name libfleet_toy.so -type f | head -n 1)
[[ -n "$toy" ]] || fail "the example build produced no libfleet_toy.so"
echo "e2e: built $toy"
if command -v nm >/dev/null; then
  exported=$(nm -D --defined-only "$toy" | awk '$3 ~ /^fleet_plugin_/ {print $3}')
  [[ "$exported" == "fleet_plugin_entry_v1" ]] \
    || fail "libfleet_toy.so should export fleet_plugin_entry_v1 only, exports: $exported"
fi

# ---- 3. the built fleet-host lists it ------------------------------------------------------------
# Checks the JSON of `plugins --json toy` on stdin: plugin "toy" from file $1 with its device.
check_listing() {
  python3 -c '
import json, os, sys
doc = json.load(sys.stdin)
expected_file = os.path.realpath(sys.argv[1])
toys = [p for p in doc["plugins"] if p["name"] == "toy"]
assert len(toys) == 1, "plugin toy not listed: %s" % json.dumps(doc, indent=2)
toy = toys[0]
assert os.path.realpath(toy["file"]) == expected_file, \
    "file %s, expected %s" % (toy["file"], expected_file)
assert toy["abi"] == sys.argv[2], "abi %r, expected %s" % (toy["abi"], sys.argv[2])
assert toy["version"] == "0.1.0", "version %r" % toy["version"]
kinds = [(c["kind"], c["name"]) for c in toy["components"]]
assert ("device", "toy") in kinds, "no device component toy: %r" % kinds
assert not doc["rejected"], "rejections: %r" % doc["rejected"]
print("e2e: listed %s with components %r" % (toy["file"], kinds))
' "$1" "$installed_abi"
}

# The ABI the plugin was built against: the installed headers' version.
installed_abi=$(awk '$2 == "FLEET_ABI_MAJOR" {ma = $3} $2 == "FLEET_ABI_MINOR" {mi = $3}
                     END {print ma "." mi}' "$prefix/include/fleet/fleet_abi.h")

plugin_dir=$(dirname "$toy")
echo "e2e: $fleet_host plugins --json toy (FLEET_PLUGIN_PATH=$plugin_dir)"
FLEET_PLUGIN_PATH=$plugin_dir "$fleet_host" plugins --json toy >"$tmp/listing.json" \
  2>"$tmp/listing.err" || { cat "$tmp/listing.json" "$tmp/listing.err" >&2;
                             fail "fleet-host plugins --json toy exited non-zero"; }
check_listing "$toy" <"$tmp/listing.json" || fail "unexpected listing from the built fleet-host"

# A name that is not there must fail, or the check above proves little.
if FLEET_PLUGIN_PATH=$plugin_dir "$fleet_host" plugins --json no_such_toy >/dev/null 2>&1; then
  fail "fleet-host plugins no_such_toy exited 0"
fi

# ---- 4. installed next to the installed host -----------------------------------------------------
run_logged "$tmp/install-toy.log" "$cmake" --install "$tmp/build" --prefix "$prefix"
installed_toy=$(find "$prefix" -name libfleet_toy.so -type f | head -n 1)
[[ -n "$installed_toy" ]] || fail "cmake --install of the example installed no libfleet_toy.so"
echo "e2e: installed $installed_toy; asking the installed fleet-host"
env -u FLEET_PLUGIN_PATH "$prefix/$bindir/fleet-host" plugins --json toy >"$tmp/installed.json" \
  2>"$tmp/installed.err" || { cat "$tmp/installed.json" "$tmp/installed.err" >&2;
                               fail "installed fleet-host did not find the installed toy"; }
check_listing "$installed_toy" <"$tmp/installed.json" \
  || fail "unexpected listing from the installed fleet-host"

# ---- 5. the installed conformance kit checks it --------------------------------------------------
# The toy device has no kernels: every op the suite tries is "not provided", which is not a
# failure unless --require-all asks for everything.
kit="$prefix/$bindir/fleet-conformance"
env -u FLEET_PLUGIN_PATH "$kit" toy --filter 'MathConformance.Scale*' >"$tmp/kit.txt" 2>&1 \
  || { cat "$tmp/kit.txt" >&2; fail "fleet-conformance toy failed"; }
grep -q '^scale  *float32  *not provided' "$tmp/kit.txt" \
  || fail "the kit does not report scale as not provided: $(cat "$tmp/kit.txt")"
if env -u FLEET_PLUGIN_PATH "$kit" toy --filter 'MathConformance.Scale*' --require-all \
     >/dev/null 2>&1; then
  fail "fleet-conformance --require-all passed a device without kernels"
fi
echo "e2e: the installed kit reports the toy device's ops as not provided"

echo "e2e: OK"
