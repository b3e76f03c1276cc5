"""The AsyncClient's own requests and answers (everything but streams) as HTTP/1.1 on asyncio Protocols.

Why not httpcore: under httpcore (with h11 and a network stream), a fenced update cost the client about
0.46 ms of CPU at C=64, which bounded one process near a quarter of the Go SDK's rate; this module does
the same exchange with a request written in one piece and an answer parsed where it lands
(docs/benchmarks.md, "Python SDK", has the end-to-end figures). Streams (watches, downloads) and the sync
Client stay on httpx and httpcore.

What it does: one request at a time per connection (no pipelining), connections kept alive per endpoint
(at most ``per_endpoint`` open, the newest idle reused first, dropped after ``_KEEPALIVE`` seconds idle),
answers framed by Content-Length, chunked encoding or the connection's end. What it raises is httpcore's
exceptions (ConnectError, ConnectTimeout, ReadTimeout, ReadError, RemoteProtocolError, PoolTimeout,
LocalProtocolError), so the client treats a failure as it did under httpcore. A connection whose exchange
did not end cleanly (a timeout, a cancellation, a broken answer) is closed, never reused."""

from __future__ import annotations

import asyncio
import re
import ssl
import sys
from collections import deque
from collections.abc import Awaitable
from typing import TypeVar

import httpcore
import httpx

T = TypeVar("T")

_KEEPALIVE = 5.0  # seconds an idle connection is kept, as the httpcore pools were configured
_MAX_HEAD = 64 * 1024  # bytes of an answer's status line and headers, and of its trailers
# Bytes of an answer's body: well above the largest the API gives outside streams (a checkpoint read
# whole, its chunked values included, is at most 64 MiB), so that a broken or hostile endpoint cannot
# make the client buffer without end.
_MAX_BODY = 256 * 1024 * 1024
_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) ([1-5][0-9][0-9])(?: |$)")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,15})[ \t]*(?:;.*)?")
# Bytes HTTP forbids in a header value (h11's rule: controls other than tab) and in a request target.
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_BAD_TARGET = re.compile(rb"[\x00-\x20\x7f-\xff]")
_NO_BODY_STATUS = frozenset((204, 304))
_BODY_METHODS = frozenset(("POST", "PUT", "PATCH"))


class Response:
    """A complete answer: status, header pairs as sent, body."""

    __slots__ = ("status", "headers", "content")

    def __init__(self, status: int, headers: list[tuple[bytes, bytes]], content: bytes) -> None:
        self.status = status
        self.headers = headers
        self.content = content


async def _within(aw: Awaitable[T], timeout: float) -> T:
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(timeout):
            return await aw
    return await asyncio.wait_for(aw, timeout)


def _failure(exc: BaseException | None, received: bool) -> BaseException:
    """What a connection that ended before its answer was whole raises: a TLS error as the ssl module's own
    (the client tells a refused client certificate by it), else httpcore's."""
    if isinstance(exc, ssl.SSLError):
        return exc
    if exc is not None:
        return httpcore.ReadError(str(exc) or type(exc).__name__)
    if not received:
        return httpcore.RemoteProtocolError("Server disconnected without sending a response.")
    return httpcore.RemoteProtocolError("the server closed the connection in the middle of its answer")


def _unsent(t: asyncio.Transport) -> int:
    """Bytes the transport still holds to send. Python 3.10's TLS transport raises AttributeError here once
    its connection is lost (its inner transport is None): nothing is left to send then."""
    try:
        return t.get_write_buffer_size()
    except AttributeError:
        return 0


