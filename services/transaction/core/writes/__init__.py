"""The transaction core's write side: the Writer (the write machinery a core is given)
and the checks and builds of its write entry points (append, commit)."""
