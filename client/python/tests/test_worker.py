"""Worker, fencing, graceful stop, Mutex and Election; a leader killed in the middle of a run."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Cluster, uid, wait_for

import baton


def _all_done(c: baton.Client, q: str, n: int) -> bool:
    ts = list(c.iter_tasks(queue=q))
    return len(ts) == n and all(t.status == "done" for t in ts)


def test_worker_completes_fails_and_fences(client: baton.Client) -> None:
    q = uid("q")
    client.set_queue_policy(q, max_attempts=2, backoff_initial=0.05, backoff_max=0.05)
    for i in range(6):
        client.create_task(q, task_id=f"{q}-{i}", payload={"i": i})
    client.create_task(q, task_id=f"{q}-bad", payload={"i": -1})
    client.create_task(q, task_id=f"{q}-fatal", payload={"i": -2})
    errors: list[BaseException] = []

    def handle(ctx: baton.TaskContext) -> Any:
        i = ctx.task.payload["i"]
        if i == -1:
            raise RuntimeError("always fails")
        if i == -2:
            raise baton.NonRetryable("cannot be fixed")
        ctx.kv_put("out", ctx.task.task_id, i * i)
        ctx.heartbeat()
        return {"square": i * i}

    w = baton.Worker(client, q, handle, concurrency=3, lease=5, wait=0.5, on_error=lambda t, e: errors.append(e))
    th = threading.Thread(target=w.run)
    th.start()
    try:
        wait_for(lambda: client.get_task(f"{q}-bad").status == "dead" and client.get_task(f"{q}-fatal").status == "dead"
                 and all(client.get_task(f"{q}-{i}").status == "done" for i in range(6)), what="the queue drained")
    finally:
        w.stop()
        th.join(10)
    assert not th.is_alive()
    for i in range(6):
        t = client.get_task(f"{q}-{i}")
        assert t.result == {"square": i * i} and t.owner == "" and t.attempt == 1
        assert client.kv_get("out", t.task_id).value == i * i
    bad = client.get_task(f"{q}-bad")
    assert bad.attempt == 2 and bad.last_error == "always fails"
    assert client.get_task(f"{q}-fatal").attempt == 1
    assert sum(isinstance(e, RuntimeError) for e in errors) == 2


def test_stale_worker_writes_are_fenced(client: baton.Client) -> None:
    q = uid("q")
    client.create_task(q, task_id="job")
    started, go = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}
    errors: list[BaseException] = []

    def handle(ctx: baton.TaskContext) -> Any:
        seen["token"] = ctx.token
        started.set()
        go.wait(20)
        try:
            ctx.kv_put("out", "job", "stale result")
        except baton.Fenced as e:
            seen["fenced"] = e
        try:
            ctx.set_ref("job/out", "sha256:" + "0" * 64)
        except baton.LeaseLost as e:
            seen["lost"] = e
        return "stale"

    w = baton.Worker(client, q, handle, lease=10, wait=1, on_error=lambda t, e: errors.append(e))
    th = threading.Thread(target=w.run_once)
    th.start()
    assert started.wait(10)
    # Someone else takes the task over: the worker's token is no longer current.
    other = client.claim_task("job", owner=w.owner, lease=30)
    assert other.fencing_token > seen["token"]
    go.set()
    th.join(20)
    assert seen["fenced"].current_token == other.fencing_token
    assert "lost" in seen  # refused locally once the lease was known lost
    with pytest.raises(baton.NotFound):
        client.kv_get("out", "job")
    t = client.get_task("job")
    assert t.status == "pending" and t.fencing_token == other.fencing_token and t.result is None
    assert any(isinstance(e, baton.LeaseLost) for e in errors)


def test_worker_survives_leader_kill(cluster: Cluster, client: baton.Client) -> None:
    q = uid("q")
    n = 40
    for i in range(n):
        client.create_task(q, task_id=f"{q}-{i:03d}", payload=i)
    calls: collections.Counter[str] = collections.Counter()
    lock = threading.Lock()

    def handle(ctx: baton.TaskContext) -> Any:
        with lock:
            calls[ctx.task.task_id] += 1
        time.sleep(0.05)
        return ctx.task.payload * 2

    w = baton.Worker(client, q, handle, concurrency=4, lease=10, wait=1)
    th = threading.Thread(target=w.run)
    th.start()
    leader = -1
    try:
        wait_for(lambda: sum(calls.values()) >= n // 4, what="a quarter of the tasks")
        leader = cluster.leader()
        cluster.kill(leader)
        wait_for(lambda: _all_done(client, q, n), timeout=60, what="every task done after the leader kill")
    finally:
        w.stop()
        th.join(15)
        if leader >= 0:
            cluster.start(leader)
            cluster.wait_ready()
    assert not th.is_alive()
    assert calls == collections.Counter({f"{q}-{i:03d}": 1 for i in range(n)})  # none lost, none twice
    for t in client.iter_tasks(queue=q):
        assert t.status == "done" and t.result == t.payload * 2 and t.attempt == 1


SIGTERM_SCRIPT = textwrap.dedent("""
    import sys, time, baton
    q = sys.argv[1]
    client = baton.Client.from_env()
    def handle(ctx):
        client.kv_put("started", ctx.task.task_id, True)
        time.sleep(1.5)
        return "finished"
    w = baton.Worker(client, q, handle, concurrency=2, lease=10, wait=1)
    w.run()
    print("stopped", w.processed, flush=True)
