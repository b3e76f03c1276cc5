"""The sans-I/O core shared by Client and AsyncClient.

Request descriptions (``Call``), headers, the classification of an answer
(retry or not, leader hint, Retry-After), the client session's bookkeeping,
backoff, the SSE parser and small encoders. No network I/O happens here.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import os
import random
import re
import secrets
import ssl
import threading
import time
import urllib.parse
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Generic, TypeVar

from . import _json
from ._errors import BatonError, InvalidArgument, error_from_answer

T = TypeVar("T")

DEFAULT_TIMEOUT = 10.0  # seconds, per attempt
DEFAULT_MAX_RETRY = 15.0  # seconds, the retry budget of one call
BACKOFF_START = 0.05
BACKOFF_CAP = 0.25
USER_AGENT = "baton-python-client/0.1"

Duration = float | timedelta
"""A duration: float seconds or a ``timedelta``."""


def seconds(d: Duration | None, default: float = 0.0) -> float:
    if d is None:
        return default
    if isinstance(d, timedelta):
        return d.total_seconds()
    return float(d)


def millis(d: Duration) -> int:
    """A duration in whole milliseconds, as the API counts them."""
    return int(seconds(d) * 1000)


# Endpoints and configuration.


def normalize_endpoint(raw: str, tls: bool) -> str:
    """``host:port`` becomes https://host:port when a CA file is given, else http://, as the CLI does."""
    ep = raw.strip()
    if "://" not in ep:
        ep = ("https://" if tls else "http://") + ep
    u = urllib.parse.urlsplit(ep)
    if u.scheme not in ("http", "https"):
        raise InvalidArgument(f"invalid endpoint {raw!r}: scheme must be http or https")
    if not u.netloc or u.query or u.fragment or "@" in u.netloc:
        raise InvalidArgument(f"invalid endpoint {raw!r}: must be host:port or a URL without query or user info")
    return ep.rstrip("/")


def parse_endpoints(endpoints: str | list[str] | tuple[str, ...], tls: bool) -> list[str]:
    if isinstance(endpoints, str):
        endpoints = endpoints.split(",")
    eps = [normalize_endpoint(e, tls) for e in endpoints if e.strip()]
    if not eps:
        raise InvalidArgument("at least one endpoint is required")
    return eps


def host_of(endpoint: str) -> str:
    return urllib.parse.urlsplit(endpoint).netloc


def env_config() -> dict[str, Any]:
    """The keyword arguments ``from_env`` reads: BATON_ENDPOINTS, BATON_TOKEN, BATON_CACERT, BATON_CERT,
    BATON_KEY, BATON_TENANT."""
    kw: dict[str, Any] = {
        "endpoints": os.environ.get("BATON_ENDPOINTS") or "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"
    }
    for key, env in (("token", "BATON_TOKEN"), ("ca_file", "BATON_CACERT"), ("cert_file", "BATON_CERT"),
                     ("key_file", "BATON_KEY"), ("tenant", "BATON_TENANT")):
        v = os.environ.get(env)
        if v:
            kw[key] = v
    return kw


def ssl_context(ca_file: str | None, cert_file: str | None = None, key_file: str | None = None
                ) -> ssl.SSLContext | bool:
    if ca_file is None and cert_file is None:
        return True
    if ca_file is None:
        # A client certificate alone: the node is checked against the roots httpx uses by default
        # (certifi's, or SSL_CERT_FILE / SSL_CERT_DIR), as without one.
        import httpx

        ctx = httpx.create_ssl_context()
    else:
        ctx = ssl.create_default_context(cafile=ca_file)
    if cert_file is not None:
        if key_file is None:
            raise InvalidArgument("give both cert_file and key_file, or neither")
        ctx.load_cert_chain(cert_file, key_file)
    return ctx


# Paths and bodies.


_UNRESERVED = re.compile(r"[A-Za-z0-9_.~-]+")  # what quote(s, safe="") leaves as it is


def seg(s: str) -> str:
    """One path segment, percent-encoded (``/`` too)."""
    if s in (".", ".."):
        return s.replace(".", "%2E")
    if _UNRESERVED.fullmatch(s):
        return s  # most ids and names: urllib's quote costs a few times more, on every call
    return urllib.parse.quote(s, safe="")


