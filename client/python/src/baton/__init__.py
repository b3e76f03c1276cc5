"""Baton's Python SDK: a client of a Baton cluster, sync (``Client``) and asyncio (``AsyncClient``).

See docs/python.md in the Baton repository.
"""

from ._async_client import CHECKPOINT_INLINE_MAX, MISSING, AsyncClient, AsyncWatch
from ._core import new_idempotency_key, params_digest
from ._errors import (
    CODES,
    STATUSES,
    AlreadyExists,
    BatonError,
    Compacted,
    Conflict,
    DigestMismatch,
    Fenced,
    IdempotencyExpired,
    IdempotencyMismatch,
    Internal,
    InvalidArgument,
    LeaseHeld,
    LeaseLost,
    LeaseReleased,
    Locked,
    MethodNotAllowed,
    MissingChunks,
    NoLeader,
    NonRetryable,
    NotFound,
    NotLeader,
    NotLocked,
    OpFailed,
    OpInDoubt,
    OpUnrecorded,
    PermissionDenied,
    RateLimited,
    Referenced,
    ResourceExhausted,
    TooLarge,
    Unauthenticated,
    Unavailable,
    VersionMismatch,
)
from ._models import (
    ArtifactPolicy,
    ArtifactSummary,
    Checkpoint,
    ChunkRef,
    ClusterStatus,
    Fence,
    Grant,
    KVEntry,
    Manifest,
    Member,
    Op,
    Page,
    PendingWrites,
    Principal,
    Quota,
    QueuePolicy,
    QueueStats,
    Ref,
    Task,
    TxnResult,
    UploadStats,
    WatchEvent,
)
from ._async_helpers import AsyncElection, AsyncMutex, AsyncTaskContext, AsyncWorker
from ._async_helpers import once as async_once
from ._sync_client import Client, Watch
from ._sync_helpers import Election, Mutex, TaskContext, Worker, once

__version__ = "0.1.0"

__all__ = [
    "CHECKPOINT_INLINE_MAX", "CODES", "MISSING", "STATUSES", "AlreadyExists", "ArtifactPolicy",
    "ArtifactSummary", "AsyncClient", "AsyncElection", "AsyncMutex", "AsyncTaskContext", "AsyncWorker", "AsyncWatch", "BatonError", "Checkpoint", "ChunkRef", "Client",
    "ClusterStatus", "Compacted", "Conflict", "DigestMismatch", "Fence", "Fenced", "Grant",
    "IdempotencyExpired", "IdempotencyMismatch", "Internal", "InvalidArgument", "KVEntry", "LeaseHeld",
    "LeaseLost", "LeaseReleased", "Locked", "Manifest", "Member", "MethodNotAllowed", "MissingChunks",
    "NoLeader", "NonRetryable", "NotFound", "NotLeader", "NotLocked", "Op", "OpFailed", "OpInDoubt",
    "OpUnrecorded", "Page", "PendingWrites", "PermissionDenied", "Principal", "Quota", "QueuePolicy",
    "QueueStats", "RateLimited", "Ref", "Referenced", "ResourceExhausted", "Task", "TooLarge", "TxnResult",
    "Unauthenticated", "Unavailable", "UploadStats", "VersionMismatch", "Watch", "WatchEvent", "Worker", "TaskContext", "Mutex", "Election", "once",
    "async_once",
    "new_idempotency_key", "params_digest",
]
