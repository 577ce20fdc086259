-- A job's record becomes bytes: the binary encoding of
-- store/internal/jobbinary, as store/bolt stores it, about half the size
-- of the JSON and several times cheaper to write and read. Records
-- written before keep their JSON text, byte for byte, and are read as
-- such (a record that starts with "{"); each is rewritten in the binary
-- encoding at its next write. The change rewrites the table once.
ALTER TABLE {schema}.jobs ALTER COLUMN job TYPE bytea USING convert_to(job::text, 'UTF8');
