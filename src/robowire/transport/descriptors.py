"""The process's open file descriptors against its limit (RLIMIT_NOFILE, `ulimit -n`).

A gateway out of descriptors cannot accept a connection, and nobody hears of it: uvloop
(libuv) accepts and closes the waiting ones without a word, asyncio logs a traceback a
second. `watch_descriptors` counts them once a second and says it in one line when they run
out, at most once a minute, and in one more when they are free again. The decisions are
`DescriptorWatch`'s (sans I/O: fed counts and times).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import resource
from dataclasses import dataclass

from robowire.timebase import monotonic

log = logging.getLogger("robowire.descriptors")

RESERVE = 2  # descriptors short of the limit that count as out (libuv keeps one spare)
EVERY = 1.0  # seconds between counts
REPEAT = 60.0  # seconds: "out" is said at most this often


@dataclass(slots=True)
class DescriptorWatch:
    """When to say what about `count` descriptors open of `limit`."""

    limit: int
    short: bool = False  # out of them now
    told: bool = False  # this time out was said
    said: float = -math.inf  # when "out" was said last

    def check(self, count: int, now: float) -> str | None:
        """The line to log about `count` descriptors open at `now`, if any."""
        if not self.short and count >= self.limit - RESERVE:
            self.short = True
            self.told = now - self.said >= REPEAT
            if self.told:
                self.said = now
                return (
                    f"out of file descriptors ({count} open, the limit is {self.limit}: "
                    "ulimit -n): new connections are refused until some close"
                )
        elif self.short and count < self.limit - RESERVE - 1:  # (one below: no flapping)
            self.short = False
            if self.told:
                return f"file descriptors free again ({count} open of {self.limit}): serving"
        return None


def open_descriptors(limit: int) -> int | None:
    """How many descriptors this process has open: `limit` when none is left to count them
    with, None where /proc is not (not Linux)."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # (less the listing's own)
    except FileNotFoundError:
        return None
    except OSError:  # EMFILE: not one left
        return limit


async def watch_descriptors() -> None:
    """Count this process's descriptors once a second and log what `DescriptorWatch` says,
    until cancelled (or at once, where they cannot be counted)."""
    if open_descriptors(0) is None:
        return
    watch = DescriptorWatch(0)
    while True:
        await asyncio.sleep(EVERY)
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]  # (it may be changed: prlimit)
        if limit == resource.RLIM_INFINITY:
            continue
        watch.limit = limit
        count = open_descriptors(limit)
        if count is not None and (line := watch.check(count, monotonic())):
            log.warning("%s", line)
