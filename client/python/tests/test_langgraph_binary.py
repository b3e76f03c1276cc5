"""The LangGraph savers' bytes on the wire (issue 29, binary values): application/msgpack with the
serializer's bytes as msgpack bin, no base64; JSON (base64) when msgpack is off; each reads what the
other wrote. Against a real cluster."""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Cluster, uid

import baton
from baton import _mp

pytest.importorskip("langgraph.checkpoint.baton", reason="make test-python installs langgraph")

from langgraph.checkpoint.base import empty_checkpoint  # noqa: E402
from langgraph.checkpoint.baton import CHECKPOINT_CHANNEL, AsyncBatonSaver, BatonSaver  # noqa: E402

# A value whose serialized bytes are not UTF-8, and whose base64 is easy to look for.
VALUE = {"blob": b"\x00\xff\xfe" * 40, "text": "bytes on the wire"}


def _tenant(cluster: Cluster) -> str:
    name = "lgb-" + uuid.uuid4().hex[:10]
    with baton.Client(cluster.endpoints, token=cluster.token, ca_file=cluster.ca) as c:
        c.create_tenant(name)
    return name


@pytest.fixture
def client(cluster: Cluster) -> Iterator[baton.Client]:
    with baton.Client(cluster.endpoints, token=cluster.token, ca_file=cluster.ca, tenant=_tenant(cluster)) as c:
        yield c


def _spy(client: Any, answers: list[bytes] | None = None) -> list[Any]:
    """The calls the client sends (content type, Accept, body), recorded; with answers, the first byte
    of each answer too (sync clients)."""
    calls: list[Any] = []
    send = client._send

    def spying(call: Any) -> Any:
        calls.append(call)
        ans = send(call)
        if answers is not None:
            answers.append(ans.body[:1])
        return ans

    client._send = spying
    return calls


def _step(saver: Any, thread: str, n: int, parent: str | None) -> tuple[Any, str]:
    cp = empty_checkpoint()
    cp["channel_values"] = {"state": dict(VALUE, n=n)}
    cp["channel_versions"] = {"state": saver.get_next_version(None if n == 0 else str(n), None)}
    cfg: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    if parent:
        cfg["configurable"]["checkpoint_id"] = parent
    got = saver.put(cfg, cp, {"source": "loop", "step": n}, dict(cp["channel_versions"]))
    saver.put_writes(got, [("state", dict(VALUE, n=n + 1)), ("__interrupt__", b"\x00why")], task_id=f"t{n}",
                     task_path="~__pregel_pull, agent")
    return got, cp["id"]


def _check(saver: Any, thread: str, n: int, cid: str) -> None:
    tup = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    assert tup is not None and tup.checkpoint["id"] == cid
    assert tup.checkpoint["channel_values"] == {"state": dict(VALUE, n=n)}
    assert CHECKPOINT_CHANNEL not in tup.checkpoint["channel_values"]
    assert sorted(tup.pending_writes, key=lambda w: w[1]) == [
        (f"t{n}", "__interrupt__", b"\x00why"), (f"t{n}", "state", dict(VALUE, n=n + 1))]
    listed = list(saver.list({"configurable": {"thread_id": thread}}))
    assert [t.checkpoint["id"] for t in listed][0] == cid
    assert listed[0].checkpoint["channel_values"] == {"state": dict(VALUE, n=n)} and len(listed[0].pending_writes) == 2


def test_saver_sends_bytes_as_msgpack(client: baton.Client) -> None:
    """put, put_writes, get_tuple and list go as application/msgpack both ways, the serializer's bytes
    in the bodies as they are: no base64 of them anywhere."""
    assert _mp.on(), "ormsgpack comes with langgraph-checkpoint"
    saver = BatonSaver(client)
    answers: list[bytes] = []
    calls = _spy(client, answers)
    thread = uid("mp")
    cfg, cid = _step(saver, thread, 0, None)
    _check(saver, thread, 0, cid)
    cp_calls = [c for c in calls if "checkpoints" in c.path]
    assert len(cp_calls) >= 4
    # The answers are msgpack maps too (a JSON one starts with "{"): the Accept header went out.
    assert all(a and a != b"{" for a, c in zip(answers, calls, strict=True) if "checkpoints" in c.path), answers
    for c in cp_calls:
        assert c.accept == _mp.MEDIA, c.path
        if c.body is not None:
            assert c.content_type == _mp.MEDIA, c.path
    _, raw = saver.serde.dumps_typed(dict(VALUE, n=0))
    put = next(c for c in cp_calls if c.method == "PUT" and "/writes/" not in c.path)
    assert raw in put.body and base64.b64encode(raw) not in put.body
    writes = next(c for c in cp_calls if "/writes/" in c.path)
    assert b"\x00why" in writes.body


