"""Tasks, queues, policies and transactions against the real cluster."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from conftest import uid, wait_for

import baton


def test_task_lifecycle(client: baton.Client) -> None:
    t = client.create_task("research", task_id="report-1", payload={"topic": "fencing"}, priority=3)
    assert (t.task_id, t.queue, t.status, t.version, t.priority) == ("report-1", "research", "pending", 1, 3)
    assert t.created_at is not None and t.lease_until is None
    with pytest.raises(baton.AlreadyExists):
        client.create_task("research", task_id="report-1")
    c = client.claim_task("report-1", owner="a", lease=timedelta(seconds=30), set_status="running")
    assert c.owner == "a" and c.fencing_token > 0 and c.status == "running" and c.lease_until is not None
    with pytest.raises(baton.LeaseHeld) as ei:
        client.claim_task("report-1", owner="b", lease=30)
    assert ei.value.owner == "a"
    r = client.renew_task("report-1", fencing_token=c.fencing_token, lease=60)
    assert r.lease_until is not None and c.lease_until is not None and r.lease_until >= c.lease_until
    with pytest.raises(baton.Fenced) as ef:
        client.renew_task("report-1", fencing_token=c.fencing_token - 1, lease=60)
    assert ef.value.current_token == c.fencing_token
    u = client.update_task("report-1", fencing_token=c.fencing_token, status="done", result={"pages": 3},
                           release=True)
    assert u.status == "done" and u.result == {"pages": 3} and u.owner == ""
    with pytest.raises(baton.VersionMismatch) as ev:
        client.update_task("report-1", expect_version=1, status="x")
    assert ev.value.current_version == u.version
    u2 = client.update_task("report-1", result=None)
    assert u2.result is None and u2.version == u.version + 1
    client.delete_task("report-1", expect_version=u2.version)
    with pytest.raises(baton.NotFound):
        client.get_task("report-1")


def test_release_unstarted(client: baton.Client) -> None:
    """A release with unstarted gives back the claim's attempt and the status its set_status replaced."""
    queue = uid("unstarted")
    client.create_task(queue, task_id=queue + "-1")
    c = client.claim_task(queue + "-1", owner="a", lease=30, set_status="running")
    assert (c.attempt, c.status, c.owner) == (1, "running", "a")
    r = client.update_task(c.task_id, fencing_token=c.fencing_token, release=True, unstarted=True)
    assert (r.attempt, r.status, r.owner, r.lease_until) == (0, "pending", "", None)
    c2 = client.claim(queue, owner="b", lease=30)
    assert c2 is not None and c2.task_id == c.task_id and c2.attempt == 1


def test_fail_retry_and_policy(client: baton.Client) -> None:
    q = uid("q")
    pol = client.set_queue_policy(q, max_attempts=2, backoff_initial=0.05, backoff_max=0.1)
    assert pol.max_attempts == 2 and client.get_queue_policy(q).backoff_initial_ms == 50
    t = client.create_task(q)
    assert t.max_attempts == 2
    c1 = client.claim(q, owner="w", lease=10)
    assert c1 is not None and c1.task_id == t.task_id and c1.attempt == 1
    f = client.fail_task(t.task_id, fencing_token=c1.fencing_token, error="boom")
    assert f.status == "pending" and f.last_error == "boom" and f.available_at is not None
    with pytest.raises(baton.Fenced):
        client.fail_task(t.task_id, fencing_token=c1.fencing_token, error="again")
    c2 = wait_for(lambda: client.claim(q, owner="w", lease=10, wait=1), what="claim after backoff")
    f2 = client.fail_task(t.task_id, fencing_token=c2.fencing_token, error="boom 2")
    assert f2.status == "dead"
    assert [x.task_id for x in client.iter_tasks(queue=q, status="dead")] == [t.task_id]
    with pytest.raises(baton.VersionMismatch):
        client.claim_task(t.task_id, owner="w", lease=10)
    r = client.retry_task(t.task_id, expect_version=f2.version)
    assert r.status == "pending" and r.attempt == 0
    st = client.queue_stats(q)
    assert st.queue == q and st.tasks == 1 and st.by_status == {"pending": 1} and st.waiting == 1
    assert any(s.queue == q for s in client.iter_queues())
    client.set_queue_policy(q)  # all zeros clear it
    assert client.get_queue_policy(q).max_attempts == 0


def test_non_retryable_fail(client: baton.Client) -> None:
    q = uid("q")
    client.create_task(q, task_id="t")
    c = client.claim(q, owner="w", lease=10)
    assert c is not None
    assert client.fail_task("t", fencing_token=c.fencing_token, non_retryable=True).status == "dead"


