"""Serve your own tracker to VRPN clients: sensor 0 of Tracker0 goes round a 1 m circle.

python examples/vrpn_server.py 3883 30   # port, seconds
vrpn_print_devices Tracker0@tcp://127.0.0.1:3883     # any VRPN client reads it
"""

import math
import sys
import time

import robowire

port = int(sys.argv[1]) if len(sys.argv) > 1 else 3883
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else math.inf
with robowire.publish(f"vrpn://127.0.0.1:{port}") as server:
    print(f"VRPN server on 127.0.0.1:{server.address[1]}", flush=True)
    start = time.monotonic()
    while (t := time.monotonic() - start) < seconds:
        yaw = t % (2 * math.pi)
        server.set("Tracker0/0", position=(math.cos(yaw), math.sin(yaw), 1.0),
                   orientation=(math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)))  # fmt: skip
        time.sleep(0.01)
