"""Helpers over AsyncClient: AsyncWorker, AsyncTaskContext (a fenced lease), once, AsyncMutex, AsyncElection.

This file is the source of ``_sync_helpers.py``, which ``tools/unasync.py`` generates from it.
Mirrors the Go SDK's client/concurrency (worker.go, once.go, mutex.go, election.go).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from . import _aio as _io
from ._async_client import MISSING, AsyncClient, Source
from ._core import Backoff, Duration, new_idempotency_key, params_digest, seconds
from ._errors import (
    AlreadyExists,
    BatonError,
    CancelRequested,
    Compacted,
    Fenced,
    InvalidArgument,
    LeaseLost,
    LeaseReleased,
    Locked,
    NoLeader,
    NonRetryable,
    NotFound,
    NotLeader,
    NotLocked,
    OpFailed,
    OpInDoubt,
    OpUnrecorded,
    OutcomeUnknown,
    Unavailable,
    VersionMismatch,
)
from ._models import Checkpoint, Fence, KVEntry, Manifest, Op, PendingWrite, Ref, Task, TxnResult, UploadStats

P = ParamSpec("P")
R = TypeVar("R")

MAX_FAIL_ERROR = 4096


def _truncate(s: str, n: int) -> str:
    b = s.encode()
    if len(b) <= n:
        return s
    return b[:n].decode("utf-8", "ignore")


def _non_retryable(e: BaseException) -> bool:
    seen: set[int] = set()
    x: BaseException | None = e
    while x is not None and id(x) not in seen:
        if isinstance(x, NonRetryable):
            return True
        seen.add(id(x))
        x = x.__cause__ or x.__context__
    return False


class AsyncTaskContext:
    """A hold on one claimed task (a lease), renewed in the background while held.

    Writes made through it (``kv_put``, ``set_ref``, ``upload_artifact``, ``put_checkpoint``, ``once``,
    ``txn``...) carry the claim's fence, so that they are refused with Fenced once someone else holds the
    task; a Fenced answer marks the lease lost, and later writes are refused locally (LeaseLost).

    A renewal that shows the task was cancelled (``cancel_task``) sets ``cancel_requested``: the handler
    should stop (``should_stop``, ``wait_stop``), and the worker acknowledges the cancellation.
    """

    def __init__(self, client: AsyncClient, tenant: str, task: Task, *, lease: float, renew_every: float,
                 safety_margin: float, sent: float) -> None:
        self.client = client
        self.tenant = tenant
        self.task = task
        self._lease = lease
        self._renew_every = renew_every
        self._margin = safety_margin
        self._deadline = sent + lease - safety_margin
        self._err: BatonError | None = None
        self._lost = False
        self._releasing = 0
        self._stop = _io.Event()
        self._lost_ev = _io.Event()
        self._cancel_req = False
        self._interrupt = _io.Event()  # set once the lease is lost or a cancellation requested
        self._renewer: _io.Handle | None = None

    @property
    def token(self) -> int:
        """The claim's fencing token."""
        return self.task.fencing_token

    @property
    def fence(self) -> Fence:
        return Fence(self.task.task_id, self.task.fencing_token)

    @property
    def lost(self) -> bool:
        """True once the lease is known lost (fenced, deleted or expired)."""
        self._check()
        return self._lost

    @property
    def cancel_requested(self) -> bool:
        """True once a renewal (the background one or ``heartbeat``) showed that the task was cancelled
        while this lease held it."""
        return self._cancel_req

    @property
    def should_stop(self) -> bool:
        """True once the lease is lost or a cancellation requested: a long handler checks it between
        steps."""
        return self.lost or self._cancel_req

    async def wait_stop(self, timeout: Duration | None = None) -> bool:
        """Waits up to ``timeout`` (None: without end) for the lease to be lost or the task to be
        cancelled; True if it was (a sleep that ends early when the handler should stop)."""
        if self.should_stop:
            return True
        await self._interrupt.wait(None if timeout is None else seconds(timeout))
        return self.should_stop

    @property
    def error(self) -> BatonError | None:
        """None while held; afterwards why it ended (LeaseLost or LeaseReleased)."""
        return self._check()

    @property
    def ended(self) -> bool:
        return self._check() is not None

    def _check(self) -> BatonError | None:
        if self._err is None and self._releasing == 0 and _io.monotonic() >= self._deadline:
            self._end(LeaseLost(f"lease of task {self.task.task_id!r} expired: no renewal succeeded in time"), True)
        return self._err

    def _end(self, err: BatonError, lost: bool) -> None:
        if self._err is None:
            self._err, self._lost = err, lost
            self._stop.set()
            if lost:
                self._lost_ev.set()
                self._interrupt.set()

    def _observe(self, e: BaseException, task_write: bool = False) -> None:
        if isinstance(e, Fenced) or (task_write and isinstance(e, NotFound)):
            self._end(LeaseLost(f"lease of task {self.task.task_id!r} lost: {e}", details={"cause": e.code}), True)

    def _guard(self) -> None:
        err = self._check()
        if err is not None:
            raise err

    # The lease itself.

    async def _renew(self) -> None:
        sent = _io.monotonic()
        try:
            t = await self.client.renew_task(self.task.task_id, fencing_token=self.token, lease=self._lease,
                                             tenant=self.tenant)
        except BatonError as e:
            if self._releasing == 0:
                self._observe(e, True)
            raise
        self._deadline = max(self._deadline, sent + self._lease - self._margin)
        if t.cancel_requested and not self._cancel_req:
            self._cancel_req = True
            self._interrupt.set()

    def _cancel_cause(self) -> CancelRequested:
        return CancelRequested(f"task {self.task.task_id!r} was cancelled while held")

    async def heartbeat(self, progress: Any = MISSING) -> None:
        """Renews now; with progress, first records it as the task's result under the lease's token.
        Raises CancelRequested once the task was cancelled while held."""
        self._guard()
        if progress is not MISSING:
            try:
                await self.client.update_task(self.task.task_id, fencing_token=self.token, result=progress,
                                              tenant=self.tenant)
            except BatonError as e:
                self._observe(e, True)
                raise self._check() or e from e
        try:
            await self._renew()
        except BatonError as e:
            raise self._check() or e from e
        if self._cancel_req:
            raise self._cancel_cause()

    def _start_renewer(self) -> None:
        self._renewer = _io.spawn(self._renew_loop)

    async def _stop_renewer(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            await self._renewer.join()

    async def _renew_loop(self) -> None:
        nxt = _io.monotonic() + self._renew_every
        bo = Backoff()
        while self._check() is None:
            wait = min(nxt, self._deadline) - _io.monotonic()
            if await self._stop.wait(max(wait, 0.0)):
                return
            if self._check() is not None:
                return
            if _io.monotonic() < nxt:
                continue
            sent = _io.monotonic()
            try:
                await self._renew()
            except BatonError:
                nxt = _io.monotonic() + bo.delay(0.0, max(self._deadline - _io.monotonic(), 0.0))
                continue
            bo = Backoff()
            nxt = sent + self._renew_every

    async def _update(self, *, release: bool, **kw: Any) -> Task:
        if release:
            self._guard()
            self._releasing += 1
        else:
            self._guard()
        try:
            t = await self.client.update_task(self.task.task_id, fencing_token=self.token, release=release or None,
                                              tenant=self.tenant, **kw)
        except BatonError as e:
            self._observe(e, True)
            if release:
                self._releasing -= 1
            raise
        if release:
            self._releasing -= 1
            self._end(LeaseReleased(f"task {self.task.task_id!r} released under token {self.token}"), False)
        return t

    async def update(self, **kw: Any) -> Task:
        """update_task under this lease's token (``release=True`` gives the lease back)."""
        release = bool(kw.pop("release", False))
        return await self._update(release=release, **kw)

    async def complete(self, result: Any = MISSING, *, status: str | None = "done") -> Task:
        """Sets status and result and releases the lease, in one fenced update."""
        return await self._update(release=True, status=status, result=result)

    async def release(self, *, unstarted: bool = False) -> Task:
        """Gives the task back (clears owner and lease) without changing it; ``unstarted=True`` says it
        never started, which gives back the claim's attempt and the status its ``set_status`` replaced."""
        return await self._update(release=True, unstarted=unstarted)

    async def fail(self, error: BaseException | str | None = None, *, non_retryable: bool = False) -> Task:
        """Ends the attempt as failed (POST .../fail): the server retries the task after its backoff, or
        makes it dead after its max_attempts (at once with non_retryable, or a NonRetryable error)."""
        self._guard()
        if isinstance(error, BaseException):
            non_retryable = non_retryable or _non_retryable(error)
            msg = str(error) or type(error).__name__
        else:
            msg = error or ""
        return await self._give_back(
            "failed", self.client.fail_task, error=_truncate(msg, MAX_FAIL_ERROR) or None,
            non_retryable=non_retryable)

    async def ack_cancel(self, reason: str | None = None) -> Task:
        """Cancels the task under this lease's token, which ends the lease: the task is ``cancelled`` at
        once and the token retired (a requested cancellation is acknowledged so; without one, the holder
        cancels its own task, ``reason`` kept as its last_error)."""
        self._guard()
        return await self._give_back("cancelled", self.client.cancel_task, reason=reason)

    async def park(self, waitpoint_id: str) -> Task:
        """Parks the task on a waitpoint under this lease's token, which ends the lease: the task is
        claimable again once the waitpoint is completed or times out, and that claim carries
        ``Task.waitpoint``."""
        self._guard()
        return await self._give_back("parked", self.client.park_task, waitpoint_id=waitpoint_id)

    async def _give_back(self, what: str, fn: Callable[..., Awaitable[Task]], **kw: Any) -> Task:
        """A task write under the token that ends the lease (fail, cancel, park)."""
        self._releasing += 1
        try:
            t = await fn(self.task.task_id, fencing_token=self.token, tenant=self.tenant, **kw)
        except BatonError as e:
            self._releasing -= 1
            self._observe(e, True)
            raise
        self._releasing -= 1
        self._end(LeaseReleased(f"task {self.task.task_id!r} {what} under token {self.token}"), False)
        return t

    # Fenced writes.

    async def _fenced(self, fn: Callable[..., Awaitable[Any]], *args: Any, **kw: Any) -> Any:
        self._guard()
        try:
            return await fn(*args, fence=self.fence, tenant=self.tenant, **kw)
        except BatonError as e:
            self._observe(e)
            raise

    async def kv_put(self, namespace: str, key: str, value: Any, **kw: Any) -> KVEntry:
        r: KVEntry = await self._fenced(self.client.kv_put, namespace, key, value, **kw)
        return r

    async def set_ref(self, ref: str, artifact_id: str, **kw: Any) -> Ref:
        r: Ref = await self._fenced(self.client.set_ref, ref, artifact_id, **kw)
        return r

    async def upload_artifact(self, name: str, source: Source, *, stats: UploadStats | None = None,
                              **kw: Any) -> Manifest:
        kw.setdefault("task_id", self.task.task_id)
        r: Manifest = await self._fenced(self.client.upload_artifact, name, source, stats=stats, **kw)
        return r

    async def put_checkpoint(self, thread: str, checkpoint_id: str, data: Any, **kw: Any) -> Checkpoint:
        r: Checkpoint = await self._fenced(self.client.put_checkpoint, thread, checkpoint_id, data, **kw)
        return r

    async def put_writes(self, thread: str, checkpoint_id: str, task_id: str,
                         writes: Sequence[tuple[str, Any] | dict[str, Any]], **kw: Any) -> list[PendingWrite]:
        r: list[PendingWrite] = await self._fenced(self.client.put_writes, thread, checkpoint_id, task_id, writes,
                                                   **kw)
        return r

    async def delete_thread(self, thread: str, **kw: Any) -> None:
        await self._fenced(self.client.delete_thread, thread, **kw)

    async def txn(self, ops: Sequence[dict[str, Any]], **kw: Any) -> TxnResult:
        """A transaction whose kv.put, kv.delete and ref.set ops carry this lease's fence."""
        self._guard()
        fenced = [dict(op, fence=self.fence.to_json()) if op.get("op") in ("kv.put", "kv.delete", "ref.set")
                  and "fence" not in op else op for op in ops]
        try:
            return await self.client.txn(fenced, tenant=self.tenant, **kw)
        except BatonError as e:
            self._observe(e)
            raise

    async def once(self, op_id: str, fn: Callable[[], Awaitable[Any]], *, kind: str, params: Any = None) -> Any:
        """``once`` with this task's id and fence."""
        self._guard()
        try:
            return await once(self.client, op_id, fn, kind=kind, params=params, task_id=self.task.task_id,
                              fence=self.fence, tenant=self.tenant)
        except BatonError as e:
            self._observe(e)
            raise


Handler = Callable[[AsyncTaskContext], Awaitable[Any]]


class AsyncWorker:
    """Claims tasks from a queue, ``concurrency`` at a time, and runs ``handler(ctx)`` on each.

    The lease is renewed in the background. When the handler returns, the task is completed (status
    ``done_status``, the return value as result, lease released) unless the handler already completed,
    failed or released it through ``ctx``; when it raises, the attempt is failed (POST .../fail) so that
    the server's attempts and backoff apply (raise NonRetryable to make it dead at once). When a renewal
    shows that the task was cancelled, the handler is cancelled (AsyncWorker) or sees
    ``ctx.should_stop`` (Worker); once it ends the worker acknowledges the cancellation (the task ends
    ``cancelled``, whatever the handler returned, unless it gave the task back itself) and reports
    CancelRequested to ``on_error``. ``run`` stops
    gracefully on ``stop()``, SIGTERM or SIGINT: no new claims, in-flight tasks finish (a long-poll claim
    under way still completes, and a task it brings is processed). Durations are float seconds or
    timedelta. Errors of single tasks go to ``on_error(task, exc)`` and do not stop the worker.
    """

    def __init__(
        self,
        client: AsyncClient,
        queue: str,
        handler: Handler,
        *,
        concurrency: int = 1,
        owner: str | None = None,
        lease: Duration = 30.0,
        wait: Duration = 10.0,
        statuses: Sequence[str] | None = None,
        set_status: str | None = None,
        done_status: str | None = "done",
        renew_every: Duration | None = None,
        safety_margin: Duration | None = None,
        tenant: str | None = None,
        on_error: Callable[[Task, BaseException], None] | None = None,
        handle_signals: bool = True,
    ) -> None:
        self.client = client
        self.queue = queue
        self.handler = handler
        self.concurrency = max(int(concurrency), 1)
        self.owner = owner or f"worker-{uuid.uuid4()}"
        self.lease = seconds(lease)
        self.wait = min(seconds(wait), 60.0)
        self.statuses = list(statuses) if statuses else None
        self.set_status = set_status
        self.done_status = done_status
        self.renew_every = seconds(renew_every, self.lease / 3)
        self.safety_margin = seconds(safety_margin, self.lease / 10)
        self.tenant = client._tenant(tenant)
        self.on_error = on_error
        self.handle_signals = handle_signals
        if self.lease < 0.001:
            raise InvalidArgument("worker lease must be at least 1ms")
        if self.renew_every >= self.lease - self.safety_margin:
            raise InvalidArgument("renew_every must be shorter than lease minus safety_margin")
        self._stop = _io.Event()
        self._fatal: BaseException | None = None
        self.processed = 0

    def stop(self) -> None:
        """Stops claiming; run() returns once the tasks in flight are finished."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    async def run(self) -> None:
        """Claims and runs tasks until stop() (or SIGTERM); raises the error that stopped it, if any
        (PermissionDenied, NotFound, InvalidArgument... on a claim)."""
        remove = _io.on_sigterm(self.stop) if self.handle_signals else (lambda: None)
        try:
            slots = [_io.spawn(self._slot) for _ in range(self.concurrency)]
            for s in slots:
                await s.join()
        finally:
            remove()
        if self._fatal is not None:
            raise self._fatal

    async def _slot(self) -> None:
        bo = Backoff(cap=1.0)
        while not self._stop.is_set():
            try:
                claimed = await self.run_once()
            except Unavailable:
                await self._stop.wait(bo.delay())
                continue
            except BaseException as e:  # noqa: BLE001 - a claim error stops the worker; run() raises it
                self._fatal = e
                self._stop.set()
                return
            bo = Backoff(cap=1.0)
            if not claimed and self.wait <= 0:
                await self._stop.wait(bo.delay())

    async def _claim(self) -> AsyncTaskContext | None:
        sent = _io.monotonic()
        t = await self.client.claim(self.queue, owner=self.owner, lease=self.lease, statuses=self.statuses,
                                    set_status=self.set_status, wait=self.wait, tenant=self.tenant)
        if t is None:
            return None
        ctx = AsyncTaskContext(self.client, self.tenant, t, lease=self.lease, renew_every=self.renew_every,
                               safety_margin=self.safety_margin, sent=sent)
        if _io.monotonic() - sent > self.renew_every:
            # A slow claim may have been applied anywhere in its round trip: confirm the lease at once.
            try:
                await ctx._renew()
            except BatonError:
                pass
        return ctx

    async def run_once(self) -> bool:
        """Claims one task (waiting up to ``wait``) and processes it; False when none was claimable."""
        ctx = await self._claim()
        if ctx is None:
            return False
        await self._process(ctx)
        return True

    def _report(self, task: Task, e: BaseException) -> None:
        if self.on_error is not None:
            self.on_error(task, e)

    async def _process(self, ctx: AsyncTaskContext) -> None:
        ctx._start_renewer()
        err: BaseException | None = None
        result: Any = None
        try:
            # AsyncWorker cancels the handler when the lease is lost or the task cancelled; Worker's
            # thread cannot be.
            result = await _io.run_guarded(self.handler, ctx, ctx._interrupt)
        except Exception as e:  # noqa: BLE001 - the handler's failure fails the attempt
            err = e
        finally:
            await ctx._stop_renewer()
        self.processed += 1
        if ctx._cancel_req:
            await self._end_cancelled(ctx, err)
            return
        if err is not None:
            self._report(ctx.task, err)
        if ctx._err is not None:
            if ctx._lost and err is None:
                self._report(ctx.task, ctx._err)
            return
        try:
            if err is None:
                await ctx.complete(result, status=self.done_status)
            else:
                await ctx.fail(err)
        except BatonError as e:
            if not isinstance(e, (Fenced, LeaseLost)):
                self._report(ctx.task, e)


    async def _end_cancelled(self, ctx: AsyncTaskContext, err: BaseException | None) -> None:
        """Ends the lease of a task cancelled while held: the cancellation is acknowledged unless the
        handler gave the task back itself (the server settled the cancellation then)."""
        if isinstance(ctx._err, LeaseReleased):
            if err is not None and not isinstance(err, CancelRequested):
                self._report(ctx.task, err)
            return
        if ctx._err is None:
            try:
                await ctx.ack_cancel()
            except BatonError as e:
                if not isinstance(e, (Fenced, LeaseLost)):
                    self._report(ctx.task, e)
        cause = ctx._cancel_cause()
        if err is not None and not isinstance(err, CancelRequested):
            cause.__cause__ = err
        self._report(ctx.task, cause)


# once: the operations ledger.


async def once(
    client: AsyncClient,
    op_id: str,
    fn: Callable[[], Awaitable[Any]],
    *,
    kind: str,
    params: Any = None,
    task_id: str | None = None,
    fence: Fence | None = None,
    tenant: str | None = None,
) -> Any:
    """Runs ``fn()`` at most once per ``op_id`` across retries, processes and crashes, using the
    operations ledger (as the Go SDK's Once):

    - a new op: runs fn, records ``succeeded`` with its return value (JSON) or ``failed`` with
      ``{"error": message}`` and raises OpFailed (``.cause`` is fn's exception);
    - an op already recorded: fn is not run; ``succeeded`` returns the recorded result, ``failed``
      raises OpFailed, ``started``/``unknown`` raises OpInDoubt (reconcile, then finish_op);
    - the same op_id with other params is IdempotencyMismatch;
    - an outcome that cannot be recorded raises OpUnrecorded.
    """
    t = client._tenant(tenant)
    digest = params_digest(params)
    op, created = await client.begin_op(op_id, kind=kind, params_digest=digest, task_id=task_id, fence=fence,
                                        tenant=t, idempotency_key=new_idempotency_key())
    if not created:
        return _recorded(op)
    fn_err: BaseException | None = None
    result: Any = None
    try:
        result = await fn()
    except Exception as e:  # noqa: BLE001 - recorded as the op's failure
        fn_err = e
    state = "succeeded" if fn_err is None else "failed"
    if fn_err is not None:
        result = {"error": str(fn_err) or type(fn_err).__name__}
    key = new_idempotency_key()
    rec: Op | None = None
    last: BatonError | None = None
    in_doubt = False  # a finish got no answer and may have been recorded
    for _ in range(2):
        try:
            rec = await client.finish_op(op_id, state=state, result=result, fence=fence, tenant=t,
                                         idempotency_key=key)
            break
        except (Unavailable, OutcomeUnknown) as e:  # sent again with the same key: recorded at most once
            last = e
            in_doubt = in_doubt or isinstance(e, OutcomeUnknown)
        except BatonError as e:
            raise OpUnrecorded(f"op {op_id} ran (outcome {state}) but the ledger refused the outcome: {e}",
                               op_id=op_id, state=state, result=result, recorded="") from e
    if rec is None:
        # Still started, unless a finish got no answer and may have been recorded: then the caller
        # cannot tell ("").
        recorded = "" if in_doubt else "started"
        try:
            rec = await client.finish_op(op_id, state="unknown", result=result, fence=fence, tenant=t,
                                         idempotency_key=new_idempotency_key())
            recorded = "unknown"
        except VersionMismatch:
            cur = await client.get_op(op_id, tenant=t)
            if cur.state == state:
                rec = cur
        except BatonError:
            pass
        if rec is None or rec.state == "unknown":
            how = f"is recorded as {recorded}" if recorded else "may or may not be recorded"
            raise OpUnrecorded(f"op {op_id} ran (outcome {state}) but its outcome {how}: {last}",
                               op_id=op_id, state=state, result=result, recorded=recorded)
    if rec.state == "failed":
        raise OpFailed(f"op {op_id} failed: {fn_err}", op=rec, cause=fn_err) from fn_err
    return rec.result


def exactly_once(
    client: AsyncClient,
    *,
    kind: str,
    op_id: Callable[..., str],
    task_id: str | None = None,
    fence: Fence | None = None,
    tenant: str | None = None,
) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """A decorator form of ``once``: each call of the decorated function is one op, whose id
    ``op_id(*args, **kwargs)`` computes and whose params are the call's arguments (JSON)::

        @exactly_once(client, kind="email.send", op_id=lambda to, report: f"mail:{report}:{to}")
        def send_report(to: str, report: str) -> dict: ...

    A second call with the same id returns the recorded result without running the function.
    """

    def decorate(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        @functools.wraps(fn)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            params = {"args": list(args), "kwargs": kwargs}
            r: R = await once(client, op_id(*args, **kwargs), lambda: fn(*args, **kwargs), kind=kind,
                              params=params, task_id=task_id, fence=fence, tenant=tenant)
            return r

        return wrapper

    return decorate


def _recorded(op: Op) -> Any:
    if op.state == "succeeded":
        return op.result
    if op.state == "failed":
        msg = op.result.get("error") if isinstance(op.result, dict) else op.result
        raise OpFailed(f"op {op.op_id} failed: {msg}", op=op)
    raise OpInDoubt(f"op {op.op_id} is {op.state}: an earlier attempt may have performed it; reconcile, then "
                    "finish it", op=op)


# Mutex and Election (client/concurrency/mutex.go, election.go).

LOCK_FREE = "free"
LOCK_HELD = "held"


class AsyncMutex:
    """A distributed, fenced lock: the task ``name``, alone in a queue of that name, claimed with a lease
    and renewed in the background while held. ``lock()`` returns the hold (an AsyncTaskContext: its
    ``fence`` and fenced writes apply only while it is current). ``async with mutex:`` locks and unlocks.
    """

    def __init__(self, client: AsyncClient, name: str, *, owner: str | None = None, lease: Duration = 15.0,
                 wait: Duration = 10.0, tenant: str | None = None) -> None:
        self.client = client
        self.name = name
        self.owner = owner or f"holder-{uuid.uuid4()}"
        self.lease = seconds(lease)
        self.wait = min(seconds(wait), 60.0)
        self.tenant = client._tenant(tenant)
        self._hold: AsyncTaskContext | None = None
        self._ensured = False

    @property
    def hold(self) -> AsyncTaskContext | None:
        return self._hold

    async def _ensure(self) -> None:
        if self._ensured:
            return
        try:
            t = await self.client.create_task(self.name, task_id=self.name, status=LOCK_FREE, tenant=self.tenant)
        except AlreadyExists:
            t = await self.client.get_task(self.name, tenant=self.tenant)
        if t.queue != self.name:
            raise InvalidArgument(f"lock {self.name!r}: task exists in queue {t.queue!r}")
        if t.status not in (LOCK_FREE, LOCK_HELD):
            raise InvalidArgument(f"lock {self.name!r}: its task has status {t.status!r}")
        if t.max_attempts:
            raise InvalidArgument(f"lock {self.name!r}: its task has max_attempts {t.max_attempts}")
        self._ensured = True

    async def _lock(self, wait: bool) -> AsyncTaskContext:
        if self._hold is not None and self._hold.error is None:
            return self._hold
        await self._ensure()
        bo = Backoff()
        while True:
            sent = _io.monotonic()
            try:
                t = await self.client.claim(self.name, owner=self.owner, lease=self.lease,
                                            statuses=[LOCK_FREE, LOCK_HELD], set_status=LOCK_HELD,
                                            wait=self.wait if wait else None, tenant=self.tenant)
            except Unavailable:
                await _io.sleep(bo.delay())
                continue
            except BaseException:
                # Cancelled (or interrupted) during the long poll: the server may have claimed the lock
                # for us and the answer is lost; give back a hold in this owner's name.
                await self._abandon()
                raise
            if t is not None:
                h = AsyncTaskContext(self.client, self.tenant, t, lease=self.lease, renew_every=self.lease / 3,
                                     safety_margin=self.lease / 10, sent=sent)
                if _io.monotonic() - sent > self.lease / 3:
                    # A slow claim may have been applied anywhere in its long poll: its lease counts from
                    # when it was sent, so confirm it at once, as the Worker does (the first renewal would
                    # come a third of the lease after the claim returned: after the deadline).
                    try:
                        await h._renew()
                    except BatonError:
                        pass
                    except BaseException:
                        await self._abandon()  # cancelled: give the hold back, as during the claim
                        raise
                    if h.error is not None:
                        continue  # lost already (taken over, or its deadline passed): claim again
                h._start_renewer()
                self._hold = h
                return h
            if not wait:
                raise Locked(f"lock {self.name!r} is held by another holder")
            self._ensured = False
            await self._ensure()

    async def _abandon(self) -> None:
        try:
            t = await self.client.get_task(self.name, tenant=self.tenant)
            if t.owner == self.owner:
                await self.client.update_task(self.name, fencing_token=t.fencing_token, status=LOCK_FREE,
                                              release=True, tenant=self.tenant)
        except BatonError:
            pass

    async def lock(self) -> AsyncTaskContext:
        """Waits until this holder holds the lock (the server's long poll wakes it on a release)."""
        return await self._lock(True)

    async def try_lock(self) -> AsyncTaskContext:
        """Takes the lock if free, else raises Locked at once."""
        return await self._lock(False)

    async def unlock(self) -> None:
        """Gives the lock back; NotLocked when not held, LeaseLost when the hold had been lost."""
        h, self._hold = self._hold, None
        if h is None:
            raise NotLocked(f"lock {self.name!r} is not held by this holder")
        await h._stop_renewer()
        await h._update(release=True, status=LOCK_FREE)

    async def __aenter__(self) -> AsyncTaskContext:
        return await self.lock()

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.unlock()


class AsyncElection:
    """Elects one leader among contenders sharing ``name`` (a Mutex); the leader's value is kept in the
    lock task's payload with the token it was proclaimed under."""

    def __init__(self, client: AsyncClient, name: str, *, owner: str | None = None, lease: Duration = 15.0,
                 wait: Duration = 10.0, tenant: str | None = None) -> None:
        self.mutex = AsyncMutex(client, name, owner=owner, lease=lease, wait=wait, tenant=tenant)

    @property
    def owner(self) -> str:
        return self.mutex.owner

    async def campaign(self, value: str) -> AsyncTaskContext:
        """Waits until this contender leads, then proclaims value."""
        h = await self.mutex.lock()
        try:
            await self._proclaim(h, value)
        except BaseException:
            await self.mutex.unlock()
            raise
        return h

    async def _proclaim(self, h: AsyncTaskContext, value: str) -> None:
        await h.update(payload={"token": h.token, "value": value})

    async def proclaim(self, value: str) -> None:
        h = self.mutex.hold
        if h is None:
            raise NotLeader(f"proclaim in {self.mutex.name!r}: not leader")
        await self._proclaim(h, value)

    async def resign(self) -> None:
        try:
            await self.mutex.unlock()
        except NotLocked:
            pass

    @staticmethod
    def _leader_of(t: Task) -> dict[str, Any] | None:
        v = t.payload
        if not t.owner or not isinstance(v, dict) or v.get("token") != t.fencing_token:
            return None
        return {"owner": t.owner, "value": v.get("value"), "token": t.fencing_token, "lease_until": t.lease_until}

    async def leader(self) -> dict[str, Any]:
        """``{"owner", "value", "token", "lease_until"}`` of the current leader; NoLeader when none."""
        try:
            t = await self.mutex.client.get_task(self.mutex.name, tenant=self.mutex.tenant)
        except NotFound as e:
            raise NoLeader(f"leader of {self.mutex.name!r}: none") from e
        li = self._leader_of(t)
        if li is None:
            raise NoLeader(f"leader of {self.mutex.name!r}: none")
        return li

    async def observe(self) -> AsyncIterator[dict[str, Any]]:
        """The current leader, then every newly elected leader and proclaimed value, in order."""
        last: Any = None
        c = self.mutex.client
        while True:
            try:
                t, idx = await c._get_task_indexed(self.mutex.name, tenant=self.mutex.tenant)
                li = self._leader_of(t)
                if li is not None and li != last:
                    last = li
                    yield li
            except NotFound as e:
                idx = e.index
            w = c.watch(resources=["tasks"], prefix=self.mutex.name, tenant=self.mutex.tenant,
                        from_index=idx or None)
            try:
                async for ev in w:
                    if ev.key != self.mutex.name or ev.type != "put":
                        continue
                    li = self._leader_of(Task.from_json(ev.value))
                    if li is not None and li != last:
                        last = li
                        yield li
            except Compacted:
                continue
            finally:
                await w.aclose()
            return

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.mutex.name!r}, owner={self.owner!r})"

