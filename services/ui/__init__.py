"""`morphz ui`: a read-only web inspector over the Python client (see README, "Inspect a
context in the browser")."""
