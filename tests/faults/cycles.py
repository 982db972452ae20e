"""The long fault cycles of `make reliability`: how many (`ROBOWIRE_FAULT_CYCLES` cuts or
fault events, `ROBOWIRE_FAULT_RESTARTS` peer restarts; 1 in `make test`), and the check that
they left descriptors and resident memory flat (a leak grows with every cycle)."""

from __future__ import annotations

import os

from support import open_fds, until

from .plan import DatagramPlan

CYCLES = int(os.environ.get("ROBOWIRE_FAULT_CYCLES", "1"))
RESTARTS = int(os.environ.get("ROBOWIRE_FAULT_RESTARTS", "1"))
RSS_BOUND = 16 << 20  # bytes of resident memory the cycles may add (a leak adds per cycle)


def resident() -> int:
    """This process's resident memory, bytes."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def assert_flat(fds: int, rss: int, what: str) -> None:
    """Descriptors and resident memory where they were (`fds`, `rss`) before `what`'s cycles,
    within two descriptors and `RSS_BOUND`; says both (`make reliability` shows them)."""
    now, grown = open_fds(), resident() - rss
    print(f"\n{what}: fds {fds} -> {now}, RSS {grown >> 10:+} KiB")
    assert now <= fds + 2, f"{what}: descriptors left behind ({fds} -> {now})"
    assert grown < RSS_BOUND, f"{what}: RSS +{grown >> 20} MiB"


def faults(*plans: DatagramPlan) -> int:
    """The faults the plans did that a receiver counts: lost, duplicated, reordered."""
    return sum(p.counts[k] for p in plans for k in ("lost", "duplicated", "reordered"))


async def until_faults(count: int, *plans: DatagramPlan) -> None:
    """Until the plans did `count` faults (their cells do 25 or more a second)."""
    await until(
        lambda: faults(*plans) >= count,
        lambda: f"{count} faults: {[dict(p.counts) for p in plans]}", 10 + count / 10,
    )  # fmt: skip
