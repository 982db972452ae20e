from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from robowire.errors import SessionError
from robowire.protocols.xrp import codec
from robowire.protocols.xrp.codec import DIO, Packet, XRPMotor, XRPServo, encode_packet
from robowire.protocols.xrp.events import (
    CommandReceived,
    CommandSent,
    EnabledChanged,
    Outputs,
    StatusReceived,
)
from robowire.protocols.xrp.model import COUNTS_PER_METRE, MAX_WHEEL_SPEED, Fleet
from robowire.protocols.xrp.session_robot import (
    DIVISOR,
    TRANSITIONS,
    RobotSession,
    State,
    Trigger,
    robot_accepts,
)
from robowire.protocols.xrp.session_wpilib import TRANSITIONS as WPILIB_TRANSITIONS
from robowire.protocols.xrp.session_wpilib import ClientSession, client_accepts
from robowire.protocols.xrp.session_wpilib import State as WpilibState
from robowire.wire import PacketDropped

from .pair import CLIENT, ROBOT, Pair, Robot


def command(seq: int, control: int = 1, left: float = 0.0, right: float = 0.0) -> bytes:
    blocks = (XRPMotor(id=0, value=left), XRPMotor(id=1, value=right))
    return encode_packet(Packet(seq=seq, control=control, blocks=blocks))


def test_sequence_rules() -> None:
    assert not robot_accepts(0, 0) and robot_accepts(1, 0)
    assert robot_accepts(65531, 65535) and not robot_accepts(0, 65535)  # the firmware wrap bug
    assert not client_accepts(0, 0) and client_accepts(1, 0)
    assert client_accepts(0, 65535) and client_accepts(2, 65533)
    assert not client_accepts(2, 65532) and not client_accepts(4000, 5003)


def test_robot_silent_until_first_datagram_then_20hz() -> None:
    robot = Robot(Fleet(1))
    assert robot.next_deadline() is None and robot.tick(1.0) == []
    robot.feed_datagram(command(0), CLIENT, 1.0)  # seq 0 is rejected, but the peer is known
    assert robot.state is State.SILENT and robot.stats.dropped == 1
    sent = []
    t = 1.0
    while t < 2.0:
        robot.tick(t)
        sent += robot.datagrams_to_send()
        t += 0.001
    assert 19 <= len(sent) <= 21
    assert all(addr == CLIENT for _, addr in sent)
    seqs = [codec.decode_packet(d).seq for d, _ in sent]
    assert seqs == list(range(len(sent)))


def test_reply_goes_to_latest_sender_even_if_rejected() -> None:
    robot = Robot(Fleet(1))
    robot.feed_datagram(command(5), CLIENT, 0.0)
    other = ("10.0.0.9", 4444)
    events = robot.feed_datagram(command(3), other, 0.01)  # stale, dropped
    assert isinstance(events[-1], PacketDropped)
    robot.tick(0.06)
    assert robot.datagrams_to_send()[-1][1] == other


def test_enable_gating_and_watchdog() -> None:
    fleet = Fleet(1)
    robot = Robot(fleet)
    robot.feed_datagram(command(1, control=0, left=0.5), CLIENT, 0.0)
    assert fleet.command[0, 0] == 0.0 and not robot.enabled  # disabled: motors ignored
    events = robot.feed_datagram(command(2, control=1, left=0.5, right=-0.5), CLIENT, 0.02)
    assert any(isinstance(e, EnabledChanged) and e.enabled for e in events)
    assert fleet.command[0].tolist() == [0.5, -0.5, 0.0, 0.0]
    assert fleet.counting[0]
    servo = encode_packet(Packet(seq=3, control=1, blocks=(XRPServo(id=4, value=0.25),)))
    robot.feed_datagram(servo, CLIENT, 0.04)
    assert fleet.servo[0, 0] == 45.0
    robot.feed_datagram(command(4, control=2, left=0.5), CLIENT, 0.06)  # only 1 enables
    assert not robot.enabled and fleet.command[0, 0] == 0.0 and not fleet.counting[0]
    robot.feed_datagram(command(5, control=1, left=0.7), CLIENT, 0.08)
    assert robot.enabled and fleet.command[0, 0] == pytest.approx(0.7)
    events = robot.tick(0.58)
    assert any(isinstance(e, EnabledChanged) and e.reason == "watchdog" for e in events)
    assert robot.state is State.EXPIRED and not robot.enabled
    assert fleet.command[0].tolist() == [0.0] * 4 and fleet.servo[0, 0] == 90.0
    assert robot.max_seq == 0  # resetState: a restarted client is accepted again
    robot.feed_datagram(command(1, control=1, left=0.3), CLIENT, 0.6)
    assert robot.enabled and fleet.command[0, 0] == pytest.approx(0.3)
    robot.datagrams_to_send()
    robot.tick(0.7)
    assert robot.datagrams_to_send()  # keeps streaming status


