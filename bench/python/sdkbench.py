"""The cas workload through the Python SDK (issue 28): C asyncio tasks in this one process, each
owning one task it claimed, loop fenced updates of it through ``baton.AsyncClient``, the operation
of the Go SDK's workload (bench/baton/cas.go): ``update_task(id, fencing_token=<the claim's>,
result={"n": <its count>})``.

By default the C tasks share one ``AsyncClient`` (it is safe to share among the tasks of one event
loop, and is how an asyncio agent process uses it); ``--workers-per-client 1`` gives each its own,
as the Go workload gives each worker its own ``client.Client`` (first endpoint rotated per client).

Setup, outside the measured load: the tasks are created in transactions of 128, then each worker's
client claims its own (owner ``client-<i>``, a lease of an hour).

Writes one bench/result.Run as JSON on stdout (system "baton", workload "sdk", client "python");
progress goes to stderr. The Go driver (bench/cmd/bench, workload sdk) runs it against the cluster
it started:

    bin/py/bin/python bench/python/sdkbench.py --endpoints http://127.0.0.1:7001,... --token T \\
        --tenant bench --clients 64 --warmup 5s --duration 12s
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

import baton
import benchlib
import httpx
from baton._core import ssl_context

LEASE = 3600.0
TXN_BATCH = 128


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="sdkbench", description=__doc__.split("\n\n")[0])
    p.add_argument("--endpoints", required=True, help="comma-separated node URLs")
    p.add_argument("--token", required=True, help="a principal's token with write on tasks in --tenant")
    p.add_argument("--tenant", default="bench")
    p.add_argument("--ca-file", default=None, help="CA of a TLS cluster")
    p.add_argument("--clients", type=int, default=64, help="concurrent workers (C)")
    p.add_argument("--prefix", default="", help="task id prefix (default pycas<C>-)")
    p.add_argument("--workers-per-client", type=int, default=0,
                   help="workers sharing each AsyncClient (first endpoint rotated per client); 0: all share one, "
                        "1: one per worker, as the Go workload")
    p.add_argument("--one-pool", action="store_true",
                   help="each AsyncClient on one httpx pool (max 256 connections), the SDK's transport before "
                        "its pools (docs/bench/python-sdk.md)")
    p.add_argument("--no-sessions", action="store_true",
                   help="AsyncClient(sessions=False): random Idempotency-Keys instead of a client session")
    benchlib.add_load_flags(p)
    a = p.parse_args(argv)
    if a.clients < 1:
        p.error("--clients: want 1 or more")
    return a


def rotated(eps: list[str], i: int) -> list[str]:
    k = i % len(eps)
    return eps[k:] + eps[:k]


async def main(a: argparse.Namespace) -> dict[str, Any]:
    eps = [e.strip() for e in a.endpoints.split(",") if e.strip()]
    prefix = a.prefix or f"pycas{a.clients}-"

    https: list[httpx.AsyncClient] = []

    def new_client(i: int) -> baton.AsyncClient:
        http = None
        if a.one_pool:
            http = httpx.AsyncClient(verify=ssl_context(a.ca_file), timeout=10, trust_env=False,
                                     limits=httpx.Limits(max_connections=256, max_keepalive_connections=64))
            https.append(http)
        return baton.AsyncClient(rotated(eps, i), token=a.token, ca_file=a.ca_file, tenant=a.tenant,
                                 sessions=not a.no_sessions, http_client=http)

    share = a.workers_per_client if a.workers_per_client > 0 else a.clients
    made = [new_client(k) for k in range((a.clients + share - 1) // share)]
    clients = [made[i // share] for i in range(a.clients)]
    how = (f"{len(made)} AsyncClients, {share} workers each" if len(made) > 1
           else "one AsyncClient shared by the workers")
    try:
        ids = [prefix + str(i) for i in range(a.clients)]
        for lo in range(0, len(ids), TXN_BATCH):
            await clients[0].txn([{"op": "task.create", "task_id": t, "queue": "cas"} for t in ids[lo:lo + TXN_BATCH]])
        claimed = await asyncio.gather(*(clients[i].claim_task(ids[i], owner=f"client-{i}", lease=LEASE)
                                         for i in range(a.clients)))
        tokens = [t.fencing_token for t in claimed]
        counts = [0] * a.clients
        benchlib.log(f"sdkbench: {a.clients} tasks claimed; cas C={a.clients} for "
                     f"{a.warmup:g}+{a.duration:g} s ({how})")

        async def op(w: benchlib.Worker) -> None:
            i = w.id
            counts[i] += 1
            await clients[i].update_task(ids[i], fencing_token=tokens[i], result={"n": counts[i]})

        cpu0 = time.process_time()
        run = await benchlib.run_load(a.clients, a.warmup, a.duration, a.seed, op)
        cpu = time.process_time() - cpu0
    finally:
        for c in made:
            await c.aclose()
        for h in https:
            await h.aclose()
    run.update(system="baton", workload="sdk", variant=f"C={a.clients}", client="python")
    # Client CPU per operation (warm-up and window): what bounds one Python process's rate.
    done = max(1, sum(counts))
    run["notes"] = [f"Python {sys.version.split()[0]}, {how}" + (", one httpx pool" if a.one_pool else "")
                    + (", sessions off" if a.no_sessions else "") + f", client CPU {cpu * 1000 / done:.3f} ms/op"]
    return run


if __name__ == "__main__":
    benchlib.emit(asyncio.run(main(parse(sys.argv[1:]))))
