"""Addresses shared by the server and its clients, importable without the server stack."""
DEFAULT_LISTEN = "127.0.0.1:7070"
