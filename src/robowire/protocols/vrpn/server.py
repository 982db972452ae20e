"""A VRPN server application: many clients, one set of devices, broadcast to all.

Shared by the serve sink and the simulator (services.py); part of the service layer, kept apart
because both use it. It builds one session per client with the
device names registered in a stable order, answers pings (the session does), replies to the
tracker's requests, and broadcasts reports to every connected client, skipping low-latency
data for a client whose TCP buffer keeps growing (it would only fall further behind).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from robowire.protocols.vrpn.driver import VrpnLink, VrpnListener
from robowire.protocols.vrpn.events import Connected, MessageReceived, VrpnEvent
from robowire.protocols.vrpn.messages import (
    Body,
    TextMessage,
    TrackerRequestToRoom,
    TrackerRequestUnitToSensor,
    TrackerRequestWorkspace,
    TrackerToRoom,
    TrackerUnitToSensor,
    TrackerWorkspace,
)
from robowire.protocols.vrpn.registry import SERVER_TYPE_NAMES, FrameBatch, ReportEncoder
from robowire.protocols.vrpn.session import Role, VrpnSession
from robowire.wire import Address, ConnectionLost, PacketDropped, SessionStats

log = logging.getLogger("robowire.vrpn")


class VrpnServer:
    """Devices served to every client; subclasses or callers hook connect and messages."""

    def __init__(
        self,
        devices: Sequence[str] = (),
        *,
        clock_offset: float = 0.0,
        on_connect: Callable[[VrpnLink], None] | None = None,
        on_message: Callable[[VrpnLink, MessageReceived], None] | None = None,
        sensors: Callable[[str], int] | None = None,
        workspace: tuple[tuple[float, float, float], tuple[float, float, float]] = (
            (-10.0, -10.0, 0.0),
            (10.0, 10.0, 5.0),
        ),
    ) -> None:
        self.devices: list[str] = list(devices)
        self.clock_offset = clock_offset
        self.links: set[VrpnLink] = set()
        self.stats = SessionStats()
        self.skipped = 0  # messages not sent to a client that was too far behind, in all
        self.on_connect = on_connect
        self.on_message = on_message
        self.sensor_count = sensors or (lambda _name: 1)
        self.workspace = workspace

    # -- sessions ---------------------------------------------------------------------------

    def make_session(self, peer: Address, udp_inbound: Address | None) -> VrpnSession:
        return VrpnSession(
            Role.SERVER,
            senders=self.devices,
            types=SERVER_TYPE_NAMES,
            udp_inbound=udp_inbound,
            clock_offset=self.clock_offset,
        )  # its cookie timer starts at the driver's first tick

    def add_device(self, name: str) -> None:
        """A new device: connected clients get its description now, the others at connect."""
        if name in self.devices:
            return
        self.devices.append(name)
        for link in list(self.links):
            if link.session is not None:
                link.session.register_sender(name)
                link.session.devices.add(name)
                link.flush()

    def connected(self) -> list[VrpnLink]:
        return [link for link in self.links if link.session is not None and link.session.connected]

    async def run(self, host: str, port: int, on_listening: Callable[[Address], None]) -> None:
        listener = VrpnListener(
            self.make_session, self._events, on_open=self.links.add, on_close=self.links.discard
        )
        await listener.run(host, port, on_listening)

    # -- events from clients ----------------------------------------------------------------

    def _events(self, link: VrpnLink, events: list[VrpnEvent]) -> None:
        session = link.session
        assert session is not None
        for event in events:
            match event:
                case MessageReceived():
                    self.stats.messages_in += 1
                    self._message(link, session, event)
                case Connected():
                    if self.on_connect is not None:
                        self.on_connect(link)
                case PacketDropped():
                    self.stats.drop(event.reason)
                case ConnectionLost():
                    pass  # the driver logs the close once, with its reason
        link.flush()

    def _message(self, link: VrpnLink, session: VrpnSession, event: MessageReceived) -> None:
        device = event.sender
        match event.message if session.connected else None:  # (a read may end in a close)
            case TrackerRequestToRoom():
                session.send(device, TrackerToRoom())
            case TrackerRequestUnitToSensor():
                for sensor in range(self.sensor_count(device)):
                    session.send(device, TrackerUnitToSensor(sensor=sensor))
            case TrackerRequestWorkspace():
                low, high = self.workspace
                session.send(device, TrackerWorkspace(minimum=low, maximum=high))
            case TextMessage(text=text):
                log.info("VRPN client %s:%s says: %s", *link.peer, text)
        if self.on_message is not None:
            self.on_message(link, event)

    # -- broadcasting -----------------------------------------------------------------------

    def broadcast(
        self,
        sender: str,
        message: Body,
        *,
        time: float | None = None,
        reliable: bool = True,
        flush: bool = True,
    ) -> None:
        """Send to every connected client; `flush=False` queues it for one `flush()` later,
        so that one frame's messages share TCP writes and UDP datagrams."""
        for link in self.connected():
            assert link.session is not None
            if not reliable and link.congested:
                link.skipped += 1
                self.skipped += 1
                continue
            link.session.send(sender, message, time=time, reliable=reliable)
            if flush:
                link.flush()

    def flush(self) -> None:
        for link in self.connected():
            link.flush()

    def broadcast_reports(
        self,
        encoder: ReportEncoder,
        sender: str | Sequence[str],
        sensors: npt.ArrayLike,
        values: Sequence[npt.ArrayLike],
        *,
        time: float | npt.ArrayLike,
        senders: npt.NDArray[np.intp] | None = None,
        flush: bool = True,
    ) -> None:
        """Tracker reports (rows of `encoder.kinds`, sent unreliably) to every client that is
        keeping up. `sender` is one tracker for every row, or several with `senders` giving
        each row's index among them (see `broadcast_batch`)."""

        def encode(ids: tuple[int, ...], types: tuple[int, ...]) -> FrameBatch:
            rows = ids[0] if senders is None else np.array(ids, dtype=np.int32)[senders]
            return encoder.encode(rows, types, sensors, values, time=time)

        names = [sender] if isinstance(sender, str) else list(sender)
        messages = int(np.size(sensors)) * len(encoder.kinds)
        self.broadcast_batch(names, encoder.kinds, encode, messages, flush=flush)

    def broadcast_batch(
        self,
        senders: Sequence[str],
        kinds: Sequence[str],
        encode: Callable[[tuple[int, ...], tuple[int, ...]], FrameBatch],
        messages: int,
        *,
        flush: bool = True,
    ) -> None:
        """`messages` messages encoded once (sent unreliably) to every client that is keeping
        up. `encode(sender ids, type ids)` gives the batch for a session's ids of `senders` and
        `kinds`; it is called once per distinct mapping, which all sessions share unless names
        were registered in another order, so every client gets the same bytes but for its own
        seq numbers. A client too far behind skips them (counted)."""
        batches: dict[tuple[tuple[int, ...], tuple[int, ...]], FrameBatch] = {}
        for link in self.connected():
            session = link.session
            assert session is not None
            if link.congested:
                link.skipped += messages
                self.skipped += messages
                continue
            key = (
                session.register_senders(tuple(senders)),
                tuple(map(session.register_type, kinds)),
            )
            batch = batches.get(key)
            if batch is None:
                batch = batches[key] = encode(*key)
            session.send_batch(batch)
            if flush:
                link.flush()

    def broadcast_poses(
        self,
        sender: str | Sequence[str],
        sensors: npt.ArrayLike,
        positions: npt.ArrayLike,
        quaternions_xyzw: npt.ArrayLike,
        *,
        time: float | npt.ArrayLike | None = None,
        flush: bool = True,
    ) -> None:
        for link in self.connected():
            assert link.session is not None
            if link.congested:
                link.skipped += 1
                self.skipped += 1
                continue
            link.session.send_poses(sender, sensors, positions, quaternions_xyzw, time=time)
            if flush:
                link.flush()
