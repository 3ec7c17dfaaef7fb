"""Defaults shared by the server and its command line, importable without the server
stack."""
DEFAULT_LISTEN = "127.0.0.1:7070"
# Seconds a context goes unsearched before recall holds its changes back (`serve
# --recall-idle`; services/recall/core/holds.py).
RECALL_IDLE_SECONDS = 30.0
# The environment variable naming recall's embedder when `serve --embedder` is not given
# (services/recall/wiring.py embedder_for; unset: "default").
EMBEDDER_ENV = "MORPHZ_EMBEDDER"
