"""Where a Python process's CPU goes, by layer, from a py-spy profile in raw (collapsed) form.

Each sample is charged to the innermost frame of its stack that belongs to one of the layers below
(baton, json, h11, httpcore, anyio/sniffio, the ssl module, the bench driver); a sample with none
of them (the event loop itself) to "asyncio loop and transports". So a system call counts to the
layer that made it: a socket send from anyio's stream to anyio. Samples under an import are left
out. Within each layer the heaviest functions are listed, system calls marked.

    py-spy record --nonblocking --format raw -o prof.txt -- python bench/python/sdkbench.py ...
    python bench/python/pyspy_layers.py prof.txt

(docs/bench/python-sdk.md, "Where the client's CPU goes")
"""

from __future__ import annotations

import argparse
import collections
import re
from collections.abc import Callable

LAYERS = [("baton", ("baton/",)), ("json", ("json/",)), ("h11", ("h11/",)), ("httpcore", ("httpcore/",)),
          ("anyio+sniffio", ("anyio/", "sniffio/")), ("driver", ("sdkbench.py", "benchlib.py"))]
LOOP = "asyncio loop and transports"
SYSCALLS: list[tuple[str, Callable[[str], bool]]] = [
    ("socket send", lambda f: "selector_events.py" in f and "write" in f),
    ("socket recv", lambda f: "_read_ready" in f),
    ("epoll_ctl (pause/resume reading)", lambda f: "selectors.py" in f and "register" in f),
    ("poll() of an idle connection", lambda f: "is_socket_readable" in f),
    ("getpeername", lambda f: "getpeername" in f),
    ("get_running_loop (getpid on 3.11)", lambda f: "current_task" in f or "get_running_loop" in f),
]
_FRAME = re.compile(r"\((.*):\d+\)$")


def layer(frame: str) -> str | None:
    if frame.startswith(("<module>", "run (")):
        return None  # the driver's top frames hold the event loop
    m = _FRAME.search(frame)
    path = m.group(1) if m else frame
    if path.endswith("ssl.py"):
        return "ssl"
    for name, parts in LAYERS:
        if any(p in path for p in parts):
            return name
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("profile", help="py-spy record --format raw output")
    p.add_argument("--top", type=int, default=8, help="functions listed per layer")
    a = p.parse_args()
    by: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    total = 0
    with open(a.profile) as f:
        for line in f:
            line = line.rstrip()
            if not line:
                continue
            stack, n_s = line.rsplit(" ", 1)
            n, frames = int(n_s), stack.split(";")
            if any("_bootstrap" in x for x in frames):
                continue
            total += n
            who, at = LOOP, frames[-1]
            for x in reversed(frames):
                owner = layer(x)
                if owner is not None:
                    who, at = owner, x
                    break
            call = next((name for name, test in SYSCALLS if test(frames[-1])), None)
            by[who]["[syscall] " + call if call else at.split(" (")[0]] += n
    print(f"{total} samples")
    for who, c in sorted(by.items(), key=lambda kv: -sum(kv[1].values())):
        print(f"{who}: {100 * sum(c.values()) / total:.1f}%")
        for k, v in c.most_common(a.top):
            print(f"    {100 * v / total:5.1f}% {k}")


if __name__ == "__main__":
    main()
