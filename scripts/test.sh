#!/usr/bin/env bash
# The README's second command: installs what the tests need, then builds and
# runs the whole suite twice, as CI does: a normal build and an
# AddressSanitizer + UndefinedBehaviorSanitizer build, both with -Werror.
#   scripts/test.sh            both builds
#   PDBSYM_TEST_BUILDS=normal  only one (normal or asan)
#   PDBSYM_TEST_JOBS=N         tests at once (default: the cores + 3)
#   CI=true                    every skip is a failure (the corpus in
#                              ../shared/corpus and every oracle tool must be there)
#   PDBSYM_TEST_CONTAINER=1    also build and run the container image (on when
#                              CI=true; installs podman, buildah, runc, debootstrap)
#
# What runs at once, on a 2-core machine: each configuration is built once
# (the ASan build at -O1 -g1, CMakeLists.txt), one after the other, using
# every core; then ONE ctest runs both builds' tests (build-suite/, whose
# CTestTestfile.cmake names both build folders; the ASan build's tests are
# named asan.*), three more at a time than there are cores (tests wait on
# servers, sockets and child processes much of the time), the longest first
# (COST).  The ASan build's tests sample the corpus sweeps that the normal
# build's check in full (PDBSYM_TEST_SWEEP_BUILD=sample, set by CMakeLists.txt;
# tests/unit/test.h test_sweep): the sanitizers see every path, not every
# input.  Fixtures both builds' tests make the same way (the .NET apps and
# oracles of the live tests, the PDBs clang and lld-link make) are made once
# per run, in build-fixtures/ (PDBSYM_TEST_FIXTURE_CACHE).
#
# Every test has a TMPDIR of its own (BUILD/tmp/TEST, CMakeLists.txt); a test
# that leaves anything there fails the run, named.  Ends with the list of what
# was skipped and why (each test writes its skips to BUILD/skips/, see
# tests/unit/test.h and tests/integration/harness.py), and the times.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
t_start=$SECONDS
"$root/scripts/deps.sh" --test

builds=${PDBSYM_TEST_BUILDS:-"normal asan"}
# tests wait on sockets, deadlines and child processes: three more than the
# cores (2-core VM, CI=true: cores + 2 kept both cores 89 % busy, 803 s in
# all; cores + 3 94 %, 736 s)
jobs=${PDBSYM_TEST_JOBS:-$(($(nproc) + 3))}
status=0
dirs=()
declare -A dir_of args_of
for b in $builds; do
  case $b in
    normal) dir_of[$b]="$root/build-test"; args_of[$b]="-DPDBSYM_WERROR=ON" ;;
    asan) dir_of[$b]="$root/build-asan"; args_of[$b]="-DPDBSYM_WERROR=ON -DPDBSYM_SANITIZE=ON -DPDBSYM_BUILD_BENCH=OFF" ;;
    *) echo "unknown build '$b'" >&2; exit 2 ;;
  esac
done

for b in $builds; do
  t0=$SECONDS
  # shellcheck disable=SC2086
  "$root/scripts/build.sh" "${dir_of[$b]}" ${args_of[$b]}
  echo "=== $b build: built in $((SECONDS - t0)) s"
  dirs+=("${dir_of[$b]}")
done

# one ctest over both build folders
suite="$root/build-suite"
mkdir -p "$suite"
{
  echo "# written by scripts/test.sh: the tests of every build it made"
  for dir in "${dirs[@]}"; do echo "subdirs(\"$dir\")"; done
} >"$suite/CTestTestfile.cmake"
for dir in "${dirs[@]}"; do
  rm -rf "$dir/skips"
  find "$dir/tmp" -mindepth 2 -maxdepth 2 -exec rm -rf {} + 2>/dev/null || true
done
export PDBSYM_TEST_FIXTURE_CACHE="$root/build-fixtures"
rm -rf "$PDBSYM_TEST_FIXTURE_CACHE" # made once per run: nothing kept from an earlier run's sources
mkdir -p "$PDBSYM_TEST_FIXTURE_CACHE"
t0=$SECONDS
echo "=== tests ($builds: ${dirs[*]})"
(cd "$suite" && ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}" \
  UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
  ctest --output-on-failure -j"$jobs") || status=1
for dir in "${dirs[@]}"; do
  left=$(find "$dir/tmp" -mindepth 2 -maxdepth 2 2>/dev/null | sed "s|^$dir/tmp/||" | sort)
  if [[ -n $left ]]; then
    echo "=== $(basename "$dir"): tests left files in their TMPDIR (BUILD/tmp/TEST):" >&2
    printf '  %s\n' $left >&2
    status=1
  fi
done
echo "=== tests: $((SECONDS - t0)) s"

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
if [[ " ${builds} " == *" asan "* ]]; then
  echo "=== the ASan run, by design: it.test_docker, it.test_compose and it.test_http_attack run in the normal run only;"
  echo "    corpus sweeps sampled (PDBSYM_TEST_SWEEP_BUILD=sample), in full in the normal run"
fi
echo "=== scripts/test.sh: $((SECONDS - t_start)) s in all"
exit $status
