#!/usr/bin/env bash
# Configures and builds pdbsym into a build folder; prints the compiler's
# output only when the build fails.
#   scripts/build.sh [BUILD_DIR] [extra cmake args...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-"$root/build"}
shift || true
mkdir -p "$dir"
cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >"$dir/configure.log" 2>&1 \
  || { cat "$dir/configure.log"; exit 1; }
cmake --build "$dir" -j"$(nproc)" >"$dir/build.log" 2>&1 \
  || { grep -vE '^\[ *[0-9]+%\]' "$dir/build.log"; exit 1; }
