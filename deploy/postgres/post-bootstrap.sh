#!/bin/sh
# Patroni runs this once, on the member that ran initdb, with a superuser connection URL:
# the role Morphz's storage connects as (the password of the passfile the storage processes
# mount, read by entrypoint.sh) and one database per storage shard ($MORPHZ_PG_DATABASES).
# Standbys receive them by replication like any other write.
set -eu
{
  echo "CREATE ROLE morphz LOGIN PASSWORD :'password';"
  for db in ${MORPHZ_PG_DATABASES:?one database name per storage shard}; do
    echo "CREATE DATABASE \"$db\" OWNER morphz;"
  done
} | psql "$1" --no-psqlrc -v ON_ERROR_STOP=1 -v password="$MORPHZ_PG_PASSWORD"
