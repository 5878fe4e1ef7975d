#!/usr/bin/env bash
# The soak benchmark (issue 13): the real `pdbsym serve` under mixed traffic
# for 30 minutes (--minutes N), its RSS, threads, descriptors, cache folder
# and /health latency sampled, printed as a table with a verdict per
# resource.  See bench/soak.py's header for the traffic and what is measured.
#
#   bench/run-soak.sh [--minutes 30] [--cap 4M] [--copies N] [--keep]
#
# pdbsym is taken from $PDBSYM_BIN, else build/pdbsym.  Needs python3 only
# (the symbol servers are tests/symserver.py); uses ../shared/corpus when it
# is there.  Runs under nice: the traffic and the symbol servers are this
# process's children.  Exit status: 0; 1 a bound was passed; 2 the service
# died.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export PDBSYM_BIN=${PDBSYM_BIN:-$here/../build/pdbsym}
exec nice python3 "$here/soak.py" "$@"
