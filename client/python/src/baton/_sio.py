"""Concurrency primitives of the sync flavour (threads); _aio.py has the same names for asyncio."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from typing import Any

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
