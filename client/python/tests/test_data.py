"""KV, refs, the operations ledger and once, checkpoints."""

from __future__ import annotations

import pytest
from conftest import uid, wait_for

import baton


def test_kv(client: baton.Client) -> None:
    e = client.kv_put("notes", "topic/a", "fencing tokens", expect_version=0)
    assert (e.namespace, e.key, e.value) == ("notes", "topic/a", "fencing tokens") and e.version > 0
    with pytest.raises(baton.VersionMismatch) as ei:
        client.kv_put("notes", "topic/a", "x", expect_version=0)
    assert ei.value.current_version == e.version
    e2 = client.kv_put("notes", "topic/a", {"part": 2}, expect_version=e.version)
    assert client.kv_get("notes", "topic/a").value == {"part": 2}
    assert client.kv_get("notes", "topic/a", stale=True).version in (e.version, e2.version)
    for i in range(5):
        client.kv_put("notes", f"list/{i}", i)
    page = client.kv_list("notes", prefix="list/", limit=2)
    assert [x.key for x in page.items] == ["list/0", "list/1"] and page.next_page_token
    assert [x.value for x in client.iter_kv("notes", prefix="list/", page_size=2)] == [0, 1, 2, 3, 4]
    client.kv_put("notes", "null", None)
    assert client.kv_get("notes", "null").value is None
    with pytest.raises(baton.VersionMismatch):
        client.kv_delete("notes", "topic/a", expect_version=e.version)
    client.kv_delete("notes", "topic/a", expect_version=e2.version)
    with pytest.raises(baton.NotFound):
        client.kv_get("notes", "topic/a")
    t = client.kv_put("notes", "ttl", 1, ttl=0.2)
    assert t.expires_at is not None
    wait_for(lambda: _absent(client, "notes", "ttl"), timeout=10, what="the entry to expire")


def _absent(c: baton.Client, ns: str, key: str) -> bool:
    try:
        c.kv_get(ns, key)
    except baton.NotFound:
        return True
    return False


def test_refs(client: baton.Client) -> None:
    body = b"approved draft"
    d = baton._core.digest(body)
    assert client.missing_chunks([d]) == [d]
    assert client.put_chunk(body) is True and client.put_chunk(body) is False
    assert client.get_chunk(d) == body
    m = client.publish_artifact("doc", chunks=[baton.ChunkRef(d, len(body))], digest=d, size=len(body))
    assert m.version == 1 and m.size == len(body)
    r = client.set_ref("doc/approved", m.artifact_id, expect_artifact_id="")
    assert (r.ref, r.artifact_id, r.name, r.version, r.revision) == ("doc/approved", m.artifact_id, "doc", 1, 1)
    b2 = b"second draft"
    client.put_chunk(b2)
    m2 = client.publish_artifact("doc", chunks=[baton.ChunkRef(baton._core.digest(b2), len(b2))],
                                 digest=baton._core.digest(b2), size=len(b2))
    assert m2.version == 2
    with pytest.raises(baton.VersionMismatch) as ei:
        client.set_ref("doc/approved", m2.artifact_id, expect_artifact_id="sha256:" + "1" * 64)
    assert ei.value.artifact_id == m.artifact_id
    assert client.set_ref("doc/approved", m.artifact_id).revision == 1  # no change
    assert client.get_ref("doc/approved").artifact_id == m.artifact_id
    assert [x.ref for x in client.list_refs(prefix="doc/")] == ["doc/approved"]
    with pytest.raises(baton.Referenced) as er:
        client.delete_artifact_version("doc", 1)
    assert er.value.refs == ["doc/approved"]
    client.delete_ref("doc/approved", expect_artifact_id=m.artifact_id)
    with pytest.raises(baton.NotFound):
        client.get_ref("doc/approved")
    with pytest.raises(baton.NotFound):
        client.set_ref("doc/x", "sha256:" + "0" * 64)


