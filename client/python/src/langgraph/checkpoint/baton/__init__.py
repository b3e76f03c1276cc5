"""LangGraph checkpointers on Baton: ``BatonSaver`` (a ``baton.Client``) and ``AsyncBatonSaver`` (a
``baton.AsyncClient``).

Checkpoints are kept in the client's default tenant, replicated to the cluster's members, so a
graph survives the loss of a node. They are also fork-proof: a run that extends the thread it
loaded (``get_tuple`` without a ``checkpoint_id``, or its own last ``put``) extends it only while
it is still the thread's head, so two processes resuming one thread at once cannot both extend it:
one wins and the other gets :class:`ThreadConflict`. A put from a checkpoint the run asked for by
id (time travel) or never saw as the head forks, as LangGraph means it to.

Usage::

    import baton
    from langgraph.checkpoint.baton import BatonSaver

    saver = BatonSaver(baton.Client.from_env())
    graph = builder.compile(checkpointer=saver)
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig

import baton
from baton import _mp
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

__all__ = ["AsyncBatonSaver", "BatonSaver", "ThreadConflict"]

# How many (thread, namespace, checkpoint) heads a saver remembers having seen: a put from one it
# forgot forks instead of extending guarded (see the module's doc).
HEADS_REMEMBERED = 10_000

# The most bytes of new channel values a put sends in its request as blobs, within the server's 1 MiB
# request: in msgpack the bytes go as they are, in JSON base64 takes a third more. A value over
# baton.BLOB_CHUNKED_MIN is not counted: the SDK uploads it as chunks, stored once. When the others add
# up to more, they all travel in the checkpoint's data, which may go through chunks.
BLOBS_INLINE_MAX = 640 << 10
BLOBS_INLINE_MAX_MSGPACK = 960 << 10

# The blob channel that holds a checkpoint's own serialized bytes (the checkpoint without its channel
# values), versioned by the checkpoint's id: bytes, not base64 inside the data. LangGraph keeps names
# that start with "__" for itself, and has no channel of this one.
CHECKPOINT_CHANNEL = "__baton_checkpoint__"


class ThreadConflict(baton.VersionMismatch):
    """Another process extended the thread first: this run's checkpoint was not written.

    ``current_head`` is the thread's head now. Load the thread again (``get_tuple`` without a
    ``checkpoint_id``) to continue from it; do not retry the same put.
    """


class _Heads:
    """The checkpoints this saver saw as the head of their namespace, least recently used first."""

    def __init__(self, size: int = HEADS_REMEMBERED) -> None:
        self._seen: OrderedDict[tuple[str, str, str], None] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def saw(self, thread: str, ns: str, checkpoint_id: str) -> None:
        with self._lock:
            key = (thread, ns, checkpoint_id)
            self._seen[key] = None
            self._seen.move_to_end(key)
            while len(self._seen) > self._size:
                self._seen.popitem(last=False)

    def forget(self, thread: str, ns: str, checkpoint_id: str) -> None:
        with self._lock:
            self._seen.pop((thread, ns, checkpoint_id), None)

    def seen(self, thread: str, ns: str, checkpoint_id: str) -> bool:
        with self._lock:
            return (thread, ns, checkpoint_id) in self._seen


def _typed(serde: SerializerProtocol, value: Any) -> list[str]:
    kind, data = serde.dumps_typed(value)
    return [kind, base64.b64encode(data).decode("ascii")]


def _untyped(serde: SerializerProtocol, typed: Any) -> Any:
    kind, data = typed
    return serde.loads_typed((kind, base64.b64decode(data)))


def _metadata_json(config: RunnableConfig, metadata: CheckpointMetadata) -> Any:
    md = get_serializable_checkpoint_metadata(config, metadata)
    # What the server filters on: JSON as it is, anything else as its text.
    return json.loads(json.dumps(md, default=str))


def _list_scope(config: RunnableConfig | None) -> tuple[str | None, str | None]:
    """The thread and namespace a list is about: None for every one (no config, no thread_id, no
    checkpoint_ns key; an empty checkpoint_ns is the default namespace)."""
    c = (config or {}).get("configurable") or {}
    thread = c.get("thread_id")
    ns = c.get("checkpoint_ns")
    return (None if thread is None else str(thread)), (None if ns is None else str(ns))


def _configurable(config: RunnableConfig) -> dict[str, Any]:
    c = config.get("configurable")
    if not isinstance(c, dict) or "thread_id" not in c:
        raise ValueError('a Baton checkpointer needs config["configurable"]["thread_id"]')
    return c


class _Codec:
    """How LangGraph's checkpoints, metadata and writes map onto Baton's checkpoint API: one
    shared by the sync and async savers (the I/O is theirs)."""

    def __init__(self, serde: SerializerProtocol) -> None:
        self.serde = serde

    def checkpoint_put(
        self, checkpoint: Checkpoint, new_versions: ChannelVersions, *, every_value: bool = False
    ) -> tuple[dict[str, Any], dict[str, str], list[baton.Blob]]:
        """The put of a checkpoint: its data, the versions of its values, and the values new to the
        namespace (``new_versions``; every one with ``every_value``). Values are stored once per
        (channel, version), as LangGraph's own savers keep checkpoint_blobs, and the checkpoint without
        its values is a blob of its own (CHECKPOINT_CHANNEL). When the values are too large for one
        request, or one has no version, they travel inside the data instead, base64 (which may then go
        through chunks)."""
        rest = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        values: dict[str, Any] = dict(checkpoint.get("channel_values") or {})
        versions = checkpoint.get("channel_versions") or {}
        kind, raw = self.serde.dumps_typed(rest)
        blob_versions: dict[str, str] = {CHECKPOINT_CHANNEL: str(checkpoint["id"])}
        blobs = [baton.Blob(channel=CHECKPOINT_CHANNEL, version=str(checkpoint["id"]), type=kind, data=raw)]
        size = len(raw)
        limit = BLOBS_INLINE_MAX_MSGPACK if _mp.on() else BLOBS_INLINE_MAX
        for ch, value in values.items():
            if ch not in versions or ch == CHECKPOINT_CHANNEL:
                break
            blob_versions[ch] = str(versions[ch])
            if every_value or ch in new_versions:
                kind, raw = self.serde.dumps_typed(value)
                blobs.append(baton.Blob(channel=ch, version=blob_versions[ch], type=kind, data=raw))
                if len(raw) <= baton.BLOB_CHUNKED_MIN:
                    size += len(raw)
        else:
            if size <= limit:
                return {"checkpoint_in": CHECKPOINT_CHANNEL}, blob_versions, blobs
        data = {"checkpoint": _typed(self.serde, rest),
                "channel_values": {ch: _typed(self.serde, v) for ch, v in values.items()}}
        return data, {}, []

    def writes(self, writes: Sequence[tuple[str, Any]]) -> list[dict[str, Any]]:
        """Each write as bytes of the serializer's type (b64: the SDK sends them as they are in
        msgpack, base64 in JSON)."""
        out = []
        for i, (ch, v) in enumerate(writes):
            kind, raw = self.serde.dumps_typed(v)
            out.append({"channel": ch, "type": kind, "b64": raw, "idx": WRITES_IDX_MAP.get(ch, i)})
        return out

    def tuple(self, cp: baton.Checkpoint, ns: str) -> CheckpointTuple:
        data = cp.data if isinstance(cp.data, dict) else {}
        values = {ch: _untyped(self.serde, v) for ch, v in (data.get("channel_values") or {}).items()}
        own: Any = None
        for b in cp.blobs:
            if b.channel == CHECKPOINT_CHANNEL:
                own = self.serde.loads_typed((b.type, b.data))
            else:
                values[b.channel] = self.serde.loads_typed((b.type, b.data))
        # Checkpoints put before CHECKPOINT_CHANNEL, or with their values in the data, hold it there.
        checkpoint = cast(Checkpoint, own if "checkpoint" not in data else _untyped(self.serde, data["checkpoint"]))
        checkpoint["channel_values"] = values
        thread = cp.thread_id
        config: RunnableConfig = {
            "configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": cp.checkpoint_id}
        }
        parent: RunnableConfig | None = None
        if cp.parent_id:
            parent = {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": cp.parent_id}}
        # LangGraph replays a step's writes in (task_path, task_id, idx) order (writes_sort_key).
        pending = sorted(cp.pending_writes, key=lambda w: (w.task_path, w.task_id, w.idx))
        return CheckpointTuple(
            config=config,
            checkpoint=checkpoint,
            metadata=cast(CheckpointMetadata, cp.metadata if isinstance(cp.metadata, dict) else {}),
            parent_config=parent,
            pending_writes=[(w.task_id, w.channel, self._write_value(w)) for w in pending],
        )


    def _write_value(self, w: baton.PendingWrite) -> Any:
        if w.type:
            return self.serde.loads_typed((w.type, w.data))
        return _untyped(self.serde, w.value)  # written as [type, base64] before writes of bytes


def _next_version(current: str | int | float | None) -> str:
    # Versions that sort as strings, with a random part so that two forks of one checkpoint do not
    # name different values alike.
    if current is None:
        n = 0
    elif isinstance(current, (int, float)):
        n = int(current)
    else:
        n = int(current.split(".")[0])
    return f"{n + 1:032}.{random.random():016}"


class BatonSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer on a Baton cluster, for synchronous graphs (``graph.invoke``).

    ``client`` is a ``baton.Client`` with a default tenant (``tenant=`` or ``BATON_TENANT``); its
    principal needs the ``checkpoints`` grants of the threads the graphs use. The async methods
    (``ainvoke``) run the sync ones in a worker thread; prefer :class:`AsyncBatonSaver` there.
    """

    def __init__(self, client: baton.Client, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        self.client = client
        self._codec = _Codec(self.serde)
        self._heads = _Heads()

    def get_next_version(self, current: str | None, channel: None = None) -> str:
        return _next_version(current)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        c = _configurable(config)
        thread, ns, cid = str(c["thread_id"]), str(c.get("checkpoint_ns") or ""), get_checkpoint_id(config)
        try:
            if cid:
                cp = self.client.get_checkpoint(thread, cid, ns=ns)
                self._heads.forget(thread, ns, cid)  # a checkpoint asked for by id: a put from it forks
            else:
                cp = self.client.latest_checkpoint(thread, ns=ns)
                self._heads.saw(thread, ns, cp.checkpoint_id)
        except baton.NotFound:
            if not cid:
                self._heads.saw(thread, ns, "")
            return None
        return self._codec.tuple(cp, ns)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        thread, ns = _list_scope(config)
        before_id = get_checkpoint_id(before) if before else None
        if thread is not None and ns is not None:  # one namespace of one thread: its own, cheaper list
            pages = self.client.iter_checkpoints(thread, ns=ns, filter=filter or None, before=before_id,
                                                 limit=limit, pending_writes=True)
        else:
            pages = self.client.iter_tenant_checkpoints(thread=thread, ns=ns, filter=filter or None,
                                                        before_id=before_id, limit=limit, pending_writes=True)
        for cp in pages:
            if cp.data is None and cp.data_chunks:  # held in chunks: read whole
                cp = self.client.get_checkpoint(cp.thread_id, cp.checkpoint_id, ns=cp.checkpoint_ns)
            yield self._codec.tuple(cp, cp.checkpoint_ns)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        c = _configurable(config)
        thread, ns = str(c["thread_id"]), str(c.get("checkpoint_ns") or "")
        parent = get_checkpoint_id(config) or ""
        guarded = self._heads.seen(thread, ns, parent)
        md = _metadata_json(config, metadata)
        data, versions, blobs = self._codec.checkpoint_put(checkpoint, new_versions)
        try:
            try:
                self.client.put_checkpoint(thread, checkpoint["id"], data, ns=ns, parent_id=parent or None,
                                           metadata=md, fork=not guarded, blob_versions=versions, blobs=blobs)
            except baton.InvalidArgument as e:
                if "missing_blobs" not in e.details:
                    raise
                # A value this put took as stored went with the checkpoints that named it: send them all.
                data, versions, blobs = self._codec.checkpoint_put(checkpoint, new_versions, every_value=True)
                self.client.put_checkpoint(thread, checkpoint["id"], data, ns=ns, parent_id=parent or None,
                                           metadata=md, fork=not guarded, blob_versions=versions, blobs=blobs)
        except baton.VersionMismatch as e:
            raise _conflict(e, thread, ns, parent) from e
        self._heads.saw(thread, ns, checkpoint["id"])
        return {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}}

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        c = _configurable(config)
        thread, ns, cid = str(c["thread_id"]), str(c.get("checkpoint_ns") or ""), get_checkpoint_id(config)
        if not cid:
            raise ValueError('put_writes needs config["configurable"]["checkpoint_id"]')
        self.client.put_writes(thread, cid, task_id, self._codec.writes(writes), task_path=task_path or None, ns=ns)

    def delete_thread(self, thread_id: str) -> None:
        try:
            self.client.delete_thread(str(thread_id))
        except baton.NotFound:
            pass  # nothing to delete

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        if run_ids:
            self.client.delete_runs([str(r) for r in run_ids])

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.client.copy_thread(str(source_thread_id), str(target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        if thread_ids:
            self.client.prune_checkpoints([str(t) for t in thread_ids], strategy=strategy)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        items = await asyncio.to_thread(lambda: list(self.list(config, filter=filter, before=before, limit=limit)))
        for item in items:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


class AsyncBatonSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer on a Baton cluster for asyncio graphs (``graph.ainvoke``), on a
    ``baton.AsyncClient``. Its sync methods are not served: use :class:`BatonSaver` for those."""

    def __init__(self, client: baton.AsyncClient, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        self.client = client
        self._codec = _Codec(self.serde)
        self._heads = _Heads()

    def get_next_version(self, current: str | None, channel: None = None) -> str:
        return _next_version(current)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        c = _configurable(config)
        thread, ns, cid = str(c["thread_id"]), str(c.get("checkpoint_ns") or ""), get_checkpoint_id(config)
        try:
            if cid:
                cp = await self.client.get_checkpoint(thread, cid, ns=ns)
                self._heads.forget(thread, ns, cid)
            else:
                cp = await self.client.latest_checkpoint(thread, ns=ns)
                self._heads.saw(thread, ns, cp.checkpoint_id)
        except baton.NotFound:
            if not cid:
                self._heads.saw(thread, ns, "")
            return None
        return self._codec.tuple(cp, ns)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        thread, ns = _list_scope(config)
        before_id = get_checkpoint_id(before) if before else None
        if thread is not None and ns is not None:
            pages = self.client.iter_checkpoints(thread, ns=ns, filter=filter or None, before=before_id,
                                                 limit=limit, pending_writes=True)
        else:
            pages = self.client.iter_tenant_checkpoints(thread=thread, ns=ns, filter=filter or None,
                                                        before_id=before_id, limit=limit, pending_writes=True)
        async for cp in pages:
            if cp.data is None and cp.data_chunks:
                cp = await self.client.get_checkpoint(cp.thread_id, cp.checkpoint_id, ns=cp.checkpoint_ns)
            yield self._codec.tuple(cp, cp.checkpoint_ns)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        c = _configurable(config)
        thread, ns = str(c["thread_id"]), str(c.get("checkpoint_ns") or "")
        parent = get_checkpoint_id(config) or ""
        guarded = self._heads.seen(thread, ns, parent)
        md = _metadata_json(config, metadata)
        data, versions, blobs = self._codec.checkpoint_put(checkpoint, new_versions)
        try:
            try:
                await self.client.put_checkpoint(thread, checkpoint["id"], data, ns=ns, parent_id=parent or None,
                                                 metadata=md, fork=not guarded, blob_versions=versions, blobs=blobs)
            except baton.InvalidArgument as e:
                if "missing_blobs" not in e.details:
                    raise
                data, versions, blobs = self._codec.checkpoint_put(checkpoint, new_versions, every_value=True)
                await self.client.put_checkpoint(thread, checkpoint["id"], data, ns=ns, parent_id=parent or None,
                                                 metadata=md, fork=not guarded, blob_versions=versions, blobs=blobs)
        except baton.VersionMismatch as e:
            raise _conflict(e, thread, ns, parent) from e
        self._heads.saw(thread, ns, checkpoint["id"])
        return {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}}

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        c = _configurable(config)
        thread, ns, cid = str(c["thread_id"]), str(c.get("checkpoint_ns") or ""), get_checkpoint_id(config)
        if not cid:
            raise ValueError('put_writes needs config["configurable"]["checkpoint_id"]')
        await self.client.put_writes(thread, cid, task_id, self._codec.writes(writes),
                                     task_path=task_path or None, ns=ns)

    async def adelete_thread(self, thread_id: str) -> None:
        try:
            await self.client.delete_thread(str(thread_id))
        except baton.NotFound:
            pass

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        if run_ids:
            await self.client.delete_runs([str(r) for r in run_ids])

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self.client.copy_thread(str(source_thread_id), str(target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        if thread_ids:
            await self.client.prune_checkpoints([str(t) for t in thread_ids], strategy=strategy)


def _conflict(e: baton.VersionMismatch, thread: str, ns: str, parent: str) -> ThreadConflict:
    where = f"thread {thread!r}" + (f" (namespace {ns!r})" if ns else "")
    head = e.current_head or "none"
    return ThreadConflict(
        f"another process extended {where} first: its head is {head}, not {parent or 'empty'} as this run "
        "loaded it; this checkpoint was not written (load the thread again to continue from its head)",
        code=e.code, status=e.status, details=e.details, index=e.index,
    )
