"""Watches: events in order, resumed without gaps or repeats across a leader change."""

from __future__ import annotations

import threading

import pytest
from conftest import Cluster, uid

import baton


def test_watch_events(client: baton.Client) -> None:
    q = uid("q")
    start = client.list_tasks(queue=q).index  # any read's index: watch the changes after it
    assert start > 0
    client.create_task(q, task_id="w1")
    client.kv_put("ns", "k", 1)
    client.kv_delete("ns", "k")
    client.delete_task("w1")
    with client.watch(from_index=start, resources=["tasks", "kv"], idle_timeout=5) as w:
        evs = [next(w) for _ in range(4)]
    assert [(e.resource, e.key, e.type) for e in evs] == [
        ("tasks", "w1", "put"), ("kv", "ns/k", "put"), ("kv", "ns/k", "delete"), ("tasks", "w1", "delete")]
    assert evs[0].value["queue"] == q and evs[1].value["value"] == 1 and evs[2].value is None
    assert [e.index for e in evs] == sorted(e.index for e in evs) and evs[0].index > start
    # Resuming after an event id delivers what follows it, once.
    with client.watch(after_id=evs[1].id, resources=["kv"], idle_timeout=5) as w2:
        e = next(w2)
    assert (e.key, e.type, e.id) == ("ns/k", "delete", evs[2].id)
    # prefix filters by key.
    with client.watch(from_index=start, prefix="ns/", idle_timeout=5) as w3:
        assert next(w3).key == "ns/k"


def test_watch_resumes_across_leader_change(cluster: Cluster, client: baton.Client) -> None:
    n = 60
    start = client.cluster_status().applied_index
    leader = cluster.leader()
    w = client.watch(from_index=start, resources=["kv"], idle_timeout=5)
    w._ep = leader  # stream from the leader, which is then killed
    stop = threading.Event()

    def write() -> None:
        for i in range(n):
            if stop.is_set():
                return
            client.kv_put("seq", f"{i:04d}", i)

    keys: list[str] = []
    th = threading.Thread(target=write)
    killed = False
    try:
        th.start()
        for ev in w:
            keys.append(ev.key)
            if len(keys) == n // 3 and not killed:
                cluster.kill(leader)
                killed = True
            if len(keys) == n:
                break
    finally:
        stop.set()
        th.join(60)
        w.close()
        if killed:
            cluster.start(leader)
            cluster.wait_ready()
    assert keys == [f"seq/{i:04d}" for i in range(n)]  # no gap, no repeat
    assert w.reconnects >= 1
    assert cluster.leader() is not None


def test_watch_errors(client: baton.Client, cluster: Cluster) -> None:
    with pytest.raises(baton.InvalidArgument):
        client.watch(after_id="not-an-id")
    with pytest.raises(baton.InvalidArgument):
        next(client.watch(resources=["nope"]))
    for i in range(40):  # push the first events out of the nodes' 2 MiB of history
        client.kv_put("filler", str(i), "f" * 60_000)
    with pytest.raises(baton.Compacted) as e:
        next(client.watch(from_index=1, idle_timeout=5))
    assert e.value.floor is not None and e.value.floor > 1


def test_watch_from_now_survives_a_node_kill(cluster: Cluster, client: baton.Client) -> None:
    n = 45
    w = client.watch(resources=["kv"], prefix="now/", idle_timeout=5)
    stop = threading.Event()

    def write() -> None:
        for i in range(n):
            if stop.is_set():
                return
            client.kv_put("now", f"{i:04d}", i)

    got: list[int] = []
    victim = -1
    th = threading.Thread(target=write)
    try:
        th.start()
        for ev in w:  # starts at the node's applied index when it connects
            got.append(ev.value["value"])
            if len(got) == 10:
                victim = w._ep
                cluster.kill(victim)
            if got[-1] == n - 1:
                break
    finally:
        stop.set()
        th.join(60)
        w.close()
        if victim >= 0:
            cluster.start(victim)
            cluster.wait_ready()
    assert got == list(range(got[0], n))  # from where it started: no gap, no repeat
    assert w.reconnects >= 1
