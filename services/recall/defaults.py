"""Recall's serving options' defaults, importable without recall's stack (the CLI's
help names them)."""
# Seconds a context goes unsearched before recall holds its changes back (`serve
# --recall-idle`; services/recall/runtime/holds.py).
RECALL_IDLE_SECONDS = 30.0
# The environment variable naming recall's embedder when `serve --embedder` is not given
# (services/recall/wiring.py embedder_for; unset: "default").
EMBEDDER_ENV = "MORPHZ_EMBEDDER"