def key_path(s: str) -> str:
    """A KV key or ref name: segments joined by ``/``."""
    return "/".join(seg(p) for p in s.split("/"))


def query(path: str, **params: Any) -> str:
    q = [(k, _qv(v)) for k, v in params.items() if v is not None]
    if not q:
        return path
    return path + ("&" if "?" in path else "?") + urllib.parse.urlencode(q, quote_via=urllib.parse.quote)


def _qv(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return str(v)


def dumps(v: Any) -> bytes:
    return _json.dumps(v)


def compact(body: dict[str, Any]) -> dict[str, Any]:
    """Leaves out fields that are None."""
    return {k: v for k, v in body.items() if v is not None}


def fence_json(fence: Any) -> Any:
    if fence is None:
        return None
    if hasattr(fence, "to_json"):
        return fence.to_json()
    return fence


def new_idempotency_key() -> str:
    """A UUIDv7 (RFC 9562): a key that carries its creation time, as the Go SDK's NewIdempotencyKey."""
    ms = time.time_ns() // 1_000_000
    rand = secrets.randbits(74)
    v = (ms & ((1 << 48) - 1)) << 80
    v |= 0x7 << 76
    v |= (rand >> 62) << 64  # 12 bits rand_a
    v |= 0b10 << 62
    v |= rand & ((1 << 62) - 1)
    return str(uuid.UUID(int=v))


def check_idempotency_key(key: str) -> str:
    if not key or len(key) > 128 or any(not (0x21 <= ord(c) <= 0x7E) for c in key):
        raise InvalidArgument("idempotency key must be 1 to 128 printable ASCII characters")
    return key


def params_digest(params: Any) -> str:
    """sha256 of the canonical JSON of params (keys sorted, no HTML escaping, a final newline), as the
    Go SDK's ParamsDigest computes it for strings, integers, booleans, null, lists and dicts."""
    text = json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                      default=_json.default)
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return "sha256:" + hashlib.sha256((text + "\n").encode()).hexdigest()


def digest(b: bytes) -> str:
    return "sha256:" + hashlib.sha256(b).hexdigest()


DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


# Calls and answers.


@dataclass
class Place:
    """A write's place in the client's session."""

    id: int
    seq: int


@dataclass
class Call:
    """One logical request, shared by all of its attempts."""

    method: str
    path: str
    body: bytes | None = None
    content_type: str = ""
    accept: str = ""  # Accept, "" for JSON
    key: str = ""  # Idempotency-Key
    place: Place | None = None
    attempts: int = 0
    timeout: float = DEFAULT_TIMEOUT
    want_value: bool = True  # a 200/201 without a body is a broken answer
    session: bool = True  # a write numbered in the client session (when no key)

    @property
    def is_write(self) -> bool:
        return self.method in ("POST", "PUT", "DELETE", "PATCH")


@dataclass
class Request(Generic[T]):
    """A call and how to read its answer."""

    call: Call
    parse: Callable[[Answer], T]


@dataclass
class Answer:
    status: int
    body: bytes
    index: int = 0
    replay: bool = False

    def json(self) -> Any:
        return _json.loads(self.body) if self.body else None


@dataclass
class Result:
    """The outcome of one attempt."""

    answer: Answer | None = None
    error: BatonError | None = None
    retry: bool = False  # a connection error or 503: another endpoint may do
    answered: bool = False  # the endpoint answered with something other than 503
    retry_after: float = 0.0
    leader: str = ""
    rate_limited: bool = False
    # The request may have reached a node and been applied: sent, then no (whole) answer, or a 504
    # outcome_unknown. A 503, a 429 or a connection never made applied nothing.
    maybe_applied: bool = False


def build_call(
    method: str,
    path: str,
    body: Any = None,
    *,
    raw: bytes | None = None,
    idempotency_key: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    stale: bool = False,
    want_value: bool = True,
    session: bool = True,
) -> Call:
    c = Call(method=method, path=path, timeout=timeout, want_value=want_value, session=session)
    if raw is not None:
        c.body, c.content_type = raw, "application/octet-stream"
    elif body is not None:
        c.body, c.content_type = dumps(body), "application/json"
    if stale:
        c.path = query(c.path, consistency="stale")
    if idempotency_key is not None and c.is_write:
        c.key = check_idempotency_key(idempotency_key)
    return c