""")


def test_worker_stops_gracefully_on_sigterm(cluster: Cluster, client: baton.Client, tenant: str,
                                            tmp_path: Path) -> None:
    q = uid("q")
    for i in range(6):
        client.create_task(q, task_id=f"{q}-{i}")
    script = tmp_path / "worker.py"
    script.write_text(SIGTERM_SCRIPT)
    env = dict(os.environ, **cluster.env(), BATON_TENANT=tenant)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    p = subprocess.Popen([sys.executable, str(script), q], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: len(client.kv_list("started").items) == 2, what="two tasks in flight")
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err.decode()
    assert out.decode().strip() == "stopped 2"
    tasks = list(client.iter_tasks(queue=q))
    done = [t for t in tasks if t.status == "done"]
    assert len(done) == 2 and all(t.result == "finished" for t in done)
    assert all(t.status == "pending" and t.attempt == 0 for t in tasks if t not in done)


def test_mutex_hold_won_by_a_long_wait_is_renewed_at_once(client: baton.Client) -> None:
    """A lock won at the end of a long poll: its lease counts from when the claim was sent, so the hold is
    renewed at once. Before, the first renewal came a third of the lease after the claim returned, after
    the hold's deadline (sent + lease - margin): the hold was lost, and unlock() raised LeaseLost without
    giving the lock back."""
    name = uid("lock")
    a = baton.Mutex(client, name, owner="a", lease=3, wait=1)
    b = baton.Mutex(client, name, owner="b", lease=3, wait=10)
    a.lock()
    sent = time.monotonic()
    got: list[baton.TaskContext] = []
    th = threading.Thread(target=lambda: got.append(b.lock()))
    th.start()
    # a holds the lock for 2 s of b's wait (a renews it meanwhile): b's claim returns past
    # lease - margin - a third of the lease (1.7 s) after it was sent.
    while time.monotonic() - sent < 2.0:
        time.sleep(0.05)
    a.unlock()
    th.join(10)
    assert got
    # Past the deadline the claim alone gave (sent + 2.7 s), the hold is still good.
    while time.monotonic() - sent < 2.9:
        time.sleep(0.05)
    b.unlock()
    assert client.get_task(name).owner == ""


def test_mutex_and_election(client: baton.Client) -> None:
    name = uid("lock")
    a = baton.Mutex(client, name, owner="a", lease=5, wait=1)
    b = baton.Mutex(client, name, owner="b", lease=5, wait=1)
    ha = a.lock()
    with pytest.raises(baton.Locked):
        b.try_lock()
    got: list[int] = []
    th = threading.Thread(target=lambda: got.append(b.lock().token))
    th.start()
    time.sleep(0.2)
    assert not got
    ha.kv_put("locks", name, "a")
    a.unlock()
    th.join(10)
    assert got and got[0] > ha.token
    with pytest.raises(baton.Fenced):
        client.kv_put("locks", name, "late a", fence=ha.fence)
    with pytest.raises(baton.NotLocked):
        a.unlock()
    b.unlock()
    with a as hold:
        assert hold.fence.task_id == name

    ename = uid("elect")
    e1 = baton.Election(client, ename, owner="e1", lease=5, wait=1)
    e2 = baton.Election(client, ename, owner="e2", lease=5, wait=1)
    with pytest.raises(baton.NoLeader):
        e1.leader()
    e1.campaign("v1")
    assert e2.leader()["owner"] == "e1" and e2.leader()["value"] == "v1"
    e1.proclaim("v2")
    assert e2.leader()["value"] == "v2"
    with pytest.raises(baton.NotLeader):
        e2.proclaim("x")
    seen: list[dict[str, Any]] = []
    obs = e2.observe()
    seen.append(next(obs))
    e1.resign()
    e2.campaign("v3")
    seen.append(next(obs))
    assert [(s["owner"], s["value"]) for s in seen] == [("e1", "v2"), ("e2", "v3")]
    e2.resign()
