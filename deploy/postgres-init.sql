-- Run by the postgres image on an empty data directory (docker-entrypoint-initdb.d): the creature
-- server's database, beside the authorization service's (POSTGRES_DB). Each server creates its own
-- tables at start (versioned migrations under an advisory lock).
CREATE DATABASE creatures OWNER seed;
