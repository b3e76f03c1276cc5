"""The suite's Python load drivers (bench/python: sdkbench.py, lgbench.py with the Baton saver) run
briefly against the test cluster: their arguments parse and they print one run in the form the Go
driver (bench/pyrun) reads. Their figures are not checked here: they live in docs/benchmarks.md."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest
from conftest import ROOT, Cluster

sys.path.insert(0, str(ROOT / "bench" / "python"))

import benchlib  # noqa: E402
import lgbench  # noqa: E402
import sdkbench  # noqa: E402


def _common(cluster: Cluster, tenant: str) -> list[str]:
    return ["--endpoints", ",".join(cluster.endpoints), "--token", cluster.token, "--tenant", tenant,
            "--ca-file", cluster.ca, "--warmup", "200ms", "--duration", "0.6s"]


def _check_run(run: dict[str, Any], capsys: pytest.CaptureFixture[str], workload: str, variant: str) -> None:
    benchlib.emit(run)
    line = capsys.readouterr().out.strip().splitlines()[-1]
    got = json.loads(line)
    assert got["workload"] == workload and got["variant"] == variant and got["system"] == "baton"
    assert got["ops"] > 0 and got["errors"] == 0, got.get("error_samples")
    h = got["latency"]
    assert h["count"] == got["ops"] and sum(n for _, n in h["buckets"]) == h["count"]
    assert all(0 <= i <= benchlib.MAX_BUCKET for i, _ in h["buckets"])
    assert 0 < got["metrics"]["p50_ms"] <= got["metrics"]["p99_ms"]


def test_sdkbench(cluster: Cluster, tenant: str, capsys: pytest.CaptureFixture[str]) -> None:
    a = sdkbench.parse([*_common(cluster, tenant), "--clients", "4", "--workers-per-client", "2"])
    run = asyncio.run(sdkbench.main(a))
    assert run["client"] == "python" and run["workers"] == 4
    _check_run(run, capsys, "sdk", "C=4")


def test_lgbench_baton(cluster: Cluster, tenant: str, capsys: pytest.CaptureFixture[str]) -> None:
    a = lgbench.parse(["--saver", "baton", *_common(cluster, tenant), "--threads", "2", "--steps-per-thread", "3"])
    run = asyncio.run(lgbench.main(a))
    assert set(run["stages"]) == {"put", "put_writes", "get_tuple"}
    _check_run(run, capsys, "langgraph", "T=2")


def test_parse_errors() -> None:
    with pytest.raises(SystemExit):
        lgbench.parse(["--saver", "postgres"])  # no --dsn
    with pytest.raises(SystemExit):
        sdkbench.parse(["--endpoints", "x", "--token", "t", "--clients", "0"])
    assert benchlib.duration("1m30s") == 90 and benchlib.duration("500ms") == 0.5 and benchlib.duration("2") == 2


def test_histogram_matches_go_buckets() -> None:
    # bench/result/hist.go: 1 ms is log2(1000)*64 = 637.8 -> bucket 637; 1 µs and below -> 0.
    h = benchlib.Histogram()
    for ns in (500, 1_000_000, 1_000_000, 3_000_000):
        h.record(ns)
    assert h.to_json()["buckets"] == [[0, 1], [637, 2], [739, 1]]
    assert abs(h.quantile_ms(0.5) - 1.0) < 0.011

