"""The AsyncClient's HTTP/1.1 answer parser (baton/_h1.py) on byte sequences batond's net/http does not send
(interim answers, trailers, chunk extensions, answers framed by the connection's end) or that only a broken
peer sends, fed as they could arrive: whole, byte by byte, and split at every place. The exchanges with
the real cluster are in test_transport.py."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import httpcore
import pytest

from baton import _h1


class _Transport(asyncio.Transport):
    """What a _Conn asks of its transport, recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.aborted = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def abort(self) -> None:
        self.aborted = True

    def is_closing(self) -> bool:
        return self.aborted

    def get_write_buffer_size(self) -> int:
        return 0


def _splits(data: bytes) -> list[list[bytes]]:
    """data whole, byte by byte, and cut in two at every place."""
    ways = [[data], [data[i:i + 1] for i in range(len(data))]]
    ways += [[data[:i], data[i:]] for i in range(1, len(data))]
    return ways


async def _answer(pieces: list[bytes], *, eof: bool = False, no_body: bool = False) -> tuple[Any, _h1._Conn]:
    """The answer a _Conn makes of pieces (then the server's end, with eof), or the exception it raises."""
    loop = asyncio.get_running_loop()
    conn = _h1._Conn(loop)
    t = _Transport()
    conn.connection_made(t)
    task = asyncio.ensure_future(conn.exchange(b"GET / HTTP/1.1\r\n\r\n", None, 5, no_body))
    await asyncio.sleep(0)
    for p in pieces:
        conn.data_received(p)
    if eof:
        conn.eof_received()
        conn.connection_lost(None)
    try:
        return await asyncio.wait_for(task, 1), conn
    except (httpcore.RemoteProtocolError, httpcore.ReadError, asyncio.TimeoutError) as e:
        return e, conn


CHUNKED = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Baton-Index: 7\r\n\r\n"
           b"5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\n")


