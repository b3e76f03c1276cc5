"""Checks that need no cluster: error mapping, endpoints, digests, SSE parsing, the generated sync code."""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import random
import subprocess
import sys
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import baton
from baton import _core, _errors, _json, _models
from baton._models import format_time, parse_time

HERE = Path(__file__).resolve().parent


def test_error_table_maps_codes_and_unknown_codes_by_status() -> None:
    e = _errors.error_from_answer(409, b'{"error": {"code": "fenced", "message": "m", "current_token": 7}}', 12)
    assert isinstance(e, baton.Fenced) and isinstance(e, baton.Conflict)
    assert (e.code, e.status, e.message, e.current_token, e.index) == ("fenced", 409, "m", 7, 12)
    assert e.details == {"current_token": 7}
    e = _errors.error_from_answer(403, b'{"error": {"code": "forbidden", "message": "no"}}')
    assert type(e) is baton.PermissionDenied and e.code == "forbidden"
    e = _errors.error_from_answer(504, b'{"error": {"code": "outcome_unknown", "message": "?"}}')
    assert type(e) is baton.OutcomeUnknown and e.code == "outcome_unknown" and e.status == 504
    e = _errors.error_from_answer(503, b'{"error": {"code": "no_quorum_yet"}}')
    assert type(e) is baton.Unavailable and e.code == "no_quorum_yet"
    e = _errors.error_from_answer(418, b'{"error": {"code": "teapot"}}')
    assert type(e) is baton.BatonError and e.code == "teapot" and e.status == 418
    e = _errors.error_from_answer(502, b"bad gateway")
    assert type(e) is baton.BatonError and e.message == "bad gateway"
    e = _errors.error_from_answer(409, b'{"error": {"code": "version_mismatch", "current_head": "c1"}}')
    assert isinstance(e, baton.VersionMismatch) and e.current_head == "c1" and e.current_version is None
    for code, cls in _errors.CODES.items():
        assert cls.default_code == code


def test_new_code_is_one_line() -> None:
    class NoQuorumYet(baton.Unavailable):
        default_code = "no_quorum_yet"

    _errors.CODES["no_quorum_yet"] = NoQuorumYet
    try:
        e = _errors.error_from_answer(503, b'{"error": {"code": "no_quorum_yet", "message": "?"}}')
        assert type(e) is NoQuorumYet and isinstance(e, baton.Unavailable)
    finally:
        del _errors.CODES["no_quorum_yet"]


def test_outcome_unknown_is_retried() -> None:
    """A 504 outcome_unknown is sent again (every write has a session place or a key); another 504
    is an answer (a gateway's)."""
    ou = _core.classify(504, {"Retry-After": "1"}, b'{"error": {"code": "outcome_unknown", "message": "?"}}')
    assert ou.retry and not ou.answered and ou.retry_after == 1.0
    gw = _core.classify(504, {}, b"gateway timeout")
    assert not gw.retry and gw.answered


def test_endpoints_as_the_cli_reads_them() -> None:
    assert _core.parse_endpoints("h:1, h:2", tls=False) == ["http://h:1", "http://h:2"]
    assert _core.parse_endpoints(["h:1", "http://x:2/"], tls=True) == ["https://h:1", "http://x:2"]
    with pytest.raises(baton.InvalidArgument):
        _core.parse_endpoints("ftp://h:1", tls=False)
    with pytest.raises(baton.InvalidArgument):
        _core.parse_endpoints(" , ", tls=False)
    c = baton.Client("a:1,b:2", tenant="t")
    assert c.endpoints == ["http://a:1", "http://b:2"]
    c.close()


def test_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BATON_ENDPOINTS", "h1:7001,h2:7002")
    monkeypatch.setenv("BATON_TOKEN", "tok")
    monkeypatch.setenv("BATON_TENANT", "acme")
    monkeypatch.delenv("BATON_CACERT", raising=False)
    with baton.Client.from_env() as c:
        assert c.endpoints == ["http://h1:7001", "http://h2:7002"] and c.tenant == "acme"
    with baton.Client.from_env(tenant="other", timeout=timedelta(seconds=2)) as c:
        assert c.tenant == "other" and c.timeout == 2.0