class _Conn(asyncio.Protocol):
    """One connection, and the parse of the answer it is waiting for."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None  # any loop's transport (uvloop's are not subclasses)
        self.buf = bytearray()
        self.waiter: asyncio.Future[Response] | None = None
        self.closed = False  # the peer ended it, it failed, or we gave up on it
        self.error: BaseException | None = None
        self.idle_at = 0.0
        self.last_io = 0.0
        self.keep = True  # may carry another request after this answer
        self._no_body = False  # the request was HEAD
        self._wbuf = 0  # bytes left to write when the timer last looked (an upload's progress)
        self._timer: asyncio.TimerHandle | None = None
        self._reset()

    def _reset(self) -> None:
        self._scanned = 0  # bytes of buf searched for the end of the head
        self._status = 0
        self._headers: list[tuple[bytes, bytes]] = []
        self._length = -1  # Content-Length, -1 chunked or to the end
        self._chunked = False
        self._pos = 0  # where the body (or the next chunk) starts in buf
        self._parts: list[bytes] = []
        self._size = 0  # bytes of the chunks so far

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.waiter is None:
            self._fail(httpcore.RemoteProtocolError("bytes from the server while no request was waiting"))
            return
        self.last_io = self.loop.time()
        try:
            self._advance()
        except httpcore.RemoteProtocolError as e:
            self._fail(e)

    def eof_received(self) -> bool | None:
        self._ended(None)
        return None  # the transport closes: HTTP/1.1 has nothing to send after the server's end

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended(exc)

    def resume_writing(self) -> None:
        self.last_io = self.loop.time()

    def _ended(self, exc: BaseException | None) -> None:
        was_open = not self.closed
        self.closed = True
        if exc is not None and self.error is None:
            self.error = exc
        w = self.waiter
        if w is None or w.done() or not was_open:
            return
        self.waiter = None
        if self._status and self._length == -1 and not self._chunked and exc is None:
            w.set_result(Response(self._status, self._headers, bytes(self.buf[self._pos:])))  # read to the end
            self.keep = False
            return
        w.set_exception(_failure(self.error, bool(self.buf)))

    def _fail(self, exc: BaseException) -> None:
        self.closed = True
        self.keep = False
        w, self.waiter = self.waiter, None
        if w is not None and not w.done():
            w.set_exception(exc)
        self.abort()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # The answer, parsed as its bytes arrive.

    def _advance(self) -> None:
        while True:
            if not self._status:
                if not self._head():
                    return
                continue
            if self._chunked:
                if not self._chunks():
                    return
            elif self._length >= 0:
                end = self._pos + self._length
                if len(self.buf) < end:
                    return
                self._done(bytes(self.buf[self._pos:end]), end)
            elif len(self.buf) - self._pos > _MAX_BODY:  # framed by the connection's end
                raise httpcore.RemoteProtocolError("the answer's body is too large")
            return

    def _head(self) -> bool:
        buf = self.buf
        i = buf.find(b"\r\n\r\n", max(self._scanned - 3, 0))
        if i < 0 or i > _MAX_HEAD:
            self._scanned = len(buf)
            if len(buf) > _MAX_HEAD:
                raise httpcore.RemoteProtocolError("the answer's head is too large")
            return False
        lines = bytes(buf[:i]).split(b"\r\n")
        line = lines[0]
        m = _STATUS_LINE.match(line)
        if m is None:
            raise httpcore.RemoteProtocolError(f"not an HTTP/1.1 status line: {line[:40]!r}")
        status = int(m.group(2))
        keep = m.group(1) == b"1"
        has_length = False
        headers: list[tuple[bytes, bytes]] = []
        length = -1
        chunked = False
        for h in lines[1:]:
            k, sep, v = h.partition(b":")
            if not sep or not k or k[-1:] in (b" ", b"\t") or h[:1] in (b" ", b"\t"):
                raise httpcore.RemoteProtocolError("a malformed header line in the answer")
            v = v.strip(b" \t")
            headers.append((k, v))
            n = k.lower()
            if n == b"content-length":
                if not v.isdigit() or len(v) > 18 or (length >= 0 and int(v) != length):
                    raise httpcore.RemoteProtocolError("a bad Content-Length in the answer")
                length, has_length = int(v), True
                if length > _MAX_BODY:
                    raise httpcore.RemoteProtocolError("the answer's body is too large")
            elif n == b"transfer-encoding":
                if v.lower() != b"chunked":
                    raise httpcore.RemoteProtocolError(f"unsupported Transfer-Encoding {v[:20]!r}")
                chunked = True
            elif n == b"connection":
                keep = keep and b"close" not in v.lower()
        del buf[: i + 4]
        self._scanned = 0
        if 100 <= status < 200:
            return True  # an interim answer (100 Continue): the real one follows
        self._status, self._headers, self.keep, self._pos = status, headers, self.keep and keep, 0
        if self._no_body or status in _NO_BODY_STATUS:
            self._length = 0  # the answer ends at its head, whatever its headers say (RFC 9112, 6.3)
        elif chunked:
            self._chunked, self._length = True, -1
            if has_length:
                self.keep = False  # both framings: answered by the chunks, the connection not trusted after
        else:
            self._length = length
            if length < 0:
                self.keep = False  # framed by the connection's end
        return True

    def _chunks(self) -> bool:
        buf = self.buf
        while True:
            eol = buf.find(b"\r\n", self._pos)
            if eol < 0:
                if len(buf) - self._pos > 1024:
                    raise httpcore.RemoteProtocolError("a chunk size line is too long")
                return False
            m = _CHUNK_SIZE.fullmatch(buf, self._pos, eol)
            if m is None:
                raise httpcore.RemoteProtocolError("a bad chunk size in the answer")
            size = int(m.group(1), 16)
            self._size += size
            if self._size > _MAX_BODY:
                raise httpcore.RemoteProtocolError("the answer's body is too large")
            if size == 0:
                # The last chunk, then trailers (ignored) up to an empty line.
                if buf[eol + 2:eol + 4] == b"\r\n":
                    end = eol + 4
                else:
                    t = buf.find(b"\r\n\r\n", eol + 2)
                    if t < 0 or t - eol > _MAX_HEAD:
                        if len(buf) - eol > _MAX_HEAD:
                            raise httpcore.RemoteProtocolError("the answer's trailers are too large")
                        return False
                    end = t + 4
                self._done(b"".join(self._parts), end)
                return True
            data_end = eol + 2 + size
            if len(buf) < data_end + 2:
                return False
            if buf[data_end:data_end + 2] != b"\r\n":
                raise httpcore.RemoteProtocolError("a chunk without its line end")
            self._parts.append(bytes(buf[eol + 2:data_end]))
            del buf[:data_end + 2]  # each byte held once: in the parts, not in buf as well
            self._pos = 0

    def _done(self, body: bytes, end: int) -> None:
        if len(self.buf) > end:
            self.keep = False  # bytes past the answer: nothing this connection can be trusted with
        del self.buf[:end]
        r = Response(self._status, self._headers, body)
        self._reset()
        # No longer waiting from here: bytes that land before the caller's task resumes close the connection.
        w, self.waiter = self.waiter, None
        if w is not None and not w.done():
            w.set_result(r)

    # One exchange.

    async def exchange(self, data: bytes, body: bytes | None, timeout: float, no_body: bool) -> Response:
        t = self.transport
        if t is None or self.closed or t.is_closing() or self.buf or self._status:
            raise _failure(self.error, False) if self.error is not None else httpcore.WriteError(
                "the connection is closed")
        loop = self.loop
        fut: asyncio.Future[Response] = loop.create_future()
        self.waiter, self._no_body, self.last_io = fut, no_body, loop.time()
        self._timer = loop.call_later(timeout, self._check_timeout, timeout)
        try:
            t.write(data)
            if body:
                t.write(body)
            self._wbuf = _unsent(t)
            return await fut
        finally:
            self.waiter = None
            if self._timer is not None:
                self._timer.cancel()

    def _check_timeout(self, timeout: float) -> None:
        """Fails the exchange when nothing was read or written out for timeout seconds."""
        w = self.waiter
        if w is None or w.done():
            return
        t = self.transport
        if t is not None and not t.is_closing():
            left = _unsent(t)
            if left < self._wbuf:  # the request's bytes are still leaving: the upload moves
                self.last_io = self.loop.time()
            self._wbuf = left
        idle = self.loop.time() - self.last_io
        if idle < timeout:  # something moved since the timer was armed: wait out the rest
            self._timer = self.loop.call_later(timeout - idle, self._check_timeout, timeout)
            return
        self._fail(httpcore.ReadTimeout("timed out"))


class _Endpoint:
    __slots__ = ("host", "port", "tls", "sni", "host_header", "prefix", "idle", "busy", "open", "waiters")

    def __init__(self, url: str) -> None:
        u = httpx.URL(url)  # parsed as the rest of the SDK parses endpoints
        self.tls = u.scheme == "https"
        self.host = u.host
        self.port = u.port or (443 if self.tls else 80)
        self.sni = u.host
        self.host_header = u.netloc  # as httpx sends it: an IPv6 address in brackets
        self.prefix = u.raw_path.rstrip(b"/")
        self.idle: list[_Conn] = []  # kept alive, the newest last
        self.busy: set[_Conn] = set()  # carrying a request
        self.open = 0  # idle, busy and being made
        self.waiters: deque[asyncio.Future[_Conn | None]] = deque()


class Pool:
    """Connections to each endpoint of the client, at most per_endpoint open to one; a request past that
    waits for one to come back (its timeout bounds the wait: PoolTimeout)."""

    def __init__(self, endpoints: list[str], ssl_context: ssl.SSLContext, per_endpoint: int = 128) -> None:
        self._eps = [_Endpoint(e) for e in endpoints]
        self._ctx = ssl_context
        self._limit = per_endpoint
        self._closed = False

    async def request(
        self, idx: int, method: str, path: str, hdrs: list[tuple[bytes, bytes]], body: bytes | None, timeout: float,
        connect: float,
    ) -> Response:
        """timeout bounds each wait of the attempt; connect (the client's own timeout, without the time a call
        adds for the server's wait or a large body) bounds connecting and the TLS handshake."""
        if self._closed:
            raise RuntimeError("the client is closed")
        ep = self._eps[idx]
        if body is None and method in _BODY_METHODS:
            body = b""  # Content-Length: 0, as httpx sent (a proxy may refuse a POST of no length: 411)
        try:
            target = ep.prefix + path.encode("ascii")
        except UnicodeEncodeError:
            raise httpcore.LocalProtocolError("Illegal target characters (not ASCII)") from None
        head = _head(method, target, ep.host_header, hdrs, body)
        conn = await self._acquire(ep, min(connect, timeout), timeout)
        ok = False
        ep.busy.add(conn)
        try:
            if body and len(head) + len(body) <= 65536:  # one write, one TLS record when it fits
                r = await conn.exchange(head + body, None, timeout, method == "HEAD")
            else:
                r = await conn.exchange(head, body, timeout, method == "HEAD")
            ok = True
            return r
        finally:
            ep.busy.discard(conn)
            self._release(ep, conn, ok and conn.keep and not conn.closed)

    async def _acquire(self, ep: _Endpoint, connect: float, timeout: float) -> _Conn:
        loop = asyncio.get_running_loop()
        now = loop.time()
        while ep.idle:
            c = ep.idle.pop()
            if not c.closed and now - c.idle_at < _KEEPALIVE:
                return c
            c.abort()
            ep.open -= 1
        if ep.open >= self._limit:
            fut: asyncio.Future[_Conn | None] = loop.create_future()
            ep.waiters.append(fut)
            try:
                got = await _within(fut, timeout)
            except BaseException as e:
                if fut.done() and not fut.cancelled():  # handed a connection or slot just as we left: passed on
                    c0 = fut.result()
                    self._release(ep, c0, c0 is not None)
                if isinstance(e, (TimeoutError, asyncio.TimeoutError)):
                    raise httpcore.PoolTimeout("no connection came free in time") from None
                raise
            finally:
                if fut in ep.waiters:
                    ep.waiters.remove(fut)
            if got is not None:
                if not got.closed:
                    return got
                got.abort()  # closed by the server after it was handed over: its slot makes a new one
        else:
            ep.open += 1  # the slot of the connection about to be made (a waiter was handed one)
        try:
            return await self._connect(loop, ep, connect)
        except BaseException:
            self._release(ep, None, False)
            raise

    async def _connect(self, loop: asyncio.AbstractEventLoop, ep: _Endpoint, timeout: float) -> _Conn:
        conn = _Conn(loop)
        # Happy eyeballs (IPv6 and IPv4 tried together) where the loop has it: asyncio's own loops; uvloop
        # takes no such argument.
        ctx, sni = (self._ctx, ep.sni) if ep.tls else (None, None)
        if isinstance(loop, asyncio.BaseEventLoop):
            made = loop.create_connection(lambda: conn, ep.host, ep.port, ssl=ctx, server_hostname=sni,
                                          happy_eyeballs_delay=0.25)
        else:
            made = loop.create_connection(lambda: conn, ep.host, ep.port, ssl=ctx, server_hostname=sni)
        try:  # timeout bounds connecting and the TLS handshake together (asyncio's own handshake bound is 60 s)
            await _within(made, timeout)
        except (TimeoutError, asyncio.TimeoutError) as e:
            conn.abort()
            raise httpcore.ConnectTimeout("timed out") from e
        except OSError as e:  # ssl.SSLError is an OSError: kept as the cause, where the client looks for it
            conn.abort()
            raise httpcore.ConnectError(str(e) or type(e).__name__) from e
        except BaseException:
            conn.abort()
            raise
        if conn.closed:
            raise httpcore.ConnectError("the connection closed while it was being made")
        return conn

    def _release(self, ep: _Endpoint, conn: _Conn | None, reuse: bool) -> None:
        """Gives a connection back (reuse) or its slot (closing it); a waiting request gets either first."""
        if conn is not None and not reuse:
            conn.abort()
            conn = None
        while ep.waiters:
            w = ep.waiters.popleft()
            if not w.done():
                w.set_result(conn)  # the connection, or (None) its slot for a new one
                return
        if conn is None:
            ep.open -= 1
            return
        if self._closed:
            conn.abort()
            ep.open -= 1
            return
        now = conn.loop.time()
        conn.idle_at = now
        ep.idle.append(conn)
        while ep.idle and now - ep.idle[0].idle_at >= _KEEPALIVE:  # the oldest idle first
            ep.idle.pop(0).abort()
            ep.open -= 1

    def connections(self) -> list[_Conn]:
        """The idle connections kept alive (tests)."""
        return [c for ep in self._eps for c in ep.idle]

    def in_flight(self) -> list[_Conn]:
        """The connections carrying a request (tests)."""
        return [c for ep in self._eps for c in ep.busy]

    def opened(self) -> int:
        """Connections open or being made (tests)."""
        return sum(ep.open for ep in self._eps)

    async def aclose(self) -> None:
        self._closed = True
        for ep in self._eps:
            for c in ep.idle:
                c.abort()
            ep.open -= len(ep.idle)
            ep.idle.clear()


def _head(method: str, target: bytes, host: bytes, hdrs: list[tuple[bytes, bytes]], body: bytes | None) -> bytes:
    """The request line and headers, checked as h11 checked them (LocalProtocolError: the request cannot be
    sent, which the client reports as the caller's error)."""
    if _BAD_TARGET.search(target):
        raise httpcore.LocalProtocolError("Illegal target characters")
    parts = [method.encode("ascii"), b" ", target, b" HTTP/1.1\r\nHost: ", host, b"\r\n"]
    for k, v in hdrs:
        if _BAD_VALUE.search(v):
            raise httpcore.LocalProtocolError("Illegal header value")
        parts += (k, b": ", v, b"\r\n")
    if body is not None:
        parts += (b"Content-Length: ", b"%d" % len(body), b"\r\n")
    parts.append(b"\r\n")
    return b"".join(parts)

