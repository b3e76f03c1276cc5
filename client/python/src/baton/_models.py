"""Objects the API returns, parsed from JSON into frozen dataclasses.

JSON values (payloads, results, KV values, checkpoint data) are plain Python
objects (dict, list, str, int, float, bool, None). Times are timezone-aware
``datetime`` objects in UTC; durations keep the API's integer milliseconds in
fields ending in ``_ms``. Fields the server adds later are ignored.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Generic, TypeVar

from . import _mp

T = TypeVar("T")

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def parse_time(v: Any) -> datetime | None:
    """RFC 3339 (``2026-12-01T10:15:30.123Z``) to an aware datetime; None stays None."""
    if not isinstance(v, str) or not v:
        return None
    if len(v) == 24 and v[19] == "." and v[23] == "Z":  # how the server writes them (milliseconds)
        return datetime.fromisoformat(v[:23] + "+00:00")
    s = v.replace("Z", "+00:00").replace("z", "+00:00")
    # Python 3.10's fromisoformat accepts 3 or 6 fraction digits only.
    if "." in s:
        head, _, rest = s.partition(".")
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        frac = (rest[:i] + "000000")[:6]
        s = f"{head}.{frac}{rest[i:]}"
    dt = datetime.fromisoformat(s)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt


def format_time(dt: datetime) -> str:
    """An aware datetime as the API writes times (UTC, milliseconds)."""
    if dt.tzinfo is None:
        raise ValueError("datetime must be timezone-aware")
    u = dt.astimezone(timezone.utc)
    return u.strftime("%Y-%m-%dT%H:%M:%S.") + f"{u.microsecond // 1000:03d}Z"


_TIME_FIELDS = frozenset(
    {
        "lease_until",
        "created_at",
        "updated_at",
        "available_at",
        "failed_at",
        "expires_at",
        "oldest_pending_at",
        "as_of",
        "timeout_at",
        "resolved_at",
        "next_at",
        "last_tick_at",
    }
)


_BUILDERS: dict[tuple[type, tuple[str, ...]], Any] = {}


def _builder(cls: type, conv: tuple[str, ...]) -> Any:
    """The function _build calls for cls with converters for the fields in conv, written out once per
    class (as dataclasses writes its __init__): one statement per field instead of a loop that asks of
    each field what kind it is, since a task's answer is built on every call of a worker's loop.

    Per field: absent from the object, the field keeps its default; present, it is converted (a
    converter of the call, or a time field parsed); null for a field whose default is not null leaves
    the default. ``raw`` is the whole object; ``index`` is set from the answer's header later (but for a
    WatchEvent, whose index is in the object)."""
    key = (cls, conv)
    b = _BUILDERS.get(key)
    if b is not None:
        return b
    lines = ["def build(d, conv):", "    kw = {}"]
    for i, f in enumerate(dataclasses.fields(cls)):
        n = f.name
        if n == "index" and cls.__name__ != "WatchEvent":
            continue
        if n == "raw":
            lines.append("    kw['raw'] = d")
        elif n in conv:
            lines.append(f"    if {n!r} in d: kw[{n!r}] = conv[{n!r}](d[{n!r}])")
        elif n in _TIME_FIELDS:
            lines.append(f"    if {n!r} in d: kw[{n!r}] = parse_time(d[{n!r}])")
        elif f.default is not dataclasses.MISSING and f.default is not None:
            lines += [f"    v{i} = d.get({n!r})", f"    if v{i} is not None: kw[{n!r}] = v{i}"]
        else:
            lines.append(f"    if {n!r} in d: kw[{n!r}] = d[{n!r}]")
    lines.append("    return cls(**kw)")
    ns: dict[str, Any] = {"cls": cls, "parse_time": parse_time}
    exec("\n".join(lines), ns)  # noqa: S102 - source made above from the class's own field names
    b = _BUILDERS[key] = ns["build"]
    return b


def _build(cls: type[T], d: Any, **conv: Any) -> T:
    if not isinstance(d, dict):
        raise ValueError(f"expected a JSON object for {cls.__name__}, got {type(d).__name__}")
    return _builder(cls, tuple(conv))(d, conv)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class Fence:
    """A guard on a write: applied only while ``token`` is the current fencing token of ``task_id``."""

    task_id: str
    token: int

    def to_json(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "token": self.token}


@dataclass(frozen=True, slots=True)
class Grant:
    resource: str
    prefix: str = ""
    actions: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"resource": self.resource, "prefix": self.prefix, "actions": list(self.actions)}

    @classmethod
    def from_json(cls, d: Any) -> Grant:
        return _build(cls, d, actions=lambda v: tuple(v or ()))


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    grants: tuple[Grant, ...] = ()
    token: str = ""  # only in the answer that creates or rotates it

    @classmethod
    def from_json(cls, d: Any) -> Principal:
        return _build(cls, d, grants=lambda v: tuple(Grant.from_json(g) for g in v or ()))


@dataclass(frozen=True, slots=True)
class Quota:
    tenant: str
    max_bytes: int = 0
    max_keys: int = 0
    rate_per_sec: float = 0
    burst: int = 0
    used_bytes: int = 0
    used_keys: int = 0

    @classmethod
    def from_json(cls, d: Any) -> Quota:
        return _build(cls, d)


@dataclass(frozen=True, slots=True)
class Dependency:
    """One dependency of a task: ``resolved`` once it ended (``status`` is then the status it ended in,
    ``deleted`` for a deleted one), with the result and artifact it had then."""

    task_id: str
    resolved: bool = False
    status: str = ""
    result: Any = None
    artifact_id: str = ""

    @classmethod
    def from_json(cls, d: Any) -> Dependency:
        return _build(cls, d)


@dataclass(frozen=True, slots=True)
class WaitpointOutcome:
    """In a claim's answer of a task that was parked: its waitpoint's state (``completed`` or
    ``timed_out``) and payload."""

    waitpoint_id: str
    state: str = ""
    payload: Any = None

    @classmethod
    def from_json(cls, d: Any) -> WaitpointOutcome:
        return _build(cls, d)


@dataclass(frozen=True, slots=True)
class Waitpoint:
    """Something to wait for: ``pending`` until completed once with a payload, or ``timed_out``."""

    tenant_id: str
    waitpoint_id: str
    state: str = ""  # pending, completed or timed_out
    payload: Any = None
    version: int = 0
    task_id: str = ""  # the task parked on it, "" if none
    created_at: datetime | None = None
    timeout_at: datetime | None = None
    resolved_at: datetime | None = None
    index: int = field(default=0, compare=False)  # X-Baton-Index of the answer: watch from here

    @property
    def pending(self) -> bool:
        return self.state == "pending"

    @classmethod
    def from_json(cls, d: Any) -> Waitpoint:
        return _build(cls, d)


@dataclass(frozen=True, slots=True)
class Schedule:
    """Creates a task in ``queue`` at every tick of ``cron`` (in ``timezone``) or of ``interval_ms``,
    exactly once per tick: the task's id is ``<schedule_id>:<tick in Unix ms>``."""

    tenant_id: str
    schedule_id: str
    queue: str
    cron: str = ""
    timezone: str = ""
    interval_ms: int = 0
    catch_up: str = ""  # latest, all or skip
    priority: int = 0
    payload: Any = None
    paused: bool = False
    next_at: datetime | None = None
    last_tick_at: datetime | None = None
    ticks: int = 0  # the tasks it created
    version: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None
    index: int = field(default=0, compare=False)  # X-Baton-Index of the answer: watch from here

    def task_id(self, tick: datetime) -> str:
        """The id of the task of a tick."""
        return f"{self.schedule_id}:{(tick - _EPOCH) // timedelta(milliseconds=1)}"

    @classmethod
    def from_json(cls, d: Any) -> Schedule:
        return _build(cls, d)


