"""What the gateway runs: sources (protocol -> world), sinks (world -> protocol) and simulators.

Each is a `Service`: `run(world)` does the work until it is finished (a file ended) or
cancelled (Ctrl-C, --duration). Servers set `address` and `ready` once they listen, so callers
that asked for port 0 can learn the port.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from robowire.protocols.base import Address, SessionStats
from robowire.world import World

log = logging.getLogger("robowire")


class Service(ABC):
    """Something the gateway runs; subclasses implement `run`."""

    role = "service"

    def __init__(self, name: str) -> None:
        self.name = name
        self.address: Address | None = None
        self.ready = asyncio.Event()
        self.stats = SessionStats()

    def listening(self, address: Address) -> None:
        """Call once the service's socket is bound."""
        self.address = (str(address[0]), int(address[1]))
        self.ready.set()

    @abstractmethod
    async def run(self, world: World) -> None:
        """Do the work until finished or cancelled."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class Source(Service):
    """Writes what it receives into the world under the source id `self.name`."""

    role = "source"


class Sink(Service):
    """Offers the world to peers in some protocol."""

    role = "sink"


class Sim(Service):
    """A simulated device speaking a protocol on a real socket. `run` ignores the world."""

    role = "sim"


@dataclass(frozen=True, slots=True, kw_only=True)
class SimOptions:
    """What `robowire sim PROTOCOL` passes to a protocol's `open_sim`."""

    host: str = "127.0.0.1"
    port: int | None = None  # None: the protocol's default port; 0: any free port
    count: int | None = None  # how many devices (None: the simulator's default)
    rate: float | None = None  # updates per second (None: the simulator's default)
    seed: int = 0  # all randomness comes from this seed
    options: dict[str, str] = field(default_factory=dict)  # protocol-specific --set k=v
