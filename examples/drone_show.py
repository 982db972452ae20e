"""Send a 1,000-drone light show from numpy as a VRSP sender, 30 frames a second: a ring that
turns and breathes, its colour running round it.

    robowire listen vrsp://127.0.0.1:9742 &  # or the show system's receiver
    python examples/drone_show.py 127.0.0.1:9742 10     # where to, seconds
"""

import sys
import time

import numpy as np

import robowire

to = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:9742"
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
n = 1000
ids = np.arange(1, n + 1)
angle = np.linspace(0, 2 * np.pi, n, endpoint=False)
with robowire.publish(f"vrsp://{to}") as show:
    start = time.monotonic()
    while (t := time.monotonic() - start) < seconds:
        radius = 40 + 5 * np.sin(t)
        positions = np.stack(
            [radius * np.cos(angle + 0.2 * t), radius * np.sin(angle + 0.2 * t),
             30 + 3 * np.sin(4 * angle + t)], axis=1)  # fmt: skip
        hue = (angle + t) % (2 * np.pi)
        colors = 127.5 * (1 + np.stack([np.cos(hue), np.cos(hue - 2.1), np.cos(hue + 2.1)], 1))
        show.set_many(ids, positions=positions, colors=colors)
        time.sleep(1 / 30)
    print(f"sent {n} drones for {seconds:.0f} s to {to}")
