"""The XRP WPILib side (`halsim_xrp`'s rules), sans-I/O. All of its state logic is in this file.

    state      trigger                 next
    WAITING    robot status accepted   RECEIVING   (the robot answers)
    RECEIVING  robot status accepted   RECEIVING

halsim_xrp has no timeout and no handshake: it sends motors 0..3, servos (4, 5 and any others
set) and DIO outputs every 20 ms with the control byte (1 = enabled), its own sequence starting
at 0, whether or not the robot answers. It drops robot packets whose seq is not newer than the
last accepted one, except across the wrap (last > 65532 and seq < 3), with `last` starting at 0
and never reset (W `XRP::HandleXRPUpdate`), so the robot's first status (seq 0) is dropped.
A rebooted robot is ignored by that rule until its numbers pass the old ones; with `reboots`
(the default: the gateway's source) it is a new session at its second status instead
(`xrp.sequence.StatusSequence`, `PeerRestarted`); `XrpClient` keeps WPILib's rule.

What the program sets (`enabled`, `set_motor`, `set_servo`, `set_dio`) goes out with the next
packet; each packet sent is a `CommandSent` event. A capture shows the packets a WPILib side
sent: `feed_sent_datagram` takes one in as if this side had sent it.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

import numpy as np

from robowire.errors import DecodeError
from robowire.protocols.xrp import codec
from robowire.protocols.xrp.codec import (
    DIO,
    HEADER_SIZE,
    PROTOCOL,
    Accel,
    AnalogIn,
    Encoder,
    Gyro,
    Packet,
    XRPMotor,
    XRPServo,
)
from robowire.protocols.xrp.events import (
    CommandSent,
    RobotStatus,
    StatusBatch,
    StatusReceived,
    WpilibEvent,
)
from robowire.protocols.xrp.sequence import StatusSequence, client_accepts
from robowire.sequence import PeerRestarted
from robowire.wire import Address, PacketDropped, SessionStats, transition

__all__ = ["COMMAND_PERIOD", "ClientSession", "client_accepts", "wheel_values"]

COMMAND_PERIOD = 0.020  # s, one packet per TimedRobot loop
BATCH_MIN = 4  # statuses: numpy's fixed cost (~10 µs a batch) is about two decoded one by one


class State(enum.Enum):
    WAITING = "waiting"  # no status accepted yet (the robot may not be there)
    RECEIVING = "receiving"  # the robot answers


class Trigger(enum.Enum):
    STATUS = "status accepted"


TRANSITIONS: dict[State, dict[Trigger, State]] = {
    State.WAITING: {Trigger.STATUS: State.RECEIVING},
    State.RECEIVING: {Trigger.STATUS: State.RECEIVING},
}
"""State -> trigger -> next state; a pair not in it is a bug (SessionError)."""


def wheel_values(left: float, right: float) -> Sequence[float]:
    """Motor outputs for left/right wheel efforts (forward positive): the right motor is
    mounted mirrored, so its output is negated, as `XRPMotor.setInverted(True)` does."""
    return (left, -right)


_ENCODER_COUNTS = itemgetter(0, 3, 6, 9)  # in `codec.STATUS_FIELDS` order


def _period_seconds(numerator: int, divisor: int) -> float | None:
    if numerator >= codec.NO_PERIOD - 1 or not divisor:  # left "no period" reads ...FE
        return None
    seconds = (numerator >> 1) / divisor
    return seconds if numerator & 1 else -seconds


class ClientSession:
    """The WPILib side (`halsim_xrp`): commands out at 50 Hz, robot status in.

    `remote` is the robot's address; datagrams from anywhere else are dropped (the real client
    uses a connected socket, so the kernel drops them; this check keeps unconnected drivers
    honest too).
    """

    def __init__(
        self, remote: Address | None = None, *, period: float = COMMAND_PERIOD, reboots: bool = True
    ) -> None:
        self.remote = remote
        self.period = period
        self.stats = SessionStats()
        self.state = State.WAITING
        initial = CommandSent()
        self.enabled = initial.enabled
        self.motors = list(initial.motors)
        self.servos: dict[int, float] = dict(initial.servos)
        self.dio_out: dict[int, bool] = dict(initial.dio)
        self.seq = 0
        self.sequence = StatusSequence(reboots=reboots)  # WPILib's rule, and reboots
        self.status: RobotStatus | None = None
        self._counts: list[int | None] = [None] * 4
        self._periods: list[float | None] = [None] * 4
        self._analog: list[float | None] = [None] * 3
        self._next_send = 0.0  # the first tick sends at once
        self._out: list[tuple[bytes, Address | None]] = []

    def _move(self, trigger: Trigger) -> None:
        """The one place the state changes (see `TRANSITIONS`)."""
        self.state = transition(TRANSITIONS, self.state, trigger, "xrp WPILib side")

    # -- what the program sets ----------------------------------------------------------------

    def set_motor(self, motor: int, value: float) -> None:
        if not 0 <= motor < 4:
            raise ValueError(f"XRP motors are 0..3, not {motor}")
        self.motors[motor] = min(1.0, max(-1.0, float(value)))

    def set_servo(self, servo: int, position: float) -> None:
        if not 4 <= servo < 8:
            raise ValueError(f"XRP servos are 4..7, not {servo}")
        self.servos[servo] = min(1.0, max(0.0, float(position)))

    def set_dio(self, channel: int, value: bool) -> None:
        if not 0 <= channel < 256:
            raise ValueError(f"DIO channel {channel} does not fit a byte")
        self.dio_out[channel] = bool(value)

    def take(self, packet: Packet) -> None:
        """A command packet's values become this side's: the control byte, and each motor,
        servo and DIO output it names (unmentioned ones stay). NaN motor or servo values are
        ignored (the robot would ignore them too)."""
        self.enabled = packet.control == 1
        for block in packet.blocks:
            if isinstance(block, XRPMotor) and 0 <= block.id < 4:
                if math.isfinite(block.value):
                    self.set_motor(block.id, block.value)
            elif isinstance(block, XRPServo) and 4 <= block.id < 8:
                if math.isfinite(block.value):
                    self.set_servo(block.id, block.value)
            elif isinstance(block, DIO):
                self.set_dio(block.id, block.value == 1)

    def command(self) -> CommandSent:
        """What the next packet tells the robot."""
        m = self.motors
        return CommandSent(
            seq=self.seq,
            enabled=self.enabled,
            motors=(m[0], m[1], m[2], m[3]),
            servos=dict(self.servos),
            dio=dict(self.dio_out),
        )

    def command_packet(self) -> Packet:
        blocks: list[codec.Block] = [XRPMotor(id=i, value=v) for i, v in enumerate(self.motors)]
        blocks += [XRPServo(id=i, value=self.servos[i]) for i in sorted(self.servos)]
        blocks += [DIO(id=c, value=int(self.dio_out[c])) for c in sorted(self.dio_out)]
        return Packet(seq=self.seq, control=1 if self.enabled else 0, blocks=tuple(blocks))

    def send_now(self) -> CommandSent:
        """Queue one command packet now (the periodic sender does this every 20 ms)."""
        sent = self.command()
        self._out.append((codec.encode_packet(self.command_packet()), None))
        self.seq = (self.seq + 1) & 0xFFFF
        self.stats.messages_out += 1
        return sent

    def feed_sent_datagram(self, data: bytes, now: float) -> list[WpilibEvent]:
        """A command datagram a WPILib side sent, as a capture shows it: its values become this
        side's (unmentioned ones stay), as if this side had sent it."""
        try:
            packet = codec.decode_packet(data)
        except DecodeError as exc:
            return self._drop(exc.reason, len(data), exc.offset)
        self.take(packet)
        self.seq = packet.seq
        sent = self.command()
        self.seq = (packet.seq + 1) & 0xFFFF
        return [sent]

    # -- input --------------------------------------------------------------------------------

    def feed_datagram(self, data: bytes, addr: Address, now: float) -> list[WpilibEvent]:
        self.stats.bytes_in += len(data)
        if self.remote is not None and addr != self.remote:
            reason = f"datagram from {addr[0]}:{addr[1]}, not the robot"
            return self._drop(reason, len(data))
        if len(data) < HEADER_SIZE:
            return self._drop(f"datagram of {len(data)} bytes", len(data))
        fast = codec.decode_status(data)
        if fast is not None:
            seq, values = fast
            if not self.sequence.accept(seq, now):
                return self._stale(seq, len(data))
            status = self._snapshot(seq, values)
        else:
            try:
                packet = codec.decode_packet(data)
            except DecodeError as exc:
                return self._drop(exc.reason, len(data), exc.offset)
            if not self.sequence.accept(packet.seq, now):
                return self._stale(packet.seq, len(data))
            if self.sequence.restarted:
                self._forget()
            status = self._merge(packet)
        self._move(Trigger.STATUS)
        self.status = status
        self.stats.messages_in += 1
        if self.sequence.restarted:
            return [self._restarted(status.seq), StatusReceived(status=status)]
        return [StatusReceived(status=status)]

    def feed_datagrams(
        self, datagrams: Sequence[tuple[bytes, Address]], now: float
    ) -> list[WpilibEvent]:
        """A wake-up's datagrams (`BatchDatagramSession`). A run of at least `BATCH_MIN`
        statuses from the robot, each in the firmware's layout and numbered one after the last
        accepted (what a robot sends when this side fell behind, or a capture holds), is
        decoded at once into one `StatusBatch`; anything else is fed one by one, as
        `feed_datagram` would be (the two give the same state and counts)."""
        if len(datagrams) >= BATCH_MIN:
            batch = self._status_run(datagrams, now)
            if batch is not None:
                return [batch]
        events: list[WpilibEvent] = []
        for data, addr in datagrams:
            events += self.feed_datagram(data, addr, now)
        return events

    def _status_run(
        self, datagrams: Sequence[tuple[bytes, Address]], now: float
    ) -> StatusBatch | None:
        """The batch of `feed_datagrams`, or None (nothing taken) if it is not such a run."""
        remote = self.remote
        if remote is not None and any(addr != remote for _, addr in datagrams):
            return None
        rows = codec.decode_statuses([data for data, _ in datagrams])
        if rows is None:
            return None
        first, count = int(rows["seq"][0]), len(rows)
        if not np.array_equal(rows["seq"], np.arange(first, first + count) & 0xFFFF):
            return None  # not numbered one after another
        if not self.sequence.accept_run(first, count, now):
            return None
        last = (first + count - 1) & 0xFFFF
        fast = codec.decode_status(datagrams[-1][0])
        assert fast is not None  # (its layout was checked with the others')
        status = self._snapshot(last, fast[1])
        self._move(Trigger.STATUS)
        self.status = status
        self.stats.bytes_in += count * codec.STATUS_SIZE
        self.stats.messages_in += count
        return StatusBatch(rows=rows, status=status)

    def _snapshot(self, seq: int, values: Sequence[Any]) -> RobotStatus:
        """What this side knows after the status `seq` in the firmware's layout (`values` in
        `codec.STATUS_FIELDS` order, as `codec.decode_status` unpacks them: the integer
        fields are ints already): all of it, as that layout says everything."""
        v = values  # (a lone status's whole cost is a few us: no loop, each tuple made once)
        counts: tuple[int, ...] = _ENCODER_COUNTS(v)
        periods = (
            _period_seconds(v[1], v[2]),
            _period_seconds(v[4], v[5]),
            _period_seconds(v[7], v[8]),
            _period_seconds(v[10], v[11]),
        )
        analog = tuple(v[22:25])
        self._counts[:] = counts
        self._periods[:] = periods
        self._analog[:] = analog
        button = v[12] == 1
        return RobotStatus(
            seq=seq,
            encoder_counts=counts,
            encoder_periods=periods,
            button=button,
            gyro=tuple(v[13:19]),
            accel=tuple(v[19:22]),
            analog=analog,
            dio={0: button},
        )

    @property
    def last_seq(self) -> int:
        """The robot's last accepted sequence number."""
        return self.sequence.last

    def wire_counts(self) -> dict[str, int]:
        """The robot's statuses lost, duplicated or reordered on the way, and its reboots."""
        counts = self.sequence.counts
        return {
            "lost": counts.lost,
            "settled": counts.settled(),
            "duplicated": counts.duplicated,
            "reordered": counts.reordered,
            "restarts": self.sequence.restarts,
        }

    def _forget(self) -> None:
        """The robot rebooted: nothing it said before is its state now."""
        self.status = None
        self._counts = [None] * 4
        self._periods = [None] * 4
        self._analog = [None] * 3

    def _restarted(self, seq: int) -> PeerRestarted:
        self.stats.extra["restarts"] = self.sequence.restarts
        return PeerRestarted(reason=f"the robot rebooted (its sequence began again, at {seq})")

    def _merge(self, packet: Packet) -> RobotStatus:
        """Fold a packet of any layout into what we know (unmentioned values stay)."""
        old = self.status
        gyro = old.gyro if old else None
        accel = old.accel if old else None
        dio = dict(old.dio) if old else {}
        for block in packet.blocks:
            if isinstance(block, Encoder) and 0 <= block.id < 4:
                self._counts[block.id] = block.count
                if block.period is not None and block.divisor is not None:
                    self._periods[block.id] = _period_seconds(block.period, block.divisor)
            elif isinstance(block, Gyro):
                gyro = block.values()
            elif isinstance(block, Accel):
                accel = (block.x, block.y, block.z)
            elif isinstance(block, AnalogIn) and 0 <= block.id < 3:
                self._analog[block.id] = block.value
            elif isinstance(block, DIO):
                dio[block.id] = block.value == 1
        return RobotStatus(
            seq=packet.seq,
            encoder_counts=tuple(self._counts),
            encoder_periods=tuple(self._periods),
            button=dio.get(0),
            gyro=gyro,
            accel=accel,
            analog=tuple(self._analog),
            dio=dio,
        )

    def _stale(self, seq: int, size: int) -> list[WpilibEvent]:
        self.stats.extra["stale"] = self.stats.extra.get("stale", 0) + 1
        return self._drop(f"stale sequence {seq} <= {self.last_seq}", size)

    def _drop(self, reason: str, size: int, offset: int = 0) -> list[WpilibEvent]:
        self.stats.drop(reason)
        return [PacketDropped(protocol=PROTOCOL, reason=reason, offset=offset, size=size)]

    # -- time ---------------------------------------------------------------------------------

    def tick(self, now: float) -> list[WpilibEvent]:
        if now < self._next_send:
            return []
        sent = self.send_now()
        self._next_send += self.period
        if self._next_send <= now:
            self._next_send = now + self.period
        return [sent]

    def next_deadline(self) -> float | None:
        return self._next_send

    def datagrams_to_send(self) -> list[tuple[bytes, Address | None]]:
        out, self._out = self._out, []
        for data, _ in out:
            self.stats.bytes_out += len(data)
        return out
