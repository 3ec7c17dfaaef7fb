#!/bin/sh
# Patroni reads its passwords from the environment only: read them, as root, from the
# mounted secrets ($MORPHZ_PG_SECRETS: owner-only files), then become Patroni as postgres
# (PostgreSQL refuses to run as root). post-bootstrap.sh inherits this environment.
set -eu
dir="${MORPHZ_PG_SECRETS:-/run/secrets}"
PATRONI_SUPERUSER_PASSWORD="$(cat "$dir/postgres.password")"
PATRONI_REPLICATION_PASSWORD="$(cat "$dir/replicator.password")"
PATRONI_REWIND_PASSWORD="$(cat "$dir/rewind.password")"
MORPHZ_PG_PASSWORD="$(cut -d: -f5- "$dir/morphz.pgpass")"  # host:port:db:user:password
export PATRONI_SUPERUSER_PASSWORD PATRONI_REPLICATION_PASSWORD PATRONI_REWIND_PASSWORD \
  MORPHZ_PG_PASSWORD
exec setpriv --reuid=postgres --regid=postgres --init-groups \
  patroni /etc/patroni/patroni.yml