def headers(call: Call, token: str | None, ack: int) -> dict[str, str]:
    h = {"Accept": call.accept or "application/json", "User-Agent": USER_AGENT}
    if call.content_type:
        h["Content-Type"] = call.content_type
    if token:
        h["Authorization"] = "Bearer " + token
    if call.key:
        h["Idempotency-Key"] = call.key
    elif call.place is not None:
        h["X-Baton-Session"] = str(call.place.id)
        h["X-Baton-Seq"] = str(call.place.seq)
        h["X-Baton-Ack"] = str(ack)
    return h


def raw_headers(call: Call, base: list[tuple[bytes, bytes]], ack: int) -> list[tuple[bytes, bytes]]:
    """headers() as httpcore takes them; base holds User-Agent and Authorization, built once."""
    h = base.copy()
    h.append((b"Accept", call.accept.encode() if call.accept else b"application/json"))
    if call.content_type:
        h.append((b"Content-Type", call.content_type.encode()))
    if call.key:
        h.append((b"Idempotency-Key", call.key.encode()))
    elif call.place is not None:
        h.append((b"X-Baton-Session", b"%d" % call.place.id))
        h.append((b"X-Baton-Seq", b"%d" % call.place.seq))
        h.append((b"X-Baton-Ack", b"%d" % ack))
    return h


class RawHeaders:
    """An answer's header list (httpcore's byte pairs) read as classify reads headers: get, case-insensitive.
    The first get lowers every name once, for the three or four gets of an answer."""

    __slots__ = ("_raw", "_by_name")

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self._raw = raw
        self._by_name: dict[bytes, bytes] | None = None

    def get(self, name: str, default: str | None = None) -> str | None:
        d = self._by_name
        if d is None:
            d = self._by_name = {}
            for k, v in self._raw:
                d.setdefault(k.lower(), v)  # the first of repeated names, as before
        found = d.get(name.lower().encode())
        return default if found is None else found.decode("latin-1")