def test_led_from_dio_1() -> None:
    fleet = Fleet(1)
    robot = Robot(fleet)
    robot.feed_datagram(
        encode_packet(Packet(seq=1, control=0, blocks=(DIO(id=1, value=1),))), CLIENT, 0.0
    )
    assert fleet.led[0]


def test_bad_datagrams_are_counted_not_raised() -> None:
    robot = Robot(Fleet(1))
    client = ClientSession(ROBOT)
    for data in (b"", b"\x00", b"\x00\x01", b"\x00\x05\x01\x00", b"\x00\x05\x01\x09\x12\x00"):
        assert isinstance(robot.feed_datagram(data, CLIENT, 0.0)[-1], PacketDropped)
        assert isinstance(client.feed_datagram(data, ROBOT, 0.0)[-1], PacketDropped)
    assert robot.stats.dropped == 5 and client.stats.dropped == 5
    good = robot.status_datagram(0.0)
    assert isinstance(client.feed_datagram(good, ("10.0.0.3", 3540), 0.0)[0], PacketDropped)


def test_client_drops_stale_and_handles_wrap() -> None:
    robot = Robot(Fleet(1))
    client = ClientSession(ROBOT, reboots=False)  # WPILib's rule exactly (a driver's)
    seqs = [0, 1, 5003, 4000, 65533, 65534, 65535, 0, 1]
    accepted = []
    for seq in seqs:
        robot.seq = seq
        events = client.feed_datagram(robot.status_datagram(0.0), ROBOT, 0.0)
        accepted.append(isinstance(events[0], StatusReceived))
    assert accepted == [False, True, True, False, True, True, True, True, True]


def test_client_sends_50hz_all_motors_servos_and_dio() -> None:
    client = ClientSession(ROBOT)
    client.set_dio(1, True)
    t = 0.0
    out = []
    while t < 1.0:
        if client.next_deadline() is not None and client.next_deadline() <= t:  # type: ignore[operator]
            client.tick(t)
        out += client.datagrams_to_send()
        t += 0.001
    assert 49 <= len(out) <= 51
    first = codec.decode_packet(out[0][0])
    assert first.seq == 0 and first.control == 0 and len(out[0][0]) == 49
    assert [type(b).__name__ for b in first.blocks] == ["XRPMotor"] * 4 + ["XRPServo"] * 2 + ["DIO"]
    assert codec.decode_packet(out[-1][0]).seq == len(out) - 1


def test_pair_drives_straight_and_odometry_agrees() -> None:
    pair = Pair()
    pair.client.enabled = True
    pair.client.set_motor(0, 0.5)
    pair.client.set_motor(1, -0.5)  # right motor mirrored
    pair.run(3.0)
    status = pair.client.status
    assert status is not None
    left, right = status.encoder_counts[0], status.encoder_counts[1]
    assert left == right and left is not None
    distance = left / COUNTS_PER_METRE
    expected = 0.5 * MAX_WHEEL_SPEED * 3.0
    assert expected * 0.9 < distance < expected
    assert pair.fleet.pose[0, 0] == pytest.approx(distance, abs=0.01)
    rate = status.encoder_rate(0)
    assert rate == pytest.approx(0.5 * MAX_WHEEL_SPEED * COUNTS_PER_METRE, rel=0.02)
    assert status.gyro is not None and status.gyro[5] == pytest.approx(0.0, abs=1e-6)


def test_pair_turns_and_gyro_matches_kinematics() -> None:
    pair = Pair()
    pair.client.enabled = True
    pair.client.set_motor(0, -0.4)
    pair.client.set_motor(1, -0.4)  # right wheel forward, left back: turn left (CCW)
    pair.run(2.0)
    status = pair.client.status
    assert status is not None and status.gyro is not None
    left, right = status.encoder_counts[0], status.encoder_counts[1]
    assert left is not None and right is not None and left < 0 < right
    heading = math.degrees((right - left) / COUNTS_PER_METRE / 0.155)
    assert status.gyro[5] == pytest.approx(heading, abs=2.0)
    assert status.gyro[2] > 0


def test_pair_robot_disables_when_client_stops() -> None:
    pair = Pair()
    pair.client.enabled = True
    pair.client.set_motor(0, 1.0)
    pair.run(1.0)
    assert pair.robot.enabled
    pair.client_alive = False
    stopped = pair.now
    pair.run(0.7)
    changes = [e for e in pair.robot_events if isinstance(e, EnabledChanged) and not e.enabled]
    assert changes and changes[-1].reason == "watchdog"
    assert pair.fleet.command[0, 0] == 0.0
    assert pair.robot.state is State.EXPIRED
    assert pair.now - stopped < 0.75


@given(st.lists(st.binary(max_size=160), max_size=20))
def test_sessions_never_raise_on_random_datagrams(datagrams: list[bytes]) -> None:
    robot = Robot(Fleet(1))
    client = ClientSession(ROBOT)
    for k, data in enumerate(datagrams):
        robot.feed_datagram(data, CLIENT, k * 0.01)
        client.feed_datagram(data, ROBOT, k * 0.01)
        robot.tick(k * 0.01)
        client.tick(k * 0.01)
    total = robot.stats.messages_in + robot.stats.dropped
    assert total == len(datagrams)
    assert client.stats.messages_in + client.stats.dropped == len(datagrams)


