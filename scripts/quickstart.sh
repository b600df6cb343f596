#!/usr/bin/env bash
# The README's first command: installs what is missing, builds fleet-host and its plugins, and
# trains the quick-start MLP (examples/mlp) data-parallel on the CPU in two local processes
# that all-reduce gradients with Gloo, on synthetic data. Logs land in examples/mlp/log/.
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
"$host" launch --nproc 2 -- run mlp.fleet