@pytest.mark.anyio
@pytest.mark.parametrize("name,data,status,headers,body,keep", [
    ("length", b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\nX-Baton-Leader: n1\r\n\r\n{}", 201,
     [(b"Content-Length", b"2"), (b"X-Baton-Leader", b"n1")], b"{}", True),
    ("chunked", CHUNKED, 200, [(b"Transfer-Encoding", b"chunked"), (b"X-Baton-Index", b"7")],
     b"hello 0123456789", True),
    ("interim", b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", 204, [], b"", True),
    ("close", b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx", 200,
     [(b"Connection", b"close"), (b"Content-Length", b"1")], b"x", False),
    ("http10", b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", 200, [(b"Content-Length", b"1")], b"x", False),
    ("spaces", b"HTTP/1.1 200 OK\r\nContent-Length:  3 \t\r\n\r\nabc", 200, [(b"Content-Length", b"3")], b"abc",
     True),
])
async def test_answers_however_they_arrive(name: str, data: bytes, status: int, headers: list[tuple[bytes, bytes]],
                                           body: bytes, keep: bool) -> None:
    for pieces in _splits(data):
        r, conn = await _answer(pieces)
        assert isinstance(r, _h1.Response), (name, pieces, r)
        assert (r.status, r.headers, r.content, conn.keep) == (status, headers, body, keep), (name, pieces)
        assert not conn.buf, "bytes of the answer left behind"


@pytest.mark.anyio
async def test_an_answer_framed_by_the_connections_end() -> None:
    data = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it"
    for pieces in _splits(data):
        r, conn = await _answer(pieces, eof=True)
        assert isinstance(r, _h1.Response) and r.content == b"all of it" and not conn.keep, (pieces, r)


@pytest.mark.anyio
async def test_a_head_answer_has_no_body() -> None:
    r, conn = await _answer([b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n"], no_body=True)
    assert isinstance(r, _h1.Response) and r.content == b"" and conn.keep


@pytest.mark.anyio
@pytest.mark.parametrize("data,eof,kind,words", [
    (b"", True, httpcore.RemoteProtocolError, "without sending a response"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", True, httpcore.RemoteProtocolError, "middle"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", True, httpcore.RemoteProtocolError,
     "middle"),
    (b"SSH-2.0-OpenSSH_9\r\n\r\n", False, httpcore.RemoteProtocolError, "status line"),
    (b"HTTP/1.1 2x0 OK\r\n\r\n", False, httpcore.RemoteProtocolError, "status line"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", False, httpcore.RemoteProtocolError,
     "Content-Length"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", False, httpcore.RemoteProtocolError, "Content-Length"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", False, httpcore.RemoteProtocolError,
     "Transfer-Encoding"),
    (b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", False, httpcore.RemoteProtocolError, "malformed"),
    (b"HTTP/1.1 200 OK\r\nX: 1\r\n folded\r\n\r\n", False, httpcore.RemoteProtocolError, "malformed"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", False, httpcore.RemoteProtocolError,
     "chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY", False, httpcore.RemoteProtocolError,
     "line end"),
    (b"HTTP/1.1 200 OK\r\n" + b"X: " + b"a" * (70 * 1024), False, httpcore.RemoteProtocolError, "too large"),
], ids=lambda v: v[:24].decode("latin-1") if isinstance(v, bytes) else None)
async def test_broken_answers_fail_and_close(data: bytes, eof: bool, kind: type[Exception], words: str) -> None:
    """Each is the attempt's failure (which the client retries elsewhere or reports), never an answer, and
    the connection is not kept."""
    r, conn = await _answer([data] if data else [], eof=eof)
    assert isinstance(r, kind) and words in str(r), r
    assert conn.closed


@pytest.mark.anyio
async def test_bytes_past_the_answer_end_the_connections_use() -> None:
    r, conn = await _answer([b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1 200 OK\r\n"])
    assert isinstance(r, _h1.Response) and r.content == b"{}" and not conn.keep


@pytest.mark.anyio
async def test_bytes_on_an_idle_connection_close_it() -> None:
    conn = _h1._Conn(asyncio.get_running_loop())
    t = _Transport()
    conn.connection_made(t)
    conn.data_received(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
    assert conn.closed and t.aborted


@pytest.mark.parametrize("hdrs,target,words", [
    ([(b"Authorization", b"Bearer a\r\nb")], b"/x", "header value"),
    ([(b"X", b"a\x00b")], b"/x", "header value"),
    ([], b"/a b", "target"),
    ([], b"/a\r\nb", "target"),
    ([], "/é".encode(), "target"),
])
def test_requests_http_cannot_carry_are_refused(hdrs: list[tuple[bytes, bytes]], target: bytes, words: str) -> None:
    with pytest.raises(httpcore.LocalProtocolError) as e:
        _h1._head("GET", target, b"h", hdrs, None)
    assert words in str(e.value).lower()


def test_the_request_head() -> None:
    got = _h1._head("POST", b"/v1/x?a=1", b"[::1]:7001", [(b"Accept", b"application/json"), (b"X", b"a\tb")], b"{}")
    assert got == (b"POST /v1/x?a=1 HTTP/1.1\r\nHost: [::1]:7001\r\nAccept: application/json\r\nX: a\tb\r\n"
                   b"Content-Length: 2\r\n\r\n")


@pytest.mark.anyio
@pytest.mark.parametrize("data,no_body", [
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", True),  # an answer to HEAD
    (b"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n", False),
    (b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n", False),
])
async def test_answers_without_a_body_end_at_their_head_whatever_they_say(data: bytes, no_body: bool) -> None:
    r, conn = await _answer([data], no_body=no_body)
    assert isinstance(r, _h1.Response) and r.content == b"" and conn.keep, r


@pytest.mark.anyio
@pytest.mark.parametrize("data,words", [
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n", "chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+5\r\nhello\r\n0\r\n\r\n", "chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n 5\r\nhello\r\n0\r\n\r\n", "chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1_0\r\n", "chunk size"),
    (b"HTTP/1.1 099 Odd\r\nContent-Length: 0\r\n\r\n", "status line"),
    (b"HTTP/1.1 2_0 OK\r\nContent-Length: 0\r\n\r\n", "status line"),
    (b"HTTP/1.1  20 OK\r\nContent-Length: 0\r\n\r\n", "status line"),
    (b"HTTP/1.1x200 OK\r\nContent-Length: 0\r\n\r\n", "status line"),
    (b"HTTP/1.2 200 OK\r\nContent-Length: 0\r\n\r\n", "status line"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\n{}", "Content-Length"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + b"T: " + b"a" * (70 * 1024), "trailers"),
    (b"HTTP/1.1 200 OK\r\nX: " + b"a" * (70 * 1024) + b"\r\n\r\n", "too large"),  # whole head in one read
])
async def test_numbers_and_sizes_are_read_strictly(data: bytes, words: str) -> None:
    r, conn = await _answer([data])
    assert isinstance(r, httpcore.RemoteProtocolError) and words in str(r), r
    assert conn.closed


@pytest.mark.anyio
async def test_an_answer_with_both_framings_is_read_by_its_chunks_and_not_kept() -> None:
    r, conn = await _answer([b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
                             b"2\r\nok\r\n0\r\n\r\n"])
    assert isinstance(r, _h1.Response) and r.content == b"ok" and not conn.keep


@pytest.mark.anyio
async def test_bytes_after_the_answer_before_its_caller_resumes_close_the_connection() -> None:
    """uvloop may hand the protocol several reads before the task that waited for the answer runs: bytes
    past the answer in a later read must not be parsed as the next request's answer."""
    loop = asyncio.get_running_loop()
    conn = _h1._Conn(loop)
    conn.connection_made(_Transport())
    task = asyncio.ensure_future(conn.exchange(b"GET / HTTP/1.1\r\n\r\n", None, 5, False))
    await asyncio.sleep(0)
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Le")  # before the task resumes
    r = await task
    assert r.content == b"{}"
    assert conn.closed and not conn.keep
    with pytest.raises(httpcore.WriteError):
        await conn.exchange(b"GET / HTTP/1.1\r\n\r\n", None, 5, False)


@pytest.mark.anyio
async def test_an_upload_that_keeps_moving_is_not_timed_out() -> None:
    """The timeout is for a stall: a body that leaves slower than timeout per buffer, but steadily, goes."""

    class Draining(_Transport):
        def __init__(self) -> None:
            super().__init__()
            self.left = 1000

        def get_write_buffer_size(self) -> int:
            return self.left

    loop = asyncio.get_running_loop()
    conn = _h1._Conn(loop)
    t = Draining()
    conn.connection_made(t)
    task = asyncio.ensure_future(conn.exchange(b"PUT / HTTP/1.1\r\n\r\n", b"x" * 1000, 0.2, False))
    for _ in range(8):  # 0.8 s of upload, four timeouts long, moving every 0.1 s
        await asyncio.sleep(0.1)
        t.left -= 100
        assert not task.done()
    conn.data_received(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
    assert (await task).status == 201
    # Stalled: the same timeout ends it.
    task = asyncio.ensure_future(conn.exchange(b"PUT / HTTP/1.1\r\n\r\n", b"x" * 1000, 0.2, False))
    with pytest.raises(httpcore.ReadTimeout):
        await asyncio.wait_for(task, 2)


@pytest.mark.anyio
async def test_a_path_that_is_not_ascii_is_refused_before_connecting() -> None:
    pool = _h1.Pool(["http://127.0.0.1:9"], ssl.create_default_context())
    with pytest.raises(httpcore.LocalProtocolError, match="target"):
        await pool.request(0, "GET", "/v1/chunks/sha256:é", [], None, 1, 1)
    assert pool.opened() == 0


@pytest.mark.anyio
async def test_a_connection_closed_after_it_was_handed_to_a_waiter_is_not_used() -> None:
    """A peer that answers, then closes (a restarted node, an idle close racing the reuse): the request
    waiting for the pool's one connection gets a new connection, not a WriteError. The peer is a
    misbehaving socket on 127.0.0.1, as batond never closes a kept-alive connection after its answer."""
    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await r.readuntil(b"\r\n\r\n")
        await r.readexactly(2)
        await asyncio.sleep(0.05)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await w.drain()
        w.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    pool = _h1.Pool([f"http://127.0.0.1:{port}"], ssl.create_default_context(), per_endpoint=1)
    try:
        got = await asyncio.gather(*(pool.request(0, "POST", "/", [], b"{}", 2, 2) for _ in range(3)))
        assert [r.content for r in got] == [b"ok"] * 3
        assert pool.opened() <= 1
    finally:
        await pool.aclose()
        srv.close()
        await srv.wait_closed()


@pytest.mark.anyio
@pytest.mark.parametrize("data,eof", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n", False),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n5\r\nghijk\r\n", False),
    (b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 11, True),
    (b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n", False),
], ids=["length", "chunked", "to-the-end", "digits"])
async def test_an_answer_over_the_body_bound_fails(data: bytes, eof: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken or hostile endpoint cannot make the client buffer without end (the bound is 256 MiB; 10
    bytes here)."""
    monkeypatch.setattr(_h1, "_MAX_BODY", 10)
    r, conn = await _answer([data], eof=eof)
    assert isinstance(r, httpcore.RemoteProtocolError), r
    assert conn.closed


@pytest.mark.anyio
async def test_a_transport_lost_while_the_request_is_written_fails_as_the_connection() -> None:
    """Python 3.10's TLS transport raises AttributeError from get_write_buffer_size once its connection
    is lost (a server that refused the client's certificate): the exchange fails as a lost connection,
    not with that AttributeError."""

    class Lost(_Transport):
        def get_write_buffer_size(self) -> int:
            raise AttributeError("'NoneType' object has no attribute 'get_write_buffer_size'")

    conn = _h1._Conn(asyncio.get_running_loop())
    conn.connection_made(Lost())
    task = asyncio.ensure_future(conn.exchange(b"GET / HTTP/1.1\r\n\r\n", None, 0.2, False))
    await asyncio.sleep(0)
    conn.connection_lost(ConnectionResetError("reset"))
    with pytest.raises(httpcore.ReadError):
        await task
