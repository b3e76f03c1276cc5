"""AsyncClient: the Baton API over asyncio.

This file is the source of ``_sync_client.py`` (Client), which
``tools/unasync.py`` generates from it: edit this one, then run the tool.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import ssl
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import IO, Any, TypeVar

import httpcore
import httpx

from . import _aio as _io
from . import _mp
from ._core import (
    DEFAULT_MAX_RETRY,
    DEFAULT_TIMEOUT,
    DIGEST_RE,
    USER_AGENT,
    Answer,
    Backoff,
    Call,
    Duration,
    FailoverState,
    RawHeaders,
    Result,
    Sessions,
    SSEParser,
    broken_answer,
    build_call,
    classify,
    compact,
    digest,
    dumps,
    env_config,
    event_pos,
    fence_json,
    headers,
    is_cert_error,
    key_path,
    millis,
    new_idempotency_key,
    parse_endpoints,
    parse_session,
    query,
    raw_headers,
    refused_unapplied,
    seconds,
    seg,
    ssl_context,
)
from ._errors import (
    BatonError,
    Compacted,
    DigestMismatch,
    InvalidArgument,
    NotFound,
    Unavailable,
    error_from_answer,
    in_doubt,
)
from ._models import (
    ArtifactPolicy,
    ArtifactSummary,
    Blob,
    Checkpoint,
    CheckpointPolicy,
    ChunkRef,
    ClusterStatus,
    Dependency,
    Fence,
    Grant,
    KVEntry,
    Manifest,
    Member,
    Op,
    Page,
    PendingWrite,
    Principal,
    QueuePolicy,
    QueueStats,
    Quota,
    Ref,
    Schedule,
    StoreItem,
    Task,
    TxnResult,
    UploadStats,
    Waitpoint,
    WatchEvent,
    format_time,
)

T = TypeVar("T")


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""The default of arguments whose None means JSON null (``result=None`` sets the result to null)."""

CHECKPOINT_INLINE_MAX = 512 << 10
"""Checkpoint data larger than this (as compact JSON) goes through chunks (``data_chunks``)."""

BLOB_CHUNKED_MIN = 256 << 10
"""A checkpoint value (Blob) of more bytes than this is uploaded as content-addressed chunks and named by
them: stored once in the chunk store, its chunks shared by every version and thread that holds equal
bytes (docs/api.md, "Channel values by version")."""

_UPLOAD_BATCH_CHUNKS = 4
_UPLOAD_BATCH_BYTES = 16 << 20
_MISSING_BATCH = 10_000

Source = bytes | bytearray | memoryview | str | os.PathLike[str] | IO[bytes]
"""Upload content: bytes, a file path, or a binary file object (read as a stream)."""


def _when(v: datetime | None) -> str | None:
    return None if v is None else format_time(v)


def _ms(v: Duration | None) -> int | None:
    return None if v is None else millis(v)


def _page(cls: Any, field: str) -> Callable[[Answer], Page[Any]]:
    def parse(a: Answer) -> Page[Any]:
        obj = a.json() or {}
        return Page([cls.from_json(x) for x in obj.get(field) or []], obj.get("next_page_token") or "")

    return parse


def _cp_page(obj: Any) -> Page[Checkpoint]:
    obj = obj or {}
    return Page([Checkpoint.from_json(x) for x in obj.get("checkpoints") or []], obj.get("next_page_token") or "")


def _write_json(w: dict[str, Any], binary: bool) -> dict[str, Any]:
    """A pending write as a request member: ``b64`` bytes as they are in msgpack, base64 in JSON."""
    b = w.get("b64")
    if isinstance(b, (bytes, bytearray, memoryview)):
        return dict(w, b64=_mp.wire_bytes(bytes(b), binary))
    return w


def _grants(grants: Iterable[Grant | dict[str, Any]]) -> list[Any]:
    return [g.to_json() if isinstance(g, Grant) else g for g in grants]


def _open_source(source: Source) -> tuple[Callable[[int], bytes], Callable[[], None]]:
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        pos = [0]

        def read(n: int) -> bytes:
            b = data[pos[0] : pos[0] + n]
            pos[0] += len(b)
            return b

        return read, lambda: None
    if isinstance(source, (str, os.PathLike)):
        f = open(source, "rb")  # noqa: SIM115
        return f.read, f.close
    return source.read, lambda: None


class _StreamCut(Unavailable):
    """A download cut midway: nothing wrong was written, it may start again elsewhere."""


class _Pools(httpx.AsyncBaseTransport):
    """httpx's own transport, as several connection pools; a request goes to the least busy.
    httpcore's pool scans every connection it holds each time a request starts or ends, so one
    pool of 64 busy connections spends most of a process's CPU on that scan (CPU per fenced update
    at C=64: docs/benchmarks.md, "Python SDK"). A request counts as busy until its response is
    closed, so a long watch stream keeps later requests off its pool."""

    def __init__(self, verify: Any, pools: int = 64, per_pool: int = 4) -> None:
        lim = httpx.Limits(max_connections=per_pool, max_keepalive_connections=per_pool)
        ctx = httpx.create_ssl_context(verify=verify)  # once: loading the CA bundle costs tens of ms
        self._pools = [httpx.AsyncHTTPTransport(verify=ctx, limits=lim) for _ in range(pools)]
        self._busy = [0] * pools
        self._mu = threading.Lock()  # held without awaiting: the sync client's threads share it

    def _take(self) -> int:
        with self._mu:
            i = self._busy.index(min(self._busy))  # the first of the least busy, both scans in C
            self._busy[i] += 1
            return i

    def _give(self, i: int) -> None:
        with self._mu:
            self._busy[i] -= 1

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        i = self._take()
        try:
            r = await self._pools[i].handle_async_request(request)
        except BaseException:
            self._give(i)
            raise
        assert isinstance(r.stream, httpx.AsyncByteStream)
        return httpx.Response(r.status_code, headers=r.headers, extensions=r.extensions,
                              stream=_Released(r.stream, lambda: self._give(i)))

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()


# What httpcore raises when a request did not get an answer (httpx wraps the same as TransportError).
# Under asyncio, a TLS alert read after the handshake (the node refused the client certificate) comes
# up as the ssl module's own error, which neither httpcore nor httpx wraps.
_HTTPCORE_ERRORS = (httpcore.TimeoutException, httpcore.NetworkError, httpcore.ProtocolError,
                    httpcore.ProxyError, httpcore.UnsupportedProtocol, ssl.SSLError)
_HTTPX_ERRORS = (httpx.TransportError, ssl.SSLError)
# Failures before a request could be sent: no connection made, no pool slot free.
_NOT_SENT = (httpcore.ConnectError, httpcore.ConnectTimeout, httpcore.PoolTimeout, httpx.ConnectError,
             httpx.ConnectTimeout, httpx.PoolTimeout)


class _Released(httpx.AsyncByteStream):
    """A response body that calls release once, when it is closed."""

    def __init__(self, inner: httpx.AsyncByteStream, release: Callable[[], None]) -> None:
        self._inner = inner
        self._release: Callable[[], None] | None = release

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


