"""The WPILib side's batch path (`ClientSession.feed_datagrams`, `codec.decode_statuses`, the
adapter's `StatusBatch`): the same state, counts and events as feeding the datagrams one by one,
whatever the wake-ups hold."""

from __future__ import annotations

import asyncio
import math
import socket
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robowire.protocols.xrp import codec
from robowire.protocols.xrp.adapter import XrpAdapter
from robowire.protocols.xrp.client import start_client
from robowire.protocols.xrp.events import StatusBatch, StatusReceived
from robowire.protocols.xrp.model import Fleet
from robowire.protocols.xrp.session_robot import RobotSession
from robowire.protocols.xrp.session_wpilib import BATCH_MIN, ClientSession
from robowire.sequence import PeerRestarted
from robowire.wire import Address, PacketDropped
from robowire.world import World
from support import until

from .pair import ROBOT

OTHER = ("10.0.0.9", 3540)


def _moving_values(n: int) -> list[list[float]]:
    """`n` statuses (values in `codec.STATUS_FIELDS` order) of a robot driving in a curve."""
    fleet = Fleet(1)
    robot = RobotSession(fleet)
    fleet.counting[0] = True
    fleet.command[0] = (0.6, -0.3, 0.2, 0.0)
    out = []
    for k in range(n):
        decoded = codec.decode_status(robot.status_datagram(k * 0.05))
        assert decoded is not None
        out.append(list(decoded[1]))
    return out


VALUES = _moving_values(64)


def _status(seq: int) -> bytes:
    return codec.encode_status(seq, VALUES[seq % len(VALUES)])


def _flat(events: list[Any]) -> list[tuple[object, ...]]:
    """Events as one-by-one feeding gives them: a batch is its rows' statuses."""
    out: list[tuple[object, ...]] = []
    for event in events:
        if isinstance(event, StatusBatch):
            out += [("status", int(seq)) for seq in event.rows["seq"]]
            out.append(("snapshot", event.status))
        elif isinstance(event, StatusReceived):
            out.append(("status", event.status.seq))
        elif isinstance(event, PacketDropped):
            out.append(("drop", event.reason))
        else:
            assert isinstance(event, PeerRestarted)
            out.append(("restart", event.reason))
    return out


def _state(session: ClientSession) -> tuple[object, ...]:
    s = session.sequence
    return (
        session.status,
        session.state,
        session.wire_counts(),
        session.stats,
        (s.last, s.heard, s.restarts, s.restarted, s.counts, s._candidate, s._leap),
    )


def _both(wakeups: list[list[tuple[bytes, Address]]]) -> tuple[ClientSession, list[Any]]:
    """Feed the wake-ups batched and one by one; assert the two agree; the batched side."""
    batched, single = ClientSession(ROBOT), ClientSession(ROBOT)
    events: list[Any] = []
    for k, wakeup in enumerate(wakeups):
        now = 0.05 * k
        got = batched.feed_datagrams(wakeup, now)
        expected: list[Any] = []
        for data, addr in wakeup:
            expected += single.feed_datagram(data, addr, now)
        flat, expected_flat = _flat(got), _flat(expected)
        snapshots = [e for e in flat if e[0] == "snapshot"]
        assert [e for e in flat if e[0] != "snapshot"] == expected_flat
        for snapshot in snapshots:
            assert snapshot[1] == single.status
        assert _state(batched) == _state(single)
        events += got
    return batched, events


def test_a_run_of_statuses_is_one_batch_with_the_generic_decoders_values() -> None:
    seqs = list(range(1, 1 + 3 * BATCH_MIN))
    first = [(_status(0), ROBOT), (_status(1), ROBOT)]  # seq 0: dropped (WPILib's rule)
    session, events = _both([first, [(_status(s), ROBOT) for s in seqs[1:]]])
    batch = events[-1]
    assert isinstance(batch, StatusBatch) and len(events) == 3
    assert len(batch.rows) == len(seqs) - 1
    assert batch.status.seq == seqs[-1] == session.last_seq
    for row, seq in zip(batch.rows, seqs[1:], strict=True):
        packet = codec.decode_packet(_status(seq))  # the block-by-block decoder's reading
        assert int(row["seq"]) == packet.seq
        blocks = {(type(b).__name__, getattr(b, "id", None)): b for b in packet.blocks}
        for i in range(4):
            encoder = blocks[("Encoder", i)]
            assert (row[f"encoder{i}_count"], row[f"encoder{i}_period"]) == (
                encoder.count,
                encoder.period,
            )
        gyro = blocks[("Gyro", None)]
        assert float(row["angle_z"]) == gyro.angle_z and float(row["rate_x"]) == gyro.rate_x
        assert float(row["analog2"]) == blocks[("AnalogIn", 2)].value


@pytest.mark.parametrize(
    "wakeup",
    [
        [_status(s) for s in range(2, 40) if s != 20],  # one lost on the wire
        [_status(s) for s in range(2, 40)] + [_status(39)],  # a duplicate
        [_status(s) for s in range(2, 20)] + [_status(s) for s in range(0, 20)],  # a reboot
        [_status(s) for s in range(2, 20)] + [b"\x00\x05\x00\x02\x99"],  # not a status
        [_status(s) for s in range(2, 20)] + [b"garbage"],  # too short
    ],
    ids=["gap", "duplicate", "reboot", "other-layout", "bad"],
)
def test_any_other_wakeup_is_fed_one_by_one(wakeup: list[bytes]) -> None:
    _both([[(_status(0), ROBOT), (_status(1), ROBOT)], [(data, ROBOT) for data in wakeup]])


