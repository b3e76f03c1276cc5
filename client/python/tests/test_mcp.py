"""The official Python MCP client (the PyPI package ``mcp``, a client no one here wrote) against
batond's ``/mcp`` and against ``baton mcp`` over stdio (docs/mcp.md): it lists the tools and runs the
researcher/reviewer hand-off."""

from __future__ import annotations

import os
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import ROOT, Cluster, uid
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

import baton

BATON = Path(os.environ.get("BATON", ROOT / "bin" / "baton"))

TOOLS = {"create_task", "claim_task", "heartbeat", "complete_task", "fail_task", "publish_artifact",
         "read_artifact", "list_artifacts", "set_ref", "get_ref", "write_checkpoint", "read_checkpoint",
         "kv_get", "kv_put", "kv_search", "op_begin", "op_finish", "wait_for_change"}


def principals(cluster: Cluster, tenant: str) -> dict[str, str]:
    """The researcher's and the reviewer's tokens, each with the grants its part needs."""
    rw = ("read", "write")
    with baton.Client(cluster.endpoints, token=cluster.token, ca_file=cluster.ca, tenant=tenant) as c:
        r = c.create_principal("researcher", [baton.Grant("tasks", "research", rw), baton.Grant("tasks", "review", rw),
                                              baton.Grant("artifacts", "report-", rw)])
        v = c.create_principal("reviewer", [baton.Grant("tasks", "review", rw),
                                            baton.Grant("artifacts", "report-", ("read",)),
                                            baton.Grant("refs", "report-", rw)])
    assert r.token and v.token
    return {"researcher": r.token, "reviewer": v.token}


@asynccontextmanager
async def http_session(cluster: Cluster, i: int, token: str) -> AsyncIterator[ClientSession]:
    tls = ssl.create_default_context(cafile=cluster.ca)
    url = f"https://{cluster.endpoints[i]}/mcp"
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, verify=tls,
                                 timeout=httpx.Timeout(30, read=120)) as h, \
            streamable_http_client(url, http_client=h) as (read, write, _):
        async with ClientSession(read, write) as s:
            await s.initialize()
            yield s


@asynccontextmanager
async def stdio_session(cluster: Cluster, tenant: str, token: str) -> AsyncIterator[ClientSession]:
    if not BATON.exists():
        pytest.fail(f"{BATON} is missing: run make build")
    params = StdioServerParameters(command=str(BATON), args=["mcp", "--tenant", tenant],
                                   env={"BATON_ENDPOINTS": ",".join(cluster.endpoints), "BATON_TOKEN": token,
                                        "BATON_CACERT": cluster.ca, "PATH": os.environ.get("PATH", "")})
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            yield s


def text(res: CallToolResult) -> str:
    return "".join(c.text for c in res.content if isinstance(c, TextContent))


async def call(s: ClientSession, name: str, args: dict[str, Any]) -> dict[str, Any]:
    res = await s.call_tool(name, args)
    assert not res.isError, f"{name}({args}): {text(res)}"
    assert isinstance(res.structuredContent, dict)
    return res.structuredContent


async def fails(s: ClientSession, name: str, args: dict[str, Any]) -> str:
    res = await s.call_tool(name, args)
    assert res.isError, f"{name}({args}) succeeded: {text(res)}"
    return text(res)


async def handoff(admin: baton.Client, researcher: ClientSession, reviewer: ClientSession, task_id: str) -> None:
    listed = await researcher.list_tools()
    assert TOOLS <= {t.name for t in listed.tools}
    ann = {t.name: t.annotations for t in listed.tools}
    for t in listed.tools:
        assert t.outputSchema is not None and t.annotations is not None, t.name
    assert ann["get_ref"] is not None and ann["get_ref"].readOnlyHint
    assert ann["set_ref"] is not None and not ann["set_ref"].readOnlyHint and ann["set_ref"].destructiveHint

    admin.create_task("research", task_id=task_id, payload={"topic": "fencing"})
    # The researcher claims, publishes a draft, opens the review and completes.
    claim = await call(researcher, "claim_task", {"queue": "research", "lease_seconds": 30})
    assert claim["claimed"] is True and claim["task"]["task_id"] == task_id
    draft = f"# {task_id}\n\nA stale worker is fenced.\n"
    art = await call(researcher, "publish_artifact", {"name": f"{task_id}-draft", "text": draft,
                                                      "media_type": "text/markdown"})
    assert art["task_id"] == task_id and art["version"] == 1
    await call(researcher, "create_task", {"queue": "review", "task_id": f"review-{task_id}",
                                           "payload": {"draft": art["artifact_id"]}})
    done = await call(researcher, "complete_task", {"result": {"draft": art["artifact_id"]}})
    assert done["status"] == "done" and done["owner"] == ""

    # The reviewer claims the review, reads the draft and approves it through a ref, once.
    rc = await call(reviewer, "claim_task", {"queue": "review", "wait_seconds": 5})
    draft_id = rc["task"]["payload"]["draft"]
    read = await call(reviewer, "read_artifact", {"artifact_id": draft_id})
    assert read["text"] == draft
    await call(reviewer, "set_ref", {"ref": f"{task_id}/approved", "artifact_id": draft_id, "expect_absent": True})
    msg = await fails(reviewer, "create_task", {"queue": "research"})
    assert "forbidden" in msg
    await call(reviewer, "complete_task", {"result": {"approved": draft_id}})
    assert (await call(reviewer, "get_ref", {"ref": f"{task_id}/approved"}))["artifact_id"] == draft_id

    for tid in (task_id, f"review-{task_id}"):
        t = admin.get_task(tid)
        assert t.status == "done" and t.owner == ""
    res = await reviewer.read_resource(f"baton://tasks/review-{task_id}")  # type: ignore[arg-type]
    assert '"status":"done"' in getattr(res.contents[0], "text", "")


@pytest.mark.anyio
async def test_mcp_http_handoff(cluster: Cluster, client: baton.Client, tenant: str) -> None:
    tokens = principals(cluster, tenant)
    # Two different nodes: any node serves /mcp.
    async with http_session(cluster, 0, tokens["researcher"]) as researcher, \
            http_session(cluster, 1, tokens["reviewer"]) as reviewer:
        await handoff(client, researcher, reviewer, uid("report"))


@pytest.mark.anyio
async def test_mcp_stdio_handoff(cluster: Cluster, client: baton.Client, tenant: str) -> None:
    tokens = principals(cluster, tenant)
    async with stdio_session(cluster, tenant, tokens["researcher"]) as researcher, \
            stdio_session(cluster, tenant, tokens["reviewer"]) as reviewer:
        await handoff(client, researcher, reviewer, uid("report"))


@pytest.mark.anyio
async def test_mcp_http_refuses_bad_tokens(cluster: Cluster) -> None:
    tls = ssl.create_default_context(cafile=cluster.ca)
    async with httpx.AsyncClient(verify=tls) as h:
        r = await h.post(f"https://{cluster.endpoints[0]}/mcp", headers={"Authorization": "Bearer btk_nope"},
                         json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated"
