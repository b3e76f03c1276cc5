"""application/msgpack for the checkpoint routes a LangGraph saver calls on every step (docs/api.md,
"msgpack"): bytes travel as msgpack bin instead of base64 text inside JSON.

Used when ``ormsgpack`` is importable (LangGraph's checkpoint package depends on it); the SDK speaks
JSON otherwise, and ``ENABLED = False`` makes it speak JSON anyway.
"""

from __future__ import annotations

import base64
from typing import Any

from . import _json

try:
    import ormsgpack
except ImportError:  # pragma: no cover - the SDK's own dependencies do not need it
    ormsgpack = None  # type: ignore[assignment]

MEDIA = "application/msgpack"

ENABLED = ormsgpack is not None


def on() -> bool:
    return ENABLED and ormsgpack is not None


def pack(v: Any) -> bytes:
    assert ormsgpack is not None
    return ormsgpack.packb(v)


def decode(body: bytes) -> Any:
    """An answer's body: msgpack, or JSON (errors, a checkpoint held in chunks, a server that speaks
    only JSON). A JSON answer is an object, "{", which is no msgpack map's first byte."""
    if not body:
        return None
    if body[:1] != b"{" and ormsgpack is not None:
        return ormsgpack.unpackb(body)
    return _json.loads(body)


def wire_bytes(b: bytes, binary: bool) -> Any:
    """Bytes as a request member: themselves in msgpack, base64 text in JSON."""
    return b if binary else base64.b64encode(b).decode("ascii")


def read_bytes(v: Any) -> bytes:
    """A b64 member of an answer: bytes (msgpack) or base64 text (JSON)."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    return base64.b64decode(v or "")