def test_a_datagram_from_elsewhere_is_dropped_as_one_by_one() -> None:
    wakeup = [(_status(s), ROBOT) for s in range(2, 30)]
    wakeup[5] = (wakeup[5][0], OTHER)
    _, events = _both([[(_status(0), ROBOT), (_status(1), ROBOT)], wakeup])
    assert any(isinstance(e, PacketDropped) and "not the robot" in e.reason for e in events)


def test_the_first_wakeup_keeps_wpilibs_rule_and_the_wrap_is_one_run() -> None:
    _, events = _both([[(_status(s), ROBOT) for s in range(0, 40)]])  # seq 0 dropped
    assert isinstance(events[0], PacketDropped)
    session = ClientSession(ROBOT)
    session.feed_datagrams([(_status(65530), ROBOT)], 0.0)
    events = session.feed_datagrams(
        [(_status(s & 0xFFFF), ROBOT) for s in range(65531, 65560)], 0.05
    )
    assert len(events) == 1 and isinstance(events[0], StatusBatch)
    assert session.last_seq == 65559 & 0xFFFF and session.wire_counts()["lost"] == 0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                ["next", "next", "next", "skip", "back", "leap", "restart", "other", "bad"]
            ),
            st.integers(1, 40),
        ),
        min_size=1,
        max_size=12,
    ),
    st.integers(0, 0xFFFF),
)
def test_batched_and_one_by_one_agree_on_any_stream(
    steps: list[tuple[str, int]], start: int
) -> None:
    wakeups, seq = [], start
    for kind, n in steps:
        wakeup: list[tuple[bytes, Address]] = []
        for _ in range(n):
            if kind == "skip":
                seq += 3
            elif kind == "back":
                seq -= 2
            elif kind == "leap":  # a damaged number, or a real leap once one follows it
                seq += 5000
            elif kind == "restart":
                seq, kind = 0, "next"
            seq &= 0xFFFF
            if kind == "other":
                wakeup.append((_status(seq), OTHER))
            elif kind == "bad":
                wakeup.append((_status(seq)[:-1], ROBOT))
            else:
                wakeup.append((_status(seq), ROBOT))
            seq += 1
        wakeups.append(wakeup)
    _both(wakeups)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=140), min_size=1, max_size=20))
def test_decode_statuses_takes_any_bytes(datagrams: list[bytes]) -> None:
    rows = codec.decode_statuses(datagrams)
    if rows is None:
        assert any(codec.decode_status(d) is None for d in datagrams)
        return
    for row, data in zip(rows, datagrams, strict=True):
        decoded = codec.decode_status(data)
        assert decoded is not None and decoded[0] == row["seq"]
        same = [float(row[name]) == float(v) or (math.isnan(v) and math.isnan(row[name]))
                for name, v in zip(codec.STATUS_FIELDS, decoded[1], strict=True)]  # fmt: skip
        assert all(same)


def test_the_adapter_writes_a_batch_as_its_statuses_one_by_one() -> None:
    seqs = list(range(1, 120))
    batched, single = ClientSession(ROBOT), ClientSession(ROBOT)
    worlds = World(), World()
    adapters = XrpAdapter(worlds[0], "xrp@test"), XrpAdapter(worlds[1], "xrp@test")
    for k, start in enumerate(range(0, len(seqs), 30)):
        chunk = [(_status(s), ROBOT) for s in seqs[start : start + 30]]
        adapters[0].apply(batched.feed_datagrams(chunk, 1.0 + k), 1.0 + k)
        for data, addr in chunk:
            adapters[1].apply(single.feed_datagram(data, addr, 1.0 + k), 1.0 + k)
    a, b = (world.device("xrp@test", "xrp") for world in worlds)
    assert a.position is not None and b.position is not None
    assert np.allclose(a.position, b.position, rtol=1e-12, atol=1e-12)
    assert a.position != (0.0, 0.0, 0.0)
    assert a.orientation == pytest.approx(b.orientation, abs=1e-12)
    assert a.velocity == pytest.approx(b.velocity, abs=1e-12)
    assert a.telemetry == b.telemetry


@pytest.mark.timeout(30)
async def test_a_burst_on_a_real_socket_is_read_in_one_wakeup_as_one_batch() -> None:
    """127.0.0.1: a robot that sends 100 statuses at once (the WPILib side was busy); the UDP
    driver reads them in one wake-up and the session takes them as one batch, none lost."""
    robot = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    robot.bind(("127.0.0.1", 0))
    robot.setblocking(False)
    address = robot.getsockname()
    session = ClientSession(address)
    events: list[Any] = []
    task, _driver = await start_client(session, events.extend, address)
    try:
        _, peer = await asyncio.wait_for(
            asyncio.get_running_loop().sock_recvfrom(robot, 2048), 5
        )  # its first command: where the WPILib side is
        robot.sendto(_status(0), peer)  # dropped (WPILib's rule)
        robot.sendto(_status(1), peer)
        await until(lambda: session.last_seq == 1, "the robot's first status")
        for seq in range(2, 102):  # no await between: all queued before the loop reads
            robot.sendto(_status(seq), peer)
        await until(lambda: session.last_seq == 101, "the burst of 100 statuses")
        batches = [e for e in events if isinstance(e, StatusBatch)]
        assert len(batches) == 1 and batches[0].rows["seq"].tolist() == list(range(2, 102))
        assert session.stats.messages_in == 101 and session.wire_counts()["lost"] == 0
        assert session.status is not None and session.status.seq == 101
        assert list(session.status.gyro or ()) == VALUES[101 % len(VALUES)][13:19]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        robot.close()
