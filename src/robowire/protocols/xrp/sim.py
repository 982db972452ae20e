"""`robowire sim xrp`: simulated XRP robots that real WPILib programs drive over UDP.

Robot i listens on `port + i` (default 3540, 3541, ...; port 0: any free ports). All robots
share one `Fleet`, so their physics is one vectorised step however many there are.

Options (`--set k=v`): `arena_width`, `arena_height` (m), `line_radius`, `line_width` (m),
`lag` (s, motor time constant), `button` (1: the user button reads pressed).
"""

from __future__ import annotations

import asyncio
import functools
import logging

from robowire.errors import ConfigError
from robowire.protocols.base import Address, PacketDropped
from robowire.protocols.xrp.codec import DEFAULT_PORT
from robowire.protocols.xrp.physics import MOTOR_LAG, Arena, Fleet
from robowire.protocols.xrp.session import EnabledChanged, RobotSession
from robowire.service import Sim, SimOptions
from robowire.transport.udp import run_datagram
from robowire.world import World

log = logging.getLogger("robowire.xrp")

MAX_ROBOTS = 1000


def _float_option(options: dict[str, str], name: str, default: float) -> float:
    try:
        return float(options.get(name, default))
    except ValueError:
        raise ConfigError(f"xrp sim: {name} must be a number, not {options[name]!r}") from None


def arena_from(options: dict[str, str]) -> Arena:
    base = Arena()
    return Arena(
        width=_float_option(options, "arena_width", base.width),
        height=_float_option(options, "arena_height", base.height),
        line_radius=_float_option(options, "line_radius", base.line_radius),
        line_width=_float_option(options, "line_width", base.line_width),
    )


class XrpSim(Sim):
    """N simulated robots on consecutive UDP ports."""

    def __init__(self, options: SimOptions) -> None:
        self.host = options.host
        self.port = DEFAULT_PORT if options.port is None else options.port
        self.count = options.count or 1
        if not 1 <= self.count <= MAX_ROBOTS:
            raise ConfigError(f"xrp sim: count must be 1..{MAX_ROBOTS}")
        super().__init__(f"xrp-sim@{self.host}:{self.port}")
        self.fleet = Fleet(
            self.count,
            arena=arena_from(options.options),
            lag=_float_option(options.options, "lag", MOTOR_LAG),
        )
        self.fleet.button[:] = options.options.get("button", "0") == "1"
        # every robot reports on the same 50 ms grid: one physics step and sensor snapshot
        # serve them all (a real robot's timer phase is arbitrary anyway)
        self.robots = [RobotSession(self.fleet, i, status_phase=0.0) for i in range(self.count)]
        self.addresses: list[Address | None] = [None] * self.count

    async def run(self, world: World) -> None:
        bound = 0

        def on_listening(index: int, address: Address) -> None:
            nonlocal bound
            self.addresses[index] = address
            bound += 1
            if bound == self.count:
                first = self.addresses[0]
                assert first is not None
                self.listening(first)
                log.info("xrp sim: %d robot(s) from %s:%d", self.count, first[0], first[1])

        def on_events(index: int, events: list[object]) -> None:
            for event in events:
                match event:
                    case PacketDropped():
                        self.stats.drop(event.reason)
                    case EnabledChanged(enabled=enabled, reason=reason):
                        log.info(
                            "xrp robot %d %s (%s)",
                            index,
                            "enabled" if enabled else "disabled",
                            reason,
                        )
            self.stats.messages_in = sum(r.stats.messages_in for r in self.robots)

        async with asyncio.TaskGroup() as group:
            for i, robot in enumerate(self.robots):
                port = self.port + i if self.port else 0
                group.create_task(
                    run_datagram(
                        robot,
                        functools.partial(on_events, i),
                        local_addr=(self.host, port),
                        on_listening=functools.partial(on_listening, i),
                    )
                )
