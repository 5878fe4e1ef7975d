#!/usr/bin/env bash
# test_store_cli.sh - `pdbsym cache stats|list|evict|verify|clear` run as a
# user would: the real binary, a temporary cache folder, PDBSYM_CACHE_DIR.
# Modules come from the hidden `cache _fill` (synthetic tables through
# store_put); a module's table file is damaged to see verify catch it.
set -u
bin=${PDBSYM_BIN:?set PDBSYM_BIN to the pdbsym binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PDBSYM_CACHE_DIR=$tmp/cache
unset PDBSYM_CACHE_MAX_BYTES
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# run CMD...: sets $out, $err, $rc
run() { "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?; out=$(cat "$tmp/out"); err=$(cat "$tmp/err"); }
expect_rc() { [ "$rc" = "$1" ] || fail "$2: exit $rc, wanted $1 (stderr: $err)"; }
has() { grep -q -- "$2" <<<"$1" || fail "$3: '$2' not in: $1"; }

run "$bin" cache --help; expect_rc 0 "cache --help"; has "$out" "evict MODULE" "cache --help"
for sub in stats list evict verify clear; do
  run "$bin" cache $sub --help; expect_rc 0 "$sub --help"
  has "$out" "usage: pdbsym cache $sub" "$sub --help"
done
run "$bin" cache; expect_rc 2 "cache without subcommand"
run "$bin" cache frobnicate; expect_rc 2 "unknown subcommand"; has "$err" "pdbsym cache --help" "unknown subcommand"
run "$bin" cache list --bogus; expect_rc 2 "unknown option"; has "$err" "unknown option" "unknown option"
run "$bin" cache evict; expect_rc 2 "evict without module"; has "$err" "pdbsym cache list" "evict without module"
PDBSYM_CACHE_MAX_BYTES=lots run "$bin" cache stats; expect_rc 2 "bad PDBSYM_CACHE_MAX_BYTES (refused, as serve refuses it)"
has "$err" "PDBSYM_CACHE_MAX_BYTES" "bad PDBSYM_CACHE_MAX_BYTES named"
run "$bin" cache stats --cache-max-bytes lots; expect_rc 2 "bad --cache-max-bytes"
has "$err" "cache-max-bytes" "bad --cache-max-bytes"

# no cache yet: looking after one never makes one (a mistyped --cache-dir)
run "$bin" cache stats; expect_rc 1 "stats where there is no cache"
has "$err" "no cache in $PDBSYM_CACHE_DIR" "stats where there is no cache"
[ ! -e "$PDBSYM_CACHE_DIR" ] || fail "stats made $PDBSYM_CACHE_DIR"
for sub in list verify clear; do
  run "$bin" cache $sub --cache-dir "$tmp/wrong"; expect_rc 1 "$sub --cache-dir WRONG"
done
run "$bin" cache evict x.pdb --cache-dir "$tmp/wrong"; expect_rc 1 "evict --cache-dir WRONG"
[ ! -e "$tmp/wrong" ] || fail "a cache command made $tmp/wrong"

# an empty cache
run "$bin" cache _fill --modules 0; expect_rc 0 "_fill 0 (an empty database)"
run "$bin" cache stats; expect_rc 0 "stats (empty)"
has "$out" "^modules: 0$" "stats (empty)"
has "$out" "^path: $PDBSYM_CACHE_DIR/pdbsym.sqlite$" "stats path"
PDBSYM_CACHE_MAX_BYTES=512M run "$bin" cache stats; has "$out" "^max_bytes: 536870912$" "cap from env"
run "$bin" cache stats --cache-max-bytes 3G; has "$out" "^max_bytes: 3221225472$" "cap from flag"

# three modules
run "$bin" cache _fill --modules 3 --lines 20000 --seed 7; expect_rc 0 "_fill"
run "$bin" cache stats; has "$out" "^modules: 3$" "stats after fill"
run "$bin" cache list; expect_rc 0 "list"
[ "$(wc -l <<<"$out")" = 4 ] || fail "list: wanted a header and 3 lines: $out"
[ "$(sed -n 1p <<<"$out")" = "$(printf 'last_used\tstatus\trows\tbytes\tkey\tsource_or_error')" ] \
  || fail "list: header line: $(sed -n 1p <<<"$out")"
key0=$(sed -n 2p <<<"$out" | cut -f5)
has "$key0" "^synth-s7-n20000-0.pdb/" "list key"
has "$(sed -n 2p <<<"$out" | cut -f2)" "^ok$" "list status"
run "$bin" cache _check; expect_rc 0 "_check"; has "$out" "^ok synth-s7-n20000-2.pdb" "_check"

run "$bin" cache evict "$key0"; expect_rc 0 "evict by key"
run "$bin" cache list; [ "$(wc -l <<<"$out")" = 3 ] || fail "after evict: $out"
run "$bin" cache evict "$key0"; expect_rc 1 "evict twice"; has "$err" "pdbsym cache list" "evict twice"
run "$bin" cache evict SYNTH-S7-N20000-1.PDB; expect_rc 0 "evict by debug file name"
has "$out" "evicted synth-s7-n20000-1.pdb/" "evict by name"
run "$bin" cache stats; has "$out" "^modules: 1$" "stats after evicts"

# verify: clean, then a damaged module, then --fix
run "$bin" cache verify; expect_rc 0 "verify (clean)"; has "$out" "checked 1 modules, 0 problems" "verify"
python3 - "$PDBSYM_CACHE_DIR" <<'PY'
import os, sqlite3, struct, sys
db = sqlite3.connect(os.path.join(sys.argv[1], "pdbsym.sqlite"))
# one byte of the lines section of the module's table file (the header's
# sections start at byte 368, 24 bytes each: offset, count, record size)
name = db.execute("SELECT table_file FROM modules WHERE status = 0").fetchone()[0]
path = os.path.join(sys.argv[1], "tables", name + ".pst")
with open(path, "r+b") as f:
    f.seek(368 + 2 * 24)
    off = struct.unpack("<Q", f.read(8))[0]
    f.seek(off + 100)
    b = f.read(1)
    f.seek(off + 100)
    f.write(bytes([b[0] ^ 0x5A]))
db.execute("INSERT INTO modules (key, status, error, fetched_at, last_used, expires_at)"
           " VALUES ('gone.pdb/ABC1', 1, 'not on any symbol server', 0, 0, 9999999999)")
db.commit()
PY
run "$bin" cache verify; expect_rc 1 "verify (damaged)"; has "$out" "checksum" "verify (damaged)"
has "$err" "verify --fix" "verify hint"
run "$bin" cache verify --fix; expect_rc 1 "verify --fix"
run "$bin" cache verify; expect_rc 0 "verify after --fix"
run "$bin" cache list; has "$out" "missing.*gone.pdb/ABC1.*not on any symbol server" "list negative"

# clear --negative, then clear
run "$bin" cache _fill --modules 2 --lines 5000 --seed 8; expect_rc 0 "_fill 2"
run "$bin" cache clear --negative; expect_rc 0 "clear --negative"; has "$out" "removed 1 negative" "clear --negative"
run "$bin" cache stats; has "$out" "^modules: 2$" "modules kept by clear --negative"
has "$out" "^negative_entries: 0$" "negatives gone"
run "$bin" cache clear; expect_rc 0 "clear"; has "$out" "removed 2 entries" "clear"
run "$bin" cache stats; has "$out" "^modules: 0$" "stats after clear"

# --cache-dir overrides the environment
run "$bin" cache _fill --modules 0 --cache-dir "$tmp/other"; expect_rc 0 "_fill --cache-dir"
run "$bin" cache stats --cache-dir "$tmp/other"; has "$out" "^path: $tmp/other/pdbsym.sqlite$" "--cache-dir"

# evict takes a module's id in every form dump and warm print, any case
run "$bin" cache _fill --modules 4 --lines 1000 --seed 9; expect_rc 0 "_fill 4"
g=00000009-0000-000
run "$bin" cache evict SYNTH-S9-N1000-0.PDB ${g}0-0000-000000000000-1; expect_rc 0 "evict FILE GUID-age"
has "$out" "^evicted synth-s9-n1000-0.pdb/000000090000000000000000000000001$" "evict FILE GUID-age"
run "$bin" cache evict synth-s9-n1000-1.pdb/00000009000000010000000000000000-1; expect_rc 0 "evict FILE/32hex-age"
run "$bin" cache evict Synth-S9-N1000-2.pdb/000000090000000200000000000000001; expect_rc 0 "evict FILE/KEY, any case"
run "$bin" cache evict synth-s9-n1000-3.pdb ${g}3-0000-000000000000-2; expect_rc 1 "evict another age"
has "$err" "no module" "evict another age"
run "$bin" cache stats; has "$out" "^modules: 1$" "stats after evicts by id"

# a cache folder that cannot be created
touch "$tmp/file"
run env PDBSYM_CACHE_DIR="$tmp/file/sub" "$bin" cache stats; expect_rc 1 "unusable folder"
has "$err" "no cache in" "unusable folder"
run env PDBSYM_CACHE_DIR="$tmp/file/sub" "$bin" cache _fill --modules 0; expect_rc 1 "unusable folder (_fill)"
has "$err" "cannot create the cache folder" "unusable folder (_fill)"

[ $fails = 0 ] && echo "all cache CLI checks passed" || { echo "$fails failures"; exit 1; }
