#!/usr/bin/env bash
# Runs the PDB speed benchmark beside its peers, on the same file and RVAs.
#
#   bench/run.sh DIR [COUNT]      (DIR holds big.exe and big.pdb from make-big-pdb.sh)
#
# 1. bench_pdb draws COUNT (default 100000) RVAs inside functions (fixed seed)
#    and writes them out (untimed warm-up run, which also fills the page cache);
# 2. timed, each under /usr/bin/time -v (wall time, maximum RSS):
#      ours    bench_pdb -a ours.txt big.pdb          (parse + lookups + answers)
#      llvm-symbolizer --obj=big.exe --relative-address --inlines
#                      --functions=short --no-demangle < rvas > theirs.txt
#      llvm-pdbutil dump -l -symbols big.pdb > /dev/null
# 3. prints the figures, the ratios, and the agreement of ours.txt with
#    theirs.txt (bench/compare.py) on a 2,000-address sample and on all.
#
# bench_pdb is taken from $BENCH_PDB, else build/bench_pdb (scripts/build.sh).
# Scratch files go to a temporary folder, removed at the end (KEEP=1 keeps it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: bench/run.sh DIR [COUNT]}
count=${2:-100000}
exe=$dir/big.exe
pdb=$dir/big.pdb
bench=${BENCH_PDB:-$here/../build/bench_pdb}
for f in "$exe" "$pdb" "$bench" /usr/bin/time; do
  [ -e "$f" ] || { echo "run.sh: $f missing" >&2; exit 1; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pdbsym-bench.XXXXXX")
[ "${KEEP:-0}" = 1 ] && echo "scratch: $tmp" || trap 'rm -rf "$tmp"' EXIT

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1fx", a / b; else print "-" }'; }

# time -v figures: wall seconds and max RSS in MiB
measure() { # name, command...
  local name=$1; shift
  /usr/bin/time -v -o "$tmp/$name.time" "$@"
  local wall cpu rss
  wall=$(sed -n 's/.*Elapsed (wall clock) time.*: //p' "$tmp/$name.time" \
         | awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }')
  cpu=$(awk -F': ' '/User time|System time/ { s += $2 } END { print s }' "$tmp/$name.time")
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/$name.time")
  echo "$wall $cpu $(echo "$rss / 1024" | bc -l)" > "$tmp/$name.fig"
}

echo "== $pdb ($(stat -c %s "$pdb") bytes), $count RVAs"
cat "$exe" "$pdb" > /dev/null
"$bench" -n "$count" -r "$tmp/rvas.txt" "$pdb" > /dev/null

# Image base: --relative-address must answer an RVA like the VA (base + RVA).
base=$(llvm-readobj --file-headers "$exe" | sed -n 's/^ *ImageBase: //p')
head -20 "$tmp/rvas.txt" > "$tmp/r20"
while read -r r; do printf '0x%x\n' $((base + r)); done < "$tmp/r20" > "$tmp/v20"
sym=(llvm-symbolizer "--obj=$exe" --inlines --functions=short --no-demangle)
if ! cmp -s <("${sym[@]}" --relative-address < "$tmp/r20") <("${sym[@]}" < "$tmp/v20"); then
  echo "run.sh: --relative-address disagrees with image base $base + RVA" >&2
  exit 1
fi

echo "-- ours: bench_pdb"
measure ours "$bench" -n "$count" -a "$tmp/ours.txt" "$pdb"
echo "-- llvm-symbolizer"
measure symbolizer "${sym[@]}" --relative-address < "$tmp/rvas.txt" > "$tmp/theirs.txt"
echo "-- llvm-pdbutil dump -l -symbols"
measure pdbutil llvm-pdbutil dump -l -symbols "$pdb" > /dev/null

echo
read -r ow oc orss < "$tmp/ours.fig"
printf '%-34s %8s %8s %9s %11s %10s %10s\n' tool "wall s" "CPU s" "RSS MiB" \
  "wall ratio" "CPU ratio" "RSS ratio"
for name in ours symbolizer pdbutil; do
  read -r w c rss < "$tmp/$name.fig"
  case $name in
    ours) label="bench_pdb (parse+lookups)" ;;
    symbolizer) label="llvm-symbolizer ($count RVAs)" ;;
    pdbutil) label="llvm-pdbutil dump -l -symbols" ;;
  esac
  printf '%-34s %8.2f %8.2f %9.1f %11s %10s %10s\n' "$label" "$w" "$c" "$rss" \
    "$(ratio "$w" "$ow")" "$(ratio "$c" "$oc")" "$(ratio "$rss" "$orss")"
done
echo "(ratios: peer / ours; above 1 means ours is faster or smaller; CPU = user + system,"
echo " steadier than wall time on a loaded machine)"
echo
python3 "$here/compare.py" "$tmp/rvas.txt" "$tmp/ours.txt" "$tmp/theirs.txt" --sample 2000
python3 "$here/compare.py" "$tmp/rvas.txt" "$tmp/ours.txt" "$tmp/theirs.txt" | head -2
