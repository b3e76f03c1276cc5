"""Runs the python blocks of docs/python.md, in order, against the cluster with BATON_* set."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import Cluster

DOC = Path(__file__).resolve().parents[3] / "docs" / "python.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_docs_examples_run(cluster: Cluster, tenant: str, monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    for k, v in cluster.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("BATON_TENANT", tenant)
    code = [b for b in blocks() if not b.startswith("# doc: skip")]
    assert len(code) >= 10
    ns: dict[str, object] = {"__name__": "docs_python_md"}
    for i, block in enumerate(code):
        try:
            exec(compile(block, f"{DOC.name} block {i + 1}", "exec"), ns)
        except Exception as e:
            raise AssertionError(f"docs/python.md python block {i + 1} failed:\n{block}") from e
    out = capsys.readouterr().out
    assert "{'summary': 'FENCING'}" in out and "fenced; current token" in out and "scheduler-1" in out
    # Coordinating tasks: dependencies, cancellation, waitpoints, flow control, schedules.
    assert "[{'input': [], 'stage': 'task-" in out and "\ncancelled\n" in out and "{'published': True}" in out
    assert "\nNone\n" in out and "True latest" in out and "True True" in out
    client = ns["client"]
    client.close()  # type: ignore[attr-defined]
