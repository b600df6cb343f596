#!/usr/bin/env bash
# What the benchmarks' peers need beyond the build and test dependencies: PyTorch from Debian,
# and OpenBLAS so torch does not run on the reference BLAS. Idempotent.
set -euo pipefail
pkgs=(python3-torch python3-numpy libopenblas0-pthread)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
