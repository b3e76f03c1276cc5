"""AsyncClient and the async helpers against the real cluster (anyio's pytest plugin, asyncio backend)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx
import pytest
from conftest import Cluster, uid

import baton

pytestmark = pytest.mark.anyio


def _client(cluster: Cluster, tenant: str) -> baton.AsyncClient:
    return baton.AsyncClient(cluster.endpoints, token=cluster.token, ca_file=cluster.ca, tenant=tenant)


async def test_async_client_calls(cluster: Cluster, tenant: str) -> None:
    async with _client(cluster, tenant) as c:
        q = uid("q")
        created = await asyncio.gather(*(c.create_task(q, task_id=f"{q}-{i}", payload=i) for i in range(20)))
        assert len({t.task_id for t in created}) == 20
        got = [t.task_id async for t in c.iter_tasks(queue=q, page_size=7)]
        assert got == sorted(f"{q}-{i}" for i in range(20))
        t = await c.claim(q, owner="a", lease=5, set_status="running")
        assert t is not None and t.status == "running"
        with pytest.raises(baton.Fenced):
            await c.update_task(t.task_id, fencing_token=t.fencing_token - 1, status="done")
        await c.update_task(t.task_id, fencing_token=t.fencing_token, status="done", release=True)
        e = await c.kv_put("ns", "k", {"v": 1}, expect_version=0)
        with pytest.raises(baton.VersionMismatch):
            await c.kv_put("ns", "k", 2, expect_version=0)
        assert (await c.kv_get("ns", "k")).version == e.version
        with pytest.raises(baton.NotFound):
            await c.get_task("nope")
        assert (await c.cluster_status()).leader_id in cluster.ids
        op, created_op = await c.begin_op("op-1", kind="k", params_digest=baton.params_digest(1))
        assert created_op and op.state == "started"
        calls: list[int] = []

        async def act() -> int:
            calls.append(1)
            return 42

        assert await baton.async_once(c, "op-2", act, kind="k") == 42
        assert await baton.async_once(c, "op-2", act, kind="k") == 42
        assert calls == [1]

        @baton.async_exactly_once(c, kind="k", op_id=lambda n: f"deco-{n}")
        async def act2(n: int) -> int:
            calls.append(n)
            return n * 2

        assert await act2(5) == 10 and await act2(5) == 10 and calls == [1, 5]
        cp = await c.put_checkpoint("thread 1", "c1", {"s": 1})
        assert (await c.latest_checkpoint("thread 1")).checkpoint_id == cp.checkpoint_id


async def test_async_artifacts_and_watch(cluster: Cluster, tenant: str) -> None:
    async with _client(cluster, tenant) as c:
        start = (await c.cluster_status()).applied_index
        data = os.urandom(6 << 20)
        st = baton.UploadStats()
        m = await c.upload_artifact("a", data, stats=st)
        assert m.size == len(data) and st.chunks_uploaded == st.chunks
        assert await c.read_artifact("a", 1) == data
        await c.set_ref("a/latest", m.artifact_id)
        seen: list[tuple[str, str]] = []
        async with c.watch(from_index=start, resources=["artifacts", "refs"], idle_timeout=5) as w:
            async for ev in w:
                seen.append((ev.resource, ev.key))
                if len(seen) == 2:
                    break
        assert seen == [("artifacts", "a/" + f"{1:016x}"), ("refs", "a/latest")]


async def test_async_worker_and_mutex(cluster: Cluster, tenant: str) -> None:
    async with _client(cluster, tenant) as c:
        q = uid("q")
        for i in range(8):
            await c.create_task(q, task_id=f"{q}-{i}", payload=i)
        active = 0
        peak = 0

        async def handle(ctx: baton.AsyncTaskContext) -> Any:
            nonlocal active, peak
            active += 1
            peak = max(peak, active)
            await ctx.kv_put("out", ctx.task.task_id, ctx.task.payload)
            await asyncio.sleep(0.1)
            active -= 1
            return ctx.task.payload + 100

        w = baton.AsyncWorker(c, q, handle, concurrency=4, lease=5, wait=0.5, handle_signals=False)
        run = asyncio.create_task(w.run())
        for _ in range(200):
            ts = [t async for t in c.iter_tasks(queue=q)]
            if all(t.status == "done" for t in ts):
                break
            await asyncio.sleep(0.05)
        w.stop()
        await asyncio.wait_for(run, 10)
        final = [t async for t in c.iter_tasks(queue=q)]
        assert len(final) == 8 and all(t.status == "done" and t.result == t.payload + 100 for t in final)
        assert 2 <= peak <= 4 and w.processed == 8

        name = uid("lock")
        m1 = baton.AsyncMutex(c, name, owner="m1", lease=5, wait=1)
        m2 = baton.AsyncMutex(c, name, owner="m2", lease=5, wait=1)
        async with m1 as hold:
            with pytest.raises(baton.Locked):
                await m2.try_lock()
            await hold.kv_put("locked", name, True)
        h2 = await m2.try_lock()
        assert h2.token > hold.token
        await m2.unlock()


async def test_async_handler_cancelled_when_lease_lost(cluster: Cluster, tenant: str) -> None:
    async with _client(cluster, tenant) as c:
        q = uid("q")
        await c.create_task(q, task_id="slow")
        started = asyncio.Event()
        cancelled: list[bool] = []
        errors: list[BaseException] = []

        async def handle(ctx: baton.AsyncTaskContext) -> Any:
            started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.append(True)
                raise
            return "never"

        w = baton.AsyncWorker(c, q, handle, lease=1.5, wait=0.5, handle_signals=False,
                              on_error=lambda t, e: errors.append(e))
        run = asyncio.create_task(w.run_once())
        await asyncio.wait_for(started.wait(), 10)
        taken = await c.claim_task("slow", owner=w.owner, lease=30)  # fences the worker's token
        await asyncio.wait_for(run, 10)
        assert cancelled == [True] and any(isinstance(e, baton.LeaseLost) for e in errors)
        t = await c.get_task("slow")
        assert t.status == "pending" and t.fencing_token == taken.fencing_token and t.result is None


async def test_async_mutex_lock_cancelled_gives_back(cluster: Cluster, tenant: str) -> None:
    async with _client(cluster, tenant) as c:
        name = uid("lock")
        holder = baton.AsyncMutex(c, name, owner="holder", lease=5, wait=5)
        await holder.lock()
        real_claim = c.claim
        claimed = asyncio.Event()

        async def claim_answer_lost(*a: Any, **kw: Any) -> Any:
            t = await real_claim(*a, **kw)  # applied on the server...
            if t is not None:
                claimed.set()
                await asyncio.sleep(3600)  # ...but its answer never reaches lock()
            return t

        waiter_client = _client(cluster, tenant)
        waiter_client.claim = claim_answer_lost  # type: ignore[method-assign]
        waiter = baton.AsyncMutex(waiter_client, name, owner="waiter", lease=30, wait=5)
        pending = asyncio.create_task(waiter.lock())
        await asyncio.sleep(0.2)
        await holder.unlock()
        await asyncio.wait_for(claimed.wait(), 10)
        assert (await c.get_task(name)).owner == "waiter"
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
        t = await c.get_task(name)
        assert t.owner == "" and t.status == "free"  # given back, not held for the 30 s lease
        assert (await holder.try_lock()).token > t.fencing_token - 1
        await holder.unlock()
        await waiter_client.aclose()


async def test_requests_do_not_queue_behind_open_streams(cluster: Cluster, tenant: str) -> None:
    # The client spreads requests over several httpx pools (baton._async_client._Pools). A watch
    # holds its connection for as long as it lives; requests must go to the other pools rather
    # than wait behind it. Two pools of one connection make the difference visible: taken in
    # turn, every second request would wait for the watch (and time out).
    from baton._async_client import _Pools
    from baton._core import ssl_context

    http = httpx.AsyncClient(transport=_Pools(ssl_context(cluster.ca), pools=2, per_pool=1), trust_env=False)
    async with http, baton.AsyncClient(cluster.endpoints, token=cluster.token, tenant=tenant, ca_file=cluster.ca,
                                       http_client=http, timeout=3, max_retry=0) as c:
        start = (await c.cluster_status()).applied_index
        w = c.watch(from_index=start, resources=["kv"], idle_timeout=30)
        try:
            await c.kv_put("streams", "first", 0)
            ev = await w.__anext__()  # the watch's stream is open and held
            assert ev.key == "streams/first"
            for i in range(6):
                assert (await c.kv_put("streams", f"k{i}", i)).value == i
        finally:
            await w.aclose()
