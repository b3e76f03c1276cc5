"""LangGraph on Baton: the checkpointers against LangGraph's own conformance suite, and a real
StateGraph with interrupt() and Command(resume=...) across a leader kill and two racing resumers."""

from __future__ import annotations

import asyncio
import sys
import threading
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any, TypedDict

import pytest
from conftest import Cluster, uid

import baton

pytest.importorskip("langgraph.checkpoint.conformance", reason="make test-python installs langgraph")

from langgraph.checkpoint.base import BaseCheckpointSaver  # noqa: E402
from langgraph.checkpoint.baton import CHECKPOINT_CHANNEL, AsyncBatonSaver, BatonSaver, ThreadConflict  # noqa: E402
from langgraph.checkpoint.conformance import checkpointer_test, validate  # noqa: E402
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES  # noqa: E402
from langgraph.checkpoint.conformance.report import ProgressCallbacks  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import Command, interrupt  # noqa: E402


def _fresh_tenant(cluster: Cluster) -> str:
    name = "lg-" + uuid.uuid4().hex[:10]
    with baton.Client(cluster.endpoints, token=cluster.token, ca_file=cluster.ca) as c:
        c.create_tenant(name)
    return name


def test_conformance_suite(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    """langgraph-checkpoint-conformance, as published: every base and extended capability of both
    savers, each capability on a fresh tenant (the suite reuses thread ids across its tests)."""

    @checkpointer_test(name="AsyncBatonSaver")
    async def async_saver() -> AsyncIterator[BaseCheckpointSaver[Any]]:
        async with baton.AsyncClient(cluster.endpoints, token=cluster.token, ca_file=cluster.ca,
                                     tenant=_fresh_tenant(cluster)) as c:
            yield AsyncBatonSaver(c)

    @checkpointer_test(name="BatonSaver")
    async def sync_saver() -> AsyncIterator[BaseCheckpointSaver[Any]]:
        with baton.Client(cluster.endpoints, token=cluster.token, ca_file=cluster.ca,
                          tenant=_fresh_tenant(cluster)) as c:
            yield BatonSaver(c)

    for registered in (async_saver, sync_saver):
        with capsys.disabled():  # the suite's own report, in make test's output
            report = asyncio.run(validate(registered, progress=ProgressCallbacks.default()))
            report.print_report()
        for cap in ALL_CAPABILITIES:
            result = report.results[cap.value]
            assert result.detected, f"{registered.name}: {cap.value} not detected"
            assert result.passed, f"{registered.name}: {cap.value} failed: {result.failures}"
            assert result.tests_passed > 0 and result.tests_failed == 0


class State(TypedDict):
    steps: list[str]
    approved: str


def _graph(ran: Counter[str], *, before_c: Any = None, after_interrupt: Any = None) -> StateGraph[State]:
    """research -> review (asks a person, interrupt) -> publish; ran counts each node's runs that
    completed."""

    def research(state: State) -> dict[str, Any]:
        ran["research"] += 1
        return {"steps": state["steps"] + ["research"]}

    def review(state: State) -> dict[str, Any]:
        answer = interrupt({"question": "publish?", "draft": state["steps"]})
        if after_interrupt is not None:
            after_interrupt()
        ran["review"] += 1
        return {"steps": state["steps"] + ["review"], "approved": answer}

    def publish(state: State) -> dict[str, Any]:
        if before_c is not None:
            before_c()
        ran["publish"] += 1
        return {"steps": state["steps"] + ["publish"]}

    g = StateGraph(State)
    g.add_node("research", research)
    g.add_node("review", review)
    g.add_node("publish", publish)
    g.add_edge(START, "research")
    g.add_edge("research", "review")
    g.add_edge("review", "publish")
    g.add_edge("publish", END)
    return g


@pytest.fixture
def lg_client(cluster: Cluster) -> Iterator[baton.Client]:
    with baton.Client(cluster.endpoints, token=cluster.token, ca_file=cluster.ca,
                      tenant=_fresh_tenant(cluster)) as c:
        yield c


def test_interrupt_resume_across_a_leader_kill(cluster: Cluster, lg_client: baton.Client) -> None:
    """A graph interrupts for approval; the leader is SIGKILLed between the approval's step and the
    next; the resumed run finishes with every node run once, and the history has every step."""
    ran: Counter[str] = Counter()
    killed: list[int] = []

    def kill_leader() -> None:
        if not killed:
            i = cluster.leader()
            cluster.kill(i)
            killed.append(i)

    graph = _graph(ran, before_c=kill_leader).compile(checkpointer=BatonSaver(lg_client))
    config: Any = {"configurable": {"thread_id": uid("report")}}
    try:
        out = graph.invoke(State(steps=[], approved=""), config)
        assert "__interrupt__" in out and out["__interrupt__"][0].value["question"] == "publish?"
        assert ran == Counter(research=1)
        # A new process would do just this: a new saver, resuming the thread by id.
        resumed = _graph(ran, before_c=kill_leader).compile(checkpointer=BatonSaver(lg_client))
        final = resumed.invoke(Command(resume="yes"), config)
    finally:
        for i in killed:
            cluster.start(i)
        cluster.wait_ready()
    assert killed, "the leader was not killed"
    assert final["steps"] == ["research", "review", "publish"] and final["approved"] == "yes"
    assert ran == Counter(research=1, review=1, publish=1)
    history = list(resumed.get_state_history(config))
    assert [h.metadata["step"] for h in history] == list(range(len(history) - 2, -2, -1))
    assert history[0].values["steps"] == ["research", "review", "publish"] and history[0].next == ()


def _race(make_saver: Any, ran: Counter[str]) -> tuple[list[Any], list[BaseException], Any, Any]:
    """Interrupt a thread, then resume it from two 'processes' (graphs with their own savers) at
    once: both load the interrupted head, both answer, and only then do both write on."""
    barrier = threading.Barrier(2, timeout=30)
    config: Any = {"configurable": {"thread_id": uid("race")}}
    first = _graph(ran).compile(checkpointer=make_saver())
    first.invoke(State(steps=[], approved=""), config)
    results: list[Any] = []
    errors: list[BaseException] = []

    def resume(answer: str) -> None:
        graph = _graph(ran, after_interrupt=barrier.wait).compile(checkpointer=make_saver())
        try:
            results.append(graph.invoke(Command(resume=answer), config))
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            errors.append(e)

    threads = [threading.Thread(target=resume, args=(a,)) for a in ("approve", "reject")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results, errors, first, config


def test_two_resumers_one_wins(lg_client: baton.Client) -> None:
    """Two processes resume one interrupted thread at once: on Baton exactly one extends it and the
    other gets ThreadConflict, naming the head the winner wrote; the thread has one history."""
    ran: Counter[str] = Counter()
    results, errors, graph, config = _race(lambda: BatonSaver(lg_client), ran)
    assert len(results) == 1 and len(errors) == 1, (results, errors)
    assert isinstance(errors[0], ThreadConflict) and isinstance(errors[0], baton.VersionMismatch)
    assert errors[0].current_head and "another process extended" in str(errors[0])
    winner = results[0]["approved"]
    state = graph.get_state(config)
    assert state.values["approved"] == winner and state.values["steps"] == ["research", "review", "publish"]
    parents = Counter(h.parent_config["configurable"]["checkpoint_id"] for h in graph.get_state_history(config)
                      if h.parent_config)
    assert max(parents.values()) == 1, f"the thread forked: {parents}"


def test_two_resumers_fork_in_memory() -> None:
    """The same race on LangGraph's in-memory saver: both resumers extend the thread, forking it
    (two checkpoints with one parent) - what Baton's guard prevents."""
    ran: Counter[str] = Counter()
    saver = InMemorySaver()
    results, errors, graph, config = _race(lambda: saver, ran)
    assert len(results) == 2 and not errors, (results, errors)
    parents = Counter(h.parent_config["configurable"]["checkpoint_id"] for h in graph.get_state_history(config)
                      if h.parent_config)
    assert max(parents.values()) == 2, f"no fork on the in-memory saver: {parents}"


def test_time_travel_forks(lg_client: baton.Client) -> None:
    """Editing the state at an earlier checkpoint (LangGraph's time travel, update_state on a past
    config) forks the thread, as LangGraph means it to: the guard stops only runs that extend a
    head they loaded."""
    ran: Counter[str] = Counter()
    graph = _graph(ran).compile(checkpointer=BatonSaver(lg_client))
    config: Any = {"configurable": {"thread_id": uid("travel")}}
    graph.invoke(State(steps=[], approved=""), config)
    graph.invoke(Command(resume="yes"), config)
    past = [h for h in graph.get_state_history(config) if h.next == ("review",)][0]
    forked = graph.update_state(past.config, {"approved": "maybe"})
    assert graph.get_state(config).values["approved"] == "maybe"  # the fork's end is the newest
    parents = Counter(h.parent_config["configurable"]["checkpoint_id"] for h in graph.get_state_history(config)
                      if h.parent_config)
    assert parents[past.config["configurable"]["checkpoint_id"]] == 2, f"no fork from the past checkpoint: {parents}"
    assert graph.get_state(forked).values["steps"] == ["research"]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="LangGraph's interrupt() needs Python 3.11+ under asyncio "
                    "(langgraph.config.get_config raises on 3.10); test_async_graph_breakpoint covers 3.10")
def test_async_graph(cluster: Cluster) -> None:
    """The same graph on AsyncBatonSaver under asyncio: interrupt, then resume to the end."""

    async def main() -> None:
        async with baton.AsyncClient(cluster.endpoints, token=cluster.token, ca_file=cluster.ca,
                                     tenant=_fresh_tenant(cluster)) as c:
            ran: Counter[str] = Counter()
            graph = _graph(ran).compile(checkpointer=AsyncBatonSaver(c))
            config: Any = {"configurable": {"thread_id": uid("async")}}
            out = await graph.ainvoke(State(steps=[], approved=""), config)
            assert "__interrupt__" in out
            final = await graph.ainvoke(Command(resume="ok"), config)
            assert final["steps"] == ["research", "review", "publish"] and ran["review"] == 1

    asyncio.run(main())


def test_async_graph_breakpoint(cluster: Cluster) -> None:
    """AsyncBatonSaver under asyncio with a static breakpoint (interrupt_before), the way a person
    steps in on every Python LangGraph supports: stop before review, edit the state, go on."""

    def review(state: State) -> dict[str, Any]:
        return {"steps": state["steps"] + ["review"]}

    g = StateGraph(State)
    g.add_node("research", lambda s: {"steps": s["steps"] + ["research"]})
    g.add_node("review", review)
    g.add_edge(START, "research")
    g.add_edge("research", "review")
    g.add_edge("review", END)

    async def main() -> None:
        async with baton.AsyncClient(cluster.endpoints, token=cluster.token, ca_file=cluster.ca,
                                     tenant=_fresh_tenant(cluster)) as c:
            graph = g.compile(checkpointer=AsyncBatonSaver(c), interrupt_before=["review"])
            config: Any = {"configurable": {"thread_id": uid("breakpoint")}}
            await graph.ainvoke(State(steps=[], approved=""), config)
            paused = await graph.aget_state(config)
            assert paused.next == ("review",) and paused.values["steps"] == ["research"]
            await graph.aupdate_state(config, {"approved": "ok"})
            final = await graph.ainvoke(None, config)
            assert final == {"steps": ["research", "review"], "approved": "ok"}
            assert len([h async for h in graph.aget_state_history(config)]) >= 4

    asyncio.run(main())


def test_list_scopes(lg_client: baton.Client) -> None:
    """list as LangGraph scopes it: a config without checkpoint_ns lists every namespace of its
    thread, no config every thread, an empty checkpoint_ns the root namespace only; before compares
    ids, across threads too."""
    saver = BatonSaver(lg_client)
    from langgraph.checkpoint.base import empty_checkpoint

    stored: list[Any] = []
    for thread, ns in [("t1", ""), ("t1", "child:1"), ("t2", "")]:
        cfg: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
        cp = empty_checkpoint()
        stored.append(saver.put(cfg, cp, {"source": "input", "step": -1}, {}))
    ids = [s["configurable"]["checkpoint_id"] for s in stored]
    t1_all = [t.checkpoint["id"] for t in saver.list({"configurable": {"thread_id": "t1"}})]
    assert sorted(t1_all) == sorted(ids[:2])
    assert [t.config["configurable"]["checkpoint_ns"] for t in saver.list({"configurable": {"thread_id": "t1"}})] \
        == ["child:1", ""]
    assert [t.checkpoint["id"] for t in saver.list({"configurable": {"thread_id": "t1", "checkpoint_ns": ""}})] \
        == [ids[0]]
    assert sorted(t.checkpoint["id"] for t in saver.list(None)) == sorted(ids)
    assert sorted(t.checkpoint["id"] for t in saver.list(None, before=stored[2])) == sorted(ids[:2])
    assert len(list(saver.list(None, limit=2))) == 2


def test_values_stored_once_per_version(lg_client: baton.Client) -> None:
    """A put sends only the values whose version is new (as LangGraph's Postgres saver writes
    checkpoint_blobs); the others are the namespace's already. When those went with the checkpoints
    that held them, the saver sends every value again."""
    saver = BatonSaver(lg_client)
    from langgraph.checkpoint.base import empty_checkpoint

    sent: list[list[str]] = []
    put = lg_client.put_checkpoint

    def counting_put(*args: Any, **kw: Any) -> Any:
        sent.append(sorted(b.channel for b in kw.get("blobs") or () if b.channel != CHECKPOINT_CHANNEL))
        return put(*args, **kw)

    lg_client.put_checkpoint = counting_put  # type: ignore[method-assign]
    thread = uid("blobs")
    cfg: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    history = ["hi"]
    for step in range(3):
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": list(history), "topic": "fencing"}
        cp["channel_versions"] = {"messages": str(step + 1), "topic": "1"}
        new = {"messages": str(step + 1), "topic": "1"} if step == 0 else {"messages": str(step + 1)}
        cfg = saver.put(cfg, cp, {"source": "loop", "step": step}, new)
        history.append(f"m{step}")
    assert sent == [["messages", "topic"], ["messages"], ["messages"]]
    latest = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    assert latest is not None
    assert latest.checkpoint["channel_values"] == {"messages": ["hi", "m0", "m1"], "topic": "fencing"}
    # keep_latest: the head keeps topic@1; its first holder went, yet the head still names it.
    lg_client.prune_checkpoints([thread])
    sent.clear()
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": history[:3], "topic": "fencing"}
    cp["channel_versions"] = {"messages": "3", "topic": "1"}
    cfg = saver.put(cfg, cp, {"source": "loop", "step": 3}, {})
    assert sent == [[]]
    # A value no checkpoint holds any more: the put that names it sends every value again.
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": ["gone"], "topic": "fencing"}
    cp["channel_versions"] = {"messages": "0", "topic": "1"}
    sent.clear()
    saver.put(cfg, cp, {"source": "loop", "step": 4}, {})
    assert sent == [[], ["messages", "topic"]]
    again = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    assert again is not None and again.checkpoint["channel_values"]["messages"] == ["gone"]
