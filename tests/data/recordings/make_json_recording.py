"""How `json-2dd4a94.mcap` was made: run at commit 2dd4a94, the last recorder that wrote the
`/robowire/<source>` channel as JSON (`robowire.Update`, jsonschema), from a checkout:

    cd tests/data/recordings
    PYTHONPATH=../../../src python make_json_recording.py json-2dd4a94.mcap

Later recorders write that channel as protobuf; this file keeps the older format read by
`tests/core/test_recording.py`, whose expected values are the inputs below, not read back.
Two sources: "walk", one sensor node over ten updates (attributes, links, telemetry, a log
line), and "swarm", 200 drones in one update whose columns took each of the JSON writer's
compact forms (float32 where exact, one value for all, none, a few rows)."""

import asyncio
import sys

import numpy as np

from robowire.gateway import Gateway
from robowire.recording import McapRecorder
from robowire.service import Source
from robowire.world import World

N = 200


class Walk(Source):
    async def run(self, world: World) -> None:
        for i in range(10):
            world.update_device(
                self.name, "n1", receive_time=1000.0 + i * 0.01, source_time=900.0 + i,
                kind="sensor_node", name="node one", position=(i, 2 * i, 0),
                telemetry={"temp": (20.0 + i, "Cel")},
                attributes={"firmware": "1.2"} if i == 0 else None, links=["n2"],
            )  # fmt: skip
            await asyncio.sleep(0)
        world.log(self.name, "n1", "done", time=1000.2)


class Swarm(Source):
    async def run(self, world: World) -> None:
        rng = np.random.default_rng(7)
        position = rng.normal(size=(N, 3)) * 100
        led = np.float32(rng.uniform(0, 255, N)).astype(np.float64)
        geodetic = np.column_stack([np.full(N, 47.5), np.linspace(8.0, 8.1, N), np.full(N, 400.0)])
        sparse = np.full(N, np.nan)
        sparse[[3, 150]] = [1.25, 2.5]
        slots = world.table("swarm").slots((f"d{i}" for i in range(N)), kind="drone")
        world.update(
            "swarm", slots, receive_time=1000.5, source_time=999.5, position=position,
            geodetic=geodetic,
            telemetry={"led": (led, "1"), "cue": (sparse, "1"), "laser": (np.full(N, np.nan), "W")},
        )  # fmt: skip


async def main(path: str) -> None:
    gateway = Gateway().add(Walk("walk"), Swarm("swarm"), McapRecorder(path))
    await asyncio.wait_for(gateway.run(), 10)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
