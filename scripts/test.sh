#!/usr/bin/env bash
# The README's second command: installs what the tests need, then builds and
# runs the whole suite twice, as CI does: a normal build and an
# AddressSanitizer + UndefinedBehaviorSanitizer build, both with -Werror.
#   scripts/test.sh            both builds
#   PDBSYM_TEST_BUILDS=normal  only one (normal or asan)
#   CI=true                    every skip is a failure (the corpus in
#                              ../shared/corpus and every oracle tool must be there)
#   PDBSYM_TEST_CONTAINER=1    also build and run the container image (on when
#                              CI=true; installs podman, buildah, runc, debootstrap)
# Ends with the list of what was skipped and why (each test writes its skips
# to BUILD/skips/, see tests/unit/test.h and tests/integration/harness.py).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/deps.sh" --test

builds=${PDBSYM_TEST_BUILDS:-"normal asan"}
status=0
dirs=()
for b in $builds; do
  case $b in
    normal) dir="$root/build-test"; args=(-DPDBSYM_WERROR=ON); skip=() ;;
    # the image test builds its own binary: once is enough
    asan)   dir="$root/build-asan"; args=(-DPDBSYM_WERROR=ON -DPDBSYM_SANITIZE=ON); skip=(-E '^it\.test_docker$') ;;
    *) echo "unknown build '$b'" >&2; exit 2 ;;
  esac
  echo "=== $b build ($dir)"
  "$root/scripts/build.sh" "$dir" "${args[@]}"
  rm -rf "$dir/skips"
  dirs+=("$dir")
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  if ! (cd "$dir" && ctest --output-on-failure -j"$(nproc)" "${skip[@]}"); then
    status=1
  fi
done

# What did not run, and why: ctest's "100% tests passed" counts a skipped test
# as passed and says nothing of a test that left out a part.
skipped=0 optin=0 skip_lines=() optin_lines=()
for dir in "${dirs[@]}"; do
  for f in "$dir"/skips/*.tsv; do
    [[ -e $f ]] || continue
    while IFS=$'\t' read -r test part kind why; do
      if [[ $kind == opt-in ]]; then
        optin=$((optin + 1))
        optin_lines+=("  $(basename "$dir") $test${part:+ ($part)}: $why")
      else
        skipped=$((skipped + 1))
        skip_lines+=("  $(basename "$dir") $test${part:+ ($part)}: $why")
      fi
    done <"$f"
  done
done
if ((skipped)); then
  echo
  echo "=== skipped: $skipped strong check(s) did not run (a pass above does not cover them):"
  printf '%s\n' "${skip_lines[@]}"
  if [[ ${CI:-} =~ ^(true|TRUE|True|1)$ ]]; then
    echo "CI=true: a skipped check is a failure" >&2
    status=1
  fi
fi
if ((optin)); then
  echo
  echo "=== opt-in, not asked for ($optin):"
  printf '%s\n' "${optin_lines[@]}"
fi
if ((!skipped && !optin)); then
  echo "=== nothing skipped"
fi
exit $status