def test_params_digest_matches_go_canonical_json() -> None:
    # Go: json.Marshal, keys sorted, no HTML escaping, a final newline (client/ops.go ParamsDigest).
    want = "sha256:" + hashlib.sha256(b'{"a":[1,"<x>"],"b":null,"\xc3\xa9":true}\n').hexdigest()
    assert baton.params_digest({"\u00e9": True, "b": None, "a": [1, "<x>"]}) == want


def test_idempotency_keys_are_uuid7() -> None:
    k = baton.new_idempotency_key()
    assert len(k) == 36 and k[14] == "7" and k[19] in "89ab"
    assert k != baton.new_idempotency_key()
    with pytest.raises(baton.InvalidArgument):
        _core.check_idempotency_key("has space")


def test_times_and_durations() -> None:
    t = parse_time("2026-12-01T10:15:30.123Z")
    assert t == datetime(2026, 12, 1, 10, 15, 30, 123000, tzinfo=timezone.utc)
    assert format_time(t) == "2026-12-01T10:15:30.123Z"
    assert parse_time("2026-12-01T10:15:30Z") == datetime(2026, 12, 1, 10, 15, 30, tzinfo=timezone.utc)
    assert _core.millis(timedelta(seconds=1.5)) == 1500 and _core.millis(0.25) == 250


def test_sse_parser_and_event_order() -> None:
    p = _core.SSEParser()
    got = [p.feed(x) for x in [": keepalive", "", "id: 5.0", "data: {\"a\":", "data: 1}", ""]]
    assert got[:5] == [None] * 5
    m = got[5]
    assert m is not None and m.id == "5.0" and m.data == ['{"a":', "1}"]
    assert _core.event_pos("5.0") < _core.event_pos("5.1") < _core.event_pos("5") < _core.event_pos("6.0")


def test_retry_after_and_classify() -> None:
    r = _core.classify(503, {"Retry-After": "1"}, b'{"error": {"code": "unavailable"}}')
    assert r.retry and not r.answered and r.retry_after == 1.0
    r = _core.classify(429, {}, b'{"error": {"code": "rate_limited"}}')
    assert r.retry and r.answered and r.rate_limited and r.retry_after == 1.0
    r = _core.classify(200, {"X-Baton-Leader": "h:1", "X-Baton-Index": "9"}, b"{}")
    assert r.answered and not r.retry and r.leader == "h:1" and r.answer is not None and r.answer.index == 9
    raw = _core.RawHeaders([(b"x-baton-leader", b"h:2"), (b"X-Baton-Index", b"7"), (b"X-BATON-INDEX", b"8")])
    r = _core.classify(200, raw, b"{}")
    assert r.leader == "h:2" and r.answer is not None and r.answer.index == 7 and not r.answer.replay
    assert raw.get("Retry-After") is None and raw.get("retry-after", "x") == "x"


def test_path_segments_are_quoted_as_urllib_quotes_them() -> None:
    import urllib.parse

    for s in ["", ".", "..", "...", "a-b_c.d~e", "ABCxyz019", "a b", "a/b", "%41", "é", "٣", "ｆ", "a+b", "x?y#z"]:
        want = s.replace(".", "%2E") if s in (".", "..") else urllib.parse.quote(s, safe="")
        assert _core.seg(s) == want, s