def parse_retry_after(v: str | None) -> float:
    if not v:
        return 0.0
    try:
        return max(float(int(v)), 0.0)
    except ValueError:
        pass
    try:
        t = email.utils.parsedate_to_datetime(v)
        return max(t.timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return 0.0


def classify(status: int, hdrs: Any, body: bytes) -> Result:
    """The Result of a complete answer. ``hdrs`` is a case-insensitive mapping."""
    index = 0
    try:
        index = int(hdrs.get("X-Baton-Index") or 0)
    except ValueError:
        index = 0
    ans = Answer(status=status, body=body, index=index, replay=hdrs.get("Idempotent-Replay") == "true")
    leader = hdrs.get("X-Baton-Leader") or ""
    if status < 300:
        return Result(answer=ans, answered=True, leader=leader)
    res = Result(answer=ans, error=error_from_answer(status, body, index), leader=leader)
    res.maybe_applied = status == 504 and res.error is not None and res.error.code == "outcome_unknown"
    if status == 503 or res.maybe_applied:
        # 504 outcome_unknown: the write may have applied. Every write of this SDK carries a session
        # place or an Idempotency-Key, so sending it again applies it at most once.
        res.retry = True
        res.retry_after = parse_retry_after(hdrs.get("Retry-After"))
    elif status == 429:
        # Over a rate: wait as long as the server says (at least 1 s), then the same request again.
        res.retry = res.answered = res.rate_limited = True
        res.retry_after = max(parse_retry_after(hdrs.get("Retry-After")), 1.0)
    else:
        res.answered = True
    return res


def broken_answer(call: Call, status: int, body: bytes) -> bool:
    """A 200/201 of a JSON call without a body was cut on the way: try again (same key or number)."""
    return call.want_value and not body and status in (200, 201)


def is_cert_error(exc: BaseException) -> bool:
    """A certificate the client does not trust, or a TLS alert: a configuration problem, never retried."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, (ssl.SSLCertVerificationError,)):
            return True
        if isinstance(e, ssl.SSLError) and "ALERT" in str(e).upper():
            return True
        if "CERTIFICATE_VERIFY_FAILED" in str(e):
            return True
        e = e.__cause__ or e.__context__
    return False


class Backoff:
    """Doubles from BACKOFF_START up to BACKOFF_CAP, with jitter; a shorter Retry-After caps it."""

    def __init__(self, start: float = BACKOFF_START, cap: float = BACKOFF_CAP) -> None:
        self.next = start
        self.cap = cap

    def delay(self, retry_after: float = 0.0, remaining: float = float("inf")) -> float:
        d = self.next - random.uniform(0, self.next / 4)
        self.next = min(2 * self.next, self.cap)
        if 0 < retry_after < d:
            d = retry_after
        return max(min(d, remaining), 0.0)


class FailoverState:
    """Which endpoint to try first: the one that last answered, or the leader it named."""

    def __init__(self, endpoints: list[str]) -> None:
        self.endpoints = endpoints
        self.hosts = [host_of(e) for e in endpoints]
        self.preferred = 0

    def prefer(self, answered: int, leader: str) -> None:
        if leader:
            for i, h in enumerate(self.hosts):
                if h == leader:
                    self.preferred = i
                    return
        self.preferred = answered


# Client sessions (mirrors client/session.go).


class Sessions:
    """The client's session and its writes in flight; thread-safe, never held across I/O."""

    def __init__(self, off: bool = False) -> None:
        self._mu = threading.Lock()
        self.id = 0  # 0: none open
        self.off = off  # the server has no sessions: random keys instead
        self.next = 1
        self.inflight: set[int] = set()
        self._order: deque[int] = deque()  # numbers handed out, oldest first; ended ones leave it lazily

    def place(self) -> Place | None:
        with self._mu:
            if self.id == 0:
                return None
            p = Place(self.id, self.next)
            self.next += 1
            self.inflight.add(p.seq)
            self._order.append(p.seq)
            if len(self._order) > 4 * len(self.inflight) + 64:  # ended numbers kept behind a long call
                self._order = deque(sorted(self.inflight))
            return p

    def opened(self, sid: int) -> None:
        with self._mu:
            self.id, self.next, self.inflight, self._order = sid, 1, set(), deque()

    def end(self, p: Place) -> None:
        with self._mu:
            if self.id == p.id:
                self.inflight.discard(p.seq)

    def ack(self, sid: int) -> int:
        """The lowest number of session sid the client still waits for (0 for an older session)."""
        with self._mu:
            if self.id != sid:
                return 0
            order, inflight = self._order, self.inflight
            while order and order[0] not in inflight:  # each number leaves once: O(1) amortized
                order.popleft()
            return order[0] if order else self.next

    def drop(self, sid: int) -> None:
        with self._mu:
            if self.id == sid:
                self.id, self.inflight, self._order = 0, set(), deque()


def refused_unapplied(err: BatonError | None) -> tuple[bool, bool]:
    """(refused, gone): a session write refused without being applied: its session is gone, or its number
    is at or below what the session remembers. Only meaningful for an attempt sent once."""
    if err is None or err.code != "idempotency_expired":
        return False, False
    reason = err.details.get("reason")
    if reason == "session":
        return True, True
    if reason == "seq":
        return True, False
    return False, False


def parse_session(ans: Answer) -> int:
    obj = ans.json()
    sid = obj.get("session_id") if isinstance(obj, dict) else None
    try:
        n = int(str(sid))
    except ValueError:
        n = 0
    if n <= 0:
        raise BatonError(f"open a client session: bad session_id {sid!r}")
    return n


# Server-Sent Events (the watch stream).


@dataclass
class SSEMessage:
    id: str = ""
    event: str = ""
    data: list[str] = field(default_factory=list)


class SSEParser:
    """Feeds lines (without their end), returns a message at each blank line."""

    def __init__(self) -> None:
        self.cur = SSEMessage()
        self.seen = False

    def feed(self, line: str) -> SSEMessage | None:
        if line == "":
            if not self.seen:
                return None
            m, self.cur, self.seen = self.cur, SSEMessage(), False
            return m
        if line.startswith(":"):
            return None  # a comment (keepalive)
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        self.seen = True
        if name == "id":
            self.cur.id = value
        elif name == "event":
            self.cur.event = value
        elif name == "data":
            self.cur.data.append(value)
        return None


def event_pos(eid: str) -> tuple[int, int] | None:
    """``INDEX`` or ``INDEX.POS`` as a sortable pair; ``INDEX`` (the last event of an index) sorts last."""
    idx, dot, pos = eid.partition(".")
    try:
        i = int(idx)
        p = int(pos) if dot else 1 << 62
    except ValueError:
        return None
    return (i, p)
