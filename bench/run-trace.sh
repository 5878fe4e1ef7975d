#!/usr/bin/env bash
# The trace benchmark (issue 17): `pdbsym trace` beside TraceEvent's TraceLog
# on the same big .nettrace, in the same run.
#
#   bench/run-trace.sh [COPIES]     (default 300: a ~116 MB trace)
#
# 1. make-big-trace.py repeats the .NET 10 fixture's blocks COPIES times;
# 2. timed under /usr/bin/time -v (wall time, CPU, maximum RSS), each once
#    untimed first to fill the page cache:
#      ours      pdbsym trace --offline --pdb-dir FIXTURE FILE -o /dev/null --stats S
#                (speedscope JSON, every frame's name, file and line)
#      TraceLog  tracelog/TraceLogBench FILE FIXTURE (net10.0, TraceEvent 4.0.0):
#                the .etlx conversion, then every sample's stack with names and
#                a source line per code address
#   and once more ours with a 4 KiB stack budget (flushing to the spill file);
# 3. prints samples per second, maximum RSS, the ratios, and our counted peaks.
#
# pdbsym is taken from $PDBSYM_BIN, else build/pdbsym.  Needs python3, GNU time
# and (for the peer) the .NET SDK with NuGet.  Scratch files go to a temporary
# folder, removed at the end (KEEP=1 keeps it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
copies=${1:-300}
bin=${PDBSYM_BIN:-$here/../build/pdbsym}
fix=$here/../tests/fixtures/nettrace/net10.0
for f in "$bin" /usr/bin/time; do
  [ -e "$f" ] || { echo "run-trace.sh: $f missing" >&2; exit 1; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pdbsym-bench-trace.XXXXXX")
[ "${KEEP:-0}" = 1 ] && echo "scratch: $tmp" || trap 'rm -rf "$tmp"' EXIT

python3 "$here/make-big-trace.py" "$tmp/big.nettrace" "$copies"
size=$(stat -c %s "$tmp/big.nettrace")
echo "trace: $copies copies of $fix/workload.nettrace, $((size / 1048576)) MiB"

have_dotnet=0
if command -v dotnet >/dev/null; then
  cp -r "$here/tracelog" "$tmp/tracelog-src" # builds outside the repository
  dotnet build "$tmp/tracelog-src" -c Release -o "$tmp/tracelog" -nologo -v q >/dev/null && have_dotnet=1
fi

measure() { # name, command...
  local name=$1; shift
  "$@" > "$tmp/$name.out" 2>"$tmp/$name.err" || true # warm-up
  /usr/bin/time -v -o "$tmp/$name.time" "$@" > "$tmp/$name.out" 2>"$tmp/$name.err"
  local wall cpu rss
  wall=$(sed -n 's/.*Elapsed (wall clock) time.*: //p' "$tmp/$name.time" \
         | awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }')
  cpu=$(awk -F': ' '/User time|System time/ { s += $2 } END { print s }' "$tmp/$name.time")
  rss=$(awk -F': ' '/Maximum resident/ { printf "%.1f", $2 / 1024 }' "$tmp/$name.time")
  echo "$wall $cpu $rss" > "$tmp/$name.fig"
}
env_ours=(env PDBSYM_CACHE_DIR="$tmp/cache" PDBSYM_LOG_LEVEL=error)
measure ours "${env_ours[@]}" "$bin" trace --offline --quiet --pdb-dir "$fix" "$tmp/big.nettrace" \
  -o /dev/null --stats "$tmp/ours.stats"
measure spill "${env_ours[@]}" "$bin" trace --offline --quiet --pdb-dir "$fix" "$tmp/big.nettrace" \
  -o /dev/null --stack-budget 4K --stats "$tmp/spill.stats"
samples=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples"])' "$tmp/ours.stats")
if [ $have_dotnet = 1 ]; then
  measure tracelog dotnet "$tmp/tracelog/TraceLogBench.dll" "$tmp/big.nettrace" "$fix"
fi

row() { # name label
  [ -f "$tmp/$1.fig" ] || return 0
  read -r wall cpu rss < "$tmp/$1.fig"
  awk -v n="$2" -v s="$samples" -v w="$wall" -v c="$cpu" -v r="$rss" \
    'BEGIN { printf "%-34s %8.2f s wall %8.2f s cpu %12.0f samples/s %9.1f MiB max RSS\n", n, w, c, s / w, r }'
}
echo "samples: $samples"
row ours "pdbsym trace (32 MiB stack budget)"
row spill "pdbsym trace (4 KiB stack budget)"
row tracelog "TraceEvent TraceLog + SymbolReader"
if [ -f "$tmp/tracelog.fig" ]; then
  read -r ow _ orss < "$tmp/ours.fig"
  read -r tw _ trss < "$tmp/tracelog.fig"
  awk -v a="$ow" -v b="$tw" -v x="$orss" -v y="$trss" \
    'BEGIN { printf "ratio: pdbsym %.1fx the speed of TraceLog, %.1fx less memory\n", b / a, y / x }'
  echo "TraceLog: $(cat "$tmp/tracelog.out")"
fi
echo "pdbsym peaks (counted): $(cat "$tmp/ours.stats")"
echo "pdbsym peaks, 4 KiB budget: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print({k: d[k] for k in d if k.startswith("peak") or k in ("stack_flushes","spill_bytes")})' "$tmp/spill.stats")"
