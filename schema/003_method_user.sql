-- 003_method_user.sql - method records (array kind 7) grow from 20 to 32 bytes:
-- st_method gained `user`, `local` and `gen` (the source-level method of
-- compiler-generated code, parsers/clrnames.h).  Records of the old layout
-- (store_int.h STORE_LAYOUT 2 or older) are treated as absent and replaced on
-- the next ingest, so only the documented size changes here.
UPDATE array_kinds SET elem_size = 32 WHERE kind = 7;
