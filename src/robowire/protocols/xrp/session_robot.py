"""The XRP robot side (the firmware's rules), sans-I/O. All of its state logic is in this file.

    state      trigger                                  next      what happens
    SILENT     command accepted, control byte 1         ENABLED   outputs reset, then follow
    SILENT     command accepted, control byte not 1     DISABLED
    DISABLED   ... 1 / not 1                             ENABLED / DISABLED
    ENABLED    ... 1 / not 1                             ENABLED / DISABLED (outputs off)
    DISABLED   watchdog ran out (500 ms, no command)    EXPIRED   sequence max reset to 0
    ENABLED    watchdog ran out                         EXPIRED   outputs off
    EXPIRED    ... 1 / not 1                             ENABLED / DISABLED

The rules, whatever the state (F = the XRP firmware, `wpilibudp.cpp` / `main.cpp`):

* The reply address is the source of the latest datagram, updated before any check; status
  goes there every 50 ms from the first datagram on (even one that is rejected).
* Sequence rule (F `processPacket`): accept if seq > max, or if 65535 - seq < 5; the max resets
  to 0 when the watchdog expires. So the first packet (seq 0) is rejected, and after 65535 the
  robot rejects 0, 1, ... until the watchdog resets it (the firmware's wrap drop-out, kept).
* Enabled only when the control byte is 1; motors and servos follow commands only while
  enabled. On any change of enabled (the control byte, or the watchdog): motors stop, servos
  centre (90 deg), and the encoders count only while enabled (counts kept). DIO 1 (the LED)
  follows commands whatever the state.

The session moves nothing: it emits `CommandReceived` / `EnabledChanged` with the outputs the
firmware drives, and reads what it reports from a `StatusSource` (`robot.Robots`, or the
simulator's `model.Fleet`, which the caller drives with those outputs). Time comes only from
the `now` arguments. When an
outputs change and a status fall due in one `tick`, the tick returns the change alone and the
status stays due (`next_deadline() <= now`), so that the sensors are read after the caller
applied the change.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from typing import Protocol

from robowire.errors import DecodeError
from robowire.protocols.xrp import codec
from robowire.protocols.xrp.codec import DIO, HEADER_SIZE, PROTOCOL, Packet, XRPMotor, XRPServo
from robowire.protocols.xrp.events import (
    CommandReceived,
    EnabledChanged,
    Outputs,
    RobotEvent,
)
from robowire.sequence import Seen, SequenceCounts
from robowire.wire import Address, PacketDropped, SessionStats, transition

STATUS_PERIOD = 0.050  # s, the firmware's MIN_UPDATE_TIME_MS
WATCHDOG_TIMEOUT = 0.500  # s, the firmware's DEFAULT_WATCHDOG_TIMEOUT
DIVISOR = 9_375_000  # encoder ticks per second: 150 MHz / 16 (RP2350 board)
ROBOT_WRAP_WINDOW = 5  # robot accepts seq >= 65531 always
SERVO_CENTRE = 90.0  # degrees; servo value 0.5


class State(enum.Enum):
    SILENT = "silent"  # no command accepted yet
    DISABLED = "disabled"  # watchdog fed, control byte not 1
    ENABLED = "enabled"  # watchdog fed, control byte 1: outputs follow commands
    EXPIRED = "expired"  # watchdog ran out: disabled, still streaming status


class Trigger(enum.Enum):
    ENABLE = "control byte"  # a command accepted with control byte 1
    DISABLE = "control byte not 1"  # a command accepted with any other control byte
    EXPIRE = "watchdog"  # no command accepted for the watchdog's time


TRANSITIONS: dict[State, dict[Trigger, State]] = {
    State.SILENT: {Trigger.ENABLE: State.ENABLED, Trigger.DISABLE: State.DISABLED},
    State.DISABLED: {
        Trigger.ENABLE: State.ENABLED,
        Trigger.DISABLE: State.DISABLED,
        Trigger.EXPIRE: State.EXPIRED,
    },
    State.ENABLED: {
        Trigger.ENABLE: State.ENABLED,
        Trigger.DISABLE: State.DISABLED,
        Trigger.EXPIRE: State.EXPIRED,
    },
    State.EXPIRED: {Trigger.ENABLE: State.ENABLED, Trigger.DISABLE: State.DISABLED},
}
"""State -> trigger -> next state; a pair not in it is a bug (SessionError)."""


class StatusSource(Protocol):
    """Where a robot session's status values come from (`robot.Robots` and `model.Fleet`
    implement it)."""

    def status_values(self, index: int, now: float, divisor: int) -> Sequence[float]:
        """Robot `index`'s sensors at `now`, in `codec.STATUS_FIELDS` order and wire form:
        i32 counts, period numerators `(ticks << 1) | forward` for `divisor` ticks per
        second (or `codec.NO_PERIOD`), the divisor, the button as 0/1, then floats."""
        ...


def robot_accepts(seq: int, max_seq: int) -> bool:
    """The firmware's rule (F `wpilibudp.cpp processPacket`)."""
    return seq > max_seq or 0xFFFF - seq < ROBOT_WRAP_WINDOW


