"""Sans-I/O XRP sessions: the robot (firmware rules) and the WPILib side (halsim_xrp rules).

Robot (`RobotSession`, one robot row of a `physics.Fleet`):

    state        on a datagram                          on tick
    silent       remember the sender, accept -> live     nothing to send yet
    live         remember the sender; seq rule; enable   status every 50 ms; watchdog 500 ms
    expired      remember the sender; seq rule -> live   status every 50 ms (to the last sender)

* The reply address is the source of the latest datagram, updated before any check.
* Sequence rule (F `processPacket`): accept if seq > max, or if 65535 - seq < 5; the max resets
  to 0 when the watchdog expires. So the first packet (seq 0) is rejected, and after 65535 the
  robot rejects 0, 1, ... until the watchdog resets it (the firmware's wrap drop-out, kept).
* Enabled only when the control byte is 1; motors and servos apply only while enabled and the
  watchdog is alive. On watchdog expiry or disable: motors stop, servos centre (90 deg),
  encoders stop counting (counts kept). On enable: the same shut-off first, then counting.

WPILib side (`ClientSession`): sends motors 0..3, servos (4, 5 and any others set) and DIO
outputs at 50 Hz with the control byte; its own sequence starts at 0. It drops robot packets
whose seq is not newer than the last accepted one, except across the wrap (last > 65532 and
seq < 3), with `last` starting at 0 and never reset (W `HandleXRPUpdate`). It has no timeout.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from robowire.errors import DecodeError
from robowire.protocols.base import Address, PacketDropped, SessionStats
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
from robowire.protocols.xrp.physics import Fleet

STATUS_PERIOD = 0.050  # s, the firmware's MIN_UPDATE_TIME_MS
WATCHDOG_TIMEOUT = 0.500  # s, the firmware's DEFAULT_WATCHDOG_TIMEOUT
COMMAND_PERIOD = 0.020  # s, one packet per TimedRobot loop
DIVISOR = 9_375_000  # encoder ticks per second: 150 MHz / 16 (RP2350 board)
ROBOT_WRAP_WINDOW = 5  # robot accepts seq >= 65531 always
CLIENT_WRAP_WINDOW = 3  # client accepts seq < 3 after last > 65532


def robot_accepts(seq: int, max_seq: int) -> bool:
    """The firmware's rule (F `wpilibudp.cpp processPacket`)."""
    return seq > max_seq or 0xFFFF - seq < ROBOT_WRAP_WINDOW


def client_accepts(seq: int, last: int) -> bool:
    """WPILib's rule (W `XRP::HandleXRPUpdate`)."""
    if seq > last:
        return True
    return 0xFFFF - last < CLIENT_WRAP_WINDOW and seq < CLIENT_WRAP_WINDOW


# -- events ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandReceived:
    """The robot accepted a packet from the WPILib side."""

    packet: Packet
    enabled: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class EnabledChanged:
    """The robot was enabled or disabled (by the control byte or the watchdog)."""

    enabled: bool
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RobotStatus:
    """What the WPILib side knows of the robot after one accepted status packet."""

    seq: int
    encoder_counts: tuple[int | None, ...]  # ids 0..3, None if never reported
    encoder_periods: tuple[float | None, ...]  # seconds per count, signed; None: no period
    button: bool | None
    gyro: tuple[float, ...] | None  # rate x, y, z (deg/s), angle x, y, z (deg)
    accel: tuple[float, ...] | None  # g
    analog: tuple[float | None, ...]  # volts, channels 0..2 (None if never reported)
    dio: dict[int, bool] = field(default_factory=dict)

    def encoder_rate(self, index: int) -> float:
        """Counts per second of encoder `index` (0 without a period)."""
        period = self.encoder_periods[index]
        return 0.0 if not period else 1.0 / period


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusReceived:
    status: RobotStatus


