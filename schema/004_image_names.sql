-- 004_image_names.sql - a complete module remembers whether its table holds
-- the method names of its PE image (the image's metadata: .NET frames named
-- Namespace.Type.Method).  A managed module cached without them (its request
-- named no image, or the image was not on any server yet) gains them when a
-- later request names the image: the engine fetches it and the module is
-- stored again with image_names = 1 (store_put replaces a row without names
-- by one with them, never the other way).
ALTER TABLE modules ADD COLUMN image_names INTEGER NOT NULL DEFAULT 0;
