"""LangGraph's long-term memory store on Baton: ``BatonStore`` (a ``baton.Client``) and ``AsyncBatonStore``
(a ``baton.AsyncClient``).

Items live in the client's default tenant, replicated to the cluster's members. The server does the
work of a ``BaseStore``: namespaces of labels, get / put / delete, search under a namespace prefix with
filters (``$eq $ne $gt $gte $lt $lte``), limit and offset, namespace listing with prefix / suffix
conditions and max depth, TTLs in minutes refreshed on read, and exact k-nearest search (cosine) over
the vectors the store computes with the ``index`` config's embeddings, as ``InMemoryStore`` and
``PostgresStore`` do (docs/api.md, "Knowledge store (LangGraph)").

Usage::

    import baton
    from langgraph.store.baton import BatonStore

    store = BatonStore(baton.Client.from_env(), index={"dims": 1536, "embed": "openai:text-embedding-3-small"})
    graph = builder.compile(store=store)

Within one ``batch``, reads see the state before its puts (as ``PostgresStore``), puts of one
namespace and key keep the last, and up to 256 puts are applied all or nothing (more go in several
writes). A search examines at most the server's ``--store-scan-max`` items under its prefix; a search
or namespace listing answers at most 1,000 at a time (``limit``; page with ``offset``, up to 100,000),
and a larger ``limit`` is ``baton.InvalidArgument``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

import baton
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)
from langgraph.store.base.embed import ensure_embeddings, get_text_at_path, tokenize_path

__all__ = ["AsyncBatonStore", "BatonStore"]

# The most items one write or get of the server takes.
_MAX_ITEMS = 256

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class _Plan:
    """A batch's ops sorted by kind, in the order their answers go back."""

    def __init__(self, ops: Iterable[Op]) -> None:
        self.ops = list(ops)
        self.results: list[Result] = [None] * len(self.ops)
        self.gets: list[tuple[int, GetOp]] = []
        self.searches: list[tuple[int, SearchOp]] = []
        self.lists: list[tuple[int, ListNamespacesOp]] = []
        self.puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for i, op in enumerate(self.ops):
            validate_op_namespace(op)
            if isinstance(op, GetOp):
                self.gets.append((i, op))
            elif isinstance(op, SearchOp):
                self.searches.append((i, op))
            elif isinstance(op, ListNamespacesOp):
                self.lists.append((i, op))
            elif isinstance(op, PutOp):
                self.puts.pop((op.namespace, op.key), None)
                self.puts[(op.namespace, op.key)] = op  # the last put of a key wins
            else:
                raise ValueError(f"Unknown operation type: {type(op)}")

    def get_groups(self) -> list[tuple[bool, list[tuple[int, GetOp]]]]:
        """The gets in calls of at most _MAX_ITEMS, those that refresh TTLs apart."""
        out: list[tuple[bool, list[tuple[int, GetOp]]]] = []
        for refresh in (False, True):
            group = [(i, op) for i, op in self.gets if bool(op.refresh_ttl) == refresh]
            out += [(refresh, group[j : j + _MAX_ITEMS]) for j in range(0, len(group), _MAX_ITEMS)]
        return out


class _Index:
    """The ``index`` config: which texts of a value are embedded, and the embeddings."""

    def __init__(self, index: IndexConfig | None) -> None:
        self.config: IndexConfig | None = None
        self.embeddings: Any = None
        self.fields: list[tuple[str, Any]] = []
        if index:
            self.config = index.copy()
            self.embeddings = ensure_embeddings(index.get("embed"))
            self.fields = [(p, tokenize_path(p)) if p != "$" else (p, p) for p in (index.get("fields") or ["$"])]

    def texts(self, op: PutOp) -> list[str]:
        """The texts of a put to embed, one vector each."""
        if self.embeddings is None or op.value is None or op.index is False:
            return []
        paths = self.fields if op.index is None else [(p, tokenize_path(p)) for p in op.index]
        out: list[str] = []
        for _, field in paths:
            out += get_text_at_path(op.value, field)
        return out

    def queries(self, plan: _Plan) -> list[str]:
        if self.embeddings is None:
            return []
        return sorted({op.query for _, op in plan.searches if op.query})


def _write_op(op: PutOp, vectors: Sequence[Sequence[float]]) -> dict[str, Any]:
    w: dict[str, Any] = {"namespace": list(op.namespace), "key": op.key}
    if op.value is not None:
        w["value"] = op.value
        if vectors:
            w["vectors"] = [list(v) for v in vectors]
        if op.ttl is not None:
            w["ttl_minutes"] = float(op.ttl)
    return w


def _item(it: baton.StoreItem) -> Item:
    return Item(value=it.value, key=it.key, namespace=it.namespace, created_at=it.created_at or _EPOCH,
                updated_at=it.updated_at or _EPOCH)


def _search_item(it: baton.StoreItem) -> SearchItem:
    return SearchItem(it.namespace, it.key, it.value, it.created_at or _EPOCH, it.updated_at or _EPOCH,
                      score=it.score)


def _conditions(op: ListNamespacesOp) -> list[tuple[str, Sequence[str]]]:
    return [(c.match_type, tuple(c.path)) for c in op.match_conditions or ()]


def _put_ops(plan: _Plan, vectors: dict[tuple[tuple[str, ...], str], list[list[float]]]) -> list[list[dict[str, Any]]]:
    ops = [_write_op(op, vectors.get(k, [])) for k, op in plan.puts.items()]
    return [ops[j : j + _MAX_ITEMS] for j in range(0, len(ops), _MAX_ITEMS)]


def _to_embed(index: _Index, plan: _Plan) -> list[tuple[tuple[tuple[str, ...], str], str]]:
    return [(k, t) for k, op in plan.puts.items() for t in index.texts(op)]