@dataclass(frozen=True, slots=True)
class Task:
    tenant_id: str
    task_id: str
    queue: str
    status: str = ""
    owner: str = ""
    lease_until: datetime | None = None
    fencing_token: int = 0
    version: int = 0
    attempt: int = 0
    priority: int = 0
    artifact_id: str = ""
    payload: Any = None
    result: Any = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    max_attempts: int = 0
    backoff_initial_ms: int = 0
    backoff_max_ms: int = 0
    available_at: datetime | None = None
    last_error: str = ""
    failed_at: datetime | None = None
    retention_ms: int | None = None
    expires_at: datetime | None = None
    # Cancellation and dependencies (docs/api.md): absent unless set.
    cancel_requested: bool = False
    depends_on_count: int = 0
    dependencies_left: int | None = None
    dependency_policy: str = ""
    # In a claim's answer of a task with dependencies: the first 100, with
    # their outputs (list_task_dependencies lists them all).
    dependencies: tuple[Dependency, ...] = ()
    dependencies_truncated: bool = False
    # Waitpoints (park_task): the waitpoint the task was last parked on,
    # parked while it waits there, and in a claim's answer its outcome.
    waitpoint_id: str = ""
    parked: bool = False
    waitpoint: WaitpointOutcome | None = None
    concurrency_key: str = ""  # its queue policy's concurrency_key_limit counts per key
    index: int = field(default=0, compare=False)  # X-Baton-Index of the answer: watch from here

    @classmethod
    def from_json(cls, d: Any) -> Task:
        return _build(cls, d, dependencies=_dependencies, waitpoint=_waitpoint)

    @property
    def fence(self) -> Fence:
        """A guard with this task's current token."""
        return Fence(self.task_id, self.fencing_token)


