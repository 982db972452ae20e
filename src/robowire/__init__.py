"""robowire: one toolkit and live gateway for robot and tracker telemetry protocols.

The library face (imported on first use, so `import robowire` stays fast):

* `connect(*urls) -> Live`: a live view of sources by the devices' own names, with no asyncio
  (`robowire.live`); `open(*urls)` is the same view in your event loop.
* `publish(url) -> Publisher`: be any protocol's server or sender for devices you set
  (`robowire.publisher`).
* `robowire.protocols.ugcs.vehicle.Vehicle`: a UgCS VSM for your own vehicle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "AsyncLive",
    "Device",
    "Live",
    "Publisher",
    "Reading",
    "Subscription",
    "Update",
    "connect",
    "open",
    "publish",
]

_LAZY = {
    "AsyncLive": "robowire.live",
    "Device": "robowire.live",
    "Live": "robowire.live",
    "Reading": "robowire.live",
    "Subscription": "robowire.live",
    "Update": "robowire.live",
    "connect": "robowire.live",
    "open": "robowire.live",
    "Publisher": "robowire.publisher",
    "publish": "robowire.publisher",
}

if TYPE_CHECKING:
    from robowire.live import (
        AsyncLive,
        Device,
        Live,
        Reading,
        Subscription,
        Update,
        connect,
        open,
    )
    from robowire.publisher import Publisher, publish


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'robowire' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