def _group_vectors(todo: list[tuple[tuple[tuple[str, ...], str], str]],
                   embedded: Sequence[Sequence[float]]) -> dict[tuple[tuple[str, ...], str], list[list[float]]]:
    if len(embedded) != len(todo):
        raise ValueError(f"the embeddings gave {len(embedded)} vectors for {len(todo)} texts")
    out: dict[tuple[tuple[str, ...], str], list[list[float]]] = {}
    for (k, _), v in zip(todo, embedded, strict=True):
        out.setdefault(k, []).append([float(x) for x in v])
    return out


class BatonStore(BaseStore):
    """LangGraph's ``BaseStore`` on a Baton cluster, on a ``baton.Client`` and its default tenant.

    ``index``: LangGraph's ``IndexConfig`` (``dims``, ``embed``, ``fields``) for semantic search;
    ``ttl``: its ``TTLConfig`` (``default_ttl`` in minutes, ``refresh_on_read``). Expired items are
    purged by the cluster's leader; no sweeper runs in this process.
    """

    supports_ttl = True

    def __init__(self, client: baton.Client, *, index: IndexConfig | None = None,
                 ttl: TTLConfig | None = None) -> None:
        self.client = client
        self._index = _Index(index)
        self.index_config = self._index.config
        self.embeddings = self._index.embeddings
        self.ttl_config = ttl

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        plan = _Plan(ops)
        for refresh, group in plan.get_groups():
            items = self.client.store_get([(op.namespace, op.key) for _, op in group], refresh_ttl=refresh)
            for (i, _), it in zip(group, items, strict=True):
                plan.results[i] = None if it is None else _item(it)
        queries = self._index.queries(plan)
        qv = {q: self.embeddings.embed_query(q) for q in queries}
        for i, sop in plan.searches:
            if sop.limit <= 0:
                plan.results[i] = []
                continue
            found = self.client.store_search(sop.namespace_prefix, filter=sop.filter,
                                             vector=qv.get(sop.query or ""), limit=sop.limit,
                                             offset=sop.offset, refresh_ttl=bool(sop.refresh_ttl))
            plan.results[i] = [_search_item(it) for it in found]
        for i, lop in plan.lists:
            plan.results[i] = self.client.store_namespaces(match_conditions=_conditions(lop), max_depth=lop.max_depth,
                                                           limit=lop.limit, offset=lop.offset)
        todo = _to_embed(self._index, plan)
        vectors = _group_vectors(todo, self.embeddings.embed_documents([t for _, t in todo])) if todo else {}
        for chunk in _put_ops(plan, vectors):
            self.client.store_write(chunk)
        return plan.results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))


class AsyncBatonStore(BaseStore):
    """LangGraph's ``BaseStore`` on a Baton cluster for asyncio graphs, on a ``baton.AsyncClient`` and its
    default tenant (see :class:`BatonStore`). Its sync methods work from threads other than the event
    loop's, once the store has been used on that loop."""

    supports_ttl = True

    def __init__(self, client: baton.AsyncClient, *, index: IndexConfig | None = None,
                 ttl: TTLConfig | None = None) -> None:
        self.client = client
        self._index = _Index(index)
        self.index_config = self._index.config
        self.embeddings = self._index.embeddings
        self.ttl_config = ttl
        self._loop: asyncio.AbstractEventLoop | None = None
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            pass

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        self._loop = asyncio.get_running_loop()
        plan = _Plan(ops)

        async def get(refresh: bool, group: list[tuple[int, GetOp]]) -> None:
            items = await self.client.store_get([(op.namespace, op.key) for _, op in group], refresh_ttl=refresh)
            for (i, _), it in zip(group, items, strict=True):
                plan.results[i] = None if it is None else _item(it)

        queries = self._index.queries(plan)
        qv: dict[str, list[float]] = {}
        if queries:
            qv = dict(zip(queries, await asyncio.gather(*[self.embeddings.aembed_query(q) for q in queries]),
                          strict=True))

        async def search(i: int, sop: SearchOp) -> None:
            if sop.limit <= 0:
                plan.results[i] = []
                return
            found = await self.client.store_search(sop.namespace_prefix, filter=sop.filter,
                                                   vector=qv.get(sop.query or ""), limit=sop.limit,
                                                   offset=sop.offset, refresh_ttl=bool(sop.refresh_ttl))
            plan.results[i] = [_search_item(it) for it in found]

        async def listing(i: int, lop: ListNamespacesOp) -> None:
            plan.results[i] = await self.client.store_namespaces(
                match_conditions=_conditions(lop), max_depth=lop.max_depth, limit=lop.limit, offset=lop.offset)

        await asyncio.gather(*[get(r, g) for r, g in plan.get_groups()],
                             *[search(i, op) for i, op in plan.searches],
                             *[listing(i, op) for i, op in plan.lists])
        todo = _to_embed(self._index, plan)
        vectors: dict[tuple[tuple[str, ...], str], list[list[float]]] = {}
        if todo:
            vectors = _group_vectors(todo, await self.embeddings.aembed_documents([t for _, t in todo]))
        for chunk in _put_ops(plan, vectors):
            await self.client.store_write(chunk)
        return plan.results

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        loop = self._loop
        if loop is None or loop.is_closed():
            raise RuntimeError("AsyncBatonStore: use it on its event loop first (abatch), or use BatonStore")
        try:
            if asyncio.get_running_loop() is loop:
                raise asyncio.InvalidStateError(
                    "AsyncBatonStore's sync methods cannot run on its own event loop: await the a* methods")
        except RuntimeError:
            pass
        return asyncio.run_coroutine_threadsafe(self.abatch(list(ops)), loop).result()
