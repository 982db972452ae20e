"""A UgCS VSM for your own vehicles, in one import: `Vehicle`, its results, and `serve`.

```python
from robowire.protocols.ugcs.vsm import Vehicle, ok, serve

rover = Vehicle("ROVER-1", model="My rover", type="ground")
rover.command("arm")(lambda params: ok())
with serve(rover, port=5556):
    rover.set(latitude=56.9496, longitude=24.1052, altitude_amsl=12.0)
```

`serve` runs the VSM on a background thread (a UgCS server connects to it on host:port, or with
`to="HOST:PORT"` it dials the server, the SDK's reverse mode). In your own event loop, add
`vsm_server.VsmSim([vehicle, ...])` to a `robowire.gateway.Gateway` instead.
"""

from __future__ import annotations

from robowire.background import Running
from robowire.endpoints import split_host_port
from robowire.protocols.ugcs.codec import DEFAULT_PORT
from robowire.protocols.ugcs.vehicle import (
    Member,
    Result,
    Vehicle,
    failed,
    field,
    ok,
    param,
    progress,
)
from robowire.protocols.ugcs.vsm_server import DEFAULT_RATE, VsmSim

__all__ = [
    "Member",
    "Result",
    "Vehicle",
    "failed",
    "field",
    "ok",
    "param",
    "progress",
    "serve",
]


def serve(
    *vehicles: Member,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    to: str | None = None,
    rate: float = DEFAULT_RATE,
    name: str = "robowire",
) -> Running:
    """Run a VSM for `vehicles` until the returned handle is closed (a `with` block);
    `port` 0 picks a free one (`.address` says which). Telemetry is committed `rate` times a
    second. Raises the CLI's one-line error when the port is taken."""
    target = split_host_port(to, DEFAULT_PORT) if to else None
    return Running(
        lambda: [VsmSim(vehicles, host=host, port=port, target=target, rate=rate, name=name)],
        "robowire-vsm",
    )
