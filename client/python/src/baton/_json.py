"""JSON for request bodies and answers: orjson where it gives the json module's result, json otherwise.

orjson encodes and decodes several times faster than the json module, and every call of the SDK does both
(docs/bench/python-sdk.md has the figures). Where the two would differ, the json module decides, so the
SDK sends and returns what it did with json alone:

- encoding: NaN and infinities (orjson writes null; json refuses them, as the API does), integers past
  64 bits, keys that are not strings, subclasses of str, int, dict and list, dataclasses and datetimes all
  go to json. orjson's output is used only when it holds no ``null``, so a refused NaN cannot hide in it.
  Both encode Enum members as their value and UUIDs as their text (json through ``default``), which the
  json module alone refused.
- decoding: an integer of 19 digits or more (orjson turns integers past 64 bits into floats), NaN,
  infinities and escaped lone surrogates go to json.
"""

from __future__ import annotations

import enum
import json
import uuid
from typing import Any

import orjson

_OPTS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_DIGITS = b"0" * 19  # 19 digits in a row once every digit reads 0: cheaper than a regular expression


def dumps(v: Any) -> bytes:
    """Compact UTF-8 JSON; ValueError for NaN or an infinity, TypeError for what JSON cannot hold."""
    try:
        out = orjson.dumps(v, option=_OPTS)
    except TypeError:
        out = b"null"  # not orjson's to encode: json's answer (or error) below
    if b"null" in out:
        return json.dumps(v, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=default).encode()
    return out


def default(o: Any) -> Any:
    """What json makes of the two kinds orjson encodes that json does not: an Enum member's value, a UUID's
    text; TypeError for anything else."""
    if isinstance(o, enum.Enum):
        return o.value
    if isinstance(o, uuid.UUID):
        return str(o)
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


def loads(b: bytes | bytearray | str) -> Any:
    """A JSON document decoded as json.loads decodes it; ValueError when it is not JSON."""
    if not isinstance(b, (bytes, bytearray)):
        return json.loads(b)
    if _LONG_DIGITS not in b.translate(_DIGITS_TO_ZERO):
        try:
            return orjson.loads(b)
        except orjson.JSONDecodeError:
            pass
    return json.loads(b)
