#!/usr/bin/env bash
# The README's second command: installs what the tests need, then builds and
# runs the whole suite twice, as CI does: a normal build and an
# AddressSanitizer + UndefinedBehaviorSanitizer build, both with -Werror.
#   scripts/test.sh            both builds
#   PDBSYM_TEST_BUILDS=normal  only one (normal or asan)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/deps.sh" --test

builds=${PDBSYM_TEST_BUILDS:-"normal asan"}
status=0
for b in $builds; do
  case $b in
    normal) dir="$root/build-test"; args=(-DPDBSYM_WERROR=ON); skip=() ;;
    # the image test builds its own binary: once is enough
    asan)   dir="$root/build-asan"; args=(-DPDBSYM_WERROR=ON -DPDBSYM_SANITIZE=ON); skip=(-E '^it\.test_docker$') ;;
    *) echo "unknown build '$b'" >&2; exit 2 ;;
  esac
  echo "=== $b build ($dir)"
  "$root/scripts/build.sh" "$dir" "${args[@]}"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  if ! (cd "$dir" && ctest --output-on-failure -j"$(nproc)" "${skip[@]}"); then
    status=1
  fi
done
exit $status
