"""Thin asyncio drivers that run any sans-I/O session on real sockets.

They feed the session bytes and `timebase.monotonic()`, write what it asks to send, hand its events
to a callback and re-arm one timer at `next_deadline()`. No protocol logic lives here. Beside
them: the one reconnect loop (`reconnect`) and the timers (`timer`).
"""

from robowire.transport.loop import new_event_loop, run
from robowire.transport.tcp import StreamDriver, connect_stream, serve_stream
from robowire.transport.udp import DatagramDriver, run_datagram

__all__ = [
    "DatagramDriver",
    "StreamDriver",
    "connect_stream",
    "new_event_loop",
    "run",
    "run_datagram",
    "serve_stream",
]