def _dependencies(v: Any) -> tuple[Dependency, ...]:
    return tuple(Dependency.from_json(x) for x in v or ())


def _waitpoint(v: Any) -> WaitpointOutcome | None:
    return None if v is None else WaitpointOutcome.from_json(v)


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a list; ``next_page_token`` is ``""`` on the last page."""

    items: list[T]
    next_page_token: str = ""
    index: int = field(default=0, compare=False)  # X-Baton-Index of the answer


@dataclass(frozen=True, slots=True)
class QueueStats:
    queue: str
    tasks: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    waiting: int = 0
    due_later: int = 0
    dead: int = 0
    running: int = 0  # under a lease live at as_of, whatever their status
    lease_expired: int = 0  # with an owner whose lease ran out by as_of
    blocked: int = 0  # without a lease, waiting on dependencies
    oldest_pending_at: datetime | None = None
    oldest_pending_age_ms: int = 0
    claims_per_minute: int = 0
    as_of: datetime | None = None

    @classmethod
    def from_json(cls, d: Any) -> QueueStats:
        return _build(cls, d, by_status=lambda v: dict(v or {}))


@dataclass(frozen=True, slots=True)
class QueuePolicy:
    max_attempts: int = 0
    backoff_initial_ms: int = 0
    backoff_max_ms: int = 0
    retention_ms: int = 0
    # Flow control (0: no limit): tasks leased at once, claims a second with a burst, leased tasks per
    # concurrency_key.
    max_leased: int = 0
    claims_per_second: int = 0
    claim_burst: int = 0
    concurrency_key_limit: int = 0

    @classmethod
    def from_json(cls, d: Any) -> QueuePolicy:
        return _build(cls, d)


@dataclass(frozen=True, slots=True)
class ChunkRef:
    digest: str
    size: int

    def to_json(self) -> dict[str, Any]:
        return {"digest": self.digest, "size": self.size}

    @classmethod
    def from_json(cls, d: Any) -> ChunkRef:
        return _build(cls, d)


def _chunks(v: Any) -> tuple[ChunkRef, ...]:
    return tuple(ChunkRef.from_json(c) for c in v or ())


@dataclass(frozen=True, slots=True)
class Manifest:
    artifact_id: str
    name: str
    version: int
    digest: str
    size: int
    chunks: tuple[ChunkRef, ...] = ()
    media_type: str = ""
    sources: tuple[str, ...] = ()
    metadata: Any = None
    task_id: str = ""
    fencing_token: int = 0
    created_by: str = ""
    created_at: datetime | None = None
    index: int = field(default=0, compare=False)  # X-Baton-Index of the answer: watch from here

    @classmethod
    def from_json(cls, d: Any) -> Manifest:
        return _build(cls, d, chunks=_chunks, sources=lambda v: tuple(v or ()))


@dataclass(frozen=True, slots=True)
class ArtifactSummary:
    name: str
    latest_version: int = 0
    versions: int = 0

    @classmethod
    def from_json(cls, d: Any) -> ArtifactSummary:
        return _build(cls, d)


@dataclass(frozen=True, slots=True)
class ArtifactPolicy:
    prefix: str
    keep_last: int

    @classmethod
    def from_json(cls, d: Any) -> ArtifactPolicy:
        return _build(cls, d)


@dataclass(frozen=True, slots=True)
class CheckpointPolicy:
    """A retention policy of the threads whose id starts with ``prefix``: each namespace keeps its
    newest ``keep_last`` checkpoints, and a checkpoint is deleted ``max_age_ms`` after its put (0: no
    bound of that kind)."""

    prefix: str
    keep_last: int = 0
    max_age_ms: int = 0

    @classmethod
    def from_json(cls, d: Any) -> CheckpointPolicy:
        return _build(cls, d)


@dataclass
class UploadStats:
    """What an upload did; pass one to ``upload_artifact(stats=...)`` to have it filled in."""

    size: int = 0  # content bytes read
    chunks: int = 0  # chunks in the manifest
    chunks_uploaded: int = 0  # chunk bodies sent; the rest were held already
    bytes_sent: int = 0
    elapsed: float = 0.0  # seconds


@dataclass(frozen=True, slots=True)
class Ref:
    ref: str
    artifact_id: str
    name: str = ""
    version: int = 0
    revision: int = 0
    updated_at: datetime | None = None
    index: int = field(default=0, compare=False)  # X-Baton-Index of the answer: watch from here

    @classmethod
    def from_json(cls, d: Any) -> Ref:
        return _build(cls, d)


@dataclass(frozen=True, slots=True)
class PendingWrite:
    """One pending write of a task after a checkpoint, as LangGraph keys them: (task_id, idx)."""

    task_id: str
    channel: str
    value: Any = None
    idx: int = 0
    task_path: str = ""
    type: str = ""  # with data: bytes of a serializer's type instead of a JSON value
    data: bytes = b""

    @classmethod
    def from_json(cls, d: Any) -> PendingWrite:
        if isinstance(d, dict) and "b64" in d:
            d = dict(d, data=_mp.read_bytes(d["b64"]))
        return _build(cls, d)


@dataclass(frozen=True, slots=True)
class Blob:
    """A channel value of a checkpoint, stored once per (channel, version) of its namespace: bytes of
    a serializer's ``type``."""

    channel: str
    version: str
    type: str
    data: bytes = b""

    @classmethod
    def from_json(cls, d: Any) -> Blob:
        return cls(channel=str(d.get("channel", "")), version=str(d.get("version", "")), type=str(d.get("type", "")),
                   data=_mp.read_bytes(d.get("b64")))

    def to_json(self, binary: bool = False) -> dict[str, Any]:
        """The blob as a request member: its bytes as they are with ``binary`` (msgpack), else base64."""
        return {"channel": self.channel, "version": self.version, "type": self.type,
                "b64": _mp.wire_bytes(self.data, binary)}


