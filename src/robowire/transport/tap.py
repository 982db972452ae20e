"""The receive tap: what a live source received, as received, for the MCAP recorder's raw
channels.

A `Source` sets `RECEIVER` to itself when its task starts (`Source.run`); asyncio copies a
task's context into the callbacks and transports it creates, so the one UDP receive loop
(`udp.read_datagrams`) and the one stream driver (`tcp.StreamDriver`) find the source they
read for without any protocol passing it along. When that source's `tap` is set, each
datagram or stream chunk is handed to it with the monotonic time it was read, the transport
("udp" or "tcp") and the peer's address. Unset (the usual case), the cost is one attribute
read per wake-up. The UDP receive loop also stamps the source's `last_heard` (a datagram
peer's end is only silence: see `Source.silence`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Protocol

from robowire.wire import Address

Tap = Callable[[bytes, float, str, Address], None]
"""(data, monotonic receive time, "udp" | "tcp", peer address) -> None"""


class Tapped(Protocol):
    """Something whose received bytes may be tapped (a `Source`)."""

    tap: Tap | None
    last_heard: float | None


RECEIVER: ContextVar[Tapped | None] = ContextVar("robowire_receiver", default=None)


def current_tap() -> Tap | None:
    """The tap of the source this code runs for, if it has one."""
    receiver = RECEIVER.get()
    return None if receiver is None else receiver.tap
