"""The live world model (see `model` for the frame and the write/read API, `latest` for the
latest-state subscribers)."""

from robowire.world.feed import ChangeFeed, Subscription
from robowire.world.latest import LatestState
from robowire.world.model import Device, World
from robowire.world.table import SourceTable
from robowire.world.update import LogEvent, Update

__all__ = [
    "ChangeFeed",
    "Device",
    "LatestState",
    "LogEvent",
    "SourceTable",
    "Subscription",
    "Update",
    "World",
]