class RobotSession:
    """One XRP robot (row `index` of `sensors`), speaking the firmware's rules."""

    def __init__(
        self,
        sensors: StatusSource,
        index: int = 0,
        *,
        status_period: float = STATUS_PERIOD,
        watchdog: float = WATCHDOG_TIMEOUT,
        divisor: int = DIVISOR,
        status_phase: float | None = None,
    ) -> None:
        self.sensors = sensors
        self.index = index
        # None: the status timer starts with the first datagram (like one robot's free-running
        # timer). A number: status times fall on phase + k * period, so that many robots of
        # one fleet report together and share one physics step and sensor snapshot.
        self.status_phase = status_phase
        self.status_period = status_period
        self.watchdog = watchdog
        self.divisor = divisor
        self.stats = SessionStats()
        self.state = State.SILENT
        self.remote: Address | None = None
        self.max_seq = 0
        self.counts = SequenceCounts()  # the client's commands lost, duplicated, reordered
        self.seq = 0  # our own counter; only a reboot (a new session) resets it
        self.motors = [0.0, 0.0, 0.0, 0.0]
        self.servos = [SERVO_CENTRE] * 4
        self.led = False
        self._fed_until: float | None = None
        self._next_status: float | None = None
        self._out: list[tuple[bytes, Address | None]] = []

    def wire_counts(self) -> dict[str, int]:
        """The client's commands lost, duplicated or reordered on the way."""
        c = self.counts
        return {"lost": c.lost, "duplicated": c.duplicated, "reordered": c.reordered}

    @property
    def enabled(self) -> bool:
        return self.state is State.ENABLED

    def outputs(self) -> Outputs:
        """What the firmware drives now."""
        m, s = self.motors, self.servos
        return Outputs(
            enabled=self.enabled,
            motors=(m[0], m[1], m[2], m[3]),
            servos=(s[0], s[1], s[2], s[3]),
            led=self.led,
        )

    def _move(self, trigger: Trigger, now: float, events: list[RobotEvent]) -> None:
        """The one place the state changes (see `TRANSITIONS`)."""
        new = transition(TRANSITIONS, self.state, trigger, "xrp robot")
        was_enabled = self.enabled
        self.state = new
        if new is State.EXPIRED:
            self.max_seq = 0  # resetState(): a restarted client is accepted again
            self._fed_until = None
            self.stats.extra["watchdog_expiries"] = self.stats.extra.get("watchdog_expiries", 0) + 1
        if self.enabled != was_enabled:
            # motors never jump to stale values on enable, and stop on disable
            self.motors = [0.0, 0.0, 0.0, 0.0]
            self.servos = [SERVO_CENTRE] * 4
            reason = "watchdog" if trigger is Trigger.EXPIRE else "control byte"
            events.append(
                EnabledChanged(
                    time=now, enabled=self.enabled, reason=reason, outputs=self.outputs()
                )
            )

    # -- input --------------------------------------------------------------------------------

    def feed_datagram(self, data: bytes, addr: Address, now: float) -> list[RobotEvent]:
        self.stats.bytes_in += len(data)
        self.remote = addr  # before any check, as the firmware does
        if self._next_status is None:  # the free-running status timer starts with a peer
            self._next_status = now
            if self.status_phase is not None:
                periods = math.ceil((now - self.status_phase) / self.status_period)
                self._next_status = self.status_phase + periods * self.status_period
        events: list[RobotEvent] = []
        self._expire_if_due(now, events)
        if len(data) < HEADER_SIZE:
            return self._drop(events, f"datagram of {len(data)} bytes", len(data))
        try:
            packet = codec.decode_packet(data)
        except DecodeError as exc:
            return self._drop(events, exc.reason, len(data), exc.offset)
        seen = self.counts.see(packet.seq)
        if not robot_accepts(packet.seq, self.max_seq):
            self.stats.extra["stale"] = self.stats.extra.get("stale", 0) + 1
            return self._drop(events, f"stale sequence {packet.seq} <= {self.max_seq}", len(data))
        if seen is not Seen.NEW and seen is not Seen.LATE:  # a client restarted, after expiry
            self.counts.restart()
            self.counts.see(packet.seq)
        self.max_seq = packet.seq
        self._fed_until = now + self.watchdog
        self.stats.messages_in += 1
        self._move(Trigger.ENABLE if packet.control == 1 else Trigger.DISABLE, now, events)
        self._apply(packet)
        events.append(CommandReceived(time=now, packet=packet, outputs=self.outputs()))
        return events

    def _drop(
        self, events: list[RobotEvent], reason: str, size: int, offset: int = 0
    ) -> list[RobotEvent]:
        self.stats.drop(reason)
        events.append(PacketDropped(protocol=PROTOCOL, reason=reason, offset=offset, size=size))
        return events

    def _apply(self, packet: Packet) -> None:
        live = self.enabled
        for block in packet.blocks:
            if isinstance(block, XRPMotor):
                if live and 0 <= block.id < 4 and math.isfinite(block.value):
                    self.motors[block.id] = min(1.0, max(-1.0, block.value))
            elif isinstance(block, XRPServo):
                if live and 4 <= block.id < 8 and math.isfinite(block.value):
                    position = min(1.0, max(0.0, block.value))
                    self.servos[block.id - 4] = float(int(position * 180.0))
            elif isinstance(block, DIO) and block.id == 1:
                self.led = block.value == 1

    # -- time ---------------------------------------------------------------------------------

    def _expire_if_due(self, now: float, events: list[RobotEvent]) -> None:
        if self._fed_until is not None and now >= self._fed_until:
            self._move(Trigger.EXPIRE, self._fed_until, events)

    def tick(self, now: float) -> list[RobotEvent]:
        events: list[RobotEvent] = []
        self._expire_if_due(now, events)
        if events:  # the caller applies the change first; a due status waits for the next tick
            return events
        if self._next_status is not None and self.remote is not None and now >= self._next_status:
            self._out.append((self.status_datagram(now), self.remote))
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

    def status_datagram(self, now: float) -> bytes:
        """The status packet the robot sends at `now` (this uses up one sequence number)."""
        values = self.sensors.status_values(self.index, now, self.divisor)
        data = codec.encode_status(self.seq, values)
        self.seq = (self.seq + 1) & 0xFFFF
        return data
