#!/usr/bin/env bash
# Builds a large native PDB (and its PE) for the speed benchmark.
#
#   bench/make-big-pdb.sh [OUT_DIR] [COPIES]
#
# OUT_DIR defaults to a fresh temporary folder; nothing is written into the
# repository.  Generates C sources (bench/gen-sources.py), compiles them once
# with clang --target=x86_64-pc-windows-msvc -gcodeview -O2 (freestanding: no
# CRT, own entry point), then links every object COPIES times (default 16)
# under renamed symbols (llvm-objcopy --redefine-syms, one map per copy) with
# lld-link /debug.  Result: OUT_DIR/big.exe and OUT_DIR/big.pdb.
#
# Size knobs (environment): GEN_FILES (32), GEN_FUNCS (100 per file),
# GEN_STMTS (60 per function).  The defaults (15 copies) give a 159 MB PDB
# with 48,003 functions, 5.09 M line rows and 403 k inline sites (issue 15's
# benchmark file: 150 MB or more); the size grows with COPIES.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$(mktemp -d "${TMPDIR:-/tmp}/pdbsym-bigpdb.XXXXXX")}
copies=${2:-15}
files=${GEN_FILES:-32}
funcs=${GEN_FUNCS:-100}
stmts=${GEN_STMTS:-60}
jobs=$(nproc)

for tool in clang lld-link llvm-objcopy llvm-nm python3; do
  command -v "$tool" >/dev/null || { echo "make-big-pdb: $tool not found" >&2; exit 1; }
done

mkdir -p "$out/src" "$out/obj"
out=$(cd "$out" && pwd)
start=$(date +%s.%N)
stamp() { printf '%-8s %6.1f s\n' "$1" "$(echo "$(date +%s.%N) - $start" | bc)"; }

python3 "$here/gen-sources.py" "$out/src" --files "$files" --funcs "$funcs" --stmts "$stmts"
stamp generate

cflags=(--target=x86_64-pc-windows-msvc -gcodeview -g -O2 -ffreestanding -fno-builtin
        -fno-stack-protector -mno-stack-arg-probe)
export out
printf '%s\n' "$out"/src/*.c | xargs -P "$jobs" -I{} sh -c \
  'f="{}"; b=$(basename "$f" .c); exec clang '"${cflags[*]}"' -c "$f" -o "$out/obj/$b.obj"'
stamp compile

# One rename map per copy: every external defined by a generated object.
llvm-nm --defined-only --extern-only --format=just-symbols "$out"/obj/gen_*.obj \
  | grep -E '^g[0-9]+_' | sort -u > "$out/obj/externs.txt"
rsp="$out/obj/link.rsp"
echo "$out/obj/entry.obj" > "$rsp"
for ((c = 0; c < copies; c++)); do
  mkdir -p "$out/obj/c$c"
  sed "s/.*/& c${c}_&/" "$out/obj/externs.txt" > "$out/obj/c$c/map.txt"
  for o in "$out"/obj/gen_*.obj; do
    echo "$c $o"
    echo "$out/obj/c$c/$(basename "$o")" >> "$rsp"
  done
done | xargs -P "$jobs" -n 2 sh -c \
  'llvm-objcopy --redefine-syms="$out/obj/c$0/map.txt" "$1" "$out/obj/c$0/$(basename "$1")"'
stamp rename

lld-link /nologo /debug /opt:noref /nodefaultlib /entry:bench_entry /subsystem:console \
  /out:"$out/big.exe" /pdb:"$out/big.pdb" @"$rsp"
stamp link

ls -l "$out/big.exe" "$out/big.pdb"
echo "$out/big.pdb"
