"""The sync Client's pools of httpcore connections (the AsyncClient has _h1.py instead)."""

from __future__ import annotations

import threading
from typing import Any

import httpcore
import httpx

_TIMEOUTS_KEPT = 16
_BODY_METHODS = frozenset(("POST", "PUT", "PATCH"))


class Pool:
    """The sync Client's own requests and answers (everything but streams), on httpcore's connection pools:
    the layer under httpx's transport, without httpx.Client's work per request (URL merging, cookies,
    auth and redirect flows, event hooks, its Request and Response models), which was most of the
    client's CPU per call. Configured as httpx's transport would be (the same SSL context, keep-alive
    expiry, HTTP/1.1, no retries); several pools, the least busy taken, as in the client's _Pools (httpcore's
    pool scans every connection it holds at each request's start and end). The AsyncClient's twin is _h1.py."""

    def __init__(self, endpoints: list[str], verify: Any, pools: int = 64, per_pool: int = 4) -> None:
        ctx = httpx.create_ssl_context(verify=verify)
        self._pools = [
            httpcore.ConnectionPool(
                ssl_context=ctx, max_connections=per_pool, max_keepalive_connections=per_pool, keepalive_expiry=5.0,
            )
            for _ in range(pools)
        ]
        self._busy = [0] * pools
        self._mu = threading.Lock()  # held without awaiting: the sync client's threads share it
        self._origins: list[tuple[bytes, bytes, int | None, bytes]] = []
        # Host as httpx sends it (an IPv6 address in brackets; httpcore would write "::1:7001").
        self._hosts: list[bytes] = []
        for ep in endpoints:
            u = httpx.URL(ep)
            self._origins.append((u.raw_scheme, u.raw_host, u.port, u.raw_path.rstrip(b"/")))
            self._hosts.append(u.netloc)
        # The extensions of each timeout seen, at most _TIMEOUTS_KEPT of them: calls add their own time to the
        # client's (a chunk's size, a long poll's wait), so the timeouts seen grow with traffic.
        self._timeouts: dict[tuple[float, float], dict[str, Any]] = {}
        self._closed = False

    def request(
        self, idx: int, method: str, path: str, hdrs: list[tuple[bytes, bytes]], body: bytes | None, timeout: float,
        connect: float,
    ) -> httpcore.Response:
        """timeout bounds each wait of the attempt; connect (the client's own timeout, without the time a call
        adds for the server's wait or a large body) bounds connecting and the TLS handshake."""
        if self._closed:
            # As httpx's client did: httpcore's pools would open new connections that nothing closes.
            raise RuntimeError("the client is closed")
        scheme, host, port, prefix = self._origins[idx]
        ext = self._timeouts.get((timeout, connect))
        if ext is None:
            t = {"connect": min(connect, timeout), "read": timeout, "write": timeout, "pool": timeout}
            ext = {"timeout": t}
            if len(self._timeouts) < _TIMEOUTS_KEPT:
                self._timeouts[(timeout, connect)] = ext
        url = httpcore.URL(scheme=scheme, host=host, port=port, target=prefix + path.encode("ascii"))
        hdrs.insert(0, (b"Host", self._hosts[idx]))
        if body is None and method in _BODY_METHODS:
            body = b""  # Content-Length: 0, as httpx sent (a proxy may refuse a POST of no length: 411)
        with self._mu:
            i = self._busy.index(min(self._busy))  # as _Pools._take
            self._busy[i] += 1
        try:
            pool = self._pools[i]
            return pool.request(method.encode("ascii"), url, headers=hdrs, content=body, extensions=ext)
        finally:
            with self._mu:
                self._busy[i] -= 1

    def close(self) -> None:
        self._closed = True
        for pool in self._pools:
            pool.close()
