#!/usr/bin/env bash
# The README's first command: installs what is missing, builds fleet-host and its plugins, and
# runs the main job on the built-in defaults (CPU device, local process).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
build_dir="${BUILD_DIR:-build}"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build_dir" -j "$(nproc)" --target fleet-host fleet_cpu fleet_comm_gloo \
  fleet_transport_rpc
"$build_dir/bin/fleet-host" plugins
"$build_dir/bin/fleet-host" check
