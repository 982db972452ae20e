"""`robowire.connect` and `robowire.open`: a live view of sources by the devices' own names.

```python
import robowire

with robowire.connect("vrpn://Tracker0@127.0.0.1:3883") as live:
    live.wait(timeout=5)
    for name, device in live.devices.items():
        print(name, device.position, device.orientation)
```

`connect` runs the gateway's event loop on a background thread, so a script or a notebook needs
no asyncio; `open` is the same view in the caller's own loop (`async with robowire.open(url) as
live`, `await live.wait()`, `async for update in live`).

The view reads the world's latest state: the sources run at their own rate on the loop, and
nothing the caller does (reading, iterating slowly, a callback that blocks) slows them. Each
reader of updates (`updates()`, each `on_update` callback, `async for`) has its own bounded
queue: when it falls behind, its oldest updates are dropped and counted (`Subscription.dropped`),
and the others go on. An `Update` is one batch of devices of one source that changed together
(a VRPN datagram's reports, a VRSP frame), with the values it wrote.

Names are the protocol's own (`"Tracker0/0"` for VRPN tracker Tracker0 sensor 0, a UgCS serial,
a VRSP drone id, a SpyGlass node id). When two sources have a device of the same name, both go
by their source-qualified name (`"vrpn@127.0.0.1:3883/Tracker0/0"`) and `Live.devices.shared`
lists them; the qualified form always works.

VRPN's other devices have callbacks of their own, as `vrpn_Button_Remote` and its kin do:
`on_button`, `on_analog`, `on_dial` and `on_text` (every press and release, every analog
report, every dial turn, every text message; `ButtonEvent`, `AnalogEvent`, `DialEvent`,
`TextEvent`). They see each write as it happens, where `on_update` sees the latest state, so a
press and its release in one datagram are two calls.

Thread safety: the sources write on the loop's thread. A `Device` (`live.devices[name]`,
`devices.values()`, `items()`) and a `snapshot()` are built on that thread too (one hop to it
per call: 0.05 to 0.1 ms on a loaded 2-core machine), so each is one consistent state, never
the position of one update with the orientation of the next. Their values are copies, yours
to keep. Read many devices with one `items()` or `snapshot()`, not one lookup each.

The package: `devices` (the values handed out, names), `fanout` (each reader's bounded queue),
`feeds` (the hub and the VRPN events, on the loop), `view` (`Live`, `AsyncLive`).
"""

from __future__ import annotations

from robowire.live.devices import (
    AnalogEvent,
    ButtonEvent,
    Device,
    Devices,
    DialEvent,
    Reading,
    TextEvent,
    Update,
)
from robowire.live.fanout import Subscription
from robowire.live.view import QUEUE, AsyncLive, Live, connect, open

__all__ = [
    "QUEUE",
    "AnalogEvent",
    "AsyncLive",
    "ButtonEvent",
    "Device",
    "Devices",
    "DialEvent",
    "Live",
    "Reading",
    "Subscription",
    "TextEvent",
    "Update",
    "connect",
    "open",
]
