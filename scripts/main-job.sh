#!/usr/bin/env bash
# Sets up a Debian 12 machine, builds kloss and runs the main job on the
# bundled data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j"$(nproc)"
./build/release/examples/kloss_demo
