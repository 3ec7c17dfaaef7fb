"""Defaults shared by the server and its command line, importable without the server
stack."""
from morphz.services.recall.defaults import EMBEDDER_ENV, RECALL_IDLE_SECONDS

__all__ = ["DEFAULT_LISTEN", "EMBEDDER_ENV", "RECALL_IDLE_SECONDS"]
DEFAULT_LISTEN = "127.0.0.1:7070"
