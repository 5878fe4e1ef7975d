#!/usr/bin/env bash
# Installs the Debian 12 packages pdbsym needs.  Idempotent: packages already
# present are not asked for again, and apt's lists are refreshed only when
# something is missing.
#   scripts/deps.sh         build and run dependencies
#   scripts/deps.sh --test  plus what the test suite uses: compilers, and the
#                           oracle tools the tests compare with (LLVM 19's
#                           llvm-symbolizer, llvm-pdbutil and llvm-undname in
#                           /usr/lib/llvm-19/bin, cabextract, sqlite3, nginx).
#                           The container test (PDBSYM_TEST_CONTAINER=1, or
#                           CI=true) installs podman, buildah, runc and
#                           debootstrap itself, only when it runs.
#   scripts/deps.sh --fuzz  plus clang's libFuzzer runtime, for -DPDBSYM_FUZZ=ON builds
set -euo pipefail

pkgs=(build-essential cmake pkg-config libmicrohttpd-dev libjansson-dev libsqlite3-dev
      libcurl4-openssl-dev zlib1g-dev libmspack-dev curl ca-certificates)
if [ "${1:-}" = "--test" ]; then
  pkgs+=(clang lld llvm llvm-19 python3 sqlite3 cabextract util-linux procps nginx chromium golang-go)
fi
if [ "${1:-}" = "--fuzz" ]; then
  pkgs+=(clang libclang-rt-14-dev)
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
