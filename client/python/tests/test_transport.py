"""The SDK's transports against the real cluster: the sync Client's httpcore pools (baton._httpcore_pool) and
the AsyncClient's HTTP/1.1 on asyncio Protocols (baton._h1): timeouts, failover and leader hints, TLS client
certificates, connections after errors, cancellation, closing, and the proxy variables of the environment."""

from __future__ import annotations

import asyncio
import random
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpcore
import pytest
from conftest import BATOND, Cluster, free_ports, uid, wait_for

import baton
from baton import _h1
from baton._core import digest


@pytest.fixture(params=["asyncio", "uvloop"])
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    """The async tests of this file run on asyncio's own loop and on uvloop's (which uvicorn[standard] and
    other servers install): _h1 must work on both."""
    return ("asyncio", {"use_uvloop": True}) if request.param == "uvloop" else "asyncio"


def _sync(cluster: Cluster, tenant: str, eps: list[str] | None = None, **kw: Any) -> baton.Client:
    return baton.Client(eps or cluster.endpoints, token=cluster.token, ca_file=cluster.ca, tenant=tenant, **kw)


def _async(cluster: Cluster, tenant: str, eps: list[str] | None = None, **kw: Any) -> baton.AsyncClient:
    return baton.AsyncClient(eps or cluster.endpoints, token=cluster.token, ca_file=cluster.ca, tenant=tenant, **kw)


def _claim_body(wait_ms: int) -> dict[str, Any]:
    return {"owner": "w", "lease_ms": 5000, "wait_ms": wait_ms}


def _connections(c: baton.Client | baton.AsyncClient) -> list[Any]:
    """The connections the client keeps: httpcore's (sync) or the idle ones of _h1's pool (async)."""
    assert c._direct is not None
    if isinstance(c._direct, _h1.Pool):
        return list(c._direct.connections())
    return [conn for pool in c._direct._pools for conn in pool.connections]


def test_read_timeout_is_honoured(cluster: Cluster, tenant: str) -> None:
    """A long poll that outlasts the client's timeout ends in a read timeout, not in the server's answer
    after its wait (request() adds no time of its own to the timeout, as claim() does)."""
    path = f"/v1/tenants/{tenant}/queues/{uid('q')}/claim"
    with _sync(cluster, tenant, [cluster.endpoints[cluster.leader()]], timeout=0.3, max_retry=0) as c:
        with pytest.raises(baton.Unavailable) as e:
            c.request("POST", path, _claim_body(3000))
        assert "ReadTimeout" in str(e.value)
        # The timed-out connection is not used again: the next answer is this call's own.
        assert c.create_task(q := uid("q"), task_id="after").task_id == "after"
        assert c.get_task("after").queue == q


def test_failover_past_a_dead_endpoint_and_to_the_leader(cluster: Cluster, tenant: str) -> None:
    """A refused connection moves the call on to the next endpoint; the leader a node names in
    X-Baton-Leader becomes the endpoint tried first."""
    leader = cluster.leader()
    dead = f"127.0.0.1:{free_ports(1)[0]}"
    followers = [e for i, e in enumerate(cluster.endpoints) if i != leader]
    eps = [dead, *followers, cluster.endpoints[leader]]
    with _sync(cluster, tenant, eps, max_retry=10) as c:
        t = c.create_task(uid("q"), task_id=uid("t"))
        assert c.get_task(t.task_id).task_id == t.task_id
        assert c._fo.preferred == len(eps) - 1, "the leader's hint was not followed"


def test_kept_alive_connections_to_a_restarted_node(cluster: Cluster, tenant: str) -> None:
    """Connections kept alive to a node that was restarted are dead; the calls after the restart go on
    new ones instead of failing."""
    leader = cluster.leader()
    i = (leader + 1) % len(cluster.endpoints)
    with _sync(cluster, tenant, [cluster.endpoints[i]], max_retry=20) as c:
        assert c.cluster_status().state in ("Leader", "Follower")
        before = _connections(c)
        assert before, "no connection was kept alive"
        cluster.restart(i)
        cluster.wait_ready()
        assert c.cluster_status().state in ("Leader", "Follower")
        assert c.create_task(uid("q"), task_id=uid("t")).status