class AsyncClient:
    """A client of a Baton cluster (asyncio). Safe to share among tasks of one event loop.

    ``endpoints``: URLs or ``host:port`` (https when ``ca_file`` is given, else http), a list or one
    comma-separated string. ``token``: the admin token or a principal's. ``cert_file``/``key_file``: a
    client certificate, for nodes started with --client-ca-file. ``tenant``: the default tenant of
    calls that omit ``tenant=``. ``timeout``: per attempt, ``max_retry``: the retry budget of one call
    (float seconds or timedelta). ``sessions=False`` sends every write with a random Idempotency-Key
    instead of numbering it in a client session.
    """

    def __init__(
        self,
        endpoints: str | Sequence[str] = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003",
        *,
        token: str | None = None,
        ca_file: str | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
        tenant: str | None = None,
        timeout: Duration = DEFAULT_TIMEOUT,
        max_retry: Duration = DEFAULT_MAX_RETRY,
        sessions: bool = True,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        tls = ca_file is not None or cert_file is not None
        eps = parse_endpoints(endpoints if isinstance(endpoints, str) else list(endpoints), tls)
        self.endpoints = eps
        self.tenant = tenant
        self.timeout = seconds(timeout)
        self.max_retry = seconds(max_retry)
        self._token = token
        self._fo = FailoverState(eps)
        self._sess = Sessions(off=not sessions)
        self._open_lock = _io.Lock()
        self._own_http = http_client is None
        verify = httpx.create_ssl_context(verify=ssl_context(ca_file, cert_file, key_file))
        # Streams (watches, downloads) go through httpx; every other request through _direct, unless the
        # caller brought an httpx client of their own (then everything goes through it).
        self._http = http_client or httpx.AsyncClient(transport=_Pools(verify), timeout=self.timeout, trust_env=False)
        self._direct = _io.DirectPool(eps, verify) if http_client is None else None
        self._base_headers = [(b"User-Agent", USER_AGENT.encode())]
        if token:
            self._base_headers.append((b"Authorization", b"Bearer " + token.encode()))
        self.upload_parallel = 4  # chunk uploads in flight at once
        # Test hook: called with each chunk digest the upload sends.
        self.on_chunk_sent: Callable[[str, int], None] | None = None

    @classmethod
    def from_env(cls, **overrides: Any) -> AsyncClient:
        """A client configured from BATON_ENDPOINTS, BATON_TOKEN, BATON_CACERT, BATON_CERT, BATON_KEY and
        BATON_TENANT (what
        ``batond local`` prints and the CLI reads); keyword arguments override them."""
        kw = env_config()
        kw.update(overrides)
        return cls(**kw)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._own_http:
            await self._http.aclose()
        if self._direct is not None:
            await self._direct.aclose()

    def _tenant(self, tenant: str | None) -> str:
        t = self.tenant if tenant is None else tenant
        if not t:
            raise InvalidArgument("tenant is required: pass tenant= or set a default tenant on the client")
        return t

    def _tp(self, tenant: str | None) -> str:
        return "/v1/tenants/" + seg(self._tenant(tenant))

    # The transport: attempts, failover, sessions.

    async def _attempt(self, idx: int, call: Call) -> Result:
        call.attempts += 1
        ack = self._sess.ack(call.place.id) if call.place is not None else 0
        if self._direct is not None:
            try:
                hdrs = raw_headers(call, self._base_headers, ack)
                raw = await self._direct.request(idx, call.method, call.path, hdrs, call.body, call.timeout,
                                                 self.timeout)
            except _HTTPCORE_ERRORS as e:
                return self._transport_failure(idx, call, e)
            if broken_answer(call, raw.status, raw.content):
                return Result(retry=True, error=Unavailable(f"{raw.status} answer without a body"), maybe_applied=True)
            return classify(raw.status, RawHeaders(raw.headers), raw.content)
        try:
            r = await self._http.request(
                call.method,
                self.endpoints[idx] + call.path,
                content=call.body,
                headers=headers(call, self._token, ack),
                timeout=call.timeout,
            )
        except _HTTPX_ERRORS as e:
            return self._transport_failure(idx, call, e)
        if broken_answer(call, r.status_code, r.content):
            return Result(retry=True, error=Unavailable(f"{r.status_code} answer without a body"), maybe_applied=True)
        return classify(r.status_code, r.headers, r.content)

    def _transport_failure(self, idx: int, call: Call, e: BaseException) -> Result:
        where = f"{call.method} {self.endpoints[idx]}{call.path}"
        if is_cert_error(e):
            return Result(error=BatonError(f"{where}: {e} (check the CA file and the client certificate)", code="tls"))
        if isinstance(e, (httpcore.LocalProtocolError, httpx.LocalProtocolError)):
            # The request itself cannot be sent (a character HTTP forbids in its path or a header): final.
            # h11 quotes the offending header whole, which may be the Authorization one: not repeated here.
            if "header" in str(e).lower():
                return Result(error=InvalidArgument(
                    f"{where}: a header value holds a character HTTP forbids (a line break in the token?)"))
            return Result(error=InvalidArgument(f"{where}: {e}"))
        # A connection never made (or a pool slot never had) sent nothing; after one was made, the
        # request may have reached the node.
        return Result(retry=True, error=Unavailable(f"{where}: {type(e).__name__}: {e}"),
                      maybe_applied=not isinstance(e, _NOT_SENT))

    async def _failover(self, call: Call) -> Result:
        """Tries the endpoints in turn, from the one that last answered, backing off after each round of
        failures, until one answers or the retry budget is spent. A write that ends without an answer after
        an attempt that may have applied raises an error that is an OutcomeUnknown too (in_doubt)."""
        doubts: list[BatonError] = []  # the failures of attempts that may have applied
        res = await self._failover_attempts(call, doubts)
        if doubts and (not res.answered or res.rate_limited):
            res.error = in_doubt(res.error, doubts[-1])
        return res

    async def _failover_attempts(self, call: Call, doubts: list[BatonError]) -> Result:
        keyed = bool(call.key) or call.place is not None
        deadline = _io.monotonic() + self.max_retry
        n = len(self.endpoints)
        start = self._fo.preferred
        bo = Backoff()
        round_retry_after = 0.0
        i = 0
        while True:
            idx = (start + i) % n
            res = await self._attempt(idx, call)
            if res.answered:
                self._fo.prefer(idx, res.leader)
            if res.retry and res.maybe_applied and keyed and res.error is not None:
                doubts.append(res.error)
            if not res.retry:
                return res
            remaining = deadline - _io.monotonic()
            if res.rate_limited:
                if res.retry_after >= remaining:
                    return res
                await _io.sleep(res.retry_after)
                i += 1
                continue
            round_retry_after = max(round_retry_after, res.retry_after)
            delay = 0.0
            if (i + 1) % n == 0:
                delay = bo.delay(round_retry_after, remaining)
                round_retry_after = 0.0
            if delay >= remaining:
                if res.error is not None:
                    res.error.message = f"{res.error.message} (gave up after {i + 1} attempts)"
                return res
            await _io.sleep(delay)
            i += 1

    async def _begin_write(self) -> Any:
        """The write's place in the session, opening one first; None when the server has no sessions."""
        while True:
            if self._sess.off:
                return None
            p = self._sess.place()
            if p is not None:
                return p
            async with self._open_lock:
                if self._sess.id != 0 or self._sess.off:
                    continue
                res = await self._failover(Call("POST", "/v1/sessions", timeout=self.timeout))
                if res.error is not None:
                    if res.error.status in (404, 405):
                        self._sess.off = True
                        continue
                    raise res.error
                assert res.answer is not None
                self._sess.opened(parse_session(res.answer))

    async def _send_in_session(self, call: Call) -> Result:
        """A write numbered in the client session. A first attempt refused because the session is gone (or
        its number forgotten) applied nothing: it goes again, once, in a new session or with a new number."""
        rnd = 0
        while True:
            p = await self._begin_write()
            if p is None:
                call.key = new_idempotency_key()
                return await self._failover(call)
            call.place, call.attempts = p, 0
            try:
                res = await self._failover(call)
            finally:
                self._sess.end(p)
            refused, gone = refused_unapplied(res.error)
            if refused and rnd == 0 and call.attempts == 1:
                if gone:
                    self._sess.drop(p.id)
                rnd += 1
                continue
            return res

    async def _send(self, call: Call) -> Answer:
        if call.is_write and not call.key and call.session:
            res = await self._send_in_session(call)
        else:
            res = await self._failover(call)
        if res.error is not None:
            raise res.error
        assert res.answer is not None
        return res.answer

    async def _call(
        self,
        method: str,
        path: str,
        parse: Callable[[Answer], T],
        body: Any = None,
        *,
        idempotency_key: str | None = None,
        stale: bool = False,
        want_value: bool = True,
        raw: bytes | None = None,
        session: bool = True,
        extra_timeout: float = 0.0,
    ) -> T:
        call = build_call(
            method,
            path,
            body,
            raw=raw,
            idempotency_key=idempotency_key,
            timeout=self.timeout + extra_timeout,
            stale=stale,
            want_value=want_value,
            session=session,
        )
        ans = await self._send(call)
        r = parse(ans)
        if ans.index and "index" in getattr(type(r), "__dataclass_fields__", ()):
            # r was just made from this answer and is held nowhere else: set its (frozen) index in place.
            object.__setattr__(r, "index", ans.index)
        return r

    async def request(
        self, method: str, path: str, body: Any = None, *, idempotency_key: str | None = None
    ) -> Any:
        """Any API call, with failover, retries and sessions; returns the decoded JSON answer (None for
        204). For routes this SDK has no method for yet. ``path`` is percent-encoded as httpx encodes a URL
        (spaces and non-ASCII characters; ``%XX`` already there is kept)."""
        path = httpx.URL(path).raw_path.decode("ascii")  # the SDK's own paths are built encoded (seg, query)
        return await self._call(method, path, lambda a: a.json(), body, idempotency_key=idempotency_key,
                                want_value=False)

    async def _open_stream(self, path: str, hdrs: dict[str, str], read_timeout: float) -> httpx.Response:
        """A streamed GET with failover; the caller closes the answer."""
        call = build_call("GET", path, timeout=self.timeout)
        deadline = _io.monotonic() + self.max_retry
        n = len(self.endpoints)
        start = self._fo.preferred
        bo = Backoff()
        i = 0
        while True:
            idx = (start + i) % n
            h = headers(call, self._token, 0)
            h.update(hdrs)
            req = self._http.build_request(
                "GET", self.endpoints[idx] + path, headers=h,
                timeout=httpx.Timeout(self.timeout, read=read_timeout),
            )
            try:
                r = await self._http.send(req, stream=True)
            except _HTTPX_ERRORS as e:
                res = self._transport_failure(idx, call, e)
            else:
                if r.status_code == 200:
                    self._fo.prefer(idx, r.headers.get("X-Baton-Leader") or "")
                    return r
                body = await r.aread()
                await r.aclose()
                res = classify(r.status_code, r.headers, body)
            if not res.retry:
                assert res.error is not None
                raise res.error
            remaining = deadline - _io.monotonic()
            delay = bo.delay(res.retry_after, remaining) if (i + 1) % n == 0 or res.rate_limited else 0.0
            if res.rate_limited:
                delay = res.retry_after
            if delay >= remaining:
                assert res.error is not None
                raise res.error
            await _io.sleep(delay)
            i += 1

    # Tenants, principals, quotas, sessions.

    async def create_tenant(self, name: str, *, idempotency_key: str | None = None) -> bool:
        """Creates tenant ``name`` (admin); True when created, False when it existed."""
        return await self._call("PUT", "/v1/tenants/" + seg(name), lambda a: a.status == 201,
                                idempotency_key=idempotency_key, want_value=False)

    async def list_tenants(self, *, stale: bool = False) -> list[str]:
        return await self._call("GET", "/v1/tenants", lambda a: list((a.json() or {}).get("tenants") or []),
                                stale=stale)

    async def create_principal(
        self,
        name: str,
        grants: Iterable[Grant | dict[str, Any]],
        *,
        tenant: str | None = None,
        idempotency_key: str | None = None,
    ) -> Principal:
        """Creates a principal; the answer carries its token (shown once)."""
        return await self._call("POST", self._tp(tenant) + "/principals", lambda a: Principal.from_json(a.json()),
                                {"name": name, "grants": _grants(grants)}, idempotency_key=idempotency_key)

    async def delete_principal(self, name: str, *, tenant: str | None = None,
                               idempotency_key: str | None = None) -> None:
        await self._call("DELETE", self._tp(tenant) + "/principals/" + seg(name), lambda a: None,
                         idempotency_key=idempotency_key, want_value=False)

    async def rotate_principal(self, name: str, *, tenant: str | None = None,
                               idempotency_key: str | None = None) -> Principal:
        return await self._call("POST", self._tp(tenant) + "/principals/" + seg(name) + "/rotate",
                                lambda a: Principal.from_json(a.json()), {}, idempotency_key=idempotency_key)

    async def list_principals(self, *, tenant: str | None = None, stale: bool = False) -> list[Principal]:
        return await self._call("GET", self._tp(tenant) + "/principals",
                                lambda a: [Principal.from_json(p) for p in (a.json() or {}).get("principals") or []],
                                stale=stale)

    async def set_quota(
        self,
        *,
        max_bytes: int,
        max_keys: int,
        rate_per_sec: float | None = None,
        burst: int | None = None,
        tenant: str | None = None,
        idempotency_key: str | None = None,
    ) -> Quota:
        body = compact({"max_bytes": max_bytes, "max_keys": max_keys, "rate_per_sec": rate_per_sec, "burst": burst})
        return await self._call("PUT", self._tp(tenant) + "/quota", lambda a: Quota.from_json(a.json()), body,
                                idempotency_key=idempotency_key)

    async def get_quota(self, *, tenant: str | None = None, stale: bool = False) -> Quota:
        return await self._call("GET", self._tp(tenant) + "/quota", lambda a: Quota.from_json(a.json()), stale=stale)

    # Tasks.

    async def create_task(
        self,
        queue: str,
        *,
        task_id: str | None = None,
        payload: Any = MISSING,
        status: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        backoff_initial: Duration | None = None,
        backoff_max: Duration | None = None,
        available_at: datetime | None = None,
        delay: Duration | None = None,
        retention: Duration | None = None,
        depends_on: Sequence[str] | None = None,
        dependency_policy: str | None = None,
        concurrency_key: str | None = None,
        tenant: str | None = None,
        idempotency_key: str | None = None,
    ) -> Task:
        """Creates a task (an id is generated when ``task_id`` is None); AlreadyExists if the id exists.

        With ``depends_on`` it is claimable once those tasks are done; its claim then carries
        their results (``Task.dependencies``). ``dependency_policy`` (fail, cancel, ignore) is
        what a dependency that ends otherwise does to it. ``concurrency_key`` groups it for its
        queue policy's ``concurrency_key_limit``.
        """
        body = compact({
            "task_id": task_id, "queue": queue, "status": status, "priority": priority,
            "max_attempts": max_attempts, "backoff_initial_ms": _ms(backoff_initial),
            "backoff_max_ms": _ms(backoff_max), "available_at": _when(available_at),
            "delay_ms": _ms(delay), "retention_ms": _ms(retention),
            "depends_on": list(depends_on) if depends_on else None, "dependency_policy": dependency_policy,
            "concurrency_key": concurrency_key,
        })
        if payload is not MISSING:
            body["payload"] = payload
        return await self._call("POST", self._tp(tenant) + "/tasks", lambda a: Task.from_json(a.json()), body,
                                idempotency_key=idempotency_key)

    async def get_task(self, task_id: str, *, tenant: str | None = None, stale: bool = False) -> Task:
        return await self._call("GET", self._tp(tenant) + "/tasks/" + seg(task_id),
                                lambda a: Task.from_json(a.json()), stale=stale)

    async def _get_task_indexed(self, task_id: str, *, tenant: str | None = None) -> tuple[Task, int]:
        return await self._call("GET", self._tp(tenant) + "/tasks/" + seg(task_id),
                                lambda a: (Task.from_json(a.json()), a.index))

    async def list_tasks(
        self,
        *,
        queue: str | None = None,
        status: str | None = None,
        owner: str | None = None,
        limit: int | None = None,
        page_token: str | None = None,
        tenant: str | None = None,
        stale: bool = False,
    ) -> Page[Task]:
        """One page of tasks in id order; see iter_tasks for all of them."""
        path = query(self._tp(tenant) + "/tasks", queue=queue, status=status, owner=owner, limit=limit,
                     page_token=page_token or None)
        return await self._call("GET", path, _page(Task, "tasks"), stale=stale)

    async def iter_tasks(
        self,
        *,
        queue: str | None = None,
        status: str | None = None,
        owner: str | None = None,
        page_size: int | None = None,
        tenant: str | None = None,
    ) -> AsyncIterator[Task]:
        """Every matching task, following next_page_token (pages may be empty)."""
        token = ""
        while True:
            page = await self.list_tasks(queue=queue, status=status, owner=owner, limit=page_size,
                                         page_token=token, tenant=tenant)
            for t in page.items:
                yield t
            if not page.next_page_token:
                return
            token = page.next_page_token

    async def delete_task(self, task_id: str, *, expect_version: int | None = None, tenant: str | None = None,
                          idempotency_key: str | None = None) -> None:
        path = query(self._tp(tenant) + "/tasks/" + seg(task_id), expect_version=expect_version)
        await self._call("DELETE", path, lambda a: None, idempotency_key=idempotency_key, want_value=False)

    async def claim_task(
        self,
        task_id: str,
        *,
        owner: str,
        lease: Duration,
        expect_status: str | None = None,
        expect_version: int | None = None,
        set_status: str | None = None,
        tenant: str | None = None,
        idempotency_key: str | None = None,
    ) -> Task:
        """Claims one task by id; the answer carries a new fencing token."""
        body = compact({"owner": owner, "lease_ms": millis(lease), "expect_status": expect_status,
                        "expect_version": expect_version, "set_status": set_status})
        return await self._call("POST", self._tp(tenant) + "/tasks/" + seg(task_id) + "/claim",
                                lambda a: Task.from_json(a.json()), body, idempotency_key=idempotency_key)

    async def claim(
        self,
        queue: str,
        *,
        owner: str,
        lease: Duration,
        statuses: Sequence[str] | None = None,
        set_status: str | None = None,
        wait: Duration | None = None,
        tenant: str | None = None,
        idempotency_key: str | None = None,
    ) -> Task | None:
        """Claims the best claimable task of a queue, waiting up to ``wait`` (at most 60 s) for one;
        None when none was claimable."""
        wait_ms = _ms(wait)
        body = compact({"owner": owner, "lease_ms": millis(lease),
                        "statuses": list(statuses) if statuses else None, "set_status": set_status,
                        "wait_ms": wait_ms or None})
        return await self._call(
            "POST", self._tp(tenant) + "/queues/" + seg(queue) + "/claim",
            # 204: nothing was claimable. A 200 without its body was cut on the way: the claim may have
            # applied, so it is sent again (the same session place), not taken for "no task".
            lambda a: None if a.status == 204 else Task.from_json(a.json()), body,
            idempotency_key=idempotency_key, extra_timeout=(wait_ms or 0) / 1000,
        )

    async def renew_task(self, task_id: str, *, fencing_token: int, lease: Duration, tenant: str | None = None,
                         idempotency_key: str | None = None) -> Task:
        body = {"fencing_token": fencing_token, "lease_ms": millis(lease)}
        return await self._call("POST", self._tp(tenant) + "/tasks/" + seg(task_id) + "/renew",
                                lambda a: Task.from_json(a.json()), body, idempotency_key=idempotency_key)

    async def update_task(
        self,
        task_id: str,
        *,
        fencing_token: int | None = None,
        expect_version: int | None = None,
        expect_status: str | None = None,
        status: str | None = None,
        artifact_id: str | None = None,
        result: Any = MISSING,
        payload: Any = MISSING,
        release: bool | None = None,
        unstarted: bool = False,
        available_at: datetime | None = None,
        delay: Duration | None = None,
        tenant: str | None = None,
        idempotency_key: str | None = None,
    ) -> Task:
        """Changes a task: the fields given (``result=None`` sets JSON null); ``release=True`` clears the
        owner and lease in the same step. ``unstarted=True``, with ``release=True`` and the
        ``fencing_token`` of a live lease, says the task was claimed and never started: the release gives
        back the claim's attempt and the status its ``set_status`` replaced (no ``status``, ``result``,
        ``payload`` or ``artifact_id`` with it; a server of version 6)."""
        body = compact({"fencing_token": fencing_token, "expect_version": expect_version,
                        "expect_status": expect_status, "status": status, "artifact_id": artifact_id,
                        "release": release, "unstarted": unstarted or None, "available_at": _when(available_at),
                        "delay_ms": _ms(delay)})
        if result is not MISSING:
            body["result"] = result
        if payload is not MISSING:
            body["payload"] = payload
        return await self._call("POST", self._tp(tenant) + "/tasks/" + seg(task_id) + "/update",
                                lambda a: Task.from_json(a.json()), body, idempotency_key=idempotency_key)

    async def fail_task(
        self,
        task_id: str,
        *,
        fencing_token: int,
        error: str | None = None,
        non_retryable: bool | None = None,
        status: str | None = None,
        tenant: str | None = None,
        idempotency_key: str | None = None,
    ) -> Task:
        """Ends the attempt as failed: back to ``status`` after its backoff, or dead."""
        body = compact({"fencing_token": fencing_token, "error": error, "non_retryable": non_retryable or None,
                        "status": status})
        return await self._call("POST", self._tp(tenant) + "/tasks/" + seg(task_id) + "/fail",
                                lambda a: Task.from_json(a.json()), body, idempotency_key=idempotency_key)

    async def cancel_task(
        self,
        task_id: str,
        *,
        fencing_token: int | None = None,
        expect_version: int | None = None,
        reason: str | None = None,
        tenant: str | None = None,
        idempotency_key: str | None = None,
    ) -> Task:
        """Cancels a task: at once without a live lease (its token retired), else ``cancel_requested``
        until the holder acknowledges (this call with its ``fencing_token``) or its lease runs out."""
        body = compact({"fencing_token": fencing_token, "expect_version": expect_version, "reason": reason})
        return await self._call("POST", self._tp(tenant) + "/tasks/" + seg(task_id) + "/cancel",
                                lambda a: Task.from_json(a.json()), body, idempotency_key=idempotency_key)

    async def list_task_dependencies(self, task_id: str, *, limit: int | None = None, page_token: str | None = None,
                                     tenant: str | None = None, stale: bool = False) -> Page[Dependency]:
        """One page of a task's dependencies in id order, each with its outcome once resolved."""
        path = query(self._tp(tenant) + "/tasks/" + seg(task_id) + "/dependencies", limit=limit,
                     page_token=page_token or None)
        return await self._call("GET", path, _page(Dependency, "dependencies"), stale=stale)

    async def iter_task_dependencies(self, task_id: str, *, page_size: int | None = None,
                                     tenant: str | None = None) -> AsyncIterator[Dependency]:
        """Every dependency of a task, following next_page_token."""
        token = ""
        while True:
            page = await self.list_task_dependencies(task_id, limit=page_size, page_token=token, tenant=tenant)
            for d in page.items:
                yield d
            if not page.next_page_token:
                return
            token = page.next_page_token

    async def park_task(self, task_id: str, *, fencing_token: int, waitpoint_id: str, tenant: str | None = None,
                        idempotency_key: str | None = None) -> Task:
        """Parks a task held under ``fencing_token`` on a waitpoint: the lease ends (its token retired) and
        no claim takes the task until the waitpoint is completed or times out; that claim then carries
        ``Task.waitpoint``."""
        body = {"fencing_token": fencing_token, "waitpoint_id": waitpoint_id}
        return await self._call("POST", self._tp(tenant) + "/tasks/" + seg(task_id) + "/wait",
                                lambda a: Task.from_json(a.json()), body, idempotency_key=idempotency_key)

    async def retry_task(
        self,
        task_id: str,
        *,
        expect_version: int | None = None,
        status: str | None = None,
        available_at: datetime | None = None,
        delay: Duration | None = None,
        tenant: str | None = None,
        idempotency_key: str | None = None,
    ) -> Task:
        body = compact({"expect_version": expect_version, "status": status, "available_at": _when(available_at),
                        "delay_ms": _ms(delay)})
        return await self._call("POST", self._tp(tenant) + "/tasks/" + seg(task_id) + "/retry",
                                lambda a: Task.from_json(a.json()), body, idempotency_key=idempotency_key)

    async def queue_stats(self, queue: str, *, tenant: str | None = None, stale: bool = False) -> QueueStats:
        return await self._call("GET", self._tp(tenant) + "/queues/" + seg(queue),
                                lambda a: QueueStats.from_json(a.json()), stale=stale)

    async def list_queues(self, *, limit: int | None = None, page_token: str | None = None,
                          tenant: str | None = None, stale: bool = False) -> Page[QueueStats]:
        path = query(self._tp(tenant) + "/queues", limit=limit, page_token=page_token or None)
        return await self._call("GET", path, _page(QueueStats, "queues"), stale=stale)

    async def iter_queues(self, *, page_size: int | None = None, tenant: str | None = None
                          ) -> AsyncIterator[QueueStats]:
        token = ""
        while True:
            page = await self.list_queues(limit=page_size, page_token=token, tenant=tenant)
            for q in page.items:
                yield q
            if not page.next_page_token:
                return
            token = page.next_page_token

    async def set_queue_policy(
        self,
        queue: str,
        *,
        max_attempts: int = 0,
        backoff_initial: Duration = 0,
        backoff_max: Duration = 0,
        retention: Duration | None = None,
        max_leased: int | None = None,
        claims_per_second: int | None = None,
        claim_burst: int | None = None,
        concurrency_key_limit: int | None = None,
        tenant: str | None = None,
        idempotency_key: str | None = None,
    ) -> QueuePolicy:
        """Defaults for tasks created in the queue afterwards (cluster admin); all zeros clear it.

        Flow control (None or 0: no limit): at most ``max_leased`` tasks leased at once,
        ``claims_per_second`` claims a second with a burst of ``claim_burst``, at most
        ``concurrency_key_limit`` leased tasks per ``concurrency_key``. At a limit a queue claim finds
        nothing and a claim by id raises RateLimited.
        """
        body = compact({"max_attempts": max_attempts, "backoff_initial_ms": millis(backoff_initial),
                        "backoff_max_ms": millis(backoff_max), "retention_ms": _ms(retention),
                        "max_leased": max_leased, "claims_per_second": claims_per_second,
                        "claim_burst": claim_burst, "concurrency_key_limit": concurrency_key_limit})
        return await self._call("PUT", self._tp(tenant) + "/queues/" + seg(queue) + "/policy",
                                lambda a: QueuePolicy.from_json(a.json()), body, idempotency_key=idempotency_key)

    async def get_queue_policy(self, queue: str, *, tenant: str | None = None, stale: bool = False) -> QueuePolicy:
        return await self._call("GET", self._tp(tenant) + "/queues/" + seg(queue) + "/policy",
                                lambda a: QueuePolicy.from_json(a.json()), stale=stale)

    # Waitpoints.

    async def create_waitpoint(self, *, timeout: Duration, waitpoint_id: str | None = None,
                               tenant: str | None = None, idempotency_key: str | None = None) -> Waitpoint:
        """Creates a pending waitpoint that times out after ``timeout`` (at most 30 days); an id is
        generated when ``waitpoint_id`` is None. AlreadyExists if the id exists."""
        body = compact({"waitpoint_id": waitpoint_id, "timeout_ms": millis(timeout)})
        return await self._call("POST", self._tp(tenant) + "/waitpoints", lambda a: Waitpoint.from_json(a.json()),
                                body, idempotency_key=idempotency_key)

    async def get_waitpoint(self, waitpoint_id: str, *, wait: Duration | None = None, tenant: str | None = None,
                            stale: bool = False) -> Waitpoint:
        """Reads a waitpoint; with ``wait`` (at most 60 s) the server answers once it is no longer pending,
        or when the wait ends (a long poll: check ``pending``)."""
        wait_ms = _ms(wait)
        path = query(self._tp(tenant) + "/waitpoints/" + seg(waitpoint_id), wait_ms=wait_ms or None)
        return await self._call("GET", path, lambda a: Waitpoint.from_json(a.json()), stale=stale,
                                extra_timeout=(wait_ms or 0) / 1000)

    async def complete_waitpoint(self, waitpoint_id: str, payload: Any = None, *, tenant: str | None = None,
                                 idempotency_key: str | None = None) -> Waitpoint:
        """Completes a waitpoint with ``payload`` (JSON). Again with the same payload it answers as the
        first time; VersionMismatch for another payload, or a waitpoint that timed out."""
        return await self._call("POST", self._tp(tenant) + "/waitpoints/" + seg(waitpoint_id) + "/complete",
                                lambda a: Waitpoint.from_json(a.json()), {"payload": payload},
                                idempotency_key=idempotency_key)

    # Schedules.

    async def create_schedule(
        self,
        schedule_id: str,
        *,
        queue: str,
        cron: str | None = None,
        timezone: str | None = None,
        interval: Duration | None = None,
        catch_up: str | None = None,
        priority: int | None = None,
        payload: Any = MISSING,
        tenant: str | None = None,
        idempotency_key: str | None = None,
    ) -> Schedule:
        """Creates a schedule: a task in ``queue`` at every tick of ``cron`` (five fields or ``@hourly``...,
        in the IANA ``timezone``, UTC by default) or of ``interval`` (at least 1 s), one of them, with
        ``priority`` and ``payload``. ``catch_up`` (latest, all, skip) says which ticks missed while no
        leader ticked create tasks. InvalidArgument for a cron expression or zone that does not parse."""
        body = compact({"schedule_id": schedule_id, "queue": queue, "cron": cron, "timezone": timezone,
                        "interval_ms": _ms(interval), "catch_up": catch_up, "priority": priority})
        if payload is not MISSING:
            body["payload"] = payload
        return await self._call("POST", self._tp(tenant) + "/schedules", lambda a: Schedule.from_json(a.json()),
                                body, idempotency_key=idempotency_key)

    async def get_schedule(self, schedule_id: str, *, tenant: str | None = None, stale: bool = False) -> Schedule:
        return await self._call("GET", self._tp(tenant) + "/schedules/" + seg(schedule_id),
                                lambda a: Schedule.from_json(a.json()), stale=stale)

    async def list_schedules(self, *, limit: int | None = None, page_token: str | None = None,
                             tenant: str | None = None, stale: bool = False) -> Page[Schedule]:
        """One page of the schedules on queues the caller may read, in id order; see iter_schedules."""
        path = query(self._tp(tenant) + "/schedules", limit=limit, page_token=page_token or None)
        return await self._call("GET", path, _page(Schedule, "schedules"), stale=stale)

    async def iter_schedules(self, *, page_size: int | None = None, tenant: str | None = None
                             ) -> AsyncIterator[Schedule]:
        """Every schedule, following next_page_token (pages may be empty)."""
        token = ""
        while True:
            page = await self.list_schedules(limit=page_size, page_token=token, tenant=tenant)
            for s in page.items:
                yield s
            if not page.next_page_token:
                return
            token = page.next_page_token

    async def pause_schedule(self, schedule_id: str, *, tenant: str | None = None,
                             idempotency_key: str | None = None) -> Schedule:
        """Stops a schedule's ticks (resume_schedule starts them again)."""
        return await self._call("POST", self._tp(tenant) + "/schedules/" + seg(schedule_id) + "/pause",
                                lambda a: Schedule.from_json(a.json()), idempotency_key=idempotency_key)

    async def resume_schedule(self, schedule_id: str, *, tenant: str | None = None,
                              idempotency_key: str | None = None) -> Schedule:
        """Starts a paused schedule again at its first tick after now (the ticks of the pause are not
        made up)."""
        return await self._call("POST", self._tp(tenant) + "/schedules/" + seg(schedule_id) + "/resume",
                                lambda a: Schedule.from_json(a.json()), idempotency_key=idempotency_key)

    async def delete_schedule(self, schedule_id: str, *, tenant: str | None = None,
                              idempotency_key: str | None = None) -> None:
        """Deletes a schedule; the tasks it created stay."""
        await self._call("DELETE", self._tp(tenant) + "/schedules/" + seg(schedule_id), lambda a: None,
                         idempotency_key=idempotency_key, want_value=False)

    # Transactions.

    async def txn(self, ops: Sequence[dict[str, Any]], *, tenant: str | None = None,
                  idempotency_key: str | None = None) -> TxnResult:
        """Applies all ops or none: each ``{"op": "task.create" | "task.claim" | "task.update" | "kv.put" |
        "kv.delete" | "ref.set", ...fields}``. A failing op raises its error with ``op_index``."""
        body = {"ops": [{k: fence_json(v) if k == "fence" else v for k, v in op.items()} for op in ops]}
        return await self._call("POST", self._tp(tenant) + "/txn",
                                lambda a: TxnResult(list((a.json() or {}).get("results") or []), a.index), body,
                                idempotency_key=idempotency_key)

    # Chunks and artifacts.

    async def missing_chunks(self, digests: Sequence[str], *, tenant: str | None = None) -> list[str]:
        """The digests this tenant does not hold."""
        return await self._call("POST", self._tp(tenant) + "/chunks/missing",
                                lambda a: list((a.json() or {}).get("missing") or []),
                                {"digests": list(digests)}, session=False)

    async def put_chunk(self, data: bytes, *, tenant: str | None = None) -> bool:
        """Stores a chunk (at most 4 MiB); True when created, False when it was held already."""
        d = digest(data)
        created = await self._call("PUT", self._tp(tenant) + "/chunks/" + d, lambda a: a.status == 201,
                                   raw=data, session=False, extra_timeout=len(data) / (8 << 20))
        if self.on_chunk_sent is not None:
            self.on_chunk_sent(d, len(data))
        return created

    async def get_chunk(self, chunk_digest: str, *, tenant: str | None = None) -> bytes:
        data = await self._call("GET", self._tp(tenant) + "/chunks/" + chunk_digest, lambda a: a.body)
        if digest(data) != chunk_digest:
            raise DigestMismatch(f"chunk {chunk_digest}: the bytes received hash to {digest(data)}")
        return data

    async def publish_artifact(
        self,
        name: str,
        *,
        chunks: Sequence[ChunkRef],
        digest: str,
        size: int,
        media_type: str | None = None,
        sources: Sequence[str] | None = None,
        metadata: dict[str, Any] | None = None,
        task_id: str | None = None,
        fence: Fence | None = None,
        tenant: str | None = None,
        idempotency_key: str | None = None,
    ) -> Manifest:
        """Publishes a manifest of held chunks as the next version of ``name``."""
        body = compact({"chunks": [c.to_json() for c in chunks], "digest": digest, "size": size,
                        "media_type": media_type, "sources": list(sources) if sources else None,
                        "metadata": metadata, "task_id": task_id, "fence": fence_json(fence)})
        return await self._call("POST", self._tp(tenant) + "/artifacts/" + seg(name) + "/versions",
                                lambda a: Manifest.from_json(a.json()), body,
                                idempotency_key=idempotency_key or new_idempotency_key(),
                                extra_timeout=size / (64 << 20))

    async def _store_chunks(self, tenant: str, batch: list[tuple[str, bytes]], stats: UploadStats) -> None:
        uniq: dict[str, bytes] = {}
        for d, b in batch:
            uniq.setdefault(d, b)
        keys = list(uniq)
        for i in range(0, len(keys), _MISSING_BATCH):
            missing = [d for d in await self.missing_chunks(keys[i : i + _MISSING_BATCH], tenant=tenant) if d in uniq]
            bodies = [uniq[d] for d in missing]
            await _io.run_all([lambda b=b: self.put_chunk(b, tenant=tenant) for b in bodies],  # type: ignore[misc]
                              self.upload_parallel)
            stats.chunks_uploaded += len(bodies)
            stats.bytes_sent += sum(len(b) for b in bodies)

    async def _upload_chunks(self, tenant: str, source: Source, stats: UploadStats
                             ) -> tuple[list[ChunkRef], str, int]:
        from ._cdc import iter_chunks

        read, close = _open_source(source)
        whole = hashlib.sha256()
        refs: list[ChunkRef] = []
        batch: list[tuple[str, bytes]] = []
        batch_bytes = 0
        try:
            for chunk in iter_chunks(read):
                chunk = bytes(chunk)
                whole.update(chunk)
                d = digest(chunk)
                refs.append(ChunkRef(d, len(chunk)))
                stats.size += len(chunk)
                stats.chunks += 1
                batch.append((d, chunk))
                batch_bytes += len(chunk)
                if len(batch) >= _UPLOAD_BATCH_CHUNKS or batch_bytes >= _UPLOAD_BATCH_BYTES:
                    await self._store_chunks(tenant, batch, stats)
                    batch, batch_bytes = [], 0
            if batch:
                await self._store_chunks(tenant, batch, stats)
        finally:
            close()
        return refs, "sha256:" + whole.hexdigest(), stats.size

    async def upload_artifact(
        self,
        name: str,
        source: Source,
        *,
        media_type: str | None = None,
        sources: Sequence[str] | None = None,
        metadata: dict[str, Any] | None = None,
        task_id: str | None = None,
        fence: Fence | None = None,
        tenant: str | None = None,
        idempotency_key: str | None = None,
        stats: UploadStats | None = None,
    ) -> Manifest:
        """Cuts the content into content-defined chunks (byte-compatible with the Go SDK), uploads only
        those the tenant lacks, and publishes the manifest as a new version of ``name``. Memory stays
        bounded: the content is read once, as a stream. An upload that failed half-way is resumed by
        calling this again: chunks already held are not sent again. ``stats`` is filled in."""
        t = self._tenant(tenant)
        st = stats if stats is not None else UploadStats()
        t0 = _io.monotonic()
        try:
            refs, whole, size = await self._upload_chunks(t, source, st)
            return await self.publish_artifact(name, chunks=refs, digest=whole, size=size, media_type=media_type,
                                               sources=sources, metadata=metadata, task_id=task_id, fence=fence,
                                               tenant=t, idempotency_key=idempotency_key)
        finally:
            st.elapsed = _io.monotonic() - t0

    async def get_manifest(self, name: str, version: int, *, tenant: str | None = None,
                           stale: bool = False) -> Manifest:
        return await self._call("GET", self._tp(tenant) + "/artifacts/" + seg(name) + f"/versions/{int(version)}",
                                lambda a: Manifest.from_json(a.json()), stale=stale)

    async def list_versions(self, name: str, *, tenant: str | None = None, stale: bool = False) -> list[Manifest]:
        return await self._call("GET", self._tp(tenant) + "/artifacts/" + seg(name) + "/versions",
                                lambda a: [Manifest.from_json(m) for m in (a.json() or {}).get("versions") or []],
                                stale=stale)

    async def get_artifact_by_id(self, artifact_id: str, *, tenant: str | None = None,
                                 stale: bool = False) -> Manifest:
        return await self._call("GET", self._tp(tenant) + "/artifacts/by-id/" + seg(artifact_id),
                                lambda a: Manifest.from_json(a.json()), stale=stale)

    async def list_artifacts(self, *, prefix: str | None = None, limit: int | None = None,
                             page_token: str | None = None, tenant: str | None = None,
                             stale: bool = False) -> Page[ArtifactSummary]:
        path = query(self._tp(tenant) + "/artifacts", prefix=prefix, limit=limit, page_token=page_token or None)
        return await self._call("GET", path, _page(ArtifactSummary, "artifacts"), stale=stale)

    async def iter_artifacts(self, *, prefix: str | None = None, page_size: int | None = None,
                             tenant: str | None = None) -> AsyncIterator[ArtifactSummary]:
        token = ""
        while True:
            page = await self.list_artifacts(prefix=prefix, limit=page_size, page_token=token, tenant=tenant)
            for s in page.items:
                yield s
            if not page.next_page_token:
                return
            token = page.next_page_token

    async def delete_artifact_version(self, name: str, version: int, *, expect_artifact_id: str | None = None,
                                      tenant: str | None = None, idempotency_key: str | None = None) -> None:
        path = query(self._tp(tenant) + "/artifacts/" + seg(name) + f"/versions/{int(version)}",
                     expect_artifact_id=expect_artifact_id)
        await self._call("DELETE", path, lambda a: None, idempotency_key=idempotency_key, want_value=False)

    async def delete_artifact(self, name: str, *, expect_version: int | None = None,
                              tenant: str | None = None) -> None:
        """Deletes every version of ``name``; one by one, oldest first, when the server asks for that."""
        path = query(self._tp(tenant) + "/artifacts/" + seg(name), expect_version=expect_version)
        try:
            await self._call("DELETE", path, lambda a: None, want_value=False)
        except InvalidArgument as e:
            if not e.details.get("delete_by_version"):
                raise
            for m in await self.list_versions(name, tenant=tenant):
                try:
                    await self.delete_artifact_version(name, m.version, tenant=tenant)
                except NotFound:
                    pass

    async def set_artifact_policy(self, prefix: str, keep_last: int, *, tenant: str | None = None,
                                  idempotency_key: str | None = None) -> ArtifactPolicy:
        return await self._call("PUT", self._tp(tenant) + "/artifact-policies",
                                lambda a: ArtifactPolicy.from_json(a.json()),
                                {"prefix": prefix, "keep_last": keep_last}, idempotency_key=idempotency_key)

    async def list_artifact_policies(self, *, tenant: str | None = None, stale: bool = False) -> list[ArtifactPolicy]:
        return await self._call("GET", self._tp(tenant) + "/artifact-policies",
                                lambda a: [ArtifactPolicy.from_json(p) for p in (a.json() or {}).get("policies") or []],
                                stale=stale)

    async def download_artifact(self, name: str, version: int, dest: IO[bytes], *,
                                tenant: str | None = None) -> int:
        """Streams a version's content into ``dest`` and checks its size and digest (DigestMismatch);
        returns the bytes written. A stream cut midway (a node killed) starts again on another endpoint
        when ``dest`` is seekable (it is rewound and truncated), else raises Unavailable."""
        path = self._tp(tenant) + "/artifacts/" + seg(name) + f"/versions/{int(version)}/content"
        start = dest.tell() if dest.seekable() else None
        deadline = _io.monotonic() + self.max_retry
        bo = Backoff()
        while True:
            try:
                return await self._download_once(path, name, version, dest)
            except _StreamCut:
                if start is None or _io.monotonic() >= deadline:
                    raise
                dest.seek(start)
                dest.truncate()
                self._fo.preferred = (self._fo.preferred + 1) % len(self.endpoints)
                await _io.sleep(bo.delay(0.0, deadline - _io.monotonic()))

    async def _download_once(self, path: str, name: str, version: int, dest: IO[bytes]) -> int:
        r = await self._open_stream(path, {"Accept": "*/*"}, self.timeout)
        try:
            want = (r.headers.get("ETag") or "").strip('"')
            length = int(r.headers.get("Content-Length") or -1)
            h = hashlib.sha256()
            n = 0
            try:
                async for b in r.aiter_bytes():
                    h.update(b)
                    dest.write(b)
                    n += len(b)
            except _HTTPX_ERRORS as e:
                raise _StreamCut(f"download of {name} v{version} cut after {n} bytes: {e}") from e
        finally:
            await r.aclose()
        got = "sha256:" + h.hexdigest()
        if length >= 0 and n < length:
            raise _StreamCut(f"download of {name} v{version} cut after {n} of {length} bytes")
        if (length >= 0 and n != length) or (DIGEST_RE.match(want) and got != want):
            raise DigestMismatch(f"{name} v{version}: got {n} bytes hashing to {got}, want {length} bytes, {want}")
        return n

    async def download_artifact_to(self, name: str, version: int, path: str | os.PathLike[str], *,
                                   tenant: str | None = None) -> int:
        """Downloads to a file, written beside it first and renamed once its digest checked."""
        tmp = os.fspath(path) + ".part"
        try:
            with open(tmp, "wb") as f:
                n = await self.download_artifact(name, version, f, tenant=tenant)
            os.replace(tmp, path)
            return n
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)

    async def read_artifact(self, name: str, version: int, *, tenant: str | None = None) -> bytes:
        """A version's content in memory (checked)."""
        import io

        buf = io.BytesIO()
        await self.download_artifact(name, version, buf, tenant=tenant)
        return buf.getvalue()

    # Refs.

    async def set_ref(self, ref: str, artifact_id: str, *, expect_artifact_id: str | None = None,
                      fence: Fence | None = None, tenant: str | None = None,
                      idempotency_key: str | None = None) -> Ref:
        """Points ``ref`` at an artifact; ``expect_artifact_id=""`` means it must not exist yet."""
        body = compact({"artifact_id": artifact_id, "expect_artifact_id": expect_artifact_id,
                        "fence": fence_json(fence)})
        return await self._call("PUT", self._tp(tenant) + "/refs/" + key_path(ref), lambda a: Ref.from_json(a.json()),
                                body, idempotency_key=idempotency_key)

    async def get_ref(self, ref: str, *, tenant: str | None = None, stale: bool = False) -> Ref:
        return await self._call("GET", self._tp(tenant) + "/refs/" + key_path(ref), lambda a: Ref.from_json(a.json()),
                                stale=stale)

    async def list_refs(self, *, prefix: str | None = None, tenant: str | None = None,
                        stale: bool = False) -> list[Ref]:
        return await self._call("GET", query(self._tp(tenant) + "/refs", prefix=prefix),
                                lambda a: [Ref.from_json(r) for r in (a.json() or {}).get("refs") or []], stale=stale)

    async def delete_ref(self, ref: str, *, expect_artifact_id: str | None = None, tenant: str | None = None,
                         idempotency_key: str | None = None) -> None:
        path = query(self._tp(tenant) + "/refs/" + key_path(ref), expect_artifact_id=expect_artifact_id)
        await self._call("DELETE", path, lambda a: None, idempotency_key=idempotency_key, want_value=False)

    # Checkpoints.

    def _cp(self, tenant: str | None, thread: str, *rest: str, ns: str | None = None) -> str:
        path = self._tp(tenant) + "/threads/" + seg(thread)
        for r in rest:
            path += "/" + seg(r)
        return query(path, checkpoint_ns=ns or None)

    async def _call_cp(self, method: str, path: str, parse: Callable[[Any], T], body: Any = None, *,
                       idempotency_key: str | None = None, stale: bool = False, want_value: bool = True,
                       extra_timeout: float = 0.0) -> T:
        """A checkpoint call in msgpack when the SDK may (_mp.on()), else JSON; ``parse`` reads the
        decoded answer either way."""
        if not _mp.on():
            return await self._call(method, path, lambda a: parse(a.json()), body, idempotency_key=idempotency_key,
                                    stale=stale, want_value=want_value, extra_timeout=extra_timeout)
        call = build_call(method, path, raw=None if body is None else _mp.pack(body),
                          idempotency_key=idempotency_key, timeout=self.timeout + extra_timeout, stale=stale,
                          want_value=want_value)
        if body is not None:
            call.content_type = _mp.MEDIA
        call.accept = _mp.MEDIA
        ans = await self._send(call)
        r = parse(_mp.decode(ans.body))
        if ans.index and dataclasses.is_dataclass(r) and not isinstance(r, type) and hasattr(r, "index"):
            r = dataclasses.replace(r, index=ans.index)  # type: ignore[assignment]
        return r

    async def put_checkpoint(
        self,
        thread: str,
        checkpoint_id: str,
        data: Any,
        *,
        ns: str | None = None,
        parent_id: str | None = None,
        metadata: Any = None,
        fork: bool | None = None,
        fence: Fence | None = None,
        blob_versions: Mapping[str, str] | None = None,
        blobs: Sequence[Blob] = (),
        tenant: str | None = None,
        idempotency_key: str | None = None,
    ) -> Checkpoint:
        """Appends a checkpoint to a thread's namespace. ``parent_id`` must be the head (VersionMismatch
        with ``current_head`` otherwise) unless ``fork``. Data over 512 KiB (as JSON) is uploaded as
        chunks and named by ``data_chunks``; the answer carries the data either way. ``blob_versions``
        names the channel values the checkpoint holds (channel to version) and ``blobs`` brings those
        new to the namespace; each value is stored once per version, one over ``BLOB_CHUNKED_MIN`` bytes
        as chunks uploaded first."""
        t = self._tenant(tenant)
        extra = 0.0
        wire_blobs: list[dict[str, Any]] = []
        for b in blobs:
            if len(b.data) <= BLOB_CHUNKED_MIN:
                wire_blobs.append(b.to_json(_mp.on()))
                continue
            refs, _, size = await self._upload_chunks(t, b.data, UploadStats())
            wire_blobs.append({"channel": b.channel, "version": b.version, "type": b.type,
                               "chunks": [c.to_json() for c in refs]})
            extra += size / (64 << 20)
        body = compact({"parent_id": parent_id, "metadata": metadata, "fork": fork or None,
                        "fence": fence_json(fence), "blob_versions": dict(blob_versions) if blob_versions else None,
                        "blobs": wire_blobs or None})
        text = dumps(data)
        if len(text) <= CHECKPOINT_INLINE_MAX:
            body["data"] = data
        else:
            refs, _, size = await self._upload_chunks(t, text, UploadStats())
            body["data_chunks"] = [c.to_json() for c in refs]
            extra += size / (64 << 20)
        cp = await self._call_cp("PUT", self._cp(t, thread, "checkpoints", checkpoint_id, ns=ns),
                                 Checkpoint.from_json, body, idempotency_key=idempotency_key, extra_timeout=extra)
        if "data_chunks" in body:
            cp = dataclasses.replace(cp, data=data)
        return cp

    async def get_checkpoint(self, thread: str, checkpoint_id: str, *, ns: str | None = None,
                             tenant: str | None = None, stale: bool = False) -> Checkpoint:
        return await self._call_cp("GET", self._cp(tenant, thread, "checkpoints", checkpoint_id, ns=ns),
                                   Checkpoint.from_json, stale=stale)

    async def latest_checkpoint(self, thread: str, *, ns: str | None = None, tenant: str | None = None,
                                stale: bool = False) -> Checkpoint:
        return await self._call_cp("GET", self._cp(tenant, thread, "checkpoints", "latest", ns=ns),
                                   Checkpoint.from_json, stale=stale)

    async def list_checkpoints(
        self,
        thread: str,
        *,
        ns: str | None = None,
        filter: dict[str, Any] | None = None,
        before: str | None = None,
        limit: int | None = None,
        page_token: str | None = None,
        pending_writes: bool = False,
        tenant: str | None = None,
        stale: bool = False,
    ) -> Page[Checkpoint]:
        """One page, newest first (``data`` is None where ``data_chunks`` is set); with pending_writes
        each checkpoint carries its pending writes."""
        path = query(self._cp(tenant, thread, "checkpoints", ns=ns),
                     filter=None if filter is None else json.dumps(filter, separators=(",", ":")),
                     before=before, limit=limit, page_token=page_token or None,
                     pending_writes=True if pending_writes else None)
        return await self._call_cp("GET", path, _cp_page, stale=stale)

    async def iter_checkpoints(self, thread: str, *, ns: str | None = None, filter: dict[str, Any] | None = None,
                               before: str | None = None, limit: int | None = None,
                               pending_writes: bool = False, tenant: str | None = None
                               ) -> AsyncIterator[Checkpoint]:
        """Newest first, following page tokens (empty pages too), until ``limit`` matches."""
        token = ""
        n = 0
        while True:
            page = await self.list_checkpoints(thread, ns=ns, filter=filter, before=None if token else before,
                                               limit=None if limit is None else limit - n, page_token=token,
                                               pending_writes=pending_writes, tenant=tenant)
            for c in page.items:
                yield c
                n += 1
            if not page.next_page_token or (limit is not None and n >= limit):
                return
            token = page.next_page_token

    async def list_tenant_checkpoints(
        self,
        *,
        thread: str | None = None,
        ns: str | None = None,
        filter: dict[str, Any] | None = None,
        before_id: str | None = None,
        limit: int | None = None,
        page_token: str | None = None,
        pending_writes: bool = False,
        tenant: str | None = None,
        stale: bool = False,
    ) -> Page[Checkpoint]:
        """One page of checkpoints across threads and namespaces (LangGraph's list with no thread or no
        namespace): ``thread`` None is every thread the caller may read, ``ns`` None every namespace
        (``""`` the default one); ``before_id`` keeps ids that sort before it. By thread, then
        namespace, newest first within one."""
        path = query(self._tp(tenant) + "/checkpoints", thread=thread, checkpoint_ns=ns,  # "" is sent: one namespace
                     filter=None if filter is None else json.dumps(filter, separators=(",", ":")),
                     before_id=before_id, limit=limit, page_token=page_token or None,
                     pending_writes=True if pending_writes else None)
        return await self._call_cp("GET", path, _cp_page, stale=stale)

    async def iter_tenant_checkpoints(self, *, thread: str | None = None, ns: str | None = None,
                                      filter: dict[str, Any] | None = None, before_id: str | None = None,
                                      limit: int | None = None, pending_writes: bool = False,
                                      tenant: str | None = None) -> AsyncIterator[Checkpoint]:
        """list_tenant_checkpoints, following page tokens (empty pages too), until ``limit``."""
        token = ""
        n = 0
        while True:
            page = await self.list_tenant_checkpoints(thread=thread, ns=ns, filter=filter, before_id=before_id,
                                                      limit=None if limit is None else limit - n, page_token=token,
                                                      pending_writes=pending_writes, tenant=tenant)
            for c in page.items:
                yield c
                n += 1
            if not page.next_page_token or (limit is not None and n >= limit):
                return
            token = page.next_page_token

    async def put_writes(self, thread: str, checkpoint_id: str, task_id: str,
                         writes: Sequence[tuple[str, Any] | dict[str, Any]], *, task_path: str | None = None,
                         ns: str | None = None, fence: Fence | None = None, tenant: str | None = None,
                         idempotency_key: str | None = None) -> list[PendingWrite]:
        """Records the pending writes one task made in the step after a checkpoint: ``(channel, value)``
        pairs (idx their position) or ``{"channel", "value", "idx"}``, or ``{"channel", "type", "b64", "idx"}``
        for bytes of a serializer's type (``b64`` the bytes). Returns the task's writes as now recorded (also
        when nothing changed)."""
        binary = _mp.on()
        items = [_write_json(w, binary) if isinstance(w, dict) else {"channel": w[0], "value": w[1]} for w in writes]
        body = compact({"writes": items, "task_path": task_path, "fence": fence_json(fence)})

        def parse(obj: Any) -> list[PendingWrite]:
            return [PendingWrite.from_json(dict(w, task_id=w.get("task_id", task_id)))
                    for w in (obj or {}).get("writes") or [] if isinstance(w, dict)]

        return await self._call_cp("PUT", self._cp(tenant, thread, "checkpoints", checkpoint_id, "writes", task_id,
                                                   ns=ns), parse, body, idempotency_key=idempotency_key,
                                   want_value=False)

    async def copy_thread(self, thread: str, target: str, *, fence: Fence | None = None,
                          tenant: str | None = None, idempotency_key: str | None = None) -> dict[str, Any]:
        """Copies every checkpoint and pending write of a thread to ``target``: ``{"source", "target",
        "checkpoints"}``."""
        return await self._call("POST", self._cp(tenant, thread, "copy"), lambda a: dict(a.json() or {}),
                                compact({"target": target, "fence": fence_json(fence)}),
                                idempotency_key=idempotency_key)

    async def prune_checkpoints(self, threads: Sequence[str], *, strategy: str = "keep_latest",
                                fence: Fence | None = None, tenant: str | None = None,
                                idempotency_key: str | None = None) -> int:
        """``keep_latest`` keeps each namespace's head; ``delete`` deletes the threads. Returns the
        checkpoints deleted."""
        return await self._call("POST", self._tp(tenant) + "/checkpoints/prune",
                                lambda a: int((a.json() or {}).get("deleted") or 0),
                                compact({"threads": list(threads), "strategy": strategy, "fence": fence_json(fence)}),
                                idempotency_key=idempotency_key)

    async def delete_runs(self, run_ids: Sequence[str], *, fence: Fence | None = None, tenant: str | None = None,
                          idempotency_key: str | None = None) -> int:
        """Deletes the checkpoints whose metadata's ``run_id`` is one of ``run_ids``, in every thread."""
        return await self._call("POST", self._tp(tenant) + "/checkpoints/delete-runs",
                                lambda a: int((a.json() or {}).get("deleted") or 0),
                                compact({"run_ids": list(run_ids), "fence": fence_json(fence)}),
                                idempotency_key=idempotency_key)

    async def set_checkpoint_policy(self, prefix: str, *, keep_last: int = 0, max_age: Duration | None = None,
                                    tenant: str | None = None, idempotency_key: str | None = None
                                    ) -> CheckpointPolicy:
        """Bounds the checkpoints of the threads under a thread-id prefix (``""``: every thread): each
        namespace keeps its newest ``keep_last``, and a checkpoint goes ``max_age`` after its put, heads
        included. Both unset clear the prefix's policy; it applies to checkpoints put from now on."""
        body = {"prefix": prefix, "keep_last": keep_last, "max_age_ms": _ms(max_age) or 0}
        return await self._call("PUT", self._tp(tenant) + "/checkpoint-policies",
                                lambda a: CheckpointPolicy.from_json(a.json()), body, idempotency_key=idempotency_key)

    async def list_checkpoint_policies(self, *, tenant: str | None = None,
                                       stale: bool = False) -> list[CheckpointPolicy]:
        return await self._call("GET", self._tp(tenant) + "/checkpoint-policies",
                                lambda a: [CheckpointPolicy.from_json(p)
                                           for p in (a.json() or {}).get("policies") or []], stale=stale)

    async def delete_thread(self, thread: str, *, fence: Fence | None = None, tenant: str | None = None,
                            idempotency_key: str | None = None) -> None:
        body = {"fence": fence_json(fence)} if fence is not None else None
        await self._call("DELETE", self._cp(tenant, thread), lambda a: None, body,
                         idempotency_key=idempotency_key, want_value=False)

    # KV.

    async def kv_put(self, namespace: str, key: str, value: Any, *, expect_version: int | None = None,
                     ttl: Duration | None = None, fence: Fence | None = None, tenant: str | None = None,
                     idempotency_key: str | None = None) -> KVEntry:
        """Sets a value; ``expect_version=0`` means "must not exist" (compare-and-set otherwise)."""
        body = compact({"value": value, "expect_version": expect_version, "ttl_ms": _ms(ttl),
                        "fence": fence_json(fence)})
        body["value"] = value
        return await self._call("PUT", self._tp(tenant) + "/kv/" + seg(namespace) + "/" + key_path(key),
                                lambda a: KVEntry.from_json(a.json()), body, idempotency_key=idempotency_key)

    async def kv_get(self, namespace: str, key: str, *, tenant: str | None = None, stale: bool = False) -> KVEntry:
        return await self._call("GET", self._tp(tenant) + "/kv/" + seg(namespace) + "/" + key_path(key),
                                lambda a: KVEntry.from_json(a.json()), stale=stale)

    async def kv_delete(self, namespace: str, key: str, *, expect_version: int | None = None,
                        tenant: str | None = None, idempotency_key: str | None = None) -> None:
        path = query(self._tp(tenant) + "/kv/" + seg(namespace) + "/" + key_path(key), expect_version=expect_version)
        await self._call("DELETE", path, lambda a: None, idempotency_key=idempotency_key, want_value=False)

    async def kv_list(self, namespace: str, *, prefix: str | None = None, limit: int | None = None,
                      page_token: str | None = None, tenant: str | None = None, stale: bool = False) -> Page[KVEntry]:
        path = query(self._tp(tenant) + "/kv/" + seg(namespace), prefix=prefix, limit=limit,
                     page_token=page_token or None)
        return await self._call("GET", path, _page(KVEntry, "entries"), stale=stale)

    async def iter_kv(self, namespace: str, *, prefix: str | None = None, page_size: int | None = None,
                      tenant: str | None = None) -> AsyncIterator[KVEntry]:
        token = ""
        while True:
            page = await self.kv_list(namespace, prefix=prefix, limit=page_size, page_token=token, tenant=tenant)
            for e in page.items:
                yield e
            if not page.next_page_token:
                return
            token = page.next_page_token

    # Knowledge store (LangGraph's BaseStore; docs/api.md "Knowledge store (LangGraph)").

    async def store_write(self, ops: Sequence[Mapping[str, Any]], *, tenant: str | None = None,
                          idempotency_key: str | None = None) -> int:
        """Puts and deletes items, all or nothing: each op is ``{"namespace", "key", "value"?, "vectors"?,
        "ttl_minutes"?}``, without ``value`` (or None) a delete. Returns how many ops were applied."""
        body = {"ops": [{k: (list(v) if k == "namespace" else v) for k, v in op.items()} for op in ops]}
        return await self._call("POST", self._tp(tenant) + "/store/write",
                                lambda a: int((a.json() or {}).get("written") or 0), body,
                                idempotency_key=idempotency_key)

    async def store_get(self, items: Sequence[tuple[Sequence[str], str]], *, refresh_ttl: bool = False,
                        tenant: str | None = None, stale: bool = False) -> list[StoreItem | None]:
        """Several items in one round trip, None for one absent or expired; ``refresh_ttl`` moves the
        expiry of those read that have a TTL."""
        body: dict[str, Any] = {"items": [{"namespace": list(ns), "key": k} for ns, k in items]}
        if refresh_ttl:
            body["refresh_ttl"] = True
        return await self._call("POST", self._tp(tenant) + "/store/get",
                                lambda a: [None if d is None else StoreItem.from_json(d)
                                           for d in (a.json() or {}).get("items") or []],
                                body, stale=stale, session=False)

    async def store_search(self, namespace_prefix: Sequence[str], *, filter: Mapping[str, Any] | None = None,
                           vector: Sequence[float] | None = None, limit: int = 10, offset: int = 0,
                           refresh_ttl: bool = False, tenant: str | None = None,
                           stale: bool = False) -> list[StoreItem]:
        """Items under a namespace prefix that pass ``filter``, most recently updated first; with
        ``vector``, by descending cosine similarity (exact k-nearest, on the server)."""
        body: dict[str, Any] = {"namespace_prefix": list(namespace_prefix), "limit": limit, "offset": offset}
        if filter:
            body["filter"] = dict(filter)
        if vector is not None:
            body["vector"] = list(vector)
        if refresh_ttl:
            body["refresh_ttl"] = True
        return await self._call("POST", self._tp(tenant) + "/store/search",
                                lambda a: [StoreItem.from_json(d) for d in (a.json() or {}).get("items") or []],
                                body, stale=stale, session=False)

    async def store_namespaces(self, *, match_conditions: Sequence[tuple[str, Sequence[str]]] = (),
                               max_depth: int | None = None, limit: int = 100, offset: int = 0,
                               tenant: str | None = None, stale: bool = False) -> list[tuple[str, ...]]:
        """The namespaces holding items: ``match_conditions`` are ("prefix" or "suffix", labels), "*"
        matching any one label; each cut to ``max_depth`` labels."""
        body: dict[str, Any] = {"limit": limit, "offset": offset,
                                "match_conditions": [{"match_type": t, "path": list(p)} for t, p in match_conditions]}
        if max_depth is not None:
            body["max_depth"] = max_depth
        return await self._call("POST", self._tp(tenant) + "/store/namespaces",
                                lambda a: [tuple(ns) for ns in (a.json() or {}).get("namespaces") or []],
                                body, stale=stale, session=False)

    # Operations ledger.

    async def begin_op(self, op_id: str, *, kind: str, params_digest: str, task_id: str | None = None,
                       fence: Fence | None = None, tenant: str | None = None,
                       idempotency_key: str | None = None) -> tuple[Op, bool]:
        """Begins an op; (record, created). An existing record with the same params_digest is returned
        with created False; another digest is IdempotencyMismatch."""
        body = compact({"kind": kind, "params_digest": params_digest, "task_id": task_id,
                        "fence": fence_json(fence)})
        return await self._call("POST", self._tp(tenant) + "/ops/" + seg(op_id) + "/begin",
                                lambda a: (Op.from_json(a.json()), a.status == 201), body,
                                idempotency_key=idempotency_key)

    async def finish_op(self, op_id: str, *, state: str, result: Any = MISSING, fence: Fence | None = None,
                        tenant: str | None = None, idempotency_key: str | None = None) -> Op:
        """Records an op's outcome: ``succeeded``, ``failed`` or ``unknown``."""
        body = compact({"state": state, "fence": fence_json(fence)})
        if result is not MISSING:
            body["result"] = result
        return await self._call("POST", self._tp(tenant) + "/ops/" + seg(op_id) + "/finish",
                                lambda a: Op.from_json(a.json()), body, idempotency_key=idempotency_key)

    async def get_op(self, op_id: str, *, tenant: str | None = None, stale: bool = False) -> Op:
        return await self._call("GET", self._tp(tenant) + "/ops/" + seg(op_id), lambda a: Op.from_json(a.json()),
                                stale=stale)

    # Watch.

    def watch(
        self,
        *,
        resources: Sequence[str] | None = None,
        prefix: str | None = None,
        from_index: int | None = None,
        after_id: str | None = None,
        idle_timeout: Duration = 30.0,
        tenant: str | None = None,
    ) -> AsyncWatch:
        """A stream of the tenant's changes (``async for event in client.watch(...)``); it reconnects to
        the other endpoints with Last-Event-ID when the stream breaks, so no change is skipped or repeated.
        ``from_index``: the changes after that index (e.g. a read's ``X-Baton-Index``); ``after_id``:
        resume after an event id. Raises Compacted when the history it needs is gone."""
        return AsyncWatch(self, self._tenant(tenant), resources, prefix, from_index, after_id, seconds(idle_timeout))

    # Cluster.

    async def cluster_status(self, *, stale: bool = False) -> ClusterStatus:
        return await self._call("GET", "/v1/cluster", lambda a: ClusterStatus.from_json(a.json()), stale=stale)

    async def add_member(self, id: str, *, raft_addr: str, http_addr: str, voter: bool = True) -> Member:
        return await self._call("POST", "/v1/cluster/members", lambda a: Member.from_json(a.json()),
                                {"id": id, "raft_addr": raft_addr, "http_addr": http_addr, "voter": voter})

    async def remove_member(self, id: str) -> None:
        await self._call("DELETE", "/v1/cluster/members/" + seg(id), lambda a: None, want_value=False)

    async def promote_member(self, id: str) -> Member:
        return await self._call("POST", "/v1/cluster/members/" + seg(id) + "/promote",
                                lambda a: Member.from_json(a.json()))

    async def transfer_leadership(self, to: str | None = None) -> dict[str, Any]:
        """``{"previous", "leader"}``; ``leader`` is "" while the election still runs."""
        return await self._call("POST", "/v1/cluster/leadership-transfer", lambda a: dict(a.json() or {}),
                                compact({"to": to}), session=False, idempotency_key=None)

    async def backup(self, dest: IO[bytes]) -> int:
        """Streams a full backup (docs/operations.md) into dest; returns its size."""
        r = await self._open_stream("/v1/cluster/backup", {"Accept": "*/*"}, self.timeout)
        n = 0
        try:
            async for b in r.aiter_bytes():
                dest.write(b)
                n += len(b)
        finally:
            await r.aclose()
        return n


