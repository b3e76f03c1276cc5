"""The Python chunker against the shared vectors in testdata/chunking.

Loads src/baton/_cdc.py by its path, so it runs with nothing installed:
python3 -m pytest --noconftest client/python/tests/test_cdc.py
(--noconftest leaves out tests/conftest.py, which needs the installed SDK)
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import struct
import sys
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

_HERE = Path(__file__).resolve().parent
VECTORS = _HERE.parent.parent.parent / "testdata" / "chunking" / "vectors.json"
MODULE = _HERE.parent / "src" / "baton" / "_cdc.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("baton_cdc_under_test", MODULE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


cdc = _load()
DOC: dict[str, Any] = json.loads(VECTORS.read_text())


@cache
def _part(kind: str, seed: str, byte: int, length: int) -> bytes:
    if kind == "sha256ctr":
        s = seed.encode()
        blocks = (length + 31) // 32
        return b"".join(hashlib.sha256(s + struct.pack("<Q", k)).digest() for k in range(blocks))[:length]
    if kind == "fill":
        return bytes([byte]) * length
    raise ValueError(f"unknown part kind {kind!r}")


def vector_input(parts: list[dict[str, Any]]) -> bytes:
    return b"".join(_part(p["kind"], p.get("seed", ""), p.get("byte", 0), p["length"]) for p in parts)


def refs(chunks: Iterator[bytes] | list[bytes]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    off = 0
    for c in chunks:
        out.append({"offset": off, "size": len(c), "sha256": hashlib.sha256(c).hexdigest()})
        off += len(c)
    return out


def short_reader(data: bytes) -> Callable[[int], bytes]:
    """A read(n) that hands out fewer bytes than asked, of varying sizes."""
    pos = 0
    calls = 0

    def read(n: int) -> bytes:
        nonlocal pos, calls
        calls += 1
        k = min(n, 1 + calls * 7919 % 700_000)
        got = data[pos : pos + k]
        pos += len(got)
        return got

    return read


def test_parameters_and_gear() -> None:
    assert (DOC["min_size"], DOC["normal_size"], DOC["max_size"]) == (
        cdc.MIN_SIZE,
        cdc.NORMAL_SIZE,
        cdc.MAX_SIZE,
    )
    assert DOC["mask_s"] == f"0x{cdc.MASK_S:016x}" == f"0x{cdc.make_mask(22):016x}"
    assert DOC["mask_l"] == f"0x{cdc.MASK_L:016x}" == f"0x{cdc.make_mask(18):016x}"
    assert DOC["gear_label"].encode() == cdc.GEAR_LABEL
    assert DOC["gear_first"] == [f"0x{g:016x}" for g in cdc.GEAR[:16]]
    table = b"".join(struct.pack("<Q", g) for g in cdc.GEAR)
    assert DOC["gear_sha256"] == hashlib.sha256(table).hexdigest()


@pytest.mark.parametrize("vec", DOC["vectors"], ids=[v["name"] for v in DOC["vectors"]])
def test_vector(vec: dict[str, Any]) -> None:
    data = vector_input(vec["parts"])
    assert len(data) == vec["length"]
    assert hashlib.sha256(data).hexdigest() == vec["sha256"]
    assert refs(cdc.split(data)) == vec["chunks"]
    assert refs(cdc.iter_chunks(short_reader(data))) == vec["chunks"]


def test_stream_reader() -> None:
    # A binary file's read, the usual caller.
    import io

    data = vector_input([{"kind": "sha256ctr", "seed": "max-plus-one", "length": cdc.MAX_SIZE + 1}])
    want = next(v for v in DOC["vectors"] if v["name"] == "max-plus-one")["chunks"]
    assert refs(cdc.iter_chunks(io.BytesIO(data).read)) == want
    assert list(cdc.iter_chunks(io.BytesIO(b"").read)) == []