def test_sync_code_is_generated_from_async() -> None:
    out = subprocess.run([sys.executable, str(HERE.parent / "tools" / "unasync.py"), "--check"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_read_takes_stale() -> None:
    """docs/python.md: reads take ``stale=True`` (``?consistency=stale``, which the server takes on any GET).
    Every public method that sends a GET has the argument, except get_chunk, whose bytes are
    content-addressed (the same on every node that has them)."""
    import inspect

    checked = 0
    for cls in (baton.AsyncClient, baton.Client):
        for name, fn in inspect.getmembers(cls, inspect.isfunction):
            if name.startswith("_") or name == "get_chunk" or '"GET"' not in inspect.getsource(fn):
                continue
            checked += 1
            assert "stale" in inspect.signature(fn).parameters, f"{cls.__name__}.{name} sends a GET without stale="
    assert checked >= 50, checked


def test_client_certificate_alone_keeps_the_default_roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client certificate without ca_file checks the node against the roots used without either
    (httpx's: certifi's, or SSL_CERT_FILE's), not the system's store (docs/python.md)."""
    import httpx
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "agent")])
    now = datetime.now(timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + timedelta(days=1)).sign(key, hashes.SHA256()))
    (tmp_path / "c.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "k.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))
    ctx = _core.ssl_context(None, str(tmp_path / "c.pem"), str(tmp_path / "k.pem"))
    assert not isinstance(ctx, bool)
    want = httpx.create_ssl_context().get_ca_certs()
    assert want and ctx.get_ca_certs() == want


def test_coordination_models_parse() -> None:
    t = baton.Task.from_json({
        "tenant_id": "t", "task_id": "publish-42", "queue": "q", "parked": False, "waitpoint_id": "wp-1",
        "waitpoint": {"waitpoint_id": "wp-1", "state": "completed", "payload": {"ok": True}},
        "dependencies": [{"task_id": "a", "resolved": True, "status": "done", "result": 1, "artifact_id": ""}],
        "concurrency_key": "acme", "cancel_requested": True,
    })
    assert t.waitpoint == baton.WaitpointOutcome("wp-1", "completed", {"ok": True})
    assert t.dependencies == (baton.Dependency("a", True, "done", 1, ""),)
    assert (t.concurrency_key, t.cancel_requested) == ("acme", True)
    assert baton.Task.from_json({"tenant_id": "t", "task_id": "x", "queue": "q"}).waitpoint is None
    s = baton.Schedule.from_json({"tenant_id": "t", "schedule_id": "beat", "queue": "q", "interval_ms": 1000,
                                  "next_at": "2026-12-01T10:15:31.123Z", "last_tick_at": "2026-12-01T10:15:30.123Z"})
    assert s.last_tick_at is not None and s.next_at is not None
    # The tick's task id: Unix milliseconds, exact (no float rounding).
    assert s.task_id(s.last_tick_at) == "beat:1796120130123"
    paris = timezone(timedelta(hours=1))
    assert s.task_id(datetime(2026, 12, 1, 11, 15, 30, 123000, tzinfo=paris)) == "beat:1796120130123"


def _build_reference(cls: type, d: dict[str, Any], **conv: Any) -> Any:
    """The model builder as it was before it was written out per class (a loop over the fields)."""
    kw: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name == "index" and cls.__name__ != "WatchEvent":
            continue
        if f.name == "raw":
            kw["raw"] = d
            continue
        if f.name not in d:
            continue
        v = d[f.name]
        if f.name in conv:
            v = conv[f.name](v)
        elif f.name in _models._TIME_FIELDS:
            v = parse_time(v)
        elif v is None and f.default is not dataclasses.MISSING and f.default is not None:
            continue
        kw[f.name] = v
    return cls(**kw)


def test_models_build_as_the_field_loop_did() -> None:
    classes = [c for c in vars(_models).values()
               if isinstance(c, type) and dataclasses.is_dataclass(c) and c.__module__ == _models.__name__]
    assert len(classes) > 20
    for cls in classes:
        names = [f.name for f in dataclasses.fields(cls)]
        full = {n: (7 if i % 3 == 0 else "x" if i % 3 == 1 else None) for i, n in enumerate(names)}
        for n in names:
            if n in _models._TIME_FIELDS:
                full[n] = "2026-12-01T10:15:30.123Z"
        conv = {names[0]: lambda v: ("converted", v)}
        docs = [full, dict.fromkeys(names), {n: v for i, (n, v) in enumerate(full.items()) if i % 2 == 0},
                {**full, "unknown_member": 1}]
        for d in docs:
            for kw in ({}, conv):
                try:
                    want = _build_reference(cls, d, **kw)
                except TypeError as e:  # a required field left out
                    with pytest.raises(TypeError):
                        _models._build(cls, d, **kw)
                    assert "missing" in str(e)
                    continue
                got = _models._build(cls, d, **kw)
                assert repr(got) == repr(want), (cls.__name__, d)
    with pytest.raises(ValueError, match="expected a JSON object"):
        baton.Task.from_json([1])


def test_json_gives_the_json_modules_result() -> None:
    class Sub(str):
        pass

    def old(v: Any) -> bytes:
        return json.dumps(v, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()

    values: list[Any] = [
        {"n": 1, "s": "héllo\u2028", "f": 0.1, "l": [1, 2.5, None, True], "t": (1, 2)}, 2**63, 2**64, -(2**70),
        float("nan"), float("inf"), {"k": [float("-inf")]}, "\ud800", {1: 2}, Sub("x"), {"d": datetime(2020, 1, 1)},
        [b"x"], object(), {"nullable": "null"}, 1e300, -0.0,
    ]
    for v in values:
        try:
            want: Any = old(v)
        except (TypeError, ValueError) as e:
            want = type(e)
        try:
            got: Any = _json.dumps(v)
        except (TypeError, ValueError) as e:
            got = type(e)
        if isinstance(want, bytes) and isinstance(got, bytes):
            assert json.loads(got) == json.loads(want) or v != v, v  # the same document (floats may differ in form)
        else:
            assert got == want or issubclass(got, want), (v, got, want)
    # Enum members and UUIDs: their value and text whichever of the two encoders writes the rest.
    class Colour(enum.Enum):
        RED = "red"
        NONE = None

    u = uuid.UUID(int=5)
    for v in ({"c": Colour.RED}, {"c": Colour.RED, "x": None}, {"c": Colour.RED, "s": "annulled"},
              {"id": u, "n": 2**70}, {"id": u, 1: 2}, [Colour.NONE], {"c": [Colour.RED, u]}):
        want = json.dumps(v, separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                          default=lambda o: o.value if isinstance(o, enum.Enum) else str(o)).encode()
        assert _json.dumps(v) == want, v
    assert _core.params_digest({"id": u}) == _core.params_digest({"id": str(u)})
    docs = [b'{"a":1,"a":2}', b"123456789012345678901234567890", b"18446744073709551616", b"-9223372036854775809",
            b"[1e400, -1e400]", b"NaN", b'"\\ud800"', b'{"x": [0.1, -0, 5e-324, "\\u0000", {"y": null}]}',
            b'{"id": 12345678901234567890123}', b" [] ", "{\"s\": \"t\"}"]
    for doc in docs:
        assert repr(_json.loads(doc)) == repr(json.loads(doc)), doc
    for bad in (b"", b"{", b"[1,]", b"\xff"):
        with pytest.raises(ValueError):
            _json.loads(bad)
    with pytest.raises(TypeError):
        _json.loads(memoryview(b"1"))  # type: ignore[arg-type]


def test_session_ack_is_the_lowest_number_in_flight() -> None:
    rng = random.Random(7)
    s = _core.Sessions()
    s.opened(5)
    live: list[_core.Place] = []
    for _ in range(20000):
        if live and (len(live) > 64 or rng.random() < 0.5):
            # Mostly the newest end first, the oldest now and then: numbers end out of order.
            p = live.pop(rng.randrange(len(live)) if rng.random() < 0.3 else -1)
            s.end(p)
        else:
            p2 = s.place()
            assert p2 is not None
            live.append(p2)
        want = min((p.seq for p in live), default=s.next)
        assert s.ack(5) == want
        assert s.ack(4) == 0
        assert len(s._order) <= 4 * 65 + 64 + 1  # bounded by the writes in flight, not by the writes made
    s.drop(5)
    assert s.place() is None and s.ack(5) == 0
