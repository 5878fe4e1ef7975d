#!/usr/bin/env bash
# How many processes one pdbsym can profile on a core (issue 29;
# docs/scaling.md, bench/README.md): for N in COUNTS, N copies of tests/live's
# app (an idle one: --idle, or the default workload) profiled by one
# `pdbsym serve` (profile_command, 60 s windows by default), and over SECONDS
# the CPU pdbsym used (user + system, from /proc), the samples it named, its
# RSS; prints CPU per process, per sample, and the processes a core would
# hold at that rate.
#   bench/run-profile-scale.sh [SECONDS] [COUNTS] [WINDOW]   (default 60 "1 2 4" 10s)
# Env: PDBSYM_BIN (default: builds build-bench/pdbsym).  Needs the .NET 10 SDK.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-60}
counts=${2:-1 2 4}
window=${3:-10s}
work=$(mktemp -d "${TMPDIR:-/tmp}/pdbsym-scale.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1
bin=${PDBSYM_BIN:-}
if [ -z "$bin" ]; then
  "$root/scripts/build.sh" "$root/build-bench" -DPDBSYM_BUILD_TESTS=OFF
  bin=$root/build-bench/pdbsym
fi
cp -r "$root/tests/live" "$work/live"
dotnet build "$work/live/LiveApp" -c Release -o "$work/app" -nologo -v q >/dev/null
tick=$(getconf CLK_TCK)
cpu() { awk -v t="$tick" '{ s = $0; sub(/.*\) /, "", s); split(s, f, " "); printf "%.3f", (f[12] + f[13]) / t }' "/proc/$1/stat"; }
printf 'processes\tseconds\tpdbsym_cpu_s\tsamples\tus_per_sample\tcpu_per_process\tprocesses_per_core\trss_mib\n'
for n in $counts; do
  pids=()
  for i in $(seq "$n"); do
    "$work/app/LiveApp" 0 > "$work/app$i.out" 2>&1 &
    pids+=($!)
  done
  port=$((20000 + RANDOM % 20000))
  PDBSYM_PROFILE_COMMAND=LiveApp PDBSYM_MAX_PROFILED_PROCESSES=$n PDBSYM_PROFILE_WINDOW=$window \
    PDBSYM_PROFILE_DIR="$work/p$n" PDBSYM_PROFILE_SCAN_INTERVAL=1 PDBSYM_CACHE_DIR="$work/cache" \
    PDBSYM_OFFLINE=1 PDBSYM_LISTEN=127.0.0.1:$port PDBSYM_LOG_LEVEL=warn "$bin" serve 2> "$work/serve$n.log" &
  srv=$!
  pids+=($srv)
  sleep 8 # attached, rundowns done
  s0=$(curl -s "http://127.0.0.1:$port/metrics" | awk '/^pdbsym_profile_samples_total/ {print $2}')
  c0=$(cpu "$srv")
  sleep "$secs"
  s1=$(curl -s "http://127.0.0.1:$port/metrics" | awk '/^pdbsym_profile_samples_total/ {print $2}')
  c1=$(cpu "$srv")
  rss=$(awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$srv/status")
  kill "$srv"; wait "$srv" 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  awk -v n="$n" -v s="$secs" -v c0="$c0" -v c1="$c1" -v s0="$s0" -v s1="$s1" -v rss="$rss" 'BEGIN {
    c = c1 - c0; smp = s1 - s0; per = c / s / n;
    printf "%d\t%d\t%.2f\t%d\t%.2f\t%.4f\t%.0f\t%s\n", n, s, c, smp, smp ? c * 1e6 / smp : 0, per, per ? 1 / per : 0, rss }'
done
echo "(samples counted from windows written during the interval: with $window windows, edges vary)"
