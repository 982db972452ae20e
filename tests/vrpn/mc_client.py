"""Run the real C++ VRPN client bundled in PyPI `motioncapture` (a subprocess of the tests).

Usage: python mc_client.py HOSTNAME FRAMES [SECONDS]   (with SECONDS: run that long instead)
Prints one JSON line per frame with the rigid bodies it saw: name -> [x, y, z, qw, qx, qy, qz].
"""

from __future__ import annotations

import json
import sys
import time

import motioncapture


def main() -> None:
    hostname, frames = sys.argv[1], int(sys.argv[2])
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else None
    mc = motioncapture.connect("vrpn", {"hostname": hostname})
    start = time.monotonic()
    done = 0
    while (done < frames) if seconds is None else (time.monotonic() - start < seconds):
        done += 1
        mc.waitForNextFrame()
        bodies = {
            name: [
                *(float(v) for v in body.position),
                float(body.rotation.w),
                float(body.rotation.x),
                float(body.rotation.y),
                float(body.rotation.z),
            ]
            for name, body in mc.rigidBodies.items()
        }
        print(json.dumps({"t": time.monotonic() - start, "bodies": bodies}), flush=True)


if __name__ == "__main__":
    main()
