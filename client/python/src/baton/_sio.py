"""Concurrency primitives of the sync flavour (threads); _aio.py has the same names for asyncio."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ._httpcore_pool import Pool as DirectPool

T = TypeVar("T")

__all__ = ["DirectPool"]  # the client's own requests: httpcore's pools

Lock = threading.Lock
monotonic = time.monotonic


def sleep(d: float) -> None:
    time.sleep(max(d, 0.0))


class Event:
    def __init__(self) -> None:
        self._e = threading.Event()

    def set(self) -> None:
        self._e.set()

    def is_set(self) -> bool:
        return self._e.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """True when set, False when timeout passed first."""
        return self._e.wait(None if timeout is None else max(timeout, 0.0))


class Handle:
    def __init__(self, thread: threading.Thread) -> None:
        self._thread = thread

    def join(self) -> None:
        self._thread.join()

    def done(self) -> bool:
        return not self._thread.is_alive()


def spawn(fn: Callable[..., Any], *args: Any) -> Handle:
    t = threading.Thread(target=fn, args=args, daemon=True)
    t.start()
    return Handle(t)


def on_sigterm(callback: Callable[[], None]) -> Callable[[], None]:
    """Calls callback on SIGTERM (and SIGINT) while installed; returns the uninstaller. A no-op outside
    the main thread, where Python takes no signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    old: dict[int, Any] = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        old[sig] = signal.signal(sig, lambda _s, _f: callback())

    def remove() -> None:
        for s, h in old.items():
            signal.signal(s, h)

    return remove


def run_all(fns: list[Callable[[], T]], limit: int) -> list[T]:
    """Runs fns in threads, at most limit at a time; their results in order, or the first error."""
    if len(fns) <= 1 or limit <= 1:
        return [f() for f in fns]
    with ThreadPoolExecutor(max_workers=min(limit, len(fns))) as ex:
        return list(ex.map(lambda f: f(), fns))


def run_guarded(fn: Callable[[Any], T], arg: Any, lost: Event) -> T | None:
    """Calls fn(arg); a thread cannot be interrupted when lost is set (the handler checks ctx.lost)."""
    return fn(arg)
