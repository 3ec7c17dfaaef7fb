"""Recall's serving options' defaults, importable without recall's stack (the CLI's
help names them)."""
# Seconds a context goes unsearched before recall holds its changes back (`serve
# --recall-idle`; services/recall/runtime/holds.py).
RECALL_IDLE_SECONDS = 30.0
# The environment variable naming recall's embedder when `serve --embedder` is not given
# (services/recall/wiring.py embedder_for; unset: "default").
EMBEDDER_ENV = "MORPHZ_EMBEDDER"
# The environment variable that, set to 0, has recall open each context's index at its
# first request instead of in the background at start (services/recall/runtime/opener.py;
# the comparison of scripts/benchmarks/first_search.py).
OPEN_AT_START_ENV = "MORPHZ_RECALL_OPEN_AT_START"
