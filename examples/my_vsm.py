"""A UgCS VSM for your own vehicle: a rover that arms, drives to waypoints and reports where
it is. Swap `drive` for your vehicle's own code.

    python examples/my_vsm.py 5556 30        # port, seconds; then connect UgCS to it
"""

import math
import sys
import time

from robowire.protocols.ugcs.vsm import Vehicle, failed, ok, serve

rover = Vehicle("ROVER-1", model="Example rover", type="ground")
state = {"armed": False, "lat": 56.9496, "lon": 24.1052, "target": None}


@rover.command("arm")
def arm(params):
    state["armed"] = True
    return ok()


@rover.command("disarm")
def disarm(params):
    state["armed"] = False
    return ok()


@rover.command("waypoint")
def waypoint(params):
    if not state["armed"]:
        return failed("arm first")
    state["target"] = (params["latitude"], params["longitude"])
    return ok()


def drive(dt: float) -> None:
    """Move 2 m/s toward the target (your vehicle's own code goes here)."""
    if state["target"] is None:
        return
    lat, lon = state["target"]
    north = (lat - state["lat"]) * 111_320.0
    east = (lon - state["lon"]) * 111_320.0 * math.cos(math.radians(lat))
    step = min(1.0, 2.0 * dt / max(math.hypot(north, east), 1e-9))
    state["lat"] += (lat - state["lat"]) * step
    state["lon"] += (lon - state["lon"]) * step


port = int(sys.argv[1]) if len(sys.argv) > 1 else 5556
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else math.inf
with serve(rover, port=port) as vsm:
    print(f"VSM for {rover.serial} on {vsm.address[0]}:{vsm.address[1]}", flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        drive(0.1)
        rover.set(latitude=state["lat"], longitude=state["lon"], altitude_amsl=12.0,
                  is_armed=state["armed"], satellite_count=12, gps_fix=2)  # fmt: skip
        rover.enable(disarm=state["armed"], waypoint=state["armed"])
        time.sleep(0.1)
