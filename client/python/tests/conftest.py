"""A real three-node batond cluster with TLS, built from this tree (bin/batond), for the whole session.

Nodes can be SIGKILLed and restarted (``cluster.kill(i)``, ``cluster.restart(i)``). Every process is
killed at teardown; the node logs are printed when a test failed.
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import baton

ROOT = Path(__file__).resolve().parents[3]
BATOND = Path(os.environ.get("BATOND", ROOT / "bin" / "batond"))
FAST = ["--heartbeat-timeout=300ms", "--election-timeout=300ms", "--leader-lease-timeout=150ms",
        "--commit-timeout=20ms"]
# A small watch history, so that a watch resuming from long ago is 410 compacted (test_watch.py).
WATCH_HISTORY = ["--watch-history-bytes=2097152"]


def wait_for(cond: Callable[[], Any], timeout: float = 20.0, what: str = "condition", every: float = 0.05) -> Any:
    """Polls cond until it returns something truthy, or fails the test after timeout."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            v = cond()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - polled conditions may fail while the cluster moves
            last = e
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last error: {last!r})")


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(n: int) -> list[int]:
    """n free ports below the kernel's ephemeral range (so that no outgoing connection takes one)."""
    lo, hi = 10000, _ephemeral_low()
    ports: list[int] = []
    socks = []
    try:
        while len(ports) < n:
            p = random.randrange(lo, hi)
            if p in ports:
                continue
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                s.close()
                continue
            socks.append(s)
            ports.append(p)
    finally:
        for s in socks:
            s.close()
    return ports


class Cluster:
    def __init__(self, base: Path, nodes: int = 3, extra_args: tuple[str, ...] = ()) -> None:
        self.base = base
        self.extra_args = list(extra_args)  # more batond flags for every node
        self.token = "admin-" + secrets.token_hex(8)
        self.ids = [f"n{i + 1}" for i in range(nodes)]
        ports = free_ports(2 * nodes)
        self.http = ports[:nodes]
        self.raft = ports[nodes:]
        self.tls = base / "tls"
        self.ca = str(self.tls / "ca.pem")
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * nodes
        self.logs = [base / f"{i}.log" for i in self.ids]
        subprocess.run([str(BATOND), "certs", "--out", str(self.tls), "--nodes", ",".join(self.ids)],
                       check=True, capture_output=True)
        self._ssl = ssl.create_default_context(cafile=self.ca)

    @property
    def endpoints(self) -> list[str]:
        return [f"127.0.0.1:{p}" for p in self.http]

    def env(self) -> dict[str, str]:
        return {"BATON_ENDPOINTS": ",".join(self.endpoints), "BATON_TOKEN": self.token,
                "BATON_CACERT": self.ca}

    def start(self, i: int) -> None:
        nid = self.ids[i]
        peers = ",".join(f"{n}=127.0.0.1:{p}" for n, p in zip(self.ids, self.raft, strict=False))
        args = [str(BATOND), f"--id={nid}", f"--data-dir={self.base / nid}",
                f"--http-addr=127.0.0.1:{self.http[i]}", f"--raft-addr=127.0.0.1:{self.raft[i]}",
                f"--peers={peers}",
                f"--tls-cert-file={self.tls / (nid + '.pem')}", f"--tls-key-file={self.tls / (nid + '-key.pem')}",
                f"--peer-cert-file={self.tls / (nid + '.pem')}", f"--peer-key-file={self.tls / (nid + '-key.pem')}",
                f"--peer-ca-file={self.ca}", *FAST, *WATCH_HISTORY, *self.extra_args]
        env = dict(os.environ, BATON_ADMIN_TOKEN=self.token)
        for k in list(env):
            if k.startswith("BATON_") and k != "BATON_ADMIN_TOKEN":
                del env[k]
        with open(self.logs[i], "ab") as log:
            self.procs[i] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)

    def _get(self, i: int, path: str) -> dict[str, Any] | None:
        req = urllib.request.Request(f"https://127.0.0.1:{self.http[i]}{path}",
                                     headers={"Authorization": "Bearer " + self.token})
        try:
            with urllib.request.urlopen(req, context=self._ssl, timeout=2) as r:
                import json

                return json.loads(r.read())  # type: ignore[no-any-return]
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def ready(self, i: int) -> bool:
        return self._get(i, "/readyz") is not None

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        for i, p in enumerate(self.procs):
            if p is None:
                continue
            while not self.ready(i):
                if p.poll() is not None:
                    raise RuntimeError(f"{self.ids[i]} exited with {p.returncode}:\n{self.log_tail(i)}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.ids[i]} not ready after {timeout}s:\n{self.log_tail(i)}")
                time.sleep(0.05)

    def leader(self) -> int:
        """The index of the current leader, waiting for one."""
        def find() -> int | None:
            for i, p in enumerate(self.procs):
                if p is None or p.poll() is not None:
                    continue
                st = self._get(i, "/v1/cluster?consistency=stale")
                if st and st.get("state") == "Leader":
                    return i
            return None

        r: int = wait_for(lambda: (find() or 0) + 1, what="a leader") - 1
        return r

    def kill(self, i: int) -> None:
        p = self.procs[i]
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait(10)
        self.procs[i] = None

    def restart(self, i: int) -> None:
        self.kill(i)
        self.start(i)

    def stop_all(self) -> None:
        for i in range(len(self.procs)):
            with contextlib.suppress(Exception):
                self.kill(i)

    def log_tail(self, i: int, n: int = 40) -> str:
        try:
            return "\n".join(self.logs[i].read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    if not BATOND.exists():
        pytest.fail(f"{BATOND} is missing: run make build")
    base = Path(tempfile.mkdtemp(prefix="baton-py-"))
    c = Cluster(base)
    try:
        for i in range(len(c.ids)):
            c.start(i)
        c.wait_ready()
        c.leader()
        yield c
    finally:
        c.stop_all()
        if request.session.testsfailed:
            for i, nid in enumerate(c.ids):
                print(f"\n===== {nid} log ({c.logs[i]}) =====\n{c.log_tail(i, 60)}")
            print(f"\ncluster data kept in {base}")
        elif not os.environ.get("BATON_KEEP_TEST_DATA"):
            # Each run's three data dirs hold hundreds of MB of Raft logs
            # and chunks: left behind, a few runs fill /tmp.
            shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def tenant(cluster: Cluster) -> str:
    name = "t-" + uuid.uuid4().hex[:12]
    with baton.Client(cluster.endpoints, token=cluster.token, ca_file=cluster.ca) as c:
        c.create_tenant(name)
    return name


@pytest.fixture
def client(cluster: Cluster, tenant: str) -> Iterator[baton.Client]:
    with baton.Client(cluster.endpoints, token=cluster.token, ca_file=cluster.ca, tenant=tenant) as c:
        yield c


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def uid(prefix: str = "x") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"
