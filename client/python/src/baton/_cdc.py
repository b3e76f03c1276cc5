"""Baton's content-defined chunking, the same cut as every Baton SDK's.

The specification is the package doc of the Go package client/internal/cdc;
testdata/chunking/vectors.json holds the vectors every SDK's tests check.
In short: FastCDC with normalized chunking (level 2). For each chunk, with
fp a 64-bit unsigned integer starting at 0::

    limit = min(len(rest), MAX_SIZE)
    for i in MIN_SIZE .. limit-1:
        fp = (fp << 1) + GEAR[rest[i]]  (mod 2**64)
        if fp & (MASK_S if i < NORMAL_SIZE else MASK_L) == 0:
            cut after byte i (the chunk is rest[:i+1])
    otherwise the chunk is rest[:limit]

GEAR[i] is the first 8 bytes of SHA-256(b"baton-cdc-gear-v1" + bytes([i])),
little-endian. A mask with n one-bits sets bit 63 - (j*64)//n for j in 0..n-1;
MASK_S has 22 bits, MASK_L 18. Pure Python (stdlib only): the per-byte loop is
the cost, so it skips the first MIN_SIZE bytes of each chunk unhashed, as the
algorithm allows, and masks fp to 64 bits once per block instead of per byte.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator

__all__ = [
    "GEAR",
    "GEAR_LABEL",
    "MASK_L",
    "MASK_S",
    "MAX_SIZE",
    "MIN_SIZE",
    "NORMAL_SIZE",
    "cut",
    "iter_chunks",
    "make_mask",
    "split",
]

MIN_SIZE = 256 * 1024
NORMAL_SIZE = 1024 * 1024
MAX_SIZE = 4 * 1024 * 1024  # also the server's limit on one chunk body
GEAR_LABEL = b"baton-cdc-gear-v1"

_M64 = (1 << 64) - 1
# Bytes hashed between two reductions of fp to 64 bits. Bits above 63 never
# reach the masked bits (shifts and carries only move upward), so fp may grow
# for a while; 64 keeps the integers small enough to stay cheap.
_BLOCK = 64


def make_mask(n: int) -> int:
    """The mask with n one-bits: bit 63 - (j*64)//n for j in 0..n-1."""
    m = 0
    for j in range(n):
        m |= 1 << (63 - (j * 64) // n)
    return m


def _make_gear() -> tuple[int, ...]:
    return tuple(int.from_bytes(hashlib.sha256(GEAR_LABEL + bytes([i])).digest()[:8], "little") for i in range(256))


GEAR: tuple[int, ...] = _make_gear()
MASK_S = make_mask(22)  # 0xa4924924a4924924: before NORMAL_SIZE, harder to match
MASK_L = make_mask(18)  # 0x9122448891224488: from NORMAL_SIZE on, easier


def _scan(view: memoryview, pos: int, end: int, fp: int, mask: int) -> tuple[int, int]:
    """Search positions pos..end-1 of view for a cut with mask.

    Returns (chunk length, fp) on a match, else (0, fp after byte end-1).
    """
    gear = GEAR
    while pos < end:
        stop = min(pos + _BLOCK, end)
        f = fp
        for b in view[pos:stop]:
            f = (f << 1) + gear[b]
            if not f & mask:
                break
        else:
            fp = f & _M64
            pos = stop
            continue
        # A match in this block: go over it again to find where.
        for k in range(pos, stop):
            fp = ((fp << 1) + gear[view[k]]) & _M64
            if not fp & mask:
                return k + 1, fp
        raise AssertionError("unreachable: the block's match was not found again")
    return 0, fp


def cut(data: bytes | bytearray | memoryview) -> int:
    """Length of the first chunk of data.

    data is the rest of the input, or at least its next MAX_SIZE bytes; the
    result is 0 only for empty data.
    """
    limit = min(len(data), MAX_SIZE)
    if limit <= MIN_SIZE:
        return limit
    view = memoryview(data).cast("B") if isinstance(data, memoryview) else memoryview(data)
    n, fp = _scan(view, MIN_SIZE, min(limit, NORMAL_SIZE), 0, MASK_S)
    if n == 0 and limit > NORMAL_SIZE:
        n, fp = _scan(view, NORMAL_SIZE, limit, fp, MASK_L)
    return n or limit


def iter_chunks(read: Callable[[int], bytes]) -> Iterator[bytes]:
    """Yield the chunks of the stream read(n) gives, in order.

    read(n) returns up to n bytes, and b"" at the end, as a binary file's read
    does; short reads are fine. Memory stays about MAX_SIZE bytes of buffer
    plus the chunk handed out, whatever the stream's length.
    """
    buf = bytearray()
    eof = False
    while True:
        while not eof and len(buf) < MAX_SIZE:
            got = read(MAX_SIZE - len(buf))
            if not got:
                eof = True
            else:
                buf += got
        if not buf:
            return
        n = cut(buf)
        chunk = bytes(buf[:n])
        del buf[:n]
        yield chunk


def split(data: bytes) -> list[bytes]:
    """The chunks of data, in order (none for empty data)."""
    view = memoryview(data)
    chunks: list[bytes] = []
    off = 0
    while off < len(data):
        n = cut(view[off:])
        chunks.append(bytes(view[off : off + n]))
        off += n
    return chunks
