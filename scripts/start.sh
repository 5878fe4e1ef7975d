#!/usr/bin/env bash
# The README's first command: installs what pdbsym needs, builds it and starts
# the service on 127.0.0.1 with the embedded defaults (an SQLite cache in
# ./.pdbsym-cache, Microsoft's public symbol server upstream).  Any arguments
# are passed to 'pdbsym serve'.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/deps.sh"
"$root/scripts/build.sh" "$root/build"
export PDBSYM_CACHE_DIR=${PDBSYM_CACHE_DIR:-"$root/.pdbsym-cache"}
export PDBSYM_LISTEN=${PDBSYM_LISTEN:-127.0.0.1:8765}
mkdir -p "$PDBSYM_CACHE_DIR"
echo "pdbsym: serving on http://$PDBSYM_LISTEN (cache: $PDBSYM_CACHE_DIR)" >&2
exec "$root/build/pdbsym" serve "$@"
