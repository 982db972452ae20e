"""Record sources to MCAP for a few seconds, then read the recording back.

robowire sim vrpn &
python examples/record_and_read.py vrpn://Tracker0@127.0.0.1:3883 run.mcap
"""

import sys

import robowire

url = sys.argv[1] if len(sys.argv) > 1 else "vrpn://Tracker0@127.0.0.1:3883"
path = sys.argv[2] if len(sys.argv) > 2 else "run.mcap"
with robowire.connect(url, record=path) as live:
    for _ in range(50):
        live.wait(timeout=5)
print(f"recorded {url} to {path}")

with robowire.connect(path) as replay:  # a recording is a source too, read to its end
    while replay.wait(timeout=5):  # until the file's end
        pass
    for name, device in replay.devices.items():
        print(name, device.position)
print(f"read back: {len(replay.devices)} devices")
