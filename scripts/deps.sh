#!/usr/bin/env bash
# Installs the Debian 12 packages pdbsym needs.  Idempotent: packages already
# present are not asked for again, and apt's lists are refreshed only when
# something is missing.
#   scripts/deps.sh         build and run dependencies
#   scripts/deps.sh --test  plus what the test suite uses: compilers, and the
#                           oracle tools the tests compare with (LLVM 19's
#                           llvm-symbolizer, llvm-pdbutil and llvm-undname in
#                           /usr/lib/llvm-19/bin, cabextract), nginx
#                           (a symbol server stand-in; installed so that it
#                           does not start as a service) and chromium (the
#                           CORS test's browser).  README.md lists each
#                           package and why; tests/integration/test_docs.py
#                           checks that the two agree.
#                           The container test (PDBSYM_TEST_CONTAINER=1, or
#                           CI=true) installs podman, buildah, runc and
#                           debootstrap itself, only when it runs.
#   scripts/deps.sh --fuzz  plus clang's libFuzzer runtime, for -DPDBSYM_FUZZ=ON builds
set -euo pipefail

pkgs=(build-essential cmake pkg-config libmicrohttpd-dev libjansson-dev libsqlite3-dev
      libcurl4-openssl-dev zlib1g-dev libmspack-dev curl ca-certificates)
if [ "${1:-}" = "--test" ]; then
  pkgs+=(clang lld llvm llvm-19 python3 python3-yaml cabextract util-linux nginx chromium golang-go)
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
# nginx is a tool the tests start on loopback ports of their own, not a
# service: Debian's package would start it on port 80 and enable it at boot.
# A policy-rc.d that answers 101 ("action forbidden") keeps invoke-rc.d and
# deb-systemd-invoke from starting any service during this install; it is
# removed afterwards (only when this script made it), and nginx is left
# disabled where systemd runs.
# (PDBSYM_TEST_POLICY_RC_D: tests/integration/test_deps.py's own path for it)
policy="" rcd=${PDBSYM_TEST_POLICY_RC_D:-/usr/sbin/policy-rc.d}
if [[ " ${missing[*]} " == *" nginx "* && ! -e $rcd ]]; then
  printf '#!/bin/sh\n# scripts/deps.sh: no service starts while it installs packages\nexit 101\n' |
    $sudo tee "$rcd" >/dev/null
  $sudo chmod 755 "$rcd"
  policy=$rcd
  trap '$sudo rm -f "$rcd"' EXIT
fi
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
if [[ -n $policy && -d /run/systemd/system ]] && command -v systemctl >/dev/null; then
  $sudo systemctl disable nginx >/dev/null 2>&1 || true
fi
