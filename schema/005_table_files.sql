-- 005_table_files.sql - a complete module's arrays move out of the database
-- into one table file per module (dir/tables/<table_file>.pst, layout 4 in
-- modules.layout; server/cache/store_codec.c has the file's format): the
-- file is mapped at load, so a restart reads only the pages lookups touch
-- instead of copying every array out of its BLOB chunks.  Modules of layout
-- 3 keep their rows in `arrays` and are still read; new ingests write files.
-- The cache's byte cap counts the database's pages in use plus file_bytes.

ALTER TABLE modules ADD COLUMN table_file TEXT NOT NULL DEFAULT '';  -- layout 4: the file's name
ALTER TABLE modules ADD COLUMN file_bytes INTEGER NOT NULL DEFAULT 0; -- layout 4: the file's size
