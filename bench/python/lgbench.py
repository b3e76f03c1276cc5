"""A LangGraph step through a checkpoint saver (issue 29): ``AsyncBatonSaver`` (Baton),
``AsyncPostgresSaver`` (langgraph-checkpoint-postgres) or ``AsyncSqliteSaver``
(langgraph-checkpoint-sqlite), the same step for each.

The step is written as LangGraph's Pregel loop calls its saver in one superstep, not through a
graph (a graph would add the same Python work to every saver and measure less of the saver):

1. ``aput`` of the thread's next checkpoint (its parent the previous one, ``new_versions`` naming
   both channels, metadata ``{"source": "loop", "step": n, "parents": {}}``);
2. ``aput_writes`` of one task's writes against it (one new message and the counter);
3. ``aget_tuple`` of the thread's latest checkpoint, which must be the one just put with those
   two pending writes (anything else counts as an error).

The state is a ``messages`` channel (a list of small dicts, ``--message-bytes`` of text each) that
grows by one message a step, and a ``counter``. Each of the T concurrent workers runs a thread of
``--steps-per-thread`` steps (a conversation), then starts a new thread, so every checkpoint holds
between 1 and that many messages whichever saver is fast. Channel versions come from the saver's
own ``get_next_version``.

Savers: Baton through one ``baton.AsyncClient`` (shared by the workers); PostgreSQL through a
``psycopg_pool.AsyncConnectionPool`` of T connections (autocommit, as the saver's own
``from_conn_string``); SQLite through the saver's one ``aiosqlite`` connection to a file.

Writes one bench/result.Run as JSON on stdout (workload "langgraph", variant "T=<threads>", ops =
steps; stages put, put_writes, get_tuple); progress goes to stderr. Usage:

    bin/py-bench/bin/python bench/python/lgbench.py --saver baton --endpoints URL,... --token T --threads 32
    bin/py-bench/bin/python bench/python/lgbench.py --saver postgres --dsn postgres://... --threads 32
    bin/py-bench/bin/python bench/python/lgbench.py --saver sqlite --sqlite-path /tmp/lg.db --threads 1
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import benchlib
from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

SYSTEMS = {"baton": "baton", "postgres": "postgres", "sqlite": "sqlite"}


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="lgbench", description=__doc__.split("\n\n")[0])
    p.add_argument("--saver", required=True, choices=sorted(SYSTEMS))
    p.add_argument("--endpoints", help="baton: comma-separated node URLs")
    p.add_argument("--token", help="baton: a principal's token")
    p.add_argument("--tenant", default="bench", help="baton: the tenant the checkpoints go in")
    p.add_argument("--ca-file", default=None, help="baton: CA of a TLS cluster")
    p.add_argument("--dsn", help="postgres: connection string")
    p.add_argument("--sqlite-path", help="sqlite: database file")
    p.add_argument("--threads", type=int, default=32, help="concurrent LangGraph threads (T)")
    p.add_argument("--steps-per-thread", type=int, default=20, help="steps before a worker starts a new thread")
    p.add_argument("--message-bytes", type=int, default=200, help="text of each message")
    p.add_argument("--prefix", default="", help="thread id prefix (default lg<T>-)")
    benchlib.add_load_flags(p)
    a = p.parse_args(argv)
    need = {"baton": ["endpoints", "token"], "postgres": ["dsn"], "sqlite": ["sqlite_path"]}[a.saver]
    for n in need:
        if not getattr(a, n):
            p.error(f"--saver {a.saver} needs --{n.replace('_', '-')}")
    if a.threads < 1 or a.steps_per_thread < 1:
        p.error("--threads and --steps-per-thread: want 1 or more")
    return a


@contextlib.asynccontextmanager
async def open_saver(a: argparse.Namespace) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    if a.saver == "baton":
        import baton
        from langgraph.checkpoint.baton import AsyncBatonSaver

        eps = [e.strip() for e in a.endpoints.split(",") if e.strip()]
        async with baton.AsyncClient(eps, token=a.token, ca_file=a.ca_file, tenant=a.tenant) as client:
            yield AsyncBatonSaver(client)
    elif a.saver == "postgres":
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        async with AsyncConnectionPool(a.dsn, min_size=a.threads, max_size=a.threads, kwargs=kwargs,
                                       open=False) as pool:
            await pool.wait()
            saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
            await saver.setup()
            yield saver
    else:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(a.sqlite_path) as saver:
            await saver.setup()
            yield saver


class Thread:
    """One worker's conversation: its thread id, the last checkpoint put and the state after it."""

    def __init__(self, thread_id: str, first: dict[str, Any]) -> None:
        self.id = thread_id
        self.step = 0
        self.parent: str | None = None
        self.messages: list[dict[str, Any]] = [first]
        self.counter = 0
        self.versions: dict[str, Any] = {}