def test_saver_speaks_json_without_msgpack(client: baton.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """With msgpack off the same steps go as JSON (bytes in base64), and either form reads the
    other's checkpoints."""
    saver = BatonSaver(client)
    thread = uid("json")
    monkeypatch.setattr(_mp, "ENABLED", False)
    calls = _spy(client)
    _, c0 = _step(saver, thread, 0, None)
    _check(saver, thread, 0, c0)
    assert all(c.accept == "" and c.content_type in ("", "application/json") for c in calls if "checkpoints" in c.path)
    monkeypatch.setattr(_mp, "ENABLED", True)
    _check(saver, thread, 0, c0)  # written in JSON, read in msgpack
    _, c1 = _step(saver, thread, 1, c0)
    monkeypatch.setattr(_mp, "ENABLED", False)
    _check(saver, thread, 1, c1)  # written in msgpack, read in JSON


def test_async_saver_msgpack(cluster: Cluster) -> None:
    async def run() -> None:
        async with baton.AsyncClient(cluster.endpoints, token=cluster.token, ca_file=cluster.ca,
                                     tenant=_tenant(cluster)) as c:
            saver = AsyncBatonSaver(c)
            calls = _spy(c)
            thread = uid("amp")
            cp = empty_checkpoint()
            cp["channel_values"] = {"state": VALUE}
            cp["channel_versions"] = {"state": saver.get_next_version(None, None)}
            got = await saver.aput({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, cp, {"step": 0},
                                   dict(cp["channel_versions"]))
            await saver.aput_writes(got, [("state", b"\xff")], task_id="t")
            tup = await saver.aget_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
            assert tup is not None and tup.checkpoint["channel_values"] == {"state": VALUE}
            assert tup.pending_writes == [("t", "state", b"\xff")]
            assert [c.accept for c in calls if "checkpoints" in c.path] == [_mp.MEDIA] * 3

    asyncio.run(run())


def test_large_value_stored_once_in_chunks(cluster: Cluster, client: baton.Client) -> None:
    """A value over BLOB_CHUNKED_MIN goes as chunks uploaded once: a second version of the same bytes
    (another checkpoint) uploads nothing and names the same chunks, which the server holds; the saver
    reads it back whole, also after the leader is killed."""
    saver = BatonSaver(client)
    uploaded: list[int] = []
    put_chunk = client.put_chunk

    def counting(body: bytes, **kw: Any) -> Any:
        uploaded.append(len(body))
        return put_chunk(body, **kw)

    client.put_chunk = counting  # type: ignore[method-assign]
    big = {"doc": bytes(range(256)) * 2048 + b"tail"}  # 512 KiB, and not text
    thread = uid("big")
    cfg: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    ids = []
    for n in range(2):
        cp = empty_checkpoint()
        cp["channel_values"] = {"big": big, "n": n}
        cp["channel_versions"] = {"big": str(n + 1), "n": str(n + 1)}  # a new version of equal bytes
        cfg = saver.put(cfg, cp, {"step": n}, dict(cp["channel_versions"]))
        ids.append(cp["id"])
        if n == 0:
            first = sum(uploaded)
            assert first >= len(big["doc"]), uploaded
    assert sum(uploaded) == first, "the second version of equal bytes uploaded chunks again"
    chunk_lists = []
    for cid in ids:
        raw = client.request("GET", f"/v1/tenants/{client.tenant}/threads/{thread}/checkpoints/{cid}")
        (blob,) = [b for b in raw["blobs"] if b["channel"] == "big"]
        chunk_lists.append([c["digest"] for c in blob["chunks"]])
    assert chunk_lists[0] == chunk_lists[1] and len(chunk_lists[0]) >= 1
    assert client.missing_chunks(chunk_lists[0]) == []
    i = cluster.leader()
    cluster.kill(i)
    try:
        tup = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
        assert tup is not None and tup.checkpoint["channel_values"] == {"big": big, "n": 1}
    finally:
        cluster.start(i)
        cluster.wait_ready()