def test_close_closes_the_pools_and_refuses_calls(cluster: Cluster, tenant: str) -> None:
    c = _sync(cluster, tenant)
    c.cluster_status()
    assert _connections(c)
    c.close()
    assert _connections(c) == []
    with pytest.raises(RuntimeError, match="closed"):
        c.cluster_status()
    assert _connections(c) == [], "a call after close opened a connection"


@pytest.mark.anyio
async def test_async_close_closes_the_pools_and_refuses_calls(cluster: Cluster, tenant: str) -> None:
    c = _async(cluster, tenant)
    await asyncio.gather(*(c.cluster_status() for _ in range(8)))
    assert _connections(c)
    await c.aclose()
    assert _connections(c) == []
    with pytest.raises(RuntimeError, match="closed"):
        await c.cluster_status()
    assert _connections(c) == []


@pytest.mark.anyio
async def test_cancelled_requests_leave_no_connection_behind(cluster: Cluster, tenant: str) -> None:
    """Long polls cancelled under asyncio, once sent, close their connections (one given back to the pool
    mid-answer would hand the next request the poll's late answer): afterwards no request is in flight,
    every connection left is idle, and the client's next calls get their own answers."""
    q = uid("q")
    async with _async(cluster, tenant, max_retry=5) as c:
        assert c._direct is not None
        polls = [asyncio.create_task(c.claim(q, owner=f"ghost-{i}", lease=60, wait=30)) for i in range(12)]

        assert isinstance(c._direct, _h1.Pool)
        pool = c._direct

        def sent() -> int:  # connections whose request went out and wait for the answer
            return sum(1 for conn in pool.in_flight() if conn.waiter is not None)

        async def all_sent() -> None:
            while sent() < len(polls):
                await asyncio.sleep(0.02)

        await asyncio.wait_for(all_sent(), 20)
        opened = pool.opened()
        for p in polls:
            p.cancel()
        for p in polls:
            with pytest.raises(asyncio.CancelledError):
                await p
        assert pool.in_flight() == [] and sent() == 0
        assert pool.opened() == opened - len(polls), "a cancelled request's connection was kept"
        assert all(not conn.closed for conn in _connections(c))
        t = await c.create_task(uid("q2"), task_id=uid("t"))
        assert (await c.get_task(t.task_id)).task_id == t.task_id
        assert await asyncio.gather(*(c.get_task(t.task_id) for _ in range(16)))


@pytest.mark.anyio
async def test_async_read_timeout_is_honoured(cluster: Cluster, tenant: str) -> None:
    path = f"/v1/tenants/{tenant}/queues/{uid('q')}/claim"
    async with _async(cluster, tenant, [cluster.endpoints[cluster.leader()]], timeout=0.3, max_retry=0) as c:
        with pytest.raises(baton.Unavailable) as e:
            await c.request("POST", path, _claim_body(3000))
        assert "ReadTimeout" in str(e.value)


def test_timeouts_kept_are_bounded(cluster: Cluster, tenant: str) -> None:
    """Each call's timeout is the client's plus its own time (a long poll's wait, a chunk's size): the
    transport keeps a bounded number of them, however many different ones the calls bring."""
    with _sync(cluster, tenant) as c:
        q = uid("q")
        for i in range(40):
            assert c.claim(q, owner="w", lease=5, wait=0.001 * (i + 1)) is None
        assert c._direct is not None and 0 < len(c._direct._timeouts) <= 16