def _period_seconds(numerator: int, divisor: int) -> float | None:
    if numerator >= codec.NO_PERIOD - 1 or not divisor:  # left "no period" reads ...FE
        return None
    seconds = (numerator >> 1) / divisor
    return seconds if numerator & 1 else -seconds


# -- robot side --------------------------------------------------------------------------------


class RobotState(enum.Enum):
    SILENT = "silent"  # no datagram yet: send nothing
    LIVE = "live"  # watchdog fed
    EXPIRED = "expired"  # watchdog ran out: disabled, still streaming status


class RobotSession:
    """One simulated XRP robot (row `index` of `fleet`), speaking the firmware's rules."""

    def __init__(
        self,
        fleet: Fleet,
        index: int = 0,
        *,
        status_period: float = STATUS_PERIOD,
        watchdog: float = WATCHDOG_TIMEOUT,
        divisor: int = DIVISOR,
        status_phase: float | None = None,
    ) -> None:
        self.fleet = fleet
        # None: the status timer starts with the first datagram (like one robot's free-running
        # timer). A number: status times fall on phase + k * period, so that many robots of
        # one fleet report together and share one physics step and sensor snapshot.
        self.status_phase = status_phase
        self.index = index
        self.status_period = status_period
        self.watchdog = watchdog
        self.divisor = divisor
        self.stats = SessionStats()
        self.state = RobotState.SILENT
        self.remote: Address | None = None
        self.enabled = False
        self.max_seq = 0
        self.seq = 0  # our own counter; only a reboot (a new session) resets it
        self._fed_until: float | None = None
        self._next_status: float | None = None
        self._out: list[tuple[bytes, Address | None]] = []

    # -- input --------------------------------------------------------------------------------

    def feed_datagram(self, data: bytes, addr: Address, now: float) -> list[object]:
        self.stats.bytes_in += len(data)
        self.remote = addr  # before any check, as the firmware does
        if self._next_status is None:  # the free-running status timer starts with a peer
            self._next_status = now
            if self.status_phase is not None:
                periods = math.ceil((now - self.status_phase) / self.status_period)
                self._next_status = self.status_phase + periods * self.status_period
        events: list[object] = []
        self._expire_if_due(now, events)
        if len(data) < HEADER_SIZE:
            return self._drop(events, f"datagram of {len(data)} bytes", len(data))
        try:
            packet = codec.decode_packet(data)
        except DecodeError as exc:
            return self._drop(events, exc.reason, len(data), exc.offset)
        if not robot_accepts(packet.seq, self.max_seq):
            self.stats.extra["stale"] = self.stats.extra.get("stale", 0) + 1
            return self._drop(events, f"stale sequence {packet.seq} <= {self.max_seq}", len(data))
        self.fleet.advance(now)
        self.max_seq = packet.seq
        self._fed_until = now + self.watchdog
        self.state = RobotState.LIVE
        self.stats.messages_in += 1
        self._set_enabled(packet.control == 1, "control byte", events)
        self._apply(packet)
        events.append(CommandReceived(packet=packet, enabled=self.enabled))
        return events

    def _drop(self, events: list[object], reason: str, size: int, offset: int = 0) -> list[object]:
        self.stats.drop(reason)
        events.append(PacketDropped(protocol=PROTOCOL, reason=reason, offset=offset, size=size))
        return events

    def _apply(self, packet: Packet) -> None:
        fleet, i = self.fleet, self.index
        live = self.enabled and self.state is RobotState.LIVE
        for block in packet.blocks:
            if isinstance(block, XRPMotor):
                if live and 0 <= block.id < 4 and math.isfinite(block.value):
                    fleet.command[i, block.id] = min(1.0, max(-1.0, block.value))
            elif isinstance(block, XRPServo):
                if live and 4 <= block.id < 8 and math.isfinite(block.value):
                    position = min(1.0, max(0.0, block.value))
                    fleet.servo[i, block.id - 4] = float(int(position * 180.0))
            elif isinstance(block, DIO) and block.id == 1:
                fleet.led[i] = block.value == 1

    def _shutoff(self) -> None:
        self.fleet.command[self.index] = 0.0
        self.fleet.servo[self.index] = 90.0  # servo value 0 = centre

    def _set_enabled(self, enabled: bool, reason: str, events: list[object]) -> None:
        if enabled == self.enabled:
            return
        self.fleet.advance(self._now_hint())
        self._shutoff()  # motors never jump to stale values on enable, and stop on disable
        self.fleet.counting[self.index] = enabled
        self.fleet.invalidate()
        self.enabled = enabled
        events.append(EnabledChanged(enabled=enabled, reason=reason))

    def _now_hint(self) -> float:
        return self.fleet.time if self.fleet.time is not None else 0.0

    # -- time ---------------------------------------------------------------------------------

    def _expire_if_due(self, now: float, events: list[object]) -> None:
        if self._fed_until is not None and now >= self._fed_until:
            self.fleet.advance(self._fed_until)
            self._fed_until = None
            self.state = RobotState.EXPIRED
            self.max_seq = 0  # resetState()
            self.stats.extra["watchdog_expiries"] = self.stats.extra.get("watchdog_expiries", 0) + 1
            self._set_enabled(False, "watchdog", events)
            self._shutoff()

    def tick(self, now: float) -> list[object]:
        events: list[object] = []
        self._expire_if_due(now, events)
        if self._next_status is not None and self.remote is not None and now >= self._next_status:
            self.fleet.advance(now)
            self._out.append((self.status_datagram(), self.remote))
            self.stats.messages_out += 1
            self._next_status += self.status_period
            if self._next_status <= now:  # fell behind (a stalled loop): do not burst
                self._next_status = now + self.status_period
        return events

    def next_deadline(self) -> float | None:
        times = [t for t in (self._next_status, self._fed_until) if t is not None]
        return min(times) if times else None

    def datagrams_to_send(self) -> list[tuple[bytes, Address | None]]:
        out, self._out = self._out, []
        for data, _ in out:
            self.stats.bytes_out += len(data)
        return out

    # -- status -------------------------------------------------------------------------------

    def status_values(self) -> list[float]:
        """This robot's status in `codec.STATUS_FIELDS` order, from the fleet's sensors."""
        fleet, i = self.fleet, self.index
        all_counts, all_periods, gyro, accel, analog = fleet.snapshot(self.divisor)
        counts = all_counts[i].tolist()
        periods = all_periods[i].tolist()
        values: list[float] = []
        for count, period in zip(counts, periods, strict=True):
            wrapped = (int(count) + 0x80000000) % 0x100000000 - 0x80000000  # i32 on the wire
            values.extend((wrapped, int(period), self.divisor))
        values.append(1 if fleet.button[i] else 0)
        values.extend(gyro[i].tolist())
        values.extend(accel[i].tolist())
        values.extend(analog[i].tolist())
        return values

    def status_datagram(self) -> bytes:
        data = codec.encode_status(self.seq, self.status_values())
        self.seq = (self.seq + 1) & 0xFFFF
        return data


