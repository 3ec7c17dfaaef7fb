"""The transaction service's runtime beside its core: the lease thread that keeps this
instance's ownership of contexts (lease.py)."""
