"""Tenants, principals, quotas, the cluster, and bad input refused with the right exception."""

from __future__ import annotations

import pytest
from conftest import Cluster, uid

import baton


def test_tenants_principals_and_grants(cluster: Cluster, client: baton.Client, tenant: str) -> None:
    assert client.create_tenant(tenant) is False  # exists
    assert tenant in client.list_tenants()
    p = client.create_principal("researcher", [
        baton.Grant("tasks", "research", ("read", "write")),
        {"resource": "kv", "prefix": "notes/", "actions": ["read", "write"]},
    ])
    assert p.name == "researcher" and p.token.startswith("btk_") and len(p.grants) == 2
    with pytest.raises(baton.AlreadyExists):
        client.create_principal("researcher", [])
    assert [x.name for x in client.list_principals()] == ["researcher"]
    with baton.Client(cluster.endpoints, token=p.token, ca_file=cluster.ca, tenant=tenant) as rc:
        rc.create_task("research", task_id="r1")
        assert rc.kv_put("notes", "a", 1).value == 1
        with pytest.raises(baton.PermissionDenied) as e:
            rc.create_task("other-queue")
        assert e.value.code == "forbidden" and e.value.status == 403
        with pytest.raises(baton.PermissionDenied):
            rc.list_tenants()
        with pytest.raises(baton.PermissionDenied):
            rc.get_task("x", tenant="someone-else")
        rotated = client.rotate_principal("researcher")
        assert rotated.token and rotated.token != p.token
        with pytest.raises(baton.Unauthenticated):
            rc.get_task("r1")
    with baton.Client(cluster.endpoints, token=rotated.token, ca_file=cluster.ca, tenant=tenant) as rc2:
        assert rc2.get_task("r1").task_id == "r1"
        client.delete_principal("researcher")
        with pytest.raises(baton.Unauthenticated):
            rc2.get_task("r1")


def test_quota(client: baton.Client) -> None:
    used = client.get_quota().used_keys
    q = client.set_quota(max_bytes=0, max_keys=used + 2)
    assert q.max_keys == used + 2 and client.get_quota().max_keys == used + 2
    client.kv_put("ns", "a", 1)
    client.kv_put("ns", "b", 2)
    with pytest.raises(baton.ResourceExhausted) as e:
        client.kv_put("ns", "c", 3)
    with pytest.raises(baton.NotFound):
        client.kv_get("ns", "c")
    assert e.value.status == 507
    client.set_quota(max_bytes=0, max_keys=0)


def test_cluster_status(client: baton.Client, cluster: Cluster) -> None:
    st = client.cluster_status()
    assert st.state in ("Leader", "Follower") and st.leader_id in cluster.ids and len(st.members) == 3
    assert st.applied_index > 0 and "build" in st.raw
    assert client.cluster_status(stale=True).node_id in cluster.ids


def test_bad_input(client: baton.Client, cluster: Cluster) -> None:
    q = uid("q")
    with pytest.raises(baton.NotFound):
        client.create_task(q, tenant="no-such-tenant-" + uid())
    with pytest.raises(baton.InvalidArgument):
        client.create_task(q, task_id="bad id with spaces")
    with pytest.raises(baton.InvalidArgument):
        client.kv_put("ns", "a/../b", 1)
    with pytest.raises(baton.InvalidArgument):
        client.claim(q, owner="w", lease=0)
    with pytest.raises(baton.InvalidArgument):
        client.claim(q, owner="w", lease=1, set_status="dead")
    with pytest.raises(baton.TooLarge):
        client.kv_put("ns", "big", "x" * (2 << 20))
    with pytest.raises(baton.TooLarge):
        client.create_task(q, task_id="big", payload={"x": "y" * (2 << 20)})
    with pytest.raises(baton.InvalidArgument):
        client.get_task("x", tenant="")  # no tenant at all: refused before any request
    # Nothing was written.
    assert list(client.iter_tasks(queue=q)) == []
    assert client.kv_list("ns").items == []
    with pytest.raises(baton.NotFound):
        client.get_task("big")
    with pytest.raises(baton.Unauthenticated):
        with baton.Client(cluster.endpoints, token="wrong", ca_file=cluster.ca, tenant="x") as c:
            c.get_task("a")


def test_tls_without_the_ca_is_not_retried(cluster: Cluster) -> None:
    import time

    t0 = time.monotonic()
    with baton.Client(["https://" + e for e in cluster.endpoints], token=cluster.token, tenant="x") as c:
        with pytest.raises(baton.BatonError) as e:
            c.list_tenants()
    assert "CA" in str(e.value) and time.monotonic() - t0 < 5


def test_from_env_against_the_cluster(cluster: Cluster, tenant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in cluster.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("BATON_TENANT", tenant)
    with baton.Client.from_env() as c:
        assert c.endpoints[0].startswith("https://")
        assert c.create_task("q").tenant_id == tenant


def test_cluster_admin_calls(client: baton.Client, cluster: Cluster) -> None:
    import io

    from conftest import wait_for

    buf = io.BytesIO()
    assert client.backup(buf) > 0 and buf.getvalue()
    with pytest.raises(baton.NotFound):
        client.remove_member("n9")
    with pytest.raises(baton.NotFound):
        client.promote_member("n9")
    before = cluster.ids[cluster.leader()]
    target = next(i for i in cluster.ids if i != before)
    out = client.transfer_leadership(target)
    assert out["previous"] == before
    wait_for(lambda: client.cluster_status().leader_id == target, what="the new leader")
    # The generic call, for routes without a method.
    assert client.request("GET", "/v1/tenants")["tenants"]
    assert client.create_task("after-transfer").queue == "after-transfer"
