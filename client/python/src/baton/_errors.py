"""The SDK's exceptions: one class per API error code (docs/api.md "Errors").

Every error answer of the server becomes an instance of the class that
``CODES`` maps its ``code`` to; a code this SDK does not know yet becomes the
class ``STATUSES`` maps its HTTP status to (else :class:`BatonError`).
Adding a code is one class and one line in ``CODES``.
"""

from __future__ import annotations

from typing import Any

from . import _json


class BatonError(Exception):
    """An error answer of the API, or a failure to get one.

    ``code`` is the API's error code (``"fenced"``, ...), ``status`` the HTTP
    status (0 when no node answered), ``message`` the server's words and
    ``details`` the error object's other fields. ``index`` is the answer's
    ``X-Baton-Index`` when it had one.
    """

    default_code = ""

    def __init__(
        self,
        message: str = "",
        *,
        code: str | None = None,
        status: int = 0,
        details: dict[str, Any] | None = None,
        index: int = 0,
    ) -> None:
        super().__init__(message)
        self.code = code if code is not None else self.default_code
        self.status = status
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        self.index = index

    def __str__(self) -> str:
        if self.code and self.message:
            return f"{self.code}: {self.message}"
        return self.code or self.message or f"http {self.status}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, status={self.status}, message={self.message!r})"

    def _detail_int(self, key: str) -> int | None:
        v = self.details.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    def _detail_str(self, key: str) -> str | None:
        v = self.details.get(key)
        return v if isinstance(v, str) else None


class InvalidArgument(BatonError):
    """400: malformed request, bad name or path, missing or out-of-range field."""

    default_code = "invalid_argument"

    @property
    def op_index(self) -> int | None:
        """The failing op of a transaction."""
        return self._detail_int("op_index")


class DigestMismatch(BatonError):
    """400: content does not hash to its digest (also raised by downloads)."""

    default_code = "digest_mismatch"


class MissingChunks(BatonError):
    """400: a manifest names chunks the tenant does not hold."""

    default_code = "missing_chunks"

    @property
    def missing(self) -> list[str]:
        v = self.details.get("missing")
        return [str(d) for d in v] if isinstance(v, list) else []


class Unauthenticated(BatonError):
    """401: no token, or an unknown or revoked one."""

    default_code = "unauthenticated"


class PermissionDenied(BatonError):
    """403 ``forbidden``: no grant, another tenant's path, or admin only."""

    default_code = "forbidden"


class NotFound(BatonError):
    """404: no such object or tenant, or an unknown path."""

    default_code = "not_found"


class MethodNotAllowed(BatonError):
    """405: the path exists, the method does not."""

    default_code = "method_not_allowed"


class Conflict(BatonError):
    """Base of the 409 errors."""


class AlreadyExists(Conflict):
    """409: the id exists (with other content)."""

    default_code = "already_exists"


class LeaseHeld(Conflict):
    """409: a live lease belongs to someone else."""

    default_code = "lease_held"

    @property
    def owner(self) -> str | None:
        return self._detail_str("owner")

    @property
    def lease_until(self) -> str | None:
        return self._detail_str("lease_until")


class Fenced(Conflict):
    """409: the fencing token is not the task's current one."""

    default_code = "fenced"

    @property
    def current_token(self) -> int | None:
        return self._detail_int("current_token")


class VersionMismatch(Conflict):
    """409: an expectation failed; the current value is in the details."""

    default_code = "version_mismatch"

    @property
    def current_version(self) -> int | None:
        return self._detail_int("current_version")

    @property
    def current_status(self) -> str | None:
        return self._detail_str("current_status")

    @property
    def current_head(self) -> str | None:
        return self._detail_str("current_head")

    @property
    def current_state(self) -> str | None:
        return self._detail_str("current_state")

    @property
    def artifact_id(self) -> str | None:
        return self._detail_str("artifact_id")


class IdempotencyMismatch(Conflict):
    """409: an idempotency key or op id reused with another request."""

    default_code = "idempotency_mismatch"

    @property
    def params_digest(self) -> str | None:
        return self._detail_str("params_digest")


class IdempotencyExpired(Conflict):
    """409: a retry older than what the cluster remembers, refused rather than applied twice."""

    default_code = "idempotency_expired"

    @property
    def reason(self) -> str | None:
        return self._detail_str("reason")


class Referenced(Conflict):
    """409: deleting an artifact version that a ref points at."""

    default_code = "referenced"

    @property
    def refs(self) -> list[str]:
        v = self.details.get("refs")
        return [str(r) for r in v] if isinstance(v, list) else []


class Compacted(BatonError):
    """410: a watch resumes from before the retained history."""

    default_code = "compacted"

    @property
    def floor(self) -> int | None:
        return self._detail_int("floor")


class TooLarge(BatonError):
    """413: a body over its limit."""

    default_code = "too_large"


class RateLimited(BatonError):
    """429: over the principal's request rate or its cap of watches."""

    default_code = "rate_limited"


class Internal(BatonError):
    """500: a bug in the server."""

    default_code = "internal"


class Unavailable(BatonError):
    """503, or no endpoint reachable within the retry budget: no leader, no quorum. Nothing was done,
    unless the error is also an OutcomeUnknown (an earlier attempt of the write got no answer)."""

    default_code = "unavailable"


class OutcomeUnknown(BatonError):
    """504: the write was proposed but its outcome is not known (the leader lost its leadership or
    timed out while committing it): it may or may not have been applied. The SDK sends every write
    with a session place or an Idempotency-Key, so it retries this itself; you see it only when the
    retry budget ran out, and then only a retry with the same key is safe."""

    default_code = "outcome_unknown"


