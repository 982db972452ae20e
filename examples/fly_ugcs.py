"""Command and fly a UgCS vehicle from Python, as a UgCS server would: arm it, take off to
10 m and print its height while it climbs.

    robowire sim ugcs &                      # or any VSM built on the UgCS SDK
    python examples/fly_ugcs.py 127.0.0.1:5556 SIM-0001
"""

import asyncio
import sys

from robowire.protocols.ugcs import UcsClient
from robowire.protocols.ugcs.client import split_host


async def main(address: str, name: str) -> None:
    host, port = split_host(address)
    async with UcsClient(host, port) as ucs:
        drone = await ucs.wait_for_device(name, telemetry=["latitude"], timeout=20)
        await ucs.wait_for(lambda: drone.availability.get("arm", (0, 0))[1], timeout=20)
        print(await ucs.command(name, "arm"))
        print(await ucs.command(name, "takeoff_command", {"relative_altitude": 10.0}))
        while (height := drone.values.get("altitude_raw") or 0.0) < 9.0:
            print(f"{name}: {height:.1f} m")
            await asyncio.sleep(0.5)
        print(f"{name}: {height:.1f} m, up")


asyncio.run(main(*(sys.argv[1:3] if len(sys.argv) > 2 else ("127.0.0.1:5556", "SIM-0001"))))
