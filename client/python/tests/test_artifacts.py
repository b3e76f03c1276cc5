"""Chunks and artifacts: de-duplicated, resumable uploads; checked downloads; listing, deleting, policies."""

from __future__ import annotations

import io
import os
import random
from pathlib import Path

import pytest
from conftest import Cluster, uid

import baton
from baton._core import digest


class FailingReader(io.RawIOBase):
    """Reads data, then fails after ``fail_after`` bytes, as a connection cut mid-upload would."""

    def __init__(self, data: bytes, fail_after: int) -> None:
        self.buf = io.BytesIO(data)
        self.fail_after = fail_after

    def read(self, n: int = -1) -> bytes:
        if self.buf.tell() >= self.fail_after:
            raise ConnectionResetError("source cut")
        return self.buf.read(min(n, self.fail_after - self.buf.tell()) if n >= 0 else -1)


def test_upload_download_roundtrip(client: baton.Client, tmp_path: Path) -> None:
    data = os.urandom(3 << 20) + b"tail"
    stats = baton.UploadStats()
    m = client.upload_artifact("report-draft", data, media_type="text/markdown", sources=["https://x"],
                               metadata={"k": 1}, stats=stats)
    assert (m.name, m.version, m.size, m.digest) == ("report-draft", 1, len(data), digest(data))
    assert m.media_type == "text/markdown" and m.sources == ("https://x",) and m.metadata == {"k": 1}
    assert stats.size == len(data) and stats.chunks == len(m.chunks) == stats.chunks_uploaded >= 1
    assert client.read_artifact("report-draft", 1) == data
    out = tmp_path / "copy.bin"
    assert client.download_artifact_to("report-draft", 1, out) == len(data)
    assert out.read_bytes() == data and not (tmp_path / "copy.bin.part").exists()
    buf = io.BytesIO()
    client.download_artifact("report-draft", 1, buf)
    assert buf.getvalue() == data
    # The same content again: nothing sent, the same version answered.
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    again = baton.UploadStats()
    m2 = client.upload_artifact("report-draft", src, media_type="text/markdown", sources=["https://x"],
                                metadata={"k": 1}, stats=again)
    assert m2.version == 1 and m2.artifact_id == m.artifact_id and again.chunks_uploaded == 0
    # A stream, with a small change: only the changed chunks are sent.
    changed = data[:-4] + b"TAIL"
    with open(src, "wb") as f:
        f.write(changed)
    st3 = baton.UploadStats()
    with open(src, "rb") as f:
        m3 = client.upload_artifact("report-draft", f, stats=st3)
    assert m3.version == 2 and 1 <= st3.chunks_uploaded < st3.chunks or st3.chunks == 1
    assert client.get_manifest("report-draft", 2).digest == digest(changed)
    assert [v.version for v in client.list_versions("report-draft")] == [1, 2]
    assert client.get_artifact_by_id(m.artifact_id).version == 1


def test_resumed_upload_sends_only_missing_chunks(client: baton.Client) -> None:
    # Seeded, not os.urandom: the upload stores a batch of 4 chunks at a time, and random content
    # whose first 4 chunks (plus the chunker's read-ahead) pass the cut at 9 MiB stored nothing
    # before it (a flake). These bytes' first 4 chunks end at 3.02 MiB.
    data = random.Random(3).randbytes(12 << 20)
    sent: list[str] = []
    client.on_chunk_sent = lambda d, n: sent.append(d)
    first = baton.UploadStats()
    with pytest.raises(ConnectionResetError):
        client.upload_artifact("big", FailingReader(data, 9 << 20), stats=first)
    assert first.chunks_uploaded >= 1  # some chunks were stored before the cut
    held = set(sent)
    sent.clear()
    second = baton.UploadStats()
    m = client.upload_artifact("big", data, stats=second)
    assert m.size == len(data) and m.digest == digest(data)
    assert second.chunks_uploaded == second.chunks - len(held)
    assert held.isdisjoint(sent) and len(sent) == second.chunks_uploaded
    assert client.read_artifact("big", 1) == data


def test_publish_errors(client: baton.Client) -> None:
    body = b"hello"
    d = digest(body)
    with pytest.raises(baton.MissingChunks) as em:
        client.publish_artifact("x", chunks=[baton.ChunkRef(d, 5)], digest=d, size=5)
    assert em.value.missing == [d]
    client.put_chunk(body)
    with pytest.raises(baton.DigestMismatch):
        client.publish_artifact("x", chunks=[baton.ChunkRef(d, 5)], digest=digest(b"other"), size=5)
    with pytest.raises(baton.InvalidArgument):
        client.publish_artifact("x", chunks=[baton.ChunkRef(d, 5)], digest=d, size=6)
    with pytest.raises(baton.NotFound):
        client.get_manifest("x", 1)  # nothing was published


def test_list_delete_and_policies(client: baton.Client) -> None:
    p = uid("run")
    for i in range(3):
        client.upload_artifact(f"{p}-a", f"v{i}".encode())
    client.upload_artifact(f"{p}-b", b"b")
    names = [(s.name, s.latest_version, s.versions) for s in client.iter_artifacts(prefix=p, page_size=1)]
    assert names == [(f"{p}-a", 3, 3), (f"{p}-b", 1, 1)]
    client.delete_artifact_version(f"{p}-a", 1)
    assert [m.version for m in client.list_versions(f"{p}-a")] == [2, 3]
    with pytest.raises(baton.VersionMismatch):
        client.delete_artifact(f"{p}-a", expect_version=2)
    client.delete_artifact(f"{p}-a", expect_version=3)
    assert client.list_versions(f"{p}-a") == []
    pol = client.set_artifact_policy(p, 2)
    assert (pol.prefix, pol.keep_last) == (p, 2)
    assert any(x.prefix == p for x in client.list_artifact_policies())
    for i in range(4):
        client.upload_artifact(f"{p}-c", f"c{i}".encode())
    assert [m.version for m in client.list_versions(f"{p}-c")] == [3, 4]


def test_download_cut_midway_starts_again_elsewhere(cluster: Cluster, client: baton.Client) -> None:
    import time

    data = os.urandom(24 << 20)
    client.upload_artifact("cut", data)
    victim: list[int] = []

    class SlowFile(io.BytesIO):
        def write(self, b: bytes) -> int:  # type: ignore[override]
            if not victim:
                victim.append(client._fo.preferred)
                cluster.kill(victim[0])  # the node streaming the content
            if len(self.getbuffer()) < (1 << 20):
                time.sleep(0.01)
            return super().write(b)

    attempts: list[int] = []
    once = client._download_once

    def counted(*a: object) -> int:
        attempts.append(1)
        return once(*a)  # type: ignore[arg-type]

    client._download_once = counted  # type: ignore[method-assign]
    out = SlowFile()
    try:
        assert client.download_artifact("cut", 1, out) == len(data)
    finally:
        if victim:
            cluster.start(victim[0])
            cluster.wait_ready()
    assert out.getvalue() == data and len(attempts) >= 2  # cut, then again on another node
