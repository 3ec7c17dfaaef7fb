"""The LMDB store (store.py: its design; one environment, one named database per table),
in files of one job each: store.py (the environment, group commits and the change
feed), writes.py (a commit's writes encoded, and put in its child transaction),
reader.py (snapshots and scans). Only the storage service and the composition root's
commands reach it (tests/unit/test_architecture_imports.py): everyone else has a Store."""
from morphz.services.storage.lmdb.store import LmdbStore

__all__ = ["LmdbStore"]
