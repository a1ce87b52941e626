#!/usr/bin/env bash
# Installs what b12x needs on a fresh Debian machine with the CUDA 13 toolkit, then configures and
# builds into ./build (the library, the CLI, the tests and the torch extension, build/python/b12x). Safe to re-run: installs only what is missing. clang-14 + libclang-rt-14-dev
# (libFuzzer, ASan/UBSan runtimes) are for scripts/fuzz.sh, which scripts/test.sh runs after ctest.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_packages=(cmake ninja-build g++ nlohmann-json3-dev libcli11-dev libgtest-dev libbenchmark-dev libssl-dev
              clang-14 libclang-rt-14-dev)
missing=()
for p in "${apt_packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; }
fi

# Python test oracles (gguf, ml_dtypes) and tools, pinned.
if ! python3 -c "import numpy, gguf, ml_dtypes, safetensors, pytest" 2>/dev/null; then
  echo "setup: installing Python test packages"
  python3 -m pip install -q --disable-pip-version-check -r requirements-test.txt
fi
# torch for the extension (python/b12x) and scikit-build-core for `pip install .`, pinned. pip keeps
# its download cache on the machine, so a re-install after a clean is quick.
if ! python3 -c "import torch, scikit_build_core" 2>/dev/null; then
  echo "setup: installing torch and scikit-build-core (requirements-torch.txt)"
  python3 -m pip install -q --disable-pip-version-check -r requirements-torch.txt
fi

# B12X_TORCH=ON: the torch extension and its tests are part of the build, and missing torch is an error.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DB12X_TORCH=ON -DPython3_EXECUTABLE="$(command -v python3)" >/dev/null
cmake --build build -j "$(nproc)"
