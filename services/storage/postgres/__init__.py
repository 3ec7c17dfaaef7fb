"""The PostgreSQL store (store.py: its design), in files of one job each: schema.py (the
tables and statements), group_commit.py (commits queued and written a batch at a time),
writer_conn.py (the writer's connection and its watchdog), plan.py and writes.py (a
batch's writes as statements), pool.py (reader connections), reader.py (snapshots and
reads), notify.py (other writers' commits heard), lmdb_copy.py (backup and restore
through LMDB's layout), errors.py (database errors as named faults)."""
from morphz.services.storage.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
