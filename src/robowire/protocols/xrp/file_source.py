"""XRP captures as sources: `robowire listen xrp:capture.txt` replays what the WPILib side saw.

The datagrams of a capture (pcap/pcapng, or the `<t> <dir> <len> <hex>` text form) go through
the same WPILib-side session and adapter as a live robot's: robot status becomes the robot's
pose and telemetry; the commands the WPILib side sent set the motor, servo, LED and enabled
values shown next to them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from robowire.capture import Record, batches
from robowire.endpoints import Endpoint
from robowire.errors import DecodeError
from robowire.protocols.base import PacketDropped
from robowire.protocols.xrp.adapter import XrpAdapter
from robowire.protocols.xrp.codec import DIO, XRPMotor, XRPServo, decode_packet
from robowire.protocols.xrp.decode import TO_ROBOT, TO_WPILIB, capture_datagrams
from robowire.protocols.xrp.session import ClientSession, StatusReceived
from robowire.service import Source
from robowire.timebase import WallClock
from robowire.world import World

ROBOT: tuple[str, int] = ("robot", 0)  # the address a capture's robot datagrams are fed from


class XrpFileSource(Source):
    """Reads a capture to its end; `speed` (what `replay --speed` sets) paces it."""

    def __init__(self, endpoint: Endpoint) -> None:
        assert endpoint.path is not None
        super().__init__(f"xrp:{endpoint.path}")
        self.path = endpoint.path
        self.speed = endpoint.float_option("speed", 0.0)
        self.session = ClientSession(ROBOT)

    def _records(self) -> Iterator[Record]:
        for item in capture_datagrams(self.path):
            if isinstance(item, dict):
                self.stats.drop(item["error"])
                continue
            data, direction, time = item
            yield Record(data, time, "udp", flow=direction)

    def _command(self, data: bytes) -> None:
        """What the WPILib side asked for, as the adapter's motor/servo/LED/enabled values."""
        try:
            packet = decode_packet(data)
        except DecodeError as exc:
            self.stats.drop(exc.reason)
            return
        session = self.session
        session.enabled = packet.control == 1
        for block in packet.blocks:
            if isinstance(block, XRPMotor) and 0 <= block.id < 4:
                session.set_motor(block.id, block.value)
            elif isinstance(block, XRPServo) and 4 <= block.id < 8:
                session.set_servo(block.id, block.value)
            elif isinstance(block, DIO):
                session.set_dio(block.id, block.value == 1)

    async def run(self, world: World) -> None:
        loop = asyncio.get_running_loop()
        clock = WallClock()
        adapter = XrpAdapter(world, self.name)
        self.ready.set()
        async for batch in batches(self._records(), self.speed):
            for record in batch:
                if record.flow == TO_ROBOT:
                    self._command(record.data)
                    continue
                if record.flow != TO_WPILIB:
                    self.stats.drop(f"datagram {record.flow} is neither to nor from port 3540")
                    continue
                for event in self.session.feed_datagram(record.data, ROBOT, loop.time()):
                    if isinstance(event, StatusReceived):
                        self.stats.messages_in += 1
                        adapter.apply(event.status, self.session, clock.wall(loop.time()))
                    elif isinstance(event, PacketDropped):
                        self.stats.drop(event.reason)