def test_proxy_variables_are_not_read(cluster: Cluster, tenant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK talks to the endpoints directly (httpx's trust_env=False, as before its requests moved to
    httpcore): HTTPS_PROXY and the like naming a proxy that is not there change nothing (docs/python.md)."""
    dead = f"http://127.0.0.1:{free_ports(1)[0]}"
    for v in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"):
        monkeypatch.setenv(v, dead)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with _sync(cluster, tenant, max_retry=2) as c:
        start = c.cluster_status().applied_index
        c.kv_put("proxy", "k", 1)
        with c.watch(from_index=start, resources=["kv"], idle_timeout=5) as w:
            assert next(iter(w)).key == "proxy/k"


@pytest.fixture(scope="module")
def client_ca_node() -> Iterator[Cluster]:
    """One node that asks clients for a certificate its CA signed (--client-ca-file)."""
    base = Path(tempfile.mkdtemp(prefix="baton-py-mtls-"))
    c = Cluster(base, nodes=1, extra_args=(f"--client-ca-file={base / 'tls' / 'ca.pem'}",))
    c._ssl.load_cert_chain(c.tls / "n1.pem", c.tls / "n1-key.pem")  # the fixture's own readiness probes
    try:
        c.start(0)
        c.wait_ready()
        c.leader()
        yield c
    finally:
        c.stop_all()
        shutil.rmtree(base, ignore_errors=True)


def test_client_certificates(client_ca_node: Cluster, tmp_path: Path) -> None:
    """The client certificate is presented: one the node's CA signed is accepted, one of another CA is
    refused (a final error, not retried for the whole budget)."""
    node = client_ca_node
    subprocess.run([str(BATOND), "certs", "--out", str(tmp_path / "other"), "--nodes", "stranger"],
                   check=True, capture_output=True)
    own = (str(node.tls / "n1.pem"), str(node.tls / "n1-key.pem"))
    stranger = (str(tmp_path / "other" / "stranger.pem"), str(tmp_path / "other" / "stranger-key.pem"))
    with baton.Client(node.endpoints, token=node.token, ca_file=node.ca, cert_file=own[0], key_file=own[1],
                      max_retry=5) as c:
        assert wait_for(lambda: c.cluster_status().state == "Leader", what="the node to lead")
        name = uid("t")
        c.create_tenant(name)
        assert name in c.list_tenants()
    with baton.Client(node.endpoints, token=node.token, ca_file=node.ca, cert_file=stranger[0],
                      key_file=stranger[1], max_retry=30) as c, pytest.raises(baton.BatonError) as e:
        c.list_tenants()
    assert e.value.code == "tls", e.value


@pytest.mark.anyio
async def test_async_client_certificates(client_ca_node: Cluster, tmp_path: Path) -> None:
    node = client_ca_node
    subprocess.run([str(BATOND), "certs", "--out", str(tmp_path / "other"), "--nodes", "stranger"],
                   check=True, capture_output=True)
    async with baton.AsyncClient(node.endpoints, token=node.token, ca_file=node.ca,
                                 cert_file=str(node.tls / "n1.pem"), key_file=str(node.tls / "n1-key.pem"),
                                 max_retry=5) as c:
        assert (await c.cluster_status()).members
    async with baton.AsyncClient(node.endpoints, token=node.token, ca_file=node.ca,
                                 cert_file=str(tmp_path / "other" / "stranger.pem"),
                                 key_file=str(tmp_path / "other" / "stranger-key.pem"), max_retry=30) as c:
        with pytest.raises(baton.BatonError) as e:
            await c.list_tenants()
    assert e.value.code == "tls", e.value


def test_host_header_as_httpx_sends_it(cluster: Cluster, tenant: str) -> None:
    """httpcore writes Host from the bare host ("::1:7001" for an IPv6 address); the SDK sends it as httpx
    did, the URL's netloc (brackets kept), once per request."""
    from baton._httpcore_pool import Pool

    d = Pool(["https://[::1]:7001", "http://h.example", "https://127.0.0.1:7001/base"], True, pools=1)
    assert d._hosts == [b"[::1]:7001", b"h.example", b"127.0.0.1:7001"]
    d.close()
    with _sync(cluster, tenant) as c:
        seen = _spy(c)
        c.cluster_status()
        c.create_task(uid("q"), task_id=uid("t"))
    assert len(seen) >= 2
    for _, _, hdrs in seen:
        hosts = [v for k, v in hdrs if k.lower() == b"host"]
        assert hosts in ([h.encode()] for h in cluster.endpoints), hosts


def _spy(c: baton.Client) -> list[tuple[bytes, bytes, list[tuple[bytes, bytes]]]]:
    """Records (method, target, headers) of every request the client's pools send."""
    seen: list[tuple[bytes, bytes, list[tuple[bytes, bytes]]]] = []
    assert c._direct is not None
    for pool in c._direct._pools:
        def spy(req: Any, inner: Any = pool.handle_request) -> Any:
            seen.append((req.method, req.url.target, list(req.headers)))
            return inner(req)
        pool.handle_request = spy  # type: ignore[method-assign]
    return seen


def test_a_claim_whose_answer_was_cut_is_sent_again(cluster: Cluster, tenant: str) -> None:
    """A queue claim answered 200 without its body (cut on the way) may have claimed a task: the SDK sends
    it again from the same session place and returns the claim's answer, not None (before, it said "no
    task" while the task stayed leased to the caller, its attempt counted)."""
    with _sync(cluster, tenant) as c:
        q = uid("q")
        t = c.create_task(q, task_id=uid("t"))
        assert c._direct is not None
        cut: list[bytes] = []
        for pool in c._direct._pools:
            def handle(req: Any, inner: Any = pool.handle_request) -> Any:
                resp = inner(req)
                if req.url.target.endswith(b"/claim") and not cut:
                    resp.read()
                    resp.close()
                    cut.append(req.url.target)
                    return httpcore.Response(200, headers=[(b"Content-Length", b"0")], content=b"")
                return resp
            pool.handle_request = handle  # type: ignore[method-assign]
        got = c.claim(q, owner="w", lease=30)
        assert cut, "no claim went through the pools"
        assert got is not None and got.task_id == t.task_id and got.attempt == 1, got


def test_a_write_in_doubt_is_not_reported_as_nothing_done(cluster: Cluster, tenant: str) -> None:
    """A write whose first attempt was applied but got no answer, and whose later attempts reach no node
    until the budget runs out, fails with an error that is an OutcomeUnknown as well as an Unavailable:
    "nothing was done" (Unavailable alone, before) would invite a new call that applies it again."""
    with _sync(cluster, tenant, max_retry=1) as c, _sync(cluster, tenant) as reader:
        assert c._direct is not None
        sent: list[bytes] = []
        for pool in c._direct._pools:
            def handle(req: Any, inner: Any = pool.handle_request) -> Any:
                if req.method != b"PUT":
                    return inner(req)
                sent.append(req.url.target)
                if len(sent) == 1:
                    resp = inner(req)  # applied; its answer is lost on the way
                    resp.read()
                    resp.close()
                    raise httpcore.ReadTimeout("the answer never came")
                raise httpcore.ConnectError("no node accepts a connection now")
            pool.handle_request = handle  # type: ignore[method-assign]
        key = uid("k")
        with pytest.raises(baton.Unavailable) as e:
            c.kv_put("doubt", key, 1)
        assert isinstance(e.value, baton.OutcomeUnknown), e.value
        assert "may have been applied" in str(e.value) and len(sent) > 1
        assert reader.kv_get("doubt", key).value == 1
        # A write none of whose attempts went anywhere stays a plain Unavailable.
        sent.clear()
        sent.append(b"already one")
        with pytest.raises(baton.Unavailable) as e:
            c.kv_put("doubt", uid("k"), 1)
        assert not isinstance(e.value, baton.OutcomeUnknown), e.value


# Writes sent without a session place or a key: the session's own opening, and routes that change nothing
# or are idempotent by their content (docs/api.md, "Idempotency-Key").
_UNKEYED = re.compile(rb"^/v1/sessions$|/chunks/missing$|/chunks/sha256:[0-9a-f]{64}$|/store/(get|search|namespaces)$")


@pytest.mark.parametrize("sessions", [True, False])
def test_every_write_can_be_retried_safely(cluster: Cluster, tenant: str, sessions: bool) -> None:
    """Failover sends a write again after a connection error or a 503: every write on the wire carries a
    place in the client session (X-Baton-Session, -Seq, -Ack) or, with sessions off, an Idempotency-Key."""
    with _sync(cluster, tenant, sessions=sessions) as c:
        seen = _spy(c)
        q = uid("q")
        t = c.create_task(q, task_id=uid("t"))
        got = c.claim(q, owner="w", lease=30)
        assert got is not None and got.task_id == t.task_id
        c.renew_task(t.task_id, fencing_token=got.fencing_token, lease=30)
        c.update_task(t.task_id, fencing_token=got.fencing_token, result={"n": 1})
        c.kv_put("ns", "k", 1)
        c.kv_delete("ns", "k")
        c.upload_artifact(uid("a"), b"x" * 5000)
        c.put_checkpoint(uid("th"), "c1", {"s": 1})
        c.begin_op(uid("op"), kind="k", params_digest=baton.params_digest(1))
        c.delete_task(t.task_id)
    for m, tgt, h in seen:  # a bodyless POST too says it has no body, as httpx's requests did
        if m in (b"POST", b"PUT", b"PATCH"):
            assert [k for k, _ in h if k.lower() == b"content-length"] == [b"Content-Length"], (m, tgt)
    writes = [(m, tgt, dict((k.lower(), v) for k, v in h)) for m, tgt, h in seen
              if m in (b"POST", b"PUT", b"DELETE", b"PATCH") and not _UNKEYED.search(tgt.split(b"?")[0])]
    assert len(writes) >= 10, [w[:2] for w in writes]
    for m, tgt, h in writes:
        if sessions:
            assert b"idempotency-key" in h or all(
                k in h for k in (b"x-baton-session", b"x-baton-seq", b"x-baton-ack")), (m, tgt)
        else:
            assert b"idempotency-key" in h and b"x-baton-session" not in h, (m, tgt)


@pytest.mark.anyio
async def test_request_encodes_its_path_as_httpx_did(cluster: Cluster, tenant: str) -> None:
    """request() takes a path as httpx took a URL: spaces and non-ASCII characters percent-encoded, so the
    node gets the path and answers it (here: a key it refuses, named as it was sent)."""
    async with _async(cluster, tenant, max_retry=2) as c:
        for key in ("a b", "é", "a%20b"):
            with pytest.raises(baton.InvalidArgument) as e:
                await c.request("GET", f"/v1/tenants/{tenant}/kv/ns/{key}")
            assert ("a b" if key == "a%20b" else key) in str(e.value), e.value
        await c.kv_put("ns", "k.1", 7)
        assert (await c.request("GET", f"/v1/tenants/{tenant}/kv/ns/k.1"))["value"] == 7


def test_a_request_http_cannot_carry_is_refused_at_once(cluster: Cluster, tenant: str) -> None:
    """A header value HTTP forbids (a line break in a token) is the caller's error, final, not a connection
    error retried for the whole budget; the message does not repeat the token."""
    with baton.Client(cluster.endpoints, token="bad\r\ntoken", ca_file=cluster.ca, tenant=tenant,
                      max_retry=30) as c:
        seen = _spy(c)
        with pytest.raises(baton.InvalidArgument) as e:
            c.cluster_status()
    assert "header value" in str(e.value) and "bad" not in str(e.value) and len(seen) == 1, (e.value, len(seen))


def test_ssl_cert_file_is_trusted_without_ca_file(cluster: Cluster, tenant: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ca_file the client trusts certifi's roots, or SSL_CERT_FILE's when it is set (httpx's SSL
    context, the one environment variable of httpx's the SDK reads; docs/python.md)."""
    eps = ["https://" + e for e in cluster.endpoints]
    with baton.Client(eps, token=cluster.token, tenant=tenant, max_retry=1) as c, \
            pytest.raises(baton.BatonError) as e:
        c.cluster_status()
    assert e.value.code == "tls"
    monkeypatch.setenv("SSL_CERT_FILE", cluster.ca)
    with baton.Client(eps, token=cluster.token, tenant=tenant, max_retry=5) as c:
        assert c.cluster_status().members


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """host:port of a listener that accepts connections and never says a word (a node hung before TLS)."""
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    try:
        yield f"127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        th.join(5)
        for s in held:
            s.close()
        srv.close()


def test_a_long_poll_does_not_stretch_the_connect_timeout(cluster: Cluster, tenant: str, silent_endpoint: str) -> None:
    """A claim's wait lengthens the wait for its answer, not the TLS handshake: with a hung endpoint first,
    a claim that may wait 30 s gives that endpoint the client's timeout (0.5 s), then goes on to the leader,
    well within a retry budget of 8 s (the wait added to the handshake's timeout spent it all on the first
    endpoint)."""
    q = uid("q")
    eps = [silent_endpoint, cluster.endpoints[cluster.leader()]]
    with _sync(cluster, tenant, eps, timeout=0.5, max_retry=8) as c:
        c.create_task(q, task_id="t1")  # a write: the same hung endpoint first, the client's timeout
        c._fo.preferred = 0
        t = c.claim(q, owner="w", lease=30, wait=30)
        assert t is not None and t.task_id == "t1"


# The AsyncClient's own HTTP/1.1 (baton/_h1.py): each behaviour a connection pool owes its client, against
# the real (TLS) cluster.


@pytest.mark.anyio
async def test_async_connections_are_kept_alive_and_closed(cluster: Cluster, tenant: str) -> None:
    """The AsyncClient's connections are TLS, reused call after call, and closed with the client; the sync
    client keeps httpcore's pools."""
    ep = cluster.endpoints[0]
    c = _async(cluster, tenant, [ep])
    for _ in range(20):  # one after the other: one connection, kept alive and reused
        assert (await c.cluster_status()).members
    conns = _connections(c)
    assert len(conns) == 1 and isinstance(conns[0], _h1._Conn), conns
    t = conns[0].transport
    assert t.get_extra_info("ssl_object").version().startswith("TLS")
    assert t.get_extra_info("peername") == ("127.0.0.1", int(ep.rsplit(":", 1)[1]))
    assert c._direct is not None and c._direct.opened() == 1
    await c.aclose()
    assert t.is_closing() and _connections(c) == []
    with _sync(cluster, tenant, [ep]) as sc:
        sc.cluster_status()
        assert _connections(sc) and not isinstance(sc._direct, _h1.Pool)


@pytest.mark.anyio
async def test_async_connection_the_server_closed_is_dropped(cluster: Cluster, tenant: str) -> None:
    """An idle connection whose node went away is seen closed (its EOF), so the next call opens a new one to
    the restarted node instead of failing on the dead one."""
    leader = cluster.leader()
    i = (leader + 1) % len(cluster.endpoints)
    async with _async(cluster, tenant, [cluster.endpoints[i]], max_retry=20) as c:
        assert (await c.cluster_status()).members
        (old,) = _connections(c)
        cluster.restart(i)
        deadline = asyncio.get_running_loop().time() + 20
        while not old.closed:  # the loop must run to see the EOF
            assert asyncio.get_running_loop().time() < deadline, "the closed connection was not seen closed"
            await asyncio.sleep(0.02)
        cluster.wait_ready()
        assert (await c.cluster_status()).members
        assert old not in _connections(c) and _connections(c)
        assert (await c.create_task(uid("q"), task_id=uid("t"))).status


@pytest.mark.anyio
async def test_async_read_timeout_closes_the_connection(cluster: Cluster, tenant: str) -> None:
    """A read timeout (a long poll past the client's timeout) fails the attempt and drops its connection;
    the next call gets its own answer on another."""
    path = f"/v1/tenants/{tenant}/queues/{uid('q')}/claim"
    async with _async(cluster, tenant, [cluster.endpoints[cluster.leader()]], timeout=0.3, max_retry=0) as c:
        with pytest.raises(baton.Unavailable) as e:
            await c.request("POST", path, _claim_body(3000))
        assert "ReadTimeout" in str(e.value)
        assert _connections(c) == [] and c._direct is not None and c._direct.opened() == 0
        t = await c.create_task(q := uid("q"), task_id="after")
        assert t.task_id == "after" and (await c.get_task("after")).queue == q


@pytest.mark.anyio
async def test_async_connect_timeout_on_a_hung_endpoint(cluster: Cluster, tenant: str, silent_endpoint: str) -> None:
    """A node that accepts and never answers the TLS handshake costs the client's timeout (ConnectTimeout),
    then the call goes on to the next endpoint; a claim's wait does not lengthen the handshake's timeout."""
    q = uid("q")
    eps = [silent_endpoint, cluster.endpoints[cluster.leader()]]
    async with _async(cluster, tenant, eps, timeout=0.5, max_retry=8) as c:
        await c.create_task(q, task_id="t1")
        c._fo.preferred = 0
        t = await c.claim(q, owner="w", lease=30, wait=30)
        assert t is not None and t.task_id == "t1"
    async with _async(cluster, tenant, [silent_endpoint], timeout=0.3, max_retry=0) as c:
        with pytest.raises(baton.Unavailable, match="ConnectTimeout"):
            await c.cluster_status()


@pytest.mark.anyio
async def test_async_pool_timeouts_and_refusals(silent_endpoint: str) -> None:
    """Against a peer that takes the connection and never answers: a request ends in ReadTimeout after its
    timeout, and so does one whose body the peer never takes in (far more than both sockets' buffers); a
    refused connection is ConnectError. Each failed connection is closed, none kept."""
    pool = _h1.Pool(["http://" + silent_endpoint], _h1_ctx())
    loop = asyncio.get_running_loop()
    try:
        t0 = loop.time()
        with pytest.raises(httpcore.ReadTimeout):
            await pool.request(0, "GET", "/x", [], None, 0.2, 5)
        assert 0.2 <= loop.time() - t0 < 5
        with pytest.raises(httpcore.ReadTimeout):
            await pool.request(0, "PUT", "/x", [], b"x" * (64 << 20), 0.3, 5)
        assert pool.opened() == 0 and pool.connections() == []
    finally:
        await pool.aclose()
    refused = _h1.Pool([f"http://127.0.0.1:{free_ports(1)[0]}"], _h1_ctx())
    with pytest.raises(httpcore.ConnectError):
        await refused.request(0, "GET", "/x", [], None, 1, 1)
    assert refused.opened() == 0


def _h1_ctx() -> Any:
    import ssl

    return ssl.create_default_context()


@pytest.mark.anyio
async def test_async_pool_waits_for_a_connection_past_its_limit(cluster: Cluster, tenant: str) -> None:
    """With at most two connections to an endpoint, 24 concurrent calls all get their answers, never more
    than two connections open; a call that cannot get one within its timeout is PoolTimeout, and a cancelled
    waiter gives up its turn without losing a slot."""
    async with _async(cluster, tenant, [cluster.endpoints[cluster.leader()]]) as c:
        assert c._direct is not None
        await c._direct.aclose()
        pool = c._direct = _h1.Pool(c.endpoints, _ssl_of(cluster), per_endpoint=2)
        most = 0

        async def one(i: int) -> None:
            nonlocal most
            await c.kv_put("ns", f"k{i}", i)
            most = max(most, pool.opened())
            assert (await c.kv_get("ns", f"k{i}")).value == i

        await asyncio.gather(*(one(i) for i in range(24)))
        assert 1 <= most <= 2 and pool.opened() <= 2
        # Both connections held by long polls: a third call waits, and past its timeout is PoolTimeout.
        q = uid("q")
        polls = [asyncio.create_task(c.claim(q, owner="w", lease=5, wait=30)) for _ in range(2)]
        while len(pool.in_flight()) < 2:
            await asyncio.sleep(0.01)
        path = f"/v1/tenants/{tenant}/kv/ns/k1"
        with pytest.raises(httpcore.PoolTimeout):
            await pool.request(0, "GET", path, [(b"Authorization", b"Bearer " + cluster.token.encode())], None, 0.2, 5)
        waiter = asyncio.create_task(pool.request(0, "GET", path, [], None, 30, 5))
        await asyncio.sleep(0.05)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        async with _async(cluster, tenant) as other:  # this client's two connections are the polls'
            await other.create_task(q, task_id="wake1")  # one poll gets it and gives its connection back
        done, _ = await asyncio.wait(polls, timeout=10, return_when=asyncio.FIRST_COMPLETED)
        assert done
        assert (await c.kv_get("ns", "k3")).value == 3  # the freed connection serves the next call
        for p in polls:
            p.cancel()
        await asyncio.gather(*polls, return_exceptions=True)
        assert pool.opened() <= 2


def _ssl_of(cluster: Cluster) -> Any:
    import ssl

    return ssl.create_default_context(cafile=cluster.ca)


@pytest.mark.anyio
async def test_async_request_http_cannot_carry_is_refused_at_once(cluster: Cluster, tenant: str) -> None:
    """As the sync client: a line break in the token is the caller's error, final, sent nowhere, and the
    message does not repeat the token."""
    async with baton.AsyncClient(cluster.endpoints, token="bad\r\ntoken", ca_file=cluster.ca, tenant=tenant,
                                 max_retry=30) as c:
        with pytest.raises(baton.InvalidArgument) as e:
            await c.cluster_status()
        assert c._direct is not None and c._direct.opened() == 0
    assert "header value" in str(e.value) and "bad" not in str(e.value), e.value


@pytest.mark.anyio
async def test_async_large_bodies_both_ways(cluster: Cluster, tenant: str) -> None:
    """A 4 MiB chunk up and down over TLS: the writes wait for the socket to drain, the reads past the
    stream's buffer bound pause and resume the socket, and the bytes come back whole."""
    data = random.randbytes(4 << 20)
    async with _async(cluster, tenant) as c:
        assert await c.put_chunk(data)
        got = await asyncio.gather(*(c.get_chunk(digest(data)) for _ in range(3)))
        assert all(g == data for g in got)


@pytest.mark.anyio
async def test_async_untrusted_server_certificate(cluster: Cluster, tenant: str, tmp_path: Path) -> None:
    """A node whose certificate the CA file did not sign is a TLS error, final (not retried as the network)."""
    subprocess.run([str(BATOND), "certs", "--out", str(tmp_path / "other"), "--nodes", "stranger"],
                   check=True, capture_output=True)
    async with baton.AsyncClient(cluster.endpoints, token=cluster.token, ca_file=str(tmp_path / "other" / "ca.pem"),
                                 tenant=tenant, max_retry=30) as c:
        with pytest.raises(baton.BatonError) as e:
            await c.cluster_status()
    assert e.value.code == "tls", e.value