class ResourceExhausted(BatonError):
    """507: the write would grow the data past a quota; nothing was applied."""

    default_code = "resource_exhausted"


class UnavailableInDoubt(OutcomeUnknown, Unavailable):
    """A write whose attempts ran out with no node answering (Unavailable) after an attempt that got no
    answer (sent, then cut or timed out) and so may have been applied (OutcomeUnknown): both
    ``except Unavailable`` and ``except OutcomeUnknown`` catch it."""

    default_code = "unavailable"


def in_doubt(err: BatonError | None, doubt: BatonError) -> BatonError | None:
    """A write's final Unavailable, as an UnavailableInDoubt when an earlier attempt (failed with
    ``doubt``) may have been applied."""
    if not isinstance(err, Unavailable) or isinstance(err, OutcomeUnknown):
        return err
    return UnavailableInDoubt(f"{err.message}; an earlier attempt got no answer and may have been applied "
                              f"({doubt.message})", code=err.code, status=err.status, details=err.details,
                              index=err.index)


# The one table from API codes to classes. Add new codes here.
CODES: dict[str, type[BatonError]] = {
    "invalid_argument": InvalidArgument,
    "digest_mismatch": DigestMismatch,
    "missing_chunks": MissingChunks,
    "unauthenticated": Unauthenticated,
    "forbidden": PermissionDenied,
    "not_found": NotFound,
    "method_not_allowed": MethodNotAllowed,
    "already_exists": AlreadyExists,
    "lease_held": LeaseHeld,
    "fenced": Fenced,
    "version_mismatch": VersionMismatch,
    "idempotency_mismatch": IdempotencyMismatch,
    "idempotency_expired": IdempotencyExpired,
    "referenced": Referenced,
    "compacted": Compacted,
    "too_large": TooLarge,
    "rate_limited": RateLimited,
    "internal": Internal,
    "unavailable": Unavailable,
    "outcome_unknown": OutcomeUnknown,
    "resource_exhausted": ResourceExhausted,
}

# Unknown codes: the class of their HTTP status.
STATUSES: dict[int, type[BatonError]] = {
    400: InvalidArgument,
    401: Unauthenticated,
    403: PermissionDenied,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    410: Compacted,
    413: TooLarge,
    429: RateLimited,
    500: Internal,
    503: Unavailable,
    507: ResourceExhausted,
}


def error_class(code: str, status: int) -> type[BatonError]:
    """The class of an error answer: by code, else by status, else BatonError."""
    return CODES.get(code) or STATUSES.get(status) or BatonError


def error_from_answer(status: int, body: bytes, index: int = 0) -> BatonError:
    """Decodes an error answer's body ``{"error": {"code", "message", ...}}``."""
    obj: Any = None
    try:
        obj = _json.loads(body) if body else None
    except ValueError:
        obj = None
    err = obj.get("error") if isinstance(obj, dict) else None
    if not isinstance(err, dict):
        msg = body.decode("utf-8", "replace").strip() or f"HTTP {status}"
        cls = STATUSES.get(status, BatonError)
        return cls(msg, code=cls.default_code, status=status, index=index)
    details = dict(err)
    code = details.pop("code", "")
    message = details.pop("message", "")
    code = code if isinstance(code, str) else ""
    message = message if isinstance(message, str) else ""
    cls = error_class(code, status)
    return cls(message, code=code, status=status, details=details, index=index)


# Errors of the helpers (Worker, once, Mutex, Election).


class LeaseLost(BatonError):
    """A worker's or mutex's lease ended without it releasing it (fenced, deleted or expired)."""

    default_code = "lease_lost"


class LeaseReleased(BatonError):
    """The lease was given back already (complete, fail or release)."""

    default_code = "lease_released"


class CancelRequested(BatonError):
    """The task was cancelled (cancel_task) while a worker held it: the handler should stop; the worker
    acknowledges the cancellation and the task ends ``cancelled``."""

    default_code = "cancel_requested"


class Locked(BatonError):
    """``Mutex.try_lock`` found the lock held by another holder."""

    default_code = "locked"


class NotLocked(BatonError):
    """``Mutex.unlock`` of a mutex this holder does not hold."""

    default_code = "not_locked"


class NoLeader(BatonError):
    """``Election.leader``: none elected, resigned, or not proclaimed yet."""

    default_code = "no_leader"


class NotLeader(BatonError):
    """``Election.proclaim`` by a contender that does not lead."""

    default_code = "not_leader"


class OpFailed(BatonError):
    """``once``: the action's recorded outcome is failed."""

    default_code = "op_failed"

    def __init__(self, message: str, *, op: Any, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.op = op
        self.cause = cause


class OpInDoubt(BatonError):
    """``once``: an earlier attempt began the action without recording an outcome; reconcile, then finish it."""

    default_code = "op_in_doubt"

    def __init__(self, message: str, *, op: Any) -> None:
        super().__init__(message)
        self.op = op


class OpUnrecorded(BatonError):
    """``once``: the action ran but its outcome could not be recorded in the ledger."""

    default_code = "op_unrecorded"

    def __init__(self, message: str, *, op_id: str, state: str, result: Any, recorded: str) -> None:
        super().__init__(message)
        self.op_id = op_id
        self.state = state
        self.result = result
        self.recorded = recorded


class NonRetryable(Exception):
    """Raise (or wrap with ``raise NonRetryable(...) from err``) in a worker handler to make the task dead
    at once instead of retried after a backoff."""
