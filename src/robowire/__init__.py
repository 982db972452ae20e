"""robowire: one toolkit and live gateway for robot and tracker telemetry protocols.

The library face (imported on first use, so `import robowire` stays fast):

* `connect(*urls) -> Live`: a live view of sources by the devices' own names, with no asyncio
  (`robowire.live`); `open(*urls)` is the same view in your event loop. VRPN buttons, analogs,
  dials and text have callbacks of their own (`Live.on_button`, ...).
* `publish(url) -> Publisher`: be any protocol's server or sender for devices you set
  (`robowire.publisher`).
* `robowire.protocols.ugcs.vsm`: a UgCS VSM for your own vehicle (`Vehicle`, `serve`).
* `robowire.protocols.xrp.robot`: an XRP robot on the wire for your own robot code (`Robot`,
  `serve`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from robowire.version import __version__ as __version__

__all__ = [
    "AnalogEvent",
    "AsyncLive",
    "ButtonEvent",
    "Device",
    "DialEvent",
    "Live",
    "Publisher",
    "Reading",
    "Subscription",
    "TextEvent",
    "Update",
    "connect",
    "open",
    "publish",
]

_LAZY = {
    "AnalogEvent": "robowire.live",
    "AsyncLive": "robowire.live",
    "ButtonEvent": "robowire.live",
    "Device": "robowire.live",
    "DialEvent": "robowire.live",
    "Live": "robowire.live",
    "Reading": "robowire.live",
    "Subscription": "robowire.live",
    "TextEvent": "robowire.live",
    "Update": "robowire.live",
    "connect": "robowire.live",
    "open": "robowire.live",
    "Publisher": "robowire.publisher",
    "publish": "robowire.publisher",
}

if TYPE_CHECKING:
    from robowire.live import (
        AnalogEvent,
        AsyncLive,
        ButtonEvent,
        Device,
        DialEvent,
        Live,
        Reading,
        Subscription,
        TextEvent,
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
