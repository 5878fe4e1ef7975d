#!/usr/bin/env bash
# What profiling costs the profiled process (issue 25; bench/README.md,
# "What attaching costs the target"): tests/live's app in --bench mode (THREADS
# threads of its compute workload for SECONDS) run with nothing attached, with
# `pdbsym profile` attached (10 s windows, speedscope + pprof), and with
# `dotnet-trace collect` attached (its defaults: the sampled thread time
# profile), alternating ROUNDS times in one run; prints each run's rounds/s
# and the ratios to the median of "nothing", and pdbsym's own CPU time per
# sample (user + system, from /proc at its exit).
#   bench/run-profile-cost.sh [SECONDS] [THREADS] [ROUNDS]   (default 20 1 3)
# Env: PDBSYM_BIN (default: builds build-bench/pdbsym).  Needs the .NET 10 SDK
# and NuGet (dotnet-trace 10.0.750501 as a tool).  Quiet machine wanted.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-20}
threads=${2:-1}
rounds=${3:-3}
work=$(mktemp -d "${TMPDIR:-/tmp}/pdbsym-cost.XXXXXX")
trap 'rm -rf "$work"' EXIT
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1
bin=${PDBSYM_BIN:-}
if [ -z "$bin" ]; then
  "$root/scripts/build.sh" "$root/build-bench" -DPDBSYM_BUILD_TESTS=OFF
  bin=$root/build-bench/pdbsym
fi
cp -r "$root/tests/live" "$work/live"
dotnet build "$work/live/LiveApp" -c Release -o "$work/app" -nologo -v q >/dev/null
dotnet tool install dotnet-trace --tool-path "$work/tools" --version 10.0.750501 >/dev/null
tick=$(getconf CLK_TCK)

run() { # mode -> prints "rounds_per_s [pdbsym_cpu_s samples]"
  local mode=$1 fifo=$work/in.$RANDOM
  mkfifo "$fifo"
  "$work/app/LiveApp" --bench "$secs" "$threads" < "$fifo" > "$work/app.out" 2>&1 &
  local app=$! att=""
  exec 9> "$fifo"
  for _ in $(seq 100); do grep -q ready "$work/app.out" && break; sleep 0.1; done
  case $mode in
    pdbsym) # its CPU: the subshell's children's user and system time (bash's times)
      ( "$bin" profile --pid "$app" --window 10s --format speedscope,pprof --out "$work/w" \
          --cache-dir "$work/cache" --offline --quiet > "$work/p.out" 2>&1; times > "$work/p.times" ) &
      att=$! ;;
    dotnet-trace)
      "$work/tools/dotnet-trace" collect -p "$app" -o "$work/t.nettrace" > "$work/t.out" 2>&1 &
      att=$! ;;
  esac
  sleep 3 # attached and past its rundown
  echo go >&9
  exec 9>&-
  wait "$app"
  [ -n "$att" ] && wait "$att" 2>/dev/null || true
  rm -f "$fifo"
  local r s
  r=$(awk '/^rounds/ {print $2}' "$work/app.out"); s=$(awk '/^rounds/ {print $4}' "$work/app.out")
  if [ "$mode" = pdbsym ]; then
    local samples; samples=$(sed -n 's/.*), \([0-9]*\) samples.*/\1/p' "$work/p.out")
    # times' second line: children's user and system time, as 0m1.234s
    local cpu; cpu=$(sed -n 2p "$work/p.times" | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } print t }')
    echo "$(awk -v r="$r" -v s="$s" 'BEGIN {printf "%.2f", r / s}') $samples $cpu"
  else
    awk -v r="$r" -v s="$s" 'BEGIN {printf "%.2f\n", r / s}'
  fi
}

echo "== $rounds rounds of: nothing, pdbsym profile, dotnet-trace collect ($secs s, $threads threads each)"
printf 'round\tnothing\tpdbsym\tdotnet-trace\n' > "$work/cost.tsv"
for i in $(seq "$rounds"); do
  a=$(run none)
  b=$(run pdbsym)
  c=$(run dotnet-trace)
  printf '%s\t%s\t%s\t%s\n' "$i" "$a" "$(echo "$b" | cut -d' ' -f1)" "$c" | tee -a "$work/cost.tsv"
  set -- $b
  echo "   pdbsym: $2 samples, $3 s of CPU: $(awk -v c="$3" -v n="$2" 'BEGIN {printf "%.2f", n ? c * 1e6 / n : 0}') us a sample" | tee -a "$work/cpu.txt"
done
python3 - "$work/cost.tsv" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()[1:]]
none = statistics.median(float(r[1]) for r in rows)
for name, k in (("pdbsym profile", 2), ("dotnet-trace collect", 3)):
    v = [float(r[k]) for r in rows]
    print("%-22s median %.2f rounds/s = %.3f of nothing attached (runs: %s)"
          % (name, statistics.median(v), statistics.median(v) / none, ", ".join("%.2f" % x for x in v)))
print("%-22s median %.2f rounds/s" % ("nothing attached", none))
PY
