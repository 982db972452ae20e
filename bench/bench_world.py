"""The world model: what one `World.update` costs, against bare numpy column writes.

Printed for 1, 100 and 10,000 slots per call: microseconds per call and device updates per
second for `World.update` (with a latest-state subscriber attached, as in a live gateway) and
for the bare column writes it has to do anyway, and the ratio; then the memory a subscriber
that stalls for 300 full-swarm updates holds, latest-state against a queue of every update.
"""

from __future__ import annotations

import timeit
import tracemalloc

import numpy as np

from robowire.world import World

SIZES = (1, 100, 10_000)


def _per_call(function: object, seconds: float = 0.3) -> float:
    timer = timeit.Timer(function)  # type: ignore[arg-type]
    number, _ = timer.autorange()
    best = min(timer.repeat(repeat=5, number=max(1, int(number * seconds / 0.2))))
    return best / max(1, int(number * seconds / 0.2))


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

    for kind in ("latest-state", "every update"):
        world = World()
        slots = world.table("show").slots(f"d{i}" for i in range(10_000))
        stalled = world.subscribe(every_update=kind == "every update", max_bytes=1 << 40)
        positions = np.zeros((10_000, 3))
        tracemalloc.start()
        for i in range(300):
            world.update("show", slots, receive_time=float(i), position=positions + i)
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        print(f"   stalled subscriber, 300 updates of 10,000 drones, {kind}: "
              f"{held / 2**20:.1f} MiB held")  # fmt: skip
        stalled.close()


if __name__ == "__main__":
    main()
