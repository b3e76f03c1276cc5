"""What the suite's Python load drivers share: a closed-loop asyncio load measured the way
bench/loadgen measures the Go one, a latency histogram in bench/result's buckets, and the run
written as one bench/result.Run in JSON on stdout for the Go driver (bench/cmd/bench) to read.

Contracts, as bench/loadgen's:
- workers loop one operation each, for a warm-up and then a measured window;
- an operation counts when it starts at or after the warm-up's end and before the window's end;
  its latency, the ops and the errors cover exactly those operations;
- after a failed operation a worker pauses 5 ms;
- an operation still running 30 s after the window's end is cancelled.

Only the standard library: the drivers run in two different venvs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import re
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

# bench/result/hist.go: bucket i holds [2^(i/64), 2^((i+1)/64)) microseconds.
SUB_BUCKETS = 64
MAX_BUCKET = 30 * SUB_BUCKETS
ERROR_PAUSE = 0.005
GRACE = 30.0


class Histogram:
    """bench/result.Histogram: log-bucketed, encoded as its JSON form."""

    def __init__(self) -> None:
        self.count = 0
        self.sum_ns = 0
        self.min_ns = 0
        self.max_ns = 0
        self.dense: dict[int, int] = {}

    def record(self, ns: int) -> None:
        ns = max(ns, 0)
        us = ns / 1000
        i = 0 if us <= 1 else min(int(math.log2(us) * SUB_BUCKETS), MAX_BUCKET)
        self.dense[i] = self.dense.get(i, 0) + 1
        if self.count == 0 or ns < self.min_ns:
            self.min_ns = ns
        self.max_ns = max(self.max_ns, ns)
        self.count += 1
        self.sum_ns += ns

    def merge(self, o: Histogram) -> None:
        if o.count == 0:
            return
        for i, n in o.dense.items():
            self.dense[i] = self.dense.get(i, 0) + n
        if self.count == 0 or o.min_ns < self.min_ns:
            self.min_ns = o.min_ns
        self.max_ns = max(self.max_ns, o.max_ns)
        self.count += o.count
        self.sum_ns += o.sum_ns

    def quantile_ms(self, q: float) -> float:
        """As Histogram.Quantile: the middle of the bucket, clamped to the exact min and max."""
        if self.count == 0:
            return 0.0
        rank = max(math.ceil(q * self.count), 1)
        seen = 0
        for i in sorted(self.dense):
            seen += self.dense[i]
            if seen >= rank:
                us = 2 ** ((i + 0.5) / SUB_BUCKETS)
                return min(max(us * 1000, self.min_ns), self.max_ns) / 1e6
        return self.max_ns / 1e6

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "sum_ns": self.sum_ns, "min_ns": self.min_ns, "max_ns": self.max_ns,
                "buckets": [[i, self.dense[i]] for i in sorted(self.dense)]}


_DURATION = re.compile(r"(\d+(?:\.\d*)?)(ns|us|µs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: str) -> float:
    """Seconds of a Go duration as time.Duration.String writes it ("5s", "1m30s", "500ms"), or a
    plain number of seconds."""
    try:
        return float(text)
    except ValueError:
        pass
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 5s, 1m30s, 500ms)")
    return total


def add_load_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--warmup", type=duration, default=duration("5s"), help="warm-up (Go duration)")
    p.add_argument("--duration", type=duration, default=duration("12s"), help="measured window (Go duration)")
    p.add_argument("--seed", type=int, default=1, help="seed of the workers' random choices")


class Worker:
    """One load task's state, handed to every operation it runs."""

    def __init__(self, wid: int, seed: int) -> None:
        self.id = wid
        self.rand = random.Random(seed * 1_000_003 + wid + 1)
        self.state: Any = None
        self.measuring = False
        self.stages: dict[str, Histogram] = {}

    def observe(self, stage: str, ns: int) -> None:
        """The latency of a named part of the current operation, when it counts in the window."""
        if self.measuring:
            self.stages.setdefault(stage, Histogram()).record(ns)


Op = Callable[[Worker], Awaitable[None]]


async def run_load(workers: int, warmup: float, window: float, seed: int, op: Op) -> dict[str, Any]:
    """Runs op in workers closed loops; returns the run's figures as bench/result.Run fields."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    wstart, end = start + warmup, start + warmup + window
    lat = Histogram()
    ws = [Worker(i, seed) for i in range(max(workers, 1))]
    counts = {"ok": 0, "err": 0}
    samples: list[str] = []

    async def one(w: Worker) -> None:
        while True:
            t0 = loop.time()
            if t0 >= end:
                return
            w.measuring = t0 >= wstart
            n0 = time.perf_counter_ns()
            err: BaseException | None = None
            try:
                await op(w)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - every failure is counted, and the load goes on
                err = e
            n1 = time.perf_counter_ns()
            if w.measuring:
                if err is None:
                    counts["ok"] += 1
                    lat.record(n1 - n0)
                else:
                    counts["err"] += 1
                    msg = f"{type(err).__name__}: {err}"[:300]
                    if msg not in samples and len(samples) < 3:
                        samples.append(msg)
            if err is not None:
                await asyncio.sleep(ERROR_PAUSE)

    tasks = [asyncio.ensure_future(one(w)) for w in ws]
    done, pending = await asyncio.wait(tasks, timeout=warmup + window + GRACE)
    for t in pending:
        t.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for t in done:
        if t.exception() is not None:
            raise t.exception()  # type: ignore[misc]
    stages: dict[str, Histogram] = {}
    for w in ws:
        for k, h in w.stages.items():
            stages.setdefault(k, Histogram()).merge(h)
    ops = counts["ok"]
    run: dict[str, Any] = {
        "workers": len(ws), "seed": seed, "warmup_ms": int(warmup * 1000), "window_ms": window * 1000,
        "ops": ops, "errors": counts["err"], "ops_per_sec": ops / window if window > 0 else 0.0,
        "latency": lat.to_json(),
        "metrics": {"p50_ms": lat.quantile_ms(0.5), "p99_ms": lat.quantile_ms(0.99),
                    "p999_ms": lat.quantile_ms(0.999)},
    }
    if stages:
        run["stages"] = {k: h.to_json() for k, h in stages.items()}
    if samples:
        run["error_samples"] = samples
    return run


def emit(run: dict[str, Any]) -> None:
    """Writes the run as one line of JSON on stdout (the Go driver's input) and a summary on
    stderr."""
    m = run.get("metrics") or {}
    print(f"{run.get('system')} {run.get('workload')} {run.get('variant')}: {run.get('ops_per_sec', 0):.0f} ops/s, "
          f"p50 {m.get('p50_ms', 0):.2f} ms, p99 {m.get('p99_ms', 0):.2f} ms, {run.get('errors', 0)} errors",
          file=sys.stderr)
    sys.stdout.write(json.dumps(run) + "\n")
    sys.stdout.flush()


def log(msg: str) -> None:
    print(time.strftime("%H:%M:%S ") + msg, file=sys.stderr, flush=True)
