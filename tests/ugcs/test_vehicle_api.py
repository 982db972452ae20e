"""The Vehicle API: your own vehicle as a VSM, commanded by our UCS side (`UcsClient`)."""

from __future__ import annotations

import asyncio
import math

import pytest

from robowire.protocols.ugcs import UcsClient
from robowire.protocols.ugcs.vsm import Vehicle, failed, field, ok, param, progress, serve


def rover() -> tuple[Vehicle, list[dict[str, object]]]:
    calls: list[dict[str, object]] = []
    vehicle = Vehicle(
        "ROVER-1", model="Test rover", type="ground", telemetry=["latitude", field("fuel")]
    )

    @vehicle.command("arm")
    def arm(params: dict[str, object]) -> object:
        calls.append(params)
        return ok() if (vehicle.value("fuel") or 0) > 10 else failed("tank empty")

    @vehicle.command("waypoint")
    def waypoint(params: dict[str, object]) -> object:
        calls.append(params)
        return progress(0.25, "driving")

    @vehicle.command("honk", param("times", required=True))
    def honk(params: dict[str, object]) -> object:
        calls.append(params)
        return None

    return vehicle, calls


async def test_commands_telemetry_and_availability_reach_the_ucs() -> None:
    vehicle, calls = rover()
    vehicle.set(latitude=56.9496, fuel=5.0)
    vehicle.enable(honk=False)
    with serve(vehicle, port=0, rate=20) as vsm:
        assert vsm.address is not None
        host, port = vsm.address
        async with UcsClient(host, port) as ucs:
            device = await ucs.wait_for_device("ROVER-1", telemetry=["latitude", "fuel"])
            assert device.values["latitude"] == pytest.approx(math.radians(56.9496))
            await ucs.wait_for(lambda: "honk" in device.availability)
            enabled = {name: on for name, (_, on) in device.availability.items()}
            assert enabled == {"arm": True, "waypoint": True, "honk": False}
            refused = await ucs.command("ROVER-1", "arm")
            assert (refused.code_name, refused.text) == ("STATUS_FAILED", "tank empty")
            vehicle.set(fuel=50.0)
            await ucs.wait_for(lambda: device.values.get("fuel") == 50.0)
            assert (await ucs.command("ROVER-1", "arm")).ok
            # parameters arrive in user units, every registered one by name
            vehicle.report("waypoint", ok("arrived"))  # not in progress yet: ignored
            going = ucs.command(
                "ROVER-1",
                "waypoint",
                {"latitude": 56.95, "longitude": 24.1, "altitude_amsl": 10.0},
            )
            task = asyncio.ensure_future(going)
            await ucs.wait_for(lambda: len(calls) == 3)
            assert calls[2]["latitude"] == pytest.approx(56.95)
            assert calls[2]["acceptance_radius"] is None
            vehicle.report("waypoint", ok("arrived"))
            done = await task
            assert (done.code_name, done.text) == ("STATUS_OK", "arrived")
            missing = await ucs.command("ROVER-1", "honk")
            assert missing.code_name == "STATUS_INVALID_COMMAND"


def test_declaring_what_is_unknown_says_so() -> None:
    vehicle, _ = rover()
    with pytest.raises(ValueError, match="no telemetry field 'speed' was declared"):
        vehicle.set(speed=3.0)
    with pytest.raises(ValueError, match="unknown telemetry field 'fuel_level'"):
        Vehicle("X", telemetry=["fuel_level"])
    with pytest.raises(ValueError, match="no command 'fly'"):
        vehicle.enable(fly=True)