def test_list_and_iterate_pages(client: baton.Client) -> None:
    q = uid("q")
    ids = [f"{q}-{i:02d}" for i in range(7)]
    for i in ids:
        client.create_task(q, task_id=i)
    page = client.list_tasks(queue=q, limit=3)
    assert [t.task_id for t in page.items] == ids[:3] and page.next_page_token
    assert [t.task_id for t in client.iter_tasks(queue=q, page_size=2)] == ids
    assert [t.task_id for t in client.iter_tasks(queue=q, status="nope")] == []


def test_queue_claim_long_poll(client: baton.Client) -> None:
    q = uid("q")
    t0 = time.monotonic()
    assert client.claim(q, owner="w", lease=10, wait=0.3) is None
    assert time.monotonic() - t0 >= 0.25
    threading.Timer(0.3, lambda: client.create_task(q, task_id="late")).start()
    got = client.claim(q, owner="w", lease=10, wait=10)
    assert got is not None and got.task_id == "late"
    # Priority first, then age; delayed tasks wait.
    client.create_task(q, task_id="low", priority=0)
    client.create_task(q, task_id="high", priority=5)
    client.create_task(q, task_id="later", priority=9, delay=60)
    first = client.claim(q, owner="w", lease=10)
    assert first is not None and first.task_id == "high"


def test_transactions(client: baton.Client) -> None:
    q = uid("q")
    client.create_task(q, task_id="stage-1")
    c = client.claim_task("stage-1", owner="a", lease=30)
    res = client.txn([
        {"op": "task.update", "task_id": "stage-1", "fencing_token": c.fencing_token, "status": "done",
         "release": True},
        {"op": "task.create", "task_id": "stage-2", "queue": q},
        {"op": "kv.put", "namespace": "ns", "key": "k", "value": 1},
    ])
    assert len(res.results) == 3 and res.results[1]["task_id"] == "stage-2" and res.index > 0
    with pytest.raises(baton.AlreadyExists) as e:
        client.txn([{"op": "kv.put", "namespace": "ns", "key": "k2", "value": 2},
                    {"op": "task.create", "task_id": "stage-2", "queue": q}])
    assert e.value.details.get("op_index") == 1
    with pytest.raises(baton.NotFound):
        client.kv_get("ns", "k2")  # nothing of the failed transaction was applied


def test_explicit_idempotency_key(client: baton.Client) -> None:
    q = uid("q")
    key = baton.new_idempotency_key()
    a = client.create_task(q, payload={"n": 1}, idempotency_key=key)
    b = client.create_task(q, payload={"n": 1}, idempotency_key=key)
    assert a.task_id == b.task_id
    assert len(list(client.iter_tasks(queue=q))) == 1
    with pytest.raises(baton.IdempotencyMismatch):
        client.create_task(q, payload={"n": 2}, idempotency_key=key)


def test_dropped_session_is_replaced(client: baton.Client) -> None:
    q = uid("q")
    client.create_task(q)  # opens a session
    old = client._sess.id
    assert old
    client._sess.opened(old + 10_000_000)  # a session the cluster does not know
    client.create_task(q, task_id="after-drop")
    assert client._sess.id not in (0, old + 10_000_000)
    assert client.get_task("after-drop").queue == q
    assert len(list(client.iter_tasks(queue=q))) == 2


def test_without_sessions(cluster, tenant: str) -> None:  # type: ignore[no-untyped-def]
    with baton.Client(cluster.endpoints, token=cluster.token, ca_file=cluster.ca, tenant=tenant,
                      sessions=False) as c:
        t = c.create_task(uid("q"))
        assert c.get_task(t.task_id).task_id == t.task_id


def test_dependencies_and_cancel(client: baton.Client) -> None:
    q = uid("dq")
    a = client.create_task(q + "-up")
    b = client.create_task(q + "-up")
    with pytest.raises(baton.InvalidArgument):
        client.create_task(q, depends_on=[a.task_id, "no-such-task"])
    d = client.create_task(q, depends_on=[a.task_id, b.task_id])
    assert d.depends_on_count == 2 and d.dependencies_left == 2 and d.dependency_policy == "fail"
    assert client.claim(q, owner="w", lease=10) is None
    client.update_task(a.task_id, status="done", result={"n": 1})
    client.update_task(b.task_id, status="done", result={"n": 2})
    c = client.claim(q, owner="w", lease=10)
    assert c is not None and c.task_id == d.task_id
    assert sorted(x.result["n"] for x in c.dependencies) == [1, 2]  # in id order
    r = client.cancel_task(d.task_id, reason="stop")
    assert r.cancel_requested and r.owner == "w"
    done = client.cancel_task(d.task_id, fencing_token=c.fencing_token)
    assert done.status == "cancelled" and not done.cancel_requested and done.fencing_token > c.fencing_token
    with pytest.raises(baton.Fenced):
        client.update_task(d.task_id, fencing_token=c.fencing_token, status="done")
