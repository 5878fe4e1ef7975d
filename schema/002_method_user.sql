-- 002_method_user.sql - method records (array kind 7) grow from 20 to 32 bytes:
-- st_method gained `user`, `local` and `gen` (the source-level method of
-- compiler-generated code, parsers/clrnames.h).  Records of the old size
-- carry modules.layout 1, which store.c no longer loads (they are treated as
-- absent and replaced on the next ingest), so only the description changes.
UPDATE array_kinds SET elem_size = 32 WHERE kind = 7;
