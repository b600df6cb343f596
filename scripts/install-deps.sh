#!/usr/bin/env bash
# Installs the Debian 12 packages Fleet builds and tests with. Idempotent: packages already
# present are not fetched again, and the package index is refreshed only when something is
# missing. Needs root (or sudo). The CUDA Toolkit, cuDNN and NCCL are not Debian packages; the
# CUDA plugins build when CMake finds them and are skipped otherwise. iproute2 gives the
# two-host test its network namespaces; the openssl CLI makes the transport tests' certificates.
# ocl-icd-opencl-dev is only a Recommends of libdnnl-dev, but oneDNN's CMake package requires
# OpenCL, so without it configuring fails on a machine that never had it. clang and its
# libFuzzer runtime (libclang-rt-14-dev) build the fuzz harnesses (scripts/fuzz.sh), Debian's
# standard toolchain for coverage-guided fuzzing with the sanitizers. python3-sklearn is the
# independent reference the auc op's conformance tests compare with (roc_auc_score).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config python3 python3-numpy python3-sklearn
  libboost-dev libtomlplusplus-dev libspdlog-dev nlohmann-json3-dev zlib1g-dev libssl-dev
  libgtest-dev libgmock-dev libdnnl-dev ocl-icd-opencl-dev libgloo-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler-grpc openssl
  iproute2 clang libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
