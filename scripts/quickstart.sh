#!/usr/bin/env bash
# The README's first command: installs what is missing, builds fleet-host and its plugins, and
# trains the quick-start MLP (examples/mlp) on the CPU in this process, on synthetic data.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
build_dir="${BUILD_DIR:-build}"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build_dir" -j "$(nproc)" --target fleet-host fleet_cpu fleet_comm_gloo \
  fleet_transport_rpc
host="$(cd "$build_dir/bin" && pwd)/fleet-host"
# examples/mlp/fleet.toml is picked up from the working directory.
cd examples/mlp
"$host" run mlp.fleet
