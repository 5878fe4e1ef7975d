#!/usr/bin/env bash
# The PDB reader benchmark: issue 15's reader rows, ours beside LLVM 19's and
# LLVM 14's tools, on the same file and RVAs, in the same run.
#
#   bench/run.sh DIR [COUNT]      (DIR holds big.exe and big.pdb from make-big-pdb.sh)
#
# Runs bench/reader.py (see its header for what is measured and how): COUNT
# (default 100,000) random RVAs through a cold `pdbsym lookup` and a cold
# llvm-symbolizer; one RVA per cold run, 20 runs each; the peak memory of a
# whole parse (`pdbsym dump`) against llvm-pdbutil dump -l -symbols; then the
# agreement of our answers with llvm-symbolizer 19's.  Prints one table.
#
# Ours: $PDBSYM_BIN (default build/pdbsym) and $BENCH_PDB (build/bench_pdb,
# which draws the RVAs and prints its in-process figures); peers: $LLVM19
# (/usr/lib/llvm-19/bin) and $LLVM14 (/usr/lib/llvm-14/bin).  To measure
# another build (say main's, for a before/after table), point PDBSYM_BIN and
# BENCH_PDB at it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec python3 "$here/reader.py" "$@"
