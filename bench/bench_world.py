"""The world model: what one `World.update` costs, against bare numpy column writes.

Printed for 1, 100 and 10,000 slots per call: microseconds per call and device updates per
second for `World.update` (with a latest-state subscriber attached, as in a live gateway) and
for the bare column writes it has to do anyway, and the ratio; then the memory a subscriber
that stalls for 300 full-swarm updates holds, latest-state against a queue of every update;
then what a source's time policy adds (`TimedWorld`: `?time=sender`, which still feeds the
clock-offset estimate, and `?time=corrected`) against `World.update` with the same stamps;
then a 10,000-drone show at 30 Hz with a subscriber stalled for 60 s: ingest rate, CPU and
memory growth against no subscriber at all.
"""

from __future__ import annotations

import timeit
import tracemalloc

import numpy as np

from robowire.service import TimedWorld
from robowire.timebase import SourceClock
from robowire.world import World

SIZES = (1, 100, 10_000)


def _per_call(function: object, seconds: float = 0.3) -> float:
    timer = timeit.Timer(function)  # type: ignore[arg-type]
    number, _ = timer.autorange()
    best = min(timer.repeat(repeat=5, number=max(1, int(number * seconds / 0.2))))
    return best / max(1, int(number * seconds / 0.2))


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def _show_at_30hz(seconds: float, subscriber: str) -> tuple[float, float, int]:
    """A 10,000-drone show at 30 Hz (300k device updates/s) into a world for `seconds`, with
    no subscriber, a stalled latest-state one, or a stalled queue of every update (the
    recorder's kind, 64 MiB). Returns (device updates/s achieved, CPU share, RSS growth)."""
    import time

    world = World()
    slots = world.table("show").slots(f"d{i}" for i in range(10_000))
    positions = np.random.default_rng(0).random((10_000, 3))
    kept = []
    if subscriber == "latest-state":
        kept.append(world.subscribe())
    elif subscriber == "queue of every update":
        kept.append(world.subscribe(every_update=True))
    start_rss, start, cpu = _rss(), time.perf_counter(), time.process_time()
    frames = 0
    while (now := time.perf_counter() - start) < seconds:
        positions += 0.01
        world.update("show", slots, receive_time=now, position=positions)
        frames += 1
        delay = frames / 30.0 - (time.perf_counter() - start)
        if delay > 0:
            time.sleep(delay)
    elapsed = time.perf_counter() - start
    used = time.process_time() - cpu
    return frames * 10_000 / elapsed, used / elapsed, _rss() - start_rss


def stalled_show(seconds: float = 60.0) -> None:
    print("   10,000 drones at 30 Hz into the world; a subscriber that never pulls:")
    base_rate, base_cpu, base_rss = _show_at_30hz(min(seconds, 20.0), "none")
    print(f"   {'subscriber':>24} {'updates/s':>10} {'CPU':>6} {'memory growth':>14}")
    print(f"   {'none':>24} {base_rate:>10,.0f} {base_cpu:>6.1%} {base_rss / 2**20:>11.1f} MiB")
    for kind, length in (("latest-state", seconds), ("queue of every update", 20.0)):
        rate, cpu, grown = _show_at_30hz(min(seconds, length), kind)
        print(f"   {kind:>24} {rate:>10,.0f} {cpu:>6.1%} {grown / 2**20:>11.1f} MiB"
              f"   (rate {rate / base_rate:.3f}x, CPU {cpu / base_cpu:.2f}x no subscriber;"
              f" {min(seconds, length):.0f} s)")  # fmt: skip


def main() -> None:
    world = World()
    table = world.table("show")
    slots_all = table.slots(f"d{i}" for i in range(max(SIZES)))
    subscriber = world.subscribe()
    print(f"   {'slots/call':>10} {'World.update µs':>16} {'bare writes µs':>15} {'ratio':>6}"
          f" {'updates/s':>12}")  # fmt: skip
    for size in SIZES:
        slots = slots_all[:size]
        positions = np.zeros((size, 3))

        def update(slots: np.ndarray = slots, positions: np.ndarray = positions) -> None:
            world.update("show", slots, receive_time=1.0, position=positions)

        def bare(slots: np.ndarray = slots, positions: np.ndarray = positions) -> None:
            table.position[slots] = positions
            table.receive_time[slots] = 1.0

        ours, baseline = _per_call(update), _per_call(bare)
        subscriber.pull()
        print(f"   {size:>10} {ours * 1e6:>16.2f} {baseline * 1e6:>15.2f} "
              f"{ours / baseline:>5.1f}x {size / ours:>12,.0f}")  # fmt: skip
    subscriber.close()
    timed_writes(world)

    for kind in ("latest-state", "every update"):
        world = World()
        slots = world.table("show").slots(f"d{i}" for i in range(10_000))
        idle = world.subscribe(every_update=kind == "every update", max_bytes=1 << 40)
        positions = np.zeros((10_000, 3))
        tracemalloc.start()
        for i in range(300):
            world.update("show", slots, receive_time=float(i), position=positions + i)
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        print(f"   stalled subscriber, 300 updates of 10,000 drones, {kind}: "
              f"{held / 2**20:.1f} MiB held")  # fmt: skip
        idle.close()
    stalled_show()


def timed_writes(world: World) -> None:
    """Stamped writes through a source's time policy, against the same writes without it."""
    slots_all = world.table("show").slots(f"d{i}" for i in range(max(SIZES)))
    policies = {mode: TimedWorld(world, SourceClock(mode)) for mode in ("sender", "corrected")}
    print(f"   {'slots/call':>10} {'stamped µs':>11} {'sender µs':>10} {'ratio':>6}"
          f" {'corrected µs':>13} {'ratio':>6}")  # fmt: skip
    for size in SIZES:
        slots, positions = slots_all[:size], np.zeros((size, 3))
        stamps = np.linspace(1000.0, 1000.01, size)
        cost = {}
        for name, target in (("plain", world), *policies.items()):

            def write(
                target: World = target,
                slots: np.ndarray = slots,
                stamps: np.ndarray = stamps,
                positions: np.ndarray = positions,
            ) -> None:
                target.update(
                    "show", slots, receive_time=1120.0, source_time=stamps, position=positions
                )

            cost[name] = _per_call(write)
        plain = cost["plain"]
        print(f"   {size:>10} {plain * 1e6:>11.2f} {cost['sender'] * 1e6:>10.2f} "
              f"{cost['sender'] / plain:>5.2f}x {cost['corrected'] * 1e6:>13.2f} "
              f"{cost['corrected'] / plain:>5.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