def test_ops_and_once(client: baton.Client) -> None:
    digest = baton.params_digest({"to": "a@b"})
    op, created = client.begin_op("mail-1", kind="send_email", params_digest=digest)
    assert created and op.state == "started"
    op2, created2 = client.begin_op("mail-1", kind="send_email", params_digest=digest)
    assert not created2 and op2.op_id == "mail-1"
    with pytest.raises(baton.IdempotencyMismatch):
        client.begin_op("mail-1", kind="send_email", params_digest=baton.params_digest({"to": "c"}))
    done = client.finish_op("mail-1", state="succeeded", result={"id": 7})
    assert done.state == "succeeded" and client.get_op("mail-1").result == {"id": 7}
    with pytest.raises(baton.VersionMismatch) as ev:
        client.finish_op("mail-1", state="failed")
    assert ev.value.current_state == "succeeded"

    calls: list[int] = []

    def send() -> dict[str, int]:
        calls.append(1)
        return {"sent": len(calls)}

    assert baton.once(client, "notify-1", send, kind="email.send", params={"x": 1}) == {"sent": 1}
    assert baton.once(client, "notify-1", send, kind="email.send", params={"x": 1}) == {"sent": 1}
    assert len(calls) == 1
    with pytest.raises(baton.IdempotencyMismatch):
        baton.once(client, "notify-1", send, kind="email.send", params={"x": 2})

    def boom() -> None:
        raise RuntimeError("smtp down")

    with pytest.raises(baton.OpFailed) as ef:
        baton.once(client, "notify-2", boom, kind="email.send")
    assert isinstance(ef.value.cause, RuntimeError) and ef.value.op.result == {"error": "smtp down"}
    with pytest.raises(baton.OpFailed):
        baton.once(client, "notify-2", send, kind="email.send")
    client.begin_op("notify-3", kind="email.send", params_digest=baton.params_digest(None))
    with pytest.raises(baton.OpInDoubt) as ed:
        baton.once(client, "notify-3", send, kind="email.send")
    assert ed.value.op.state == "started" and len(calls) == 1


def test_exactly_once_decorator(client: baton.Client) -> None:
    sent: list[tuple[str, str]] = []

    @baton.exactly_once(client, kind="email.send", op_id=lambda to, report: f"mail:{report}:{to.replace('@', '.')}")
    def send_report(to: str, report: str) -> dict[str, str]:
        sent.append((to, report))
        return {"id": f"m-{len(sent)}"}

    assert send_report("a@x", "r1") == {"id": "m-1"}
    assert send_report("a@x", "r1") == {"id": "m-1"}  # recorded: not sent again
    assert send_report("b@x", "r1") == {"id": "m-2"}
    assert sent == [("a@x", "r1"), ("b@x", "r1")] and send_report.__name__ == "send_report"
    assert client.get_op("mail:r1:a.x").state == "succeeded"


