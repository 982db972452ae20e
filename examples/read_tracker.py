"""Read a VRPN tracker: print sensor 0 of Tracker0 ten times.

robowire sim vrpn &                      # or your mocap system's VRPN server
python examples/read_tracker.py vrpn://Tracker0@127.0.0.1:3883
"""

import sys

import robowire

url = sys.argv[1] if len(sys.argv) > 1 else "vrpn://Tracker0@127.0.0.1:3883"
with robowire.connect(url) as live:
    for _ in range(10):
        if not live.wait(timeout=5):
            sys.exit(f"no update from {url} in 5 s")
        tracker = live.devices.get("Tracker0/0")
        if tracker is not None:
            print(tracker.name, tracker.position, tracker.orientation)
