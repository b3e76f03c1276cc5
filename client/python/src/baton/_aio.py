"""Concurrency primitives of the async flavour (asyncio); _sio.py has the same names for threads."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from ._h1 import Pool as DirectPool

T = TypeVar("T")

__all__ = ["DirectPool"]  # the client's own requests: HTTP/1.1 on asyncio Protocols

Lock = asyncio.Lock
monotonic = time.monotonic


async def sleep(d: float) -> None:
    await asyncio.sleep(max(d, 0.0))


class Event:
    def __init__(self) -> None:
        self._e = asyncio.Event()

    def set(self) -> None:
        self._e.set()

    def is_set(self) -> bool:
        return self._e.is_set()

    async def wait(self, timeout: float | None = None) -> bool:
        """True when set, False when timeout passed first."""
        if timeout is None:
            await self._e.wait()
            return True
        try:
            await asyncio.wait_for(self._e.wait(), max(timeout, 0.0))
        except asyncio.TimeoutError:
            return self._e.is_set()
        return True


class Handle:
    def __init__(self, task: asyncio.Task[Any]) -> None:
        self._task = task

    async def join(self) -> None:
        await asyncio.gather(self._task, return_exceptions=True)

    def done(self) -> bool:
        return self._task.done()


def spawn(fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> Handle:
    return Handle(asyncio.get_running_loop().create_task(fn(*args)))


def on_sigterm(callback: Callable[[], None]) -> Callable[[], None]:
    """Calls callback on SIGTERM (and SIGINT) while installed; returns the uninstaller. A no-op where the
    loop cannot take signal handlers (not the main thread, Windows)."""
    loop = asyncio.get_running_loop()
    installed = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, callback)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass

    def remove() -> None:
        for s in installed:
            loop.remove_signal_handler(s)

    return remove


async def run_all(fns: list[Callable[[], Coroutine[Any, Any, T]]], limit: int) -> list[T]:
    """Runs fns concurrently, at most limit at a time; their results in order, or the first error."""
    sem = asyncio.Semaphore(max(limit, 1))

    async def one(fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
        async with sem:
            return await fn()

    return list(await asyncio.gather(*(one(f) for f in fns)))


async def run_guarded(fn: Callable[[Any], Awaitable[T]], arg: Any, lost: Event) -> T | None:
    """Runs fn(arg), cancelling it when lost is set first (then returns None). The sync twin cannot
    interrupt a thread and just calls fn."""
    task = asyncio.ensure_future(fn(arg))
    waiter = asyncio.ensure_future(lost.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        waiter.cancel()
    if task.done():
        return task.result()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    return None