def test_checkpoints(client: baton.Client) -> None:
    th = "user@example.com/" + uid("run")
    c1 = client.put_checkpoint(th, "c1", {"step": 1}, metadata={"source": "loop"})
    assert (c1.thread_id, c1.checkpoint_id, c1.data) == (th, "c1", {"step": 1})
    assert client.put_checkpoint(th, "c1", {"step": 1}, metadata={"source": "loop"}).checkpoint_id == "c1"
    with pytest.raises(baton.AlreadyExists):
        client.put_checkpoint(th, "c1", {"step": 99})
    with pytest.raises(baton.VersionMismatch) as ei:
        client.put_checkpoint(th, "c2", {"step": 2})
    assert ei.value.current_head == "c1"
    client.put_checkpoint(th, "c2", {"step": 2}, parent_id="c1", metadata={"source": "input"})
    rec = client.put_writes(th, "c2", "node-a",
                            [("messages", "hi"), {"channel": "x", "value": {"n": 1}, "idx": 5}],
                            task_path="~__pregel_pull, node-a")
    assert [(w.task_id, w.idx, w.channel) for w in rec] == [("node-a", 0, "messages"), ("node-a", 5, "x")]
    assert client.put_writes(th, "c2", "node-a", [("messages", "hi")])[0].value == "hi"  # kept as it was
    latest = client.latest_checkpoint(th)
    assert latest.checkpoint_id == "c2" and latest.parent_id == "c1"
    assert [(w.task_id, w.idx, w.channel, w.value, w.task_path) for w in latest.pending_writes] == [
        ("node-a", 0, "messages", "hi", "~__pregel_pull, node-a"),
        ("node-a", 5, "x", {"n": 1}, "~__pregel_pull, node-a")]
    listed = client.list_checkpoints(th, pending_writes=True).items
    assert len(listed[0].pending_writes) == 2 and listed[1].pending_writes == ()
    assert [c.checkpoint_id for c in client.iter_checkpoints(th)] == ["c2", "c1"]
    assert [c.checkpoint_id for c in client.iter_checkpoints(th, filter={"source": "loop"})] == ["c1"]
    assert [c.checkpoint_id for c in client.list_checkpoints(th, limit=1).items] == ["c2"]
    # Namespaces have chains of their own.
    n1 = client.put_checkpoint(th, "c1", {"ns": True}, ns="agent:1")
    assert n1.checkpoint_ns == "agent:1" and client.get_checkpoint(th, "c1", ns="agent:1").data == {"ns": True}
    assert client.get_checkpoint(th, "c1").data == {"step": 1}
    # Data over a request's 1 MiB goes through chunks.
    if not _have_cdc():
        pytest.skip("baton._cdc (the content-defined chunker) is not in the tree yet")
    big = {"blob": "x" * (1_500_000), "n": list(range(1000))}
    cb = client.put_checkpoint(th, "c3", big, parent_id="c2")
    assert cb.data == big
    got = client.get_checkpoint(th, "c3")
    assert got.data == big
    listed = [c for c in client.list_checkpoints(th).items if c.checkpoint_id == "c3"][0]
    assert listed.data is None and len(listed.data_chunks) >= 1
    copy = th + "-copy"
    assert client.copy_thread(th, copy)["checkpoints"] == 4
    assert client.latest_checkpoint(copy).checkpoint_id == "c3"
    assert client.prune_checkpoints([copy], strategy="keep_latest") == 2
    assert [c.checkpoint_id for c in client.iter_checkpoints(copy)] == ["c3"]
    client.put_checkpoint(th + "-runs", "r1", 1, metadata={"run_id": "run-9"})
    assert client.delete_runs(["run-9"]) == 1
    client.delete_thread(th)
    with pytest.raises(baton.NotFound):
        client.latest_checkpoint(th)


def test_checkpoint_policies(client: baton.Client) -> None:
    """keep_last trims as checkpoints come; max_age gives them an expiry the leader purges."""
    pre = uid("pol") + "/"
    p = client.set_checkpoint_policy(pre, keep_last=2)
    assert (p.prefix, p.keep_last, p.max_age_ms) == (pre, 2, 0)
    parent = None
    for i in range(4):
        client.put_checkpoint(pre + "t", f"c{i}", i, parent_id=parent)
        parent = f"c{i}"
    assert [c.checkpoint_id for c in client.iter_checkpoints(pre + "t")] == ["c3", "c2"]
    short = client.set_checkpoint_policy(pre + "tmp/", max_age=0.3)
    assert short.max_age_ms == 300 and pre + "tmp/" in [x.prefix for x in client.list_checkpoint_policies()]
    cp = client.put_checkpoint(pre + "tmp/x", "c1", 1)
    assert cp.expires_at is not None and cp.created_at is not None
    assert (cp.expires_at - cp.created_at).total_seconds() == pytest.approx(0.3)

    def gone() -> bool:
        try:
            client.latest_checkpoint(pre + "tmp/x")
        except baton.NotFound:
            return True
        return False

    wait_for(gone, what="the checkpoint purged after its max age")
    assert client.set_checkpoint_policy(pre).keep_last == 0  # cleared
    with pytest.raises(baton.InvalidArgument):
        client.set_checkpoint_policy(pre, keep_last=-1)


def _have_cdc() -> bool:
    try:
        import baton._cdc  # noqa: F401
    except ImportError:
        return False
    return True
