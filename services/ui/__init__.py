"""`morphz ui`: a read-only web inspector over the Python client (see
docs/inspector.md)."""
