"""httpcore's network backend on asyncio itself (the AsyncClient's pools use it; the sync client keeps
httpcore's own). httpcore's default async backend goes through anyio, which puts a cancel scope and a
deadline around every read and write and looks the event loop up through sniffio each time; this one
is an asyncio Protocol with a buffer: a read that finds data returns it without a timer, and a wait
for more arms one loop.call_later that fails the wait when it fires.

The exceptions are httpcore's, mapped as its anyio backend maps them (a timeout to ConnectTimeout,
ReadTimeout or WriteTimeout, a failed socket to ConnectError, ReadError or WriteError), so httpcore
and the client see what they saw before."""

from __future__ import annotations

import asyncio
import collections
import ssl
import sys
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

import httpcore
from httpcore._utils import is_socket_readable

T = TypeVar("T")

# Bytes buffered unread before the socket stops being read (resumed by the next read): bounds the memory
# of an answer nobody reads, as a socket's own buffer would.
_READ_HIGH_WATER = 256 * 1024


async def _within(aw: Awaitable[T], timeout: float | None) -> T:
    """aw, failing with TimeoutError after timeout seconds (connecting and the TLS handshake only)."""
    if timeout is None:
        return await aw
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(timeout):
            return await aw
    return await asyncio.wait_for(aw, timeout)


def _failed(kind: type[httpcore.NetworkError], error: BaseException | None) -> BaseException:
    """What a read or write on a failed connection raises: a TLS error as the ssl module's own, as anyio's
    stream raised it (the client tells a refused certificate by it: httpcore's pool drops the cause of
    what it re-raises), else kind."""
    if isinstance(error, ssl.SSLError):
        return error
    return kind(str(error) or type(error).__name__ if error is not None else "the connection is closed")


def _timed_out(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError())


class AsyncioStream(httpcore.AsyncNetworkStream, asyncio.Protocol):
    """One connection: the Protocol its transport feeds, and the stream httpcore reads and writes."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._chunks: collections.deque[bytes] = collections.deque()
        self._buffered = 0
        self._eof = False
        self._lost = False
        self._error: BaseException | None = None  # what ended the connection, when it failed
        self._read_paused = False
        self._write_paused = False
        self._reader: asyncio.Future[None] | None = None  # the read waiting for data, if one is
        self._drainer: asyncio.Future[None] | None = None  # the write waiting for the buffer to drain
        self._sock: Any = None

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._sock = transport.get_extra_info("socket")

    def data_received(self, data: bytes) -> None:
        self._chunks.append(data)
        self._buffered += len(data)
        if self._buffered > _READ_HIGH_WATER and not self._read_paused and self._transport is not None:
            self._read_paused = True
            self._transport.pause_reading()
        self._wake_reader()

    def eof_received(self) -> bool | None:
        self._eof = True
        self._wake_reader()
        return None  # the transport closes itself: HTTP/1.1 has nothing to send after the server's EOF

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._error = exc
        self._wake_reader()
        d = self._drainer
        if d is not None and not d.done():
            d.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        d = self._drainer
        if d is not None and not d.done():
            d.set_result(None)

    def _wake_reader(self) -> None:
        r = self._reader
        if r is not None and not r.done():
            r.set_result(None)

    # httpcore.AsyncNetworkStream

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        while not self._chunks:
            if self._eof or self._lost:
                if self._error is not None:
                    raise _failed(httpcore.ReadError, self._error)
                return b""
            fut = self._loop.create_future()
            timer = None if timeout is None else self._loop.call_later(timeout, _timed_out, fut)
            self._reader = fut
            try:
                await fut
            except TimeoutError as e:
                raise httpcore.ReadTimeout("timed out") from e
            finally:
                self._reader = None
                if timer is not None:
                    timer.cancel()
        data = self._chunks.popleft()
        if len(data) > max_bytes:
            self._chunks.appendleft(data[max_bytes:])
            data = data[:max_bytes]
        self._buffered -= len(data)
        if self._read_paused and self._buffered <= _READ_HIGH_WATER // 4 and self._transport is not None:
            self._read_paused = False
            self._transport.resume_reading()
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        t = self._transport
        if t is None or self._lost or t.is_closing():
            raise _failed(httpcore.WriteError, self._error)
        t.write(buffer)
        if not self._write_paused:
            return
        fut = self._loop.create_future()
        timer = None if timeout is None else self._loop.call_later(timeout, _timed_out, fut)
        self._drainer = fut
        try:
            await fut
        except TimeoutError as e:
            raise httpcore.WriteTimeout("timed out") from e
        finally:
            self._drainer = None
            if timer is not None:
                timer.cancel()
        if self._lost:
            raise _failed(httpcore.WriteError, self._error)

    async def aclose(self) -> None:
        # Closed at once, as anyio's stream ends (its transport aborted): no wait for a TLS close_notify
        # answer or for a write buffer that a hung peer never takes in.
        if self._transport is not None:
            self._transport.abort()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        assert self._transport is not None and not self._chunks
        try:
            t = await _within(
                self._loop.start_tls(self._transport, self, ssl_context, server_hostname=server_hostname),
                timeout,
            )
        except (TimeoutError, asyncio.TimeoutError) as e:
            self._transport.abort()
            raise httpcore.ConnectTimeout("timed out") from e
        except (OSError, EOFError) as e:  # ssl.SSLError is an OSError
            self._transport.abort()
            raise httpcore.ConnectError(str(e)) from e
        except BaseException:
            self._transport.abort()
            raise
        if t is None:  # the server closed the connection during the handshake
            self._transport.abort()
            raise httpcore.ConnectError("the connection closed during the TLS handshake")
        assert isinstance(t, asyncio.Transport)
        self._transport = t
        return self

    def get_extra_info(self, info: str) -> Any:
        t = self._transport
        if info == "is_readable":
            # An idle connection with something to read (most often the server's EOF) is one to drop.
            if self._eof or self._lost or self._chunks:
                return True
            return self._sock is not None and is_socket_readable(self._sock)
        if t is None:
            return None
        if info == "ssl_object":
            return t.get_extra_info("ssl_object")
        if info == "client_addr":
            return t.get_extra_info("sockname")
        if info == "server_addr":
            return t.get_extra_info("peername")
        if info == "socket":
            return self._sock
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """Opens AsyncioStreams (TCP_NODELAY set, as asyncio sets it on every TCP connection)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        stream = AsyncioStream(loop)
        local = (local_address, 0) if local_address else None
        try:
            await _within(
                loop.create_connection(lambda: stream, host, port, local_addr=local, happy_eyeballs_delay=0.25),
                timeout,
            )
        except (TimeoutError, asyncio.TimeoutError) as e:
            raise httpcore.ConnectTimeout("timed out") from e
        except OSError as e:
            raise httpcore.ConnectError(str(e)) from e
        _set_options(stream, socket_options)
        return stream

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        stream = AsyncioStream(loop)
        try:
            await _within(loop.create_unix_connection(lambda: stream, path), timeout)
        except (TimeoutError, asyncio.TimeoutError) as e:
            raise httpcore.ConnectTimeout("timed out") from e
        except OSError as e:
            raise httpcore.ConnectError(str(e)) from e
        _set_options(stream, socket_options)
        return stream

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _set_options(stream: AsyncioStream, options: Iterable[Any] | None) -> None:
    sock = stream.get_extra_info("socket")
    for opt in options or ():
        sock.setsockopt(*opt)