class AsyncWatch:
    """An iterator over a tenant's changes; see AsyncClient.watch. Close it (or use ``async with``)."""

    def __init__(self, client: AsyncClient, tenant: str, resources: Sequence[str] | None, prefix: str | None,
                 from_index: int | None, after_id: str | None, idle_timeout: float) -> None:
        self._c = client
        self._path = query("/v1/tenants/" + seg(tenant) + "/watch",
                           resources=",".join(resources) if resources else None, prefix=prefix or None)
        self._from_index = from_index
        self._cursor = after_id or ""
        self._pos = event_pos(after_id) if after_id else None
        if after_id and self._pos is None:
            raise InvalidArgument(f"event id {after_id!r} is not INDEX or INDEX.POS")
        self._idle = idle_timeout
        self._ep = client._fo.preferred
        self._resp: httpx.Response | None = None
        self._lines: AsyncIterator[str] | None = None
        self._parser = SSEParser()
        self._closed = False
        self.reconnects = 0  # streams opened after the first

    def __aiter__(self) -> AsyncWatch:
        return self

    async def __anext__(self) -> WatchEvent:
        ev = await self.next()
        if ev is None:
            raise StopAsyncIteration
        return ev

    async def __aenter__(self) -> AsyncWatch:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    @property
    def last_id(self) -> str:
        """The id of the last event delivered: pass it as ``after_id`` to resume after a restart."""
        return self._cursor

    async def aclose(self) -> None:
        self._closed = True
        await self._drop()

    async def _drop(self) -> None:
        r, self._resp, self._lines = self._resp, None, None
        self._parser = SSEParser()
        if r is not None:
            await r.aclose()

    async def _connect(self) -> Result | None:
        c = self._c
        path = self._path
        h = {"Accept": "text/event-stream"}
        if self._cursor:
            h["Last-Event-ID"] = self._cursor
        elif self._from_index:
            path = query(path, from_index=self._from_index)
        call = build_call("GET", path, timeout=c.timeout)
        hd = headers(call, c._token, 0)
        hd.update(h)
        req = c._http.build_request("GET", c.endpoints[self._ep] + path, headers=hd,
                                    timeout=httpx.Timeout(c.timeout, read=self._idle))
        try:
            r = await c._http.send(req, stream=True)
        except _HTTPX_ERRORS as e:
            return c._transport_failure(self._ep, call, e)
        if r.status_code != 200:
            body = await r.aread()
            await r.aclose()
            return classify(r.status_code, r.headers, body)
        if not self._cursor and not self._from_index:
            # The stream starts at the node's applied index: a reconnect resumes from there, not from
            # wherever another node is, so that no change in between is missed.
            try:
                self._from_index = int(r.headers.get("X-Baton-Index") or 0) or None
            except ValueError:
                self._from_index = None
        self._resp = r
        self._lines = r.aiter_lines()
        return None

    async def next(self) -> WatchEvent | None:
        """The next event; None once closed."""
        c = self._c
        n = len(c.endpoints)
        fails = 0
        start = 0.0
        bo = Backoff()
        compacted: BatonError | None = None
        while not self._closed:
            failure: Result | None = None
            if self._lines is None:
                if fails:
                    self.reconnects += 1
                failure = await self._connect()
            if failure is None and self._lines is not None:
                try:
                    line = await self._lines.__anext__()
                except StopAsyncIteration:
                    failure = Result(retry=True, error=Unavailable("watch stream ended"))
                except _HTTPX_ERRORS as e:
                    failure = Result(retry=True, error=Unavailable(f"watch stream broke: {type(e).__name__}: {e}"))
                else:
                    msg = self._parser.feed(line)
                    if msg is None:
                        continue
                    data = "\n".join(msg.data)
                    if msg.event == "error":
                        err = error_from_answer(0, data.encode())
                        failure = Result(error=err, retry=isinstance(err, (Compacted, Unavailable)))
                    elif msg.data:
                        ev = self._event(msg.id, data)
                        if ev is None:
                            continue
                        return ev
                    else:
                        continue
            if self._closed:
                return None
            # A failed connection or stream: the next endpoint, backing off after each round.
            await self._drop()
            assert failure is not None and failure.error is not None
            if isinstance(failure.error, Compacted):
                compacted = failure.error
            elif not failure.retry:
                raise failure.error
            if fails == 0:
                start = _io.monotonic()
            fails += 1
            self._ep = (self._ep + 1) % n
            if fails % n == 0:
                if compacted is not None:
                    raise compacted
                remaining = start + c.max_retry - _io.monotonic()
                if remaining <= 0:
                    raise Unavailable(f"watch: no endpoint streams ({failure.error})")
                await _io.sleep(bo.delay(failure.retry_after, remaining))
        return None

    def _event(self, eid: str, data: str) -> WatchEvent | None:
        obj = json.loads(data)
        pos = event_pos(eid) if eid else None
        if pos is not None:
            if self._pos is not None and pos <= self._pos:
                return None  # delivered before a reconnect
            self._pos, self._cursor = pos, eid
        index = int(obj.get("index") or (pos[0] if pos else 0))
        return WatchEvent(id=eid, index=index, resource=str(obj.get("resource", "")), key=str(obj.get("key", "")),
                          type=str(obj.get("type", "")), value=obj.get("value"))