def message(w: benchlib.Worker, n: int, size: int, role: str) -> dict[str, Any]:
    text = w.rand.randbytes((size + 1) // 2).hex()[:size]
    return {"role": role, "id": f"m{n}", "content": text}


async def main(a: argparse.Namespace) -> dict[str, Any]:
    prefix = a.prefix or f"lg{a.threads}-{uuid.uuid4().hex[:6]}-"
    async with open_saver(a) as saver:
        started = [0] * a.threads

        def new_thread(w: benchlib.Worker) -> Thread:
            started[w.id] += 1
            return Thread(f"{prefix}w{w.id}-c{started[w.id]}", message(w, 0, a.message_bytes, "user"))

        async def step(w: benchlib.Worker) -> None:
            t: Thread = w.state
            if t is None or t.step >= a.steps_per_thread:
                t = w.state = new_thread(w)
            for ch in ("messages", "counter"):
                t.versions[ch] = saver.get_next_version(t.versions.get(ch), None)
            cp: Checkpoint = empty_checkpoint()
            cp["id"] = str(uuid6(clock_seq=t.step))
            cp["channel_values"] = {"messages": list(t.messages), "counter": t.counter}
            cp["channel_versions"] = dict(t.versions)
            cp["versions_seen"] = {"agent": dict(t.versions)}
            cp["updated_channels"] = ["messages", "counter"]
            cfg: dict[str, Any] = {"thread_id": t.id, "checkpoint_ns": ""}
            if t.parent:
                cfg["checkpoint_id"] = t.parent
            new_versions = dict(t.versions)
            reply = message(w, len(t.messages), a.message_bytes, "assistant")

            n0 = time.perf_counter_ns()
            got = await saver.aput({"configurable": cfg}, cp, {"source": "loop", "step": t.step, "parents": {}},
                                   new_versions)
            n1 = time.perf_counter_ns()
            await saver.aput_writes(got, [("messages", [reply]), ("counter", t.counter + 1)],
                                    task_id=str(uuid.uuid4()), task_path="~__pregel_pull, agent")
            n2 = time.perf_counter_ns()
            tup = await saver.aget_tuple({"configurable": {"thread_id": t.id, "checkpoint_ns": ""}})
            n3 = time.perf_counter_ns()
            w.observe("put", n1 - n0)
            w.observe("put_writes", n2 - n1)
            w.observe("get_tuple", n3 - n2)
            if tup is None or tup.checkpoint["id"] != cp["id"] or len(tup.pending_writes or []) != 2:
                seen = None if tup is None else (tup.checkpoint["id"], len(tup.pending_writes or []))
                raise RuntimeError(f"get_tuple of {t.id}: want {cp['id']} with 2 pending writes, got {seen}")
            if len(tup.checkpoint["channel_values"].get("messages") or []) != len(t.messages):
                raise RuntimeError(f"get_tuple of {t.id}: messages do not round-trip")
            t.parent = cp["id"]
            t.messages.append(reply)
            t.counter += 1
            t.step += 1

        benchlib.log(f"lgbench: {a.saver} T={a.threads} for {a.warmup:g}+{a.duration:g} s")
        run = await benchlib.run_load(a.threads, a.warmup, a.duration, a.seed, step)
    run.update(system=SYSTEMS[a.saver], workload="langgraph", variant=f"T={a.threads}")
    run["metrics"]["steps_per_thread"] = a.steps_per_thread
    run["metrics"]["message_bytes"] = a.message_bytes
    return run


if __name__ == "__main__":
    benchlib.emit(asyncio.run(main(parse(sys.argv[1:]))))
