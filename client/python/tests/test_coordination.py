"""Issue 32's coordination primitives against the real cluster: dependencies with result passing,
cancellation seen by a Worker, waitpoints, flow control, schedules, running counts."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from conftest import Cluster, uid, wait_for

import baton


def test_dependency_chain_passes_results(client: baton.Client) -> None:
    q = uid("chain")
    art = client.upload_artifact(uid("notes"), b"research notes")
    a = client.create_task(q, task_id=f"{q}-a", payload={"step": "research"})
    b = client.create_task(q, task_id=f"{q}-b", depends_on=[a.task_id])
    c = client.create_task(q, task_id=f"{q}-c", depends_on=[b.task_id], dependency_policy="cancel")
    assert (b.depends_on_count, b.dependencies_left, b.dependency_policy) == (1, 1, "fail")
    assert client.queue_stats(q).blocked == 2

    got = client.claim(q, owner="w", lease=10)
    assert got is not None and got.task_id == a.task_id and got.dependencies == ()
    assert client.queue_stats(q).running == 1  # leased, counted apart from the waiting ones
    client.update_task(a.task_id, fencing_token=got.fencing_token, status="done", result={"pages": 3},
                       artifact_id=art.artifact_id, release=True)

    got = client.claim(q, owner="w", lease=10)
    assert got is not None and got.task_id == b.task_id
    assert got.dependencies == (baton.Dependency(a.task_id, True, "done", {"pages": 3}, art.artifact_id),)
    assert not got.dependencies_truncated
    assert client.claim(q, owner="w", lease=10) is None  # c waits on b
    client.update_task(b.task_id, fencing_token=got.fencing_token, status="done",
                       result={"summary": got.dependencies[0].result["pages"] * 2}, release=True)

    got = client.claim(q, owner="w", lease=10)
    assert got is not None and got.task_id == c.task_id
    assert [d.result for d in got.dependencies] == [{"summary": 6}]
    deps = list(client.iter_task_dependencies(c.task_id, page_size=1))
    assert [(d.task_id, d.resolved, d.status) for d in deps] == [(b.task_id, True, "done")]
    assert client.list_task_dependencies(a.task_id).items == []

    # The policy: a dependency that ends dead cancels the dependent.
    x = client.create_task(q + "-x")
    y = client.create_task(q + "-y", depends_on=[x.task_id], dependency_policy="cancel")
    xc = client.claim(q + "-x", owner="w", lease=10)
    assert xc is not None
    client.fail_task(x.task_id, fencing_token=xc.fencing_token, error="broken", non_retryable=True)
    y = client.get_task(y.task_id)
    assert y.status == "cancelled" and y.dependencies_left == 0 and x.task_id in y.last_error


def test_worker_sees_cancellation(client: baton.Client) -> None:
    q = uid("cq")
    t = client.create_task(q, payload={"steps": 1000})
    started = threading.Event()
    seen: dict[str, Any] = {}
    errors: list[BaseException] = []

    def handle(ctx: baton.TaskContext) -> str:
        seen["token"] = ctx.token
        started.set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if ctx.wait_stop(0.05):  # a sleep that ends once the task is cancelled
                seen["cancel_requested"] = ctx.cancel_requested
                return "stopped early"
        return "finished"

    w = baton.Worker(client, q, handle, lease=1.5, wait=1, on_error=lambda _t, e: errors.append(e))
    th = threading.Thread(target=w.run_once)
    th.start()
    try:
        assert started.wait(20)
        r = client.cancel_task(t.task_id, reason="no longer needed")
        assert r.cancel_requested and r.status != "cancelled"
        wait_for(lambda: client.get_task(t.task_id).status == "cancelled", what="the task to be cancelled")
    finally:
        th.join(30)
    assert not th.is_alive()
    assert seen["cancel_requested"] is True
    assert [type(e) for e in errors] == [baton.CancelRequested]
    done = client.get_task(t.task_id)
    assert done.owner == "" and done.result is None and done.last_error == "no longer needed"
    # The old holder's token is retired: its fenced writes are refused.
    with pytest.raises(baton.Fenced):
        client.kv_put("out", t.task_id, "late", fence=baton.Fence(t.task_id, seen["token"]))
    with pytest.raises(baton.Fenced):
        client.update_task(t.task_id, fencing_token=seen["token"], status="done")


def test_heartbeat_raises_cancel_requested(client: baton.Client) -> None:
    q = uid("hq")
    t = client.create_task(q)
    errors: list[BaseException] = []

    def handle(ctx: baton.TaskContext) -> None:
        client.cancel_task(ctx.task.task_id)
        ctx.heartbeat()  # the renewal shows the cancellation: CancelRequested

    assert baton.Worker(client, q, handle, lease=10, wait=1, on_error=lambda _t, e: errors.append(e)).run_once()
    assert [type(e) for e in errors] == [baton.CancelRequested]
    assert client.get_task(t.task_id).status == "cancelled"


@pytest.mark.anyio
async def test_async_worker_cancels_the_handler(cluster: Cluster, tenant: str) -> None:
    async with baton.AsyncClient(cluster.endpoints, token=cluster.token, ca_file=cluster.ca, tenant=tenant) as c:
        q = uid("acq")
        t = await c.create_task(q)
        started = asyncio.Event()
        cancelled = asyncio.Event()
        errors: list[BaseException] = []

        async def handle(ctx: baton.AsyncTaskContext) -> str:
            started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return "finished"

        w = baton.AsyncWorker(c, q, handle, lease=1.5, wait=1, on_error=lambda _t, e: errors.append(e))
        run = asyncio.ensure_future(w.run_once())
        await asyncio.wait_for(started.wait(), 20)
        await c.cancel_task(t.task_id)
        assert await asyncio.wait_for(run, 30)
        assert cancelled.is_set()
        assert [type(e) for e in errors] == [baton.CancelRequested]
        assert (await c.get_task(t.task_id)).status == "cancelled"


def test_waitpoint_park_complete_claim(client: baton.Client) -> None:
    q = uid("wq")
    wp = client.create_waitpoint(timeout=timedelta(hours=1), waitpoint_id=uid("approve"))
    assert wp.pending and wp.timeout_at is not None and wp.resolved_at is None
    t = client.create_task(q, payload={"draft": 1})

    def first(ctx: baton.TaskContext) -> None:
        ctx.park(wp.waitpoint_id)  # ends the lease: claimable again once the waitpoint resolves

    assert baton.Worker(client, q, first, lease=10, wait=1).run_once()
    parked = client.get_task(t.task_id)
    assert parked.parked and parked.waitpoint_id == wp.waitpoint_id and parked.owner == ""
    assert client.get_waitpoint(wp.waitpoint_id).task_id == t.task_id
    assert client.claim(q, owner="w", lease=10) is None
    with pytest.raises(baton.VersionMismatch):
        client.claim_task(t.task_id, owner="w", lease=10)

    # A long poll answers once it is completed; a watch sees the completion.
    polled: list[baton.Waitpoint] = []
    th = threading.Thread(target=lambda: polled.append(client.get_waitpoint(wp.waitpoint_id, wait=30)))
    th.start()
    start = client.get_waitpoint(wp.waitpoint_id).index
    done = client.complete_waitpoint(wp.waitpoint_id, {"approved": True, "by": "alice"})
    th.join(40)
    assert polled and polled[0].state == "completed" and polled[0].payload == {"approved": True, "by": "alice"}
    with client.watch(resources=["waitpoints"], from_index=start) as events:
        ev = next(iter(events))
    assert (ev.resource, ev.key, ev.type) == ("waitpoints", wp.waitpoint_id, "put")
    assert ev.value["state"] == "completed"
    assert done.state == "completed" and done.resolved_at is not None
    # Once: the same payload again answers the same, another one is refused.
    assert client.complete_waitpoint(wp.waitpoint_id, {"approved": True, "by": "alice"}).version == done.version
    with pytest.raises(baton.VersionMismatch):
        client.complete_waitpoint(wp.waitpoint_id, {"approved": False})

    def second(ctx: baton.TaskContext) -> Any:
        assert ctx.task.waitpoint is not None
        return {"outcome": ctx.task.waitpoint.state, "approved": ctx.task.waitpoint.payload["approved"]}

    assert baton.Worker(client, q, second, lease=10, wait=5).run_once()
    end = client.get_task(t.task_id)
    assert end.status == "done" and end.result == {"outcome": "completed", "approved": True} and not end.parked

    # A waitpoint that times out: the long poll tells.
    short = client.create_waitpoint(timeout=0.2)
    assert short.waitpoint_id.startswith("wp-")
    got = wait_for(lambda: (w := client.get_waitpoint(short.waitpoint_id, wait=5)).state != "pending" and w,
                   what="the waitpoint to time out")
    assert got.state == "timed_out" and got.payload is None
    with pytest.raises(baton.VersionMismatch):
        client.complete_waitpoint(short.waitpoint_id, "late")


def test_flow_control_max_leased(cluster: Cluster, client: baton.Client, tenant: str) -> None:
    q = uid("fq")
    p = client.set_queue_policy(q, max_leased=1, concurrency_key_limit=1)
    assert (p.max_leased, p.concurrency_key_limit, p.claims_per_second) == (1, 1, 0)
    assert client.get_queue_policy(q).max_leased == 1
    with pytest.raises(baton.InvalidArgument):
        client.set_queue_policy(q, claim_burst=5)  # a burst without a rate
    a = client.create_task(q, task_id=f"{q}-a", priority=1, concurrency_key="customer-1")
    b = client.create_task(q, task_id=f"{q}-b", concurrency_key="customer-2")
    assert a.concurrency_key == "customer-1"
    held = client.claim(q, owner="w1", lease=30)
    assert held is not None and held.task_id == a.task_id
    assert client.claim(q, owner="w2", lease=30) is None  # at the limit a queue claim finds nothing
    # A claim by id is refused (429): a client with a short retry budget sees RateLimited.
    with baton.Client(cluster.endpoints, token=cluster.token, ca_file=cluster.ca, tenant=tenant,
                      max_retry=0.5) as impatient, pytest.raises(baton.RateLimited):
        impatient.claim_task(b.task_id, owner="w2", lease=30)
    assert client.queue_stats(q).running == 1
    client.update_task(a.task_id, fencing_token=held.fencing_token, status="done", release=True)
    nxt = client.claim(q, owner="w2", lease=30)
    assert nxt is not None and nxt.task_id == b.task_id


def test_schedule_interval_ticks(client: baton.Client) -> None:
    q = uid("sq")
    sid = uid("beat")
    with pytest.raises(baton.InvalidArgument):
        client.create_schedule(uid("bad"), queue=q, cron="* * *")
    with pytest.raises(baton.InvalidArgument):
        client.create_schedule(uid("bad"), queue=q, cron="0 9 * * *", timezone="Nowhere/Atlantis")
    s = client.create_schedule(sid, queue=q, interval=1.0, payload={"job": "sweep"}, priority=3)
    assert (s.interval_ms, s.catch_up, s.paused, s.ticks) == (1000, "latest", False, 0)
    s = wait_for(lambda: (x := client.get_schedule(sid)).ticks >= 1 and x, what="a tick")
    s = client.pause_schedule(sid)
    assert s.paused
    tasks = list(client.iter_tasks(queue=q))
    assert len(tasks) == s.ticks  # one task per tick, with the tick in its id
    assert s.last_tick_at is not None and s.task_id(s.last_tick_at) in {t.task_id for t in tasks}
    for t in tasks:
        assert t.task_id.startswith(sid + ":") and t.payload == {"job": "sweep"} and t.priority == 3
    ticks = s.ticks
    s = client.resume_schedule(sid)
    assert not s.paused and s.next_at is not None and s.next_at > s.last_tick_at
    wait_for(lambda: client.get_schedule(sid).ticks > ticks, what="a tick after resume")
    cron = client.create_schedule(uid("daily"), queue=q, cron="0 9 * * 1-5", timezone="Europe/Paris",
                                  catch_up="skip")
    assert cron.timezone == "Europe/Paris" and cron.next_at is not None and cron.next_at.tzinfo is not None
    assert {sid, cron.schedule_id} <= {x.schedule_id for x in client.iter_schedules(page_size=1)}
    client.delete_schedule(sid)
    with pytest.raises(baton.NotFound):
        client.get_schedule(sid)
    assert len(list(client.iter_tasks(queue=q))) >= ticks  # its tasks stay
