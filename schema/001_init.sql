-- 001_init.sql - the first schema of the pdbsym line-table cache.
--
-- A module (one PDB, or one PE's embedded Portable PDB) is stored as the
-- arrays of its finished symtab (parsers/symtab.h), each array cut into
-- chunks of at most 1 MiB in the `arrays` table.  A module is always loaded
-- whole into memory (the hot set answers lookups), so one sequential read of
-- a few large BLOBs is the fastest way back: no per-row decoding, no index
-- per row, about 16 bytes per line row on disk.  The `modules` row keeps the
-- identity, the counts and sizes, so the cache can be inspected and bounded
-- without reading the arrays.
--
-- Record layout inside the BLOBs: the C structs of symtab.h, little-endian,
-- exactly as in memory; modules.layout names that layout (store.c refuses a
-- module whose layout it does not know, and treats it as absent).

CREATE TABLE modules (
  id          INTEGER PRIMARY KEY,
  key         TEXT    NOT NULL UNIQUE,  -- module_cache_key: "<debug file>/<GUID><age>"
  status      INTEGER NOT NULL,         -- 0 complete, 1 missing, 2 malformed, 3 fetch error
  format      INTEGER NOT NULL DEFAULT 0,  -- st_format: 1 Windows PDB, 2 Portable PDB
  guid        BLOB,
  age         INTEGER NOT NULL DEFAULT 0,
  pdb_age     INTEGER NOT NULL DEFAULT 0,
  stamp       INTEGER NOT NULL DEFAULT 0,
  machine     INTEGER NOT NULL DEFAULT 0,
  managed     INTEGER NOT NULL DEFAULT 0,
  source_link INTEGER NOT NULL DEFAULT 0,  -- string offset of the Source Link JSON
  source      TEXT    NOT NULL DEFAULT '', -- URL or path the module came from
  error       TEXT    NOT NULL DEFAULT '', -- negative entries: why
  layout      INTEGER NOT NULL DEFAULT 0,  -- record layout of the arrays (see store.c)
  nstrs_bytes INTEGER NOT NULL DEFAULT 0,
  nfuncs      INTEGER NOT NULL DEFAULT 0,
  nlines      INTEGER NOT NULL DEFAULT 0,
  ninlines    INTEGER NOT NULL DEFAULT 0,
  niranges    INTEGER NOT NULL DEFAULT 0,
  npublics    INTEGER NOT NULL DEFAULT 0,
  nmethods    INTEGER NOT NULL DEFAULT 0,
  nseqpts     INTEGER NOT NULL DEFAULT 0,
  data_bytes  INTEGER NOT NULL DEFAULT 0,  -- sum of the module's array bytes
  checksum    INTEGER NOT NULL DEFAULT 0,  -- CRC-32 of the arrays in kind order
  fetched_at  INTEGER NOT NULL,            -- unix seconds
  last_used   INTEGER NOT NULL,            -- unix seconds
  expires_at  INTEGER NOT NULL DEFAULT 0   -- negative entries: unix seconds
);
CREATE INDEX modules_lru ON modules (status, last_used);

-- What each array kind is (for people reading the database).
CREATE TABLE array_kinds (
  kind      INTEGER PRIMARY KEY,
  name      TEXT    NOT NULL,
  elem_size INTEGER NOT NULL
);
INSERT INTO array_kinds VALUES
  (1, 'strings', 1),
  (2, 'functions', 24),
  (3, 'lines', 16),
  (4, 'inline_sites', 20),
  (5, 'inline_ranges', 20),
  (6, 'publics', 12),
  (7, 'methods', 20),
  (8, 'sequence_points', 24);

CREATE TABLE arrays (
  module INTEGER NOT NULL REFERENCES modules (id) ON DELETE CASCADE,
  kind   INTEGER NOT NULL,
  seq    INTEGER NOT NULL,  -- chunk number, from 0
  data   BLOB    NOT NULL,
  PRIMARY KEY (module, kind, seq)
);

-- For people reading the database: each module's arrays, rows and bytes.
CREATE VIEW module_arrays AS
  SELECT m.key AS module, k.name AS array, count(*) AS chunks,
         sum(length(a.data)) / k.elem_size AS records, sum(length(a.data)) AS bytes
  FROM arrays a JOIN array_kinds k ON k.kind = a.kind JOIN modules m ON m.id = a.module
  GROUP BY a.module, a.kind;
