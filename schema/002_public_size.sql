-- 002_public_size.sql - a public symbol record gains the size it may name
-- (parsers/symtab.h st_public: rva, size, name, mangled; 16 bytes).  Records
-- of the old layout (12 bytes, store.c STORE_LAYOUT 1) are treated as absent
-- and replaced on the next ingest, so only the documented size changes here.
UPDATE array_kinds SET elem_size = 16 WHERE kind = 6;