# -- WPILib side -------------------------------------------------------------------------------


class ClientSession:
    """The WPILib side (`halsim_xrp`): commands out at 50 Hz, robot status in.

    `remote` is the robot's address; datagrams from anywhere else are dropped (the real client
    uses a connected socket, so the kernel drops them; this check keeps unconnected drivers
    honest too).
    """

    def __init__(self, remote: Address | None = None, *, period: float = COMMAND_PERIOD) -> None:
        self.remote = remote
        self.period = period
        self.stats = SessionStats()
        self.enabled = False
        self.motors = [0.0, 0.0, 0.0, 0.0]
        self.servos: dict[int, float] = {4: 0.5, 5: 0.5}
        self.dio_out: dict[int, bool] = {}
        self.seq = 0
        self.last_seq = 0
        self.status: RobotStatus | None = None
        self._counts: list[int | None] = [None] * 4
        self._periods: list[float | None] = [None] * 4
        self._analog: list[float | None] = [None] * 3
        self._next_send = 0.0  # the first tick sends at once
        self._out: list[tuple[bytes, Address | None]] = []

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

    def command_packet(self) -> Packet:
        blocks: list[codec.Block] = [XRPMotor(id=i, value=v) for i, v in enumerate(self.motors)]
        blocks += [XRPServo(id=i, value=self.servos[i]) for i in sorted(self.servos)]
        blocks += [DIO(id=c, value=int(self.dio_out[c])) for c in sorted(self.dio_out)]
        return Packet(seq=self.seq, control=1 if self.enabled else 0, blocks=tuple(blocks))

    def send_now(self) -> None:
        """Queue one command packet now (the periodic sender does this every 20 ms)."""
        self._out.append((codec.encode_packet(self.command_packet()), None))
        self.seq = (self.seq + 1) & 0xFFFF
        self.stats.messages_out += 1

    # -- input --------------------------------------------------------------------------------

    def feed_datagram(self, data: bytes, addr: Address, now: float) -> list[object]:
        self.stats.bytes_in += len(data)
        if self.remote is not None and addr != self.remote:
            reason = f"datagram from {addr[0]}:{addr[1]}, not the robot"
            return self._drop(reason, len(data))
        if len(data) < HEADER_SIZE:
            return self._drop(f"datagram of {len(data)} bytes", len(data))
        fast = codec.decode_status(data)
        if fast is not None:
            seq, values = fast
            if not client_accepts(seq, self.last_seq):
                return self._stale(seq, len(data))
            self.last_seq = seq
            for i in range(4):
                self._counts[i] = int(values[3 * i])
                self._periods[i] = _period_seconds(int(values[3 * i + 1]), int(values[3 * i + 2]))
            self._analog[:] = values[22:25]
            status = RobotStatus(
                seq=seq,
                encoder_counts=tuple(self._counts),
                encoder_periods=tuple(self._periods),
                button=values[12] == 1,
                gyro=tuple(values[13:19]),
                accel=tuple(values[19:22]),
                analog=tuple(self._analog),
                dio={0: values[12] == 1},
            )
        else:
            try:
                packet = codec.decode_packet(data)
            except DecodeError as exc:
                return self._drop(exc.reason, len(data), exc.offset)
            if not client_accepts(packet.seq, self.last_seq):
                return self._stale(packet.seq, len(data))
            self.last_seq = packet.seq
            status = self._merge(packet)
        self.status = status
        self.stats.messages_in += 1
        return [StatusReceived(status=status)]

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
                gyro = (
                    block.rate_x,
                    block.rate_y,
                    block.rate_z,
                    block.angle_x,
                    block.angle_y,
                    block.angle_z,
                )
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

    def _stale(self, seq: int, size: int) -> list[object]:
        self.stats.extra["stale"] = self.stats.extra.get("stale", 0) + 1
        return self._drop(f"stale sequence {seq} <= {self.last_seq}", size)

    def _drop(self, reason: str, size: int, offset: int = 0) -> list[object]:
        self.stats.drop(reason)
        return [PacketDropped(protocol=PROTOCOL, reason=reason, offset=offset, size=size)]

    # -- time ---------------------------------------------------------------------------------

    def tick(self, now: float) -> list[object]:
        if now >= self._next_send:
            self.send_now()
            self._next_send += self.period
            if self._next_send <= now:
                self._next_send = now + self.period
        return []

    def next_deadline(self) -> float | None:
        return self._next_send

    def datagrams_to_send(self) -> list[tuple[bytes, Address | None]]:
        out, self._out = self._out, []
        for data, _ in out:
            self.stats.bytes_out += len(data)
        return out


def wheel_values(left: float, right: float) -> Sequence[float]:
    """Motor outputs for left/right wheel efforts (forward positive): the right motor is
    mounted mirrored, so its output is negated, as `XRPMotor.setInverted(True)` does."""
    return (left, -right)