@dataclass(frozen=True, slots=True)
class Checkpoint:
    thread_id: str
    checkpoint_id: str
    checkpoint_ns: str = ""
    parent_id: str = ""
    data: Any = None
    data_chunks: tuple[ChunkRef, ...] = ()
    metadata: Any = None
    created_at: datetime | None = None
    pending_writes: tuple[PendingWrite, ...] = ()
    expires_at: datetime | None = None  # when a retention policy's max age deletes it
    blobs: tuple[Blob, ...] = ()  # the channel values it names, with their bytes
    index: int = field(default=0, compare=False)  # X-Baton-Index of the answer: watch from here

    @classmethod
    def from_json(cls, d: Any) -> Checkpoint:
        return _build(
            cls,
            d,
            blobs=lambda v: tuple(Blob.from_json(b) for b in v or ()),
            data_chunks=_chunks,
            pending_writes=lambda v: tuple(PendingWrite.from_json(p) for p in v or ()),
        )


@dataclass(frozen=True, slots=True)
class KVEntry:
    namespace: str
    key: str
    value: Any = None
    version: int = 0
    updated_at: datetime | None = None
    expires_at: datetime | None = None
    index: int = field(default=0, compare=False)  # X-Baton-Index of the answer: watch from here

    @classmethod
    def from_json(cls, d: Any) -> KVEntry:
        return _build(cls, d)


@dataclass(frozen=True, slots=True)
class StoreItem:
    """An item of the knowledge store (LangGraph's BaseStore): a JSON object under a namespace of labels.
    ``score``: the cosine similarity to a search's vector, None without one or for an item with no vector."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    expires_at: datetime | None = None
    score: float | None = None

    @classmethod
    def from_json(cls, d: Any) -> StoreItem:
        return _build(cls, d, namespace=tuple)


@dataclass(frozen=True, slots=True)
class Op:
    """A record of the operations ledger."""

    op_id: str
    kind: str = ""
    params_digest: str = ""
    task_id: str = ""
    state: str = ""  # started, succeeded, failed or unknown
    result: Any = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    index: int = field(default=0, compare=False)  # X-Baton-Index of the answer: watch from here

    @classmethod
    def from_json(cls, d: Any) -> Op:
        return _build(cls, d)


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One committed change. ``id`` is ``INDEX`` or ``INDEX.POS``; ids of one watch strictly increase."""

    id: str
    index: int
    resource: str
    key: str
    type: str  # put or delete
    value: Any = None


@dataclass(frozen=True, slots=True)
class Member:
    id: str
    raft_addr: str = ""
    http_addr: str = ""
    voter: bool = True
    state: str = ""

    @classmethod
    def from_json(cls, d: Any) -> Member:
        return _build(cls, d)


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    """``GET /v1/cluster``; ``raw`` holds the whole answer (retries, state_size, build, ...)."""

    node_id: str
    state: str = ""
    leader_id: str = ""
    leader_http_addr: str = ""
    term: int = 0
    commit_index: int = 0
    applied_index: int = 0
    state_digest: str = ""
    members: tuple[Member, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Any) -> ClusterStatus:
        leader = d.get("leader") if isinstance(d, dict) else None
        leader = leader if isinstance(leader, dict) else {}
        d2 = dict(d)
        d2["leader_id"] = leader.get("id", "")
        d2["leader_http_addr"] = leader.get("http_addr", "")
        c = _build(cls, d2, members=lambda v: tuple(Member.from_json(m) for m in v or ()))
        return dataclasses.replace(c, raw=dict(d))


@dataclass(frozen=True, slots=True)
class TxnResult:
    """The answer of a transaction: each op's answer body, in order (plain JSON)."""

    results: list[Any]
    index: int = 0