def test_client_drops_reply_from_wrong_port() -> None:
    robot = Robot(Fleet(1))
    client = ClientSession(ROBOT)
    robot.seq = 1
    events = client.feed_datagram(robot.status_datagram(0.0), (ROBOT[0], ROBOT[1] + 1), 0.0)
    assert isinstance(events[0], PacketDropped) and "not the robot" in events[0].reason
    assert client.status is None and client.last_seq == 0


def test_robot_wrap_dropout_until_watchdog_resets() -> None:
    fleet = Fleet(1)
    robot = Robot(fleet)
    robot.feed_datagram(command(65534, left=0.5), CLIENT, 0.00)
    robot.feed_datagram(command(65535, left=0.5), CLIENT, 0.02)
    assert robot.enabled
    for k, seq in enumerate((0, 1, 2, 3)):
        events = robot.feed_datagram(command(seq, left=0.5), CLIENT, 0.04 + 0.02 * k)
        assert isinstance(events[-1], PacketDropped)  # the firmware's wrap bug, kept
    robot.tick(0.53)  # 500 ms after the last accepted packet
    assert not robot.enabled and robot.max_seq == 0
    robot.feed_datagram(command(30, left=0.5), CLIENT, 0.54)
    assert robot.enabled and fleet.command[0, 0] == 0.5


class Recorded:
    """Sensors that say what was asked of them."""

    def __init__(self) -> None:
        self.reads: list[tuple[int, float, int]] = []

    def status_values(self, index: int, now: float, divisor: int) -> list[float]:
        self.reads.append((index, now, divisor))
        return [0, codec.NO_PERIOD, divisor] * 4 + [0] + [0.0] * 6 + [0.0, 0.0, 1.0] + [0.0] * 3


def test_robot_session_is_pure_outputs_out_and_sensors_read_at_now() -> None:
    sensors = Recorded()
    robot = RobotSession(sensors, 2)
    assert robot.feed_datagram(command(1, control=0, left=0.5), CLIENT, 10.0)[-1] == (
        CommandReceived(time=10.0, packet=codec.decode_packet(command(1, 0, 0.5)),
                        outputs=Outputs(enabled=False))
    )  # fmt: skip
    events = robot.feed_datagram(command(2, control=1, left=0.5, right=-0.25), CLIENT, 10.02)
    assert events[0] == EnabledChanged(time=10.02, enabled=True, reason="control byte",
                                       outputs=Outputs(enabled=True))  # fmt: skip
    assert isinstance(events[1], CommandReceived) and events[1].enabled
    assert events[1].outputs.motors == (0.5, -0.25, 0.0, 0.0)
    assert sensors.reads == []  # nothing read until a status is due
    robot.tick(10.03)
    assert sensors.reads == [(2, 10.03, DIVISOR)]
    expiry = robot.tick(10.52)  # the watchdog runs out, and a status is due too
    assert expiry == [EnabledChanged(time=10.52, enabled=False, reason="watchdog",
                                     outputs=Outputs(enabled=False))]  # fmt: skip
    deadline = robot.next_deadline()  # the status waits for the caller to apply the change
    assert len(sensors.reads) == 1 and deadline is not None and deadline <= 10.52
    assert robot.tick(10.52) == [] and sensors.reads[-1] == (2, 10.52, DIVISOR)


def test_every_robot_state_change_is_in_the_table() -> None:
    assert set(TRANSITIONS) == set(State)
    robot = RobotSession(Recorded())
    with pytest.raises(SessionError, match=r"cannot take .EXPIRE. in state SILENT"):
        robot._move(Trigger.EXPIRE, 0.0, [])
    assert set(WPILIB_TRANSITIONS) == set(WpilibState)
    client = ClientSession(ROBOT)
    assert client.state is WpilibState.WAITING
    robot.seq = 1
    client.feed_datagram(robot.status_datagram(0.0), ROBOT, 0.0)
    assert client.state is WpilibState.RECEIVING


def test_client_says_what_it_sends_and_takes_in_what_a_capture_shows_it_sent() -> None:
    client = ClientSession(ROBOT)
    client.enabled = True
    client.set_motor(1, -0.5)
    (sent,) = client.tick(0.0)
    assert sent == CommandSent(seq=0, enabled=True, motors=(0.0, -0.5, 0.0, 0.0))
    assert client.tick(0.001) == []
    other = ClientSession(ROBOT)
    (seen,) = other.feed_sent_datagram(client.datagrams_to_send()[0][0], 0.0)
    assert seen == sent
    assert isinstance(other.feed_sent_datagram(b"\x00\x01\x00\x05", 0.0)[0], PacketDropped)
