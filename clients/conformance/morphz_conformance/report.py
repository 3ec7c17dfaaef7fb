"""The report: JSON, signed with Ed25519 over a canonical encoding.

Canonical encoding: the report without its `signature` member, as JSON with keys
sorted, no insignificant whitespace, UTF-8 (non-ASCII kept as is). Every number in a
report is an integer (timings in milliseconds), so the encoding has one form.

Keys are PEM files as OpenSSL writes them: `openssl genpkey -algorithm ed25519` (PKCS#8
private key) and `openssl pkey -pubout` (SubjectPublicKeyInfo public key).
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import pathlib
import platform
from importlib import metadata
from typing import Any, Iterable

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (Ed25519PrivateKey,
                                                               Ed25519PublicKey)

ALGORITHM = "ed25519"
REDACTED = "[redacted]"
PACKAGE = pathlib.Path(__file__).resolve().parent


class VerifyError(Exception):
    """The report does not verify (why, for people)."""


def canonical(report: dict[str, Any]) -> bytes:
    body = {k: v for k, v in report.items() if k != "signature"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def sign(report: dict[str, Any], private: Ed25519PrivateKey) -> dict[str, Any]:
    signed = dict(report)
    signed["signature"] = {
        "algorithm": ALGORITHM, "key_id": key_id(private.public_key()),
        "value": base64.b64encode(private.sign(canonical(report))).decode("ascii")}
    return signed


def verify(report: dict[str, Any], public: Ed25519PublicKey) -> None:
    sig = report.get("signature")
    if not isinstance(sig, dict):
        raise VerifyError("the report is not signed")
    if sig.get("algorithm") != ALGORITHM:
        raise VerifyError(f"unknown signature algorithm {sig.get('algorithm')!r}")
    if sig.get("key_id") != key_id(public):
        raise VerifyError("the report was signed by another key")
    try:
        public.verify(base64.b64decode(sig.get("value", ""), validate=True), canonical(report))
    except (InvalidSignature, ValueError):
        raise VerifyError("the signature does not match the report's content") from None


def load_private(path: str) -> Ed25519PrivateKey:
    key = serialization.load_pem_private_key(pathlib.Path(path).read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{path} is not an Ed25519 private key")
    return key


def load_public(path: str) -> Ed25519PublicKey:
    key = serialization.load_pem_public_key(pathlib.Path(path).read_bytes())
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError(f"{path} is not an Ed25519 public key")
    return key


def keygen(private_path: str, public_path: str) -> str:
    """Write a new key pair (private key readable by its owner only); returns its key id."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    pathlib.Path(public_path).write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return key_id(key.public_key())


def kit_hash() -> str:
    """SHA-256 over the kit's own files (its cases, driver, generated stubs and the
    requirements' text): which kit, byte for byte, made a report."""
    h = hashlib.sha256()
    files = [*PACKAGE.rglob("*.py"), PACKAGE / "CONFORMANCE.md"]
    for path in sorted(p for p in files if "__pycache__" not in p.parts):
        h.update(str(path.relative_to(PACKAGE)).encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return "sha256:" + h.hexdigest()


def environment() -> dict[str, str]:
    """Where the kit ran: versions only (no environment variables, host names or paths)."""
    env = {"python": platform.python_version(), "platform": platform.platform(terse=True),
           "machine": platform.machine()}
    for dist in ("grpcio", "protobuf", "cryptography"):
        try:
            env[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            env[dist] = ""
    return env


def scrub(value: Any, secrets: Iterable[str]) -> Any:
    """`value` with every occurrence of every secret replaced by [redacted]."""
    secrets = sorted((s for s in secrets if s), key=len, reverse=True)
    if isinstance(value, str):
        for s in secrets:
            value = value.replace(s, REDACTED)
        return value
    if isinstance(value, dict):
        return {scrub(k, secrets): scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v, secrets) for v in value]
    return value


def dump(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
