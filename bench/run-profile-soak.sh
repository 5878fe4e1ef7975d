#!/usr/bin/env bash
# The live-profiling soak of issue 25 (bench/README.md, "Profiling a running
# process for 30 minutes"): tests/live's app minting new methods (a
# DynamicMethod, a compiled Regex, an expression tree) and new stack shapes
# every second, profiled by `pdbsym profile` with 10 s windows and, in the
# same run, by TraceEvent's live TraceLog (bench/tracelog-live).  Every 10 s
# the RSS of both (and of the app) is recorded; at the end pdbsym and the
# peer are stopped, every window is checked against `pdbsym trace` of the
# session's own stream (--tee), and the figures are printed:
# RSS first third vs last third for pdbsym and TraceLog, windows written,
# samples, dropped events, samples that differ.
#
#   bench/run-profile-soak.sh [MINUTES]      (default 30)
# Env: PDBSYM_BIN (default: builds build-bench/pdbsym), WINDOW (10s), KEEP=1
# keeps the work folder.  Needs the .NET 10 SDK and NuGet.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
minutes=${1:-30}
window=${WINDOW:-10s}
work=$(mktemp -d "${TMPDIR:-/tmp}/pdbsym-soak.XXXXXX")
cleanup() {
  for p in ${app_pid:-} ${prof_pid:-} ${peer_pid:-}; do kill -9 "$p" 2>/dev/null || true; done
  [ "${KEEP:-}" = 1 ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1
bin=${PDBSYM_BIN:-}
if [ -z "$bin" ]; then
  "$root/scripts/build.sh" "$root/build-bench" -DPDBSYM_BUILD_TESTS=OFF
  bin=$root/build-bench/pdbsym
fi
echo "== building the app and the TraceLog peer"
cp -r "$root/tests/live" "$work/live"
dotnet build "$work/live/LiveApp" -c Release -o "$work/app" -nologo -v q >/dev/null
cp -r "$root/bench/tracelog-live" "$work/peer-src"
dotnet build "$work/peer-src" -c Release -o "$work/peer" -nologo -v q >/dev/null

rss() { awk '/^VmRSS/ {print $2 * 1024}' "/proc/$1/status" 2>/dev/null || echo 0; }

echo "== $minutes minutes, windows of $window"
"$work/app/LiveApp" 0 --mint > "$work/app.out" 2>&1 &
app_pid=$!
for _ in $(seq 100); do grep -q ready "$work/app.out" && break; sleep 0.1; done
sleep 2
"$bin" profile --pid "$app_pid" --window "$window" --out "$work/windows" --tee "$work/session.nettrace" \
  --cache-dir "$work/cache" --offline --quiet > "$work/profile.out" 2> "$work/profile.err" &
prof_pid=$!
dotnet "$work/peer/TraceLogLive.dll" "$app_pid" 0 "$work/peer.tsv" > "$work/peer.out" 2>&1 &
peer_pid=$!
printf 'seconds\tpdbsym_rss\tpeer_rss\tapp_rss\twindows\n' > "$work/rss.tsv"
end=$(( $(date +%s) + minutes * 60 ))
start=$(date +%s)
while [ "$(date +%s)" -lt "$end" ]; do
  sleep 10
  kill -0 "$prof_pid" 2>/dev/null || { echo "pdbsym profile ended early:"; cat "$work/profile.err"; exit 1; }
  printf '%s\t%s\t%s\t%s\t%s\n' $(( $(date +%s) - start )) "$(rss "$prof_pid")" "$(rss "$peer_pid")" \
    "$(rss "$app_pid")" "$(ls "$work/windows" | grep -c speedscope.json)" >> "$work/rss.tsv"
done
kill -TERM "$prof_pid"; wait "$prof_pid" || true
kill -TERM "$peer_pid" 2>/dev/null || true; sleep 1; kill -9 "$peer_pid" 2>/dev/null || true
kill "$app_pid"; wait "$app_pid" 2>/dev/null || true
echo "== pdbsym trace of the session's own stream"
"$bin" trace "$work/session.nettrace" -o "$work/trace.json" --pdb-dir "$work/app" \
  --cache-dir "$work/cache" --offline --quiet
python3 "$root/bench/profile_soak_report.py" "$work" "$minutes" "$window"
