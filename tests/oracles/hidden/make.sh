#!/usr/bin/env bash
# make.sh - remakes the hidden-point expectations in this folder (README.md):
#   portable.tsv.gz  the .NET runtime's answers (StackTraceLines.cs) for every
#                    Portable PDB of ../shared/corpus (and every PE with an
#                    embedded one), of tests/fixtures/managed and of the
#                    synthetic PE among the fuzz seeds
#   windows.tsv.gz   the contract's answers on DiaSymReader's points
#                    (.winpdb.jsonl) for every Windows managed PDB there
#   tests/oracles/hidden/make.sh           rewrite the two files
#   tests/oracles/hidden/make.sh --check   remake into a temp folder, compare
# Needs the .NET SDK (`dotnet`, 10 or later; see ../shared/DOTNET.md) and the
# corpus.  The product's build and test command never run this.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
corpus=$root/../shared/corpus
fixtures=$root/tests/fixtures/managed
[[ -f $corpus/MANIFEST.tsv ]] || { echo "make.sh: $corpus absent" >&2; exit 1; }
command -v dotnet >/dev/null || { echo "make.sh: the .NET SDK (dotnet) is not installed" >&2; exit 1; }

check=0
[[ ${1:-} == --check ]] && check=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=$here
((check)) && out=$work/out && mkdir -p "$out"

export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
mkdir -p "$work/src"
cp "$here/StackTraceLines.cs" "$here/StackTraceLines.csproj" "$work/src/"
dotnet build "$work/src" -c Release -o "$work/bin" -nologo -v quiet >"$work/build.log" 2>&1 ||
  { cat "$work/build.log" >&2; exit 1; }

# the inputs: "kind<TAB>key<TAB>path", keys relative to the corpus or the repository
awk -F'\t' -v c="$corpus" 'NR > 1 && $2 == "portable-pdb" && $15 !~ /Edit-and-Continue DELTA/ {
      print "pdb\tcorpus/" $1 "\t" c "/" $1 }
    NR > 1 && $2 == "pe-with-embedded-ppdb" { print "embedded\tcorpus/" $1 "\t" c "/" $1 }' \
  "$corpus/MANIFEST.tsv" >"$work/portable.in"
for d in portable-debug portable-release; do
  printf 'pdb\tfixtures/managed/%s/Demo.pdb\t%s/%s/Demo.pdb\n' "$d" "$fixtures" "$d" >>"$work/portable.in"
done
printf 'embedded\tfixtures/managed/embedded-debug/Demo.dll\t%s/embedded-debug/Demo.dll\n' "$fixtures" >>"$work/portable.in"
printf 'embedded\ttests/fuzz/corpus/pe/synthetic.dll.bin\t%s/tests/fuzz/corpus/pe/synthetic.dll.bin\n' "$root" >>"$work/portable.in"
awk -F'\t' -v c="$corpus" 'NR > 1 && $2 == "windows-managed-pdb" {
      print "winpdb\tcorpus/" $1 "\t" c "/" $1 ".winpdb.jsonl" }' "$corpus/MANIFEST.tsv" |
  while IFS=$'\t' read -r kind key path; do [[ -f $path ]] && printf '%s\t%s\t%s\n' "$kind" "$key" "$path"; done \
  >"$work/windows.in"
for d in windows-debug windows-release; do
  printf 'winpdb\tfixtures/managed/%s/Demo.pdb\t%s/%s/Demo.pdb.winpdb.jsonl\n' "$d" "$fixtures" "$d" >>"$work/windows.in"
done

for set in portable windows; do
  dotnet "$work/bin/StackTraceLines.dll" <"$work/$set.in" >"$work/$set.tsv"
  gzip -n -9 -c "$work/$set.tsv" >"$out/$set.tsv.gz"
  echo "$set.tsv.gz: $(wc -l <"$work/$set.in") files, $(grep -vc '^#' "$work/$set.tsv") probes;" \
    "$(grep -v '^#' "$work/$set.tsv" | cut -f6 | sort | uniq -c | tr -s ' ' | tr '\n' ',')"
done

if ((check)); then
  status=0
  for set in portable windows; do
    cmp -s "$out/$set.tsv.gz" "$here/$set.tsv.gz" || { echo "differs from the committed file: $set.tsv.gz" >&2; status=1; }
  done
  ((status == 0)) && echo "make.sh reproduces the committed files"
  exit $status
fi
