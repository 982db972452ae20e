"""Batched ingest, bytes alone: a wake-up's datagrams decode as one batch, runs of one
sender's reports decode as views with the same values as the general path, and one adapter
apply() of several senders and kinds makes as few world updates as the data allows."""

from __future__ import annotations

import numpy as np
import pytest

from robowire.protocols.vrpn import (
    Role,
    State,
    TrackerReports,
    VrpnSession,
    encode_cookie,
    encode_frame,
)
from robowire.protocols.vrpn.adapter import VrpnAdapter
from robowire.protocols.vrpn.codec import encode_name
from robowire.protocols.vrpn.messages import TrackerAcceleration, TrackerPosQuat, TrackerVelocity
from robowire.wire import PacketDropped
from robowire.world import Update, World

POS, VEL, ACC = TrackerPosQuat.WIRE_NAME, TrackerVelocity.WIRE_NAME, TrackerAcceleration.WIRE_NAME
TYPE_IDS = {POS: 0, VEL: 1, ACC: 2}
SENDER_IDS = {"A": 0, "B": 1}
PEER = ("127.0.0.1", 40001)


def connected_client() -> VrpnSession:
    """A client session that has the server's cookie and descriptions (senders A, B)."""
    client = VrpnSession(Role.CLIENT, udp_inbound=("127.0.0.1", 40002))
    head = encode_cookie()
    for name, sender_id in SENDER_IDS.items():
        head += encode_frame(sender_id, -1, encode_name(name))
    for name, type_id in TYPE_IDS.items():
        head += encode_frame(type_id, -2, encode_name(name))
    client.feed(head, 0.0)
    assert client.state is State.CONNECTED
    return client


def pose(sender: str, sensor: int, x: float, t: float = 10.0) -> bytes:
    body = TrackerPosQuat(sensor=sensor, position=(x, 2.0, 3.0), quaternion=(0.0, 0.0, 0.6, 0.8))
    sec, usec = int(t), round((t - int(t)) * 1e6)
    return encode_frame(SENDER_IDS[sender], TYPE_IDS[POS], body.encode(), sec=sec, usec=usec)


def velocity(sender: str, sensor: int, vx: float, t: float = 10.0) -> bytes:
    body = TrackerVelocity(sensor=sensor, velocity=(vx, 0.5, 0.25), velocity_quaternion_dt=0.1)
    return encode_frame(SENDER_IDS[sender], TYPE_IDS[VEL], body.encode(), sec=int(t))


def acceleration(sender: str, sensor: int, ax: float, t: float = 10.0) -> bytes:
    body = TrackerAcceleration(sensor=sensor, acceleration=(ax, 9.0, 8.0))
    return encode_frame(SENDER_IDS[sender], TYPE_IDS[ACC], body.encode(), sec=int(t))


def batches(events: list[object]) -> list[TrackerReports]:
    return [e for e in events if isinstance(e, TrackerReports)]


def updates_of(world: World, events: list[object], receive_time: float = 100.0) -> list[Update]:
    """What one apply() of `events` publishes, every update as written."""
    adapter = VrpnAdapter(world, "src")
    with world.subscribe(every_update=True) as sub:
        adapter.apply(events, receive_time)  # type: ignore[arg-type]
        return [item for item in sub.pull() if isinstance(item, Update)]


def test_a_wake_ups_datagrams_decode_as_one_batch_per_sender_and_kind() -> None:
    client = connected_client()
    datagrams = [
        (pose("A", 0, 1.0) + pose("A", 1, 2.0) + pose("B", 0, 3.0), PEER),
        (pose("B", 1, 4.0) + velocity("A", 0, 5.0), PEER),
        (pose("A", 0, 6.0), PEER),
    ]
    events = client.feed_datagrams(datagrams, 1.0)
    got = {(b.sender, b.kind): b for b in batches(events)}
    assert sorted(got) == [("A", POS), ("A", VEL), ("B", POS)]
    a = got[("A", POS)]
    assert a.sensor.tolist() == [0, 1, 0]  # arrival order kept within a sender
    assert a.vector[:, 0].tolist() == [1.0, 2.0, 6.0]
    assert a.order.tolist() == sorted(a.order.tolist())
    assert got[("B", POS)].vector[:, 0].tolist() == [3.0, 4.0]
    assert got[("A", VEL)].vector.tolist() == [[5.0, 0.5, 0.25]]
    assert got[("A", VEL)].dt is not None and got[("A", VEL)].dt.tolist() == [0.1]
    assert client.stats.messages_in == 6 + 5  # the reports and the five descriptions


def test_a_bad_datagram_in_a_batch_is_dropped_alone() -> None:
    client = connected_client()
    good = pose("A", 0, 1.0) + pose("A", 1, 2.0)
    events = client.feed_datagrams(
        [(good, PEER), (good[:-8], PEER), (pose("B", 3, 7.0), PEER)], 1.0
    )
    assert sum(isinstance(e, PacketDropped) for e in events) == 1
    reported = sorted((b.sender, int(s)) for b in batches(events) for s in b.sensor)
    assert reported == [("A", 0), ("A", 1), ("B", 3)]


@pytest.mark.parametrize("split", [1, 7, 88, 100, 880])
def test_report_runs_decode_like_the_general_path(split: int) -> None:
    """A read of one sender's poses (fast path) gives what byte-wise feeding (general path)
    gives, values and header times included."""
    stream = b"".join(pose("A", i, float(i), t=10.5 + i) for i in range(10))
    whole = connected_client()
    (run,) = batches(whole.feed(stream, 0.0))
    pieces = connected_client()
    parts = [
        b
        for i in range(0, len(stream), split)
        for b in batches(pieces.feed(stream[i : i + split], 0))
    ]
    assert sum(len(b) for b in parts) == len(run) == 10
    for column in ("sensor", "vector", "quaternion", "time", "order"):
        joined = np.concatenate([getattr(b, column) for b in parts])
        assert np.array_equal(getattr(run, column), joined), column
    assert run.time.tolist() == [10.5 + i for i in range(10)]
    assert run.quaternion.tolist()[0] == [0.0, 0.0, 0.6, 0.8]


def test_one_apply_of_several_senders_and_kinds_is_one_world_update() -> None:
    client = connected_client()
    frame = b"".join(
        pose(s, i, 10.0 * i, t=10.0)
        + velocity(s, i, 20.0 * i, t=11.0)
        + acceleration(s, i, 30.0 * i, t=12.0)
        for s in ("A", "B")
        for i in range(3)
    )
    events = client.feed_datagrams([(frame[:840], PEER), (frame[840:], PEER)], 1.0)  # per sender
    assert len(batches(events)) == 6  # two senders x three kinds
    world = World()
    (update,) = updates_of(world, events)
    assert len(update) == 6
    assert {"position", "orientation", "velocity", "acceleration_x"} <= update.fields
    device = world.device("src", "B/2")
    assert device.position == (20.0, 2.0, 3.0)
    assert device.orientation == pytest.approx((0.8, 0.0, 0.0, 0.6))  # w, x, y, z
    assert device.velocity == (40.0, 0.5, 0.25)
    assert device.telemetry["acceleration_x"] == (60.0, "m/s2")
    assert device.source_time == 12.0  # the newest of its reports
    assert device.receive_time == 100.0


def test_slots_that_got_only_some_kinds_keep_their_other_columns() -> None:
    world = World()
    client = connected_client()
    first = b"".join(pose("A", i, 1.0) + velocity("A", i, 2.0) for i in range(3))
    updates_of(world, client.feed(first, 0.0))
    # now every sensor gets a pose, sensor 1 alone a velocity and an acceleration
    second = b"".join(pose("A", i, 5.0 + i) for i in range(3))
    second += velocity("A", 1, 7.0) + acceleration("A", 1, 9.0)
    (update,) = updates_of(world, client.feed(second, 0.0))
    assert len(update) == 3
    a0, a1 = world.device("src", "A/0"), world.device("src", "A/1")
    assert a0.position == (5.0, 2.0, 3.0) and a0.velocity == (2.0, 0.5, 0.25)  # kept
    assert "acceleration_x" not in a0.telemetry  # never given: still unknown
    assert a1.position == (6.0, 2.0, 3.0) and a1.velocity == (7.0, 0.5, 0.25)
    assert a1.telemetry["acceleration_x"] == (9.0, "m/s2")


def test_a_slot_without_a_pose_is_not_given_an_orientation() -> None:
    world = World()
    client = connected_client()
    events = client.feed(pose("A", 0, 1.0) + velocity("A", 1, 2.0), 0.0)
    updates = updates_of(world, events)
    assert len(updates) == 2  # one per kind: a merged one would give A/1 an orientation
    assert world.device("src", "A/1").orientation is None
    assert world.device("src", "A/1").velocity == (2.0, 0.5, 0.25)
    assert world.device("src", "A/0").orientation is not None


# -- interleaved records (pose, velocity, acceleration per sensor, as C++ trackers send) -------


def interleaved(senders: str = "A", sensors: int = 10, t0: float = 10.5) -> list[bytes]:
    """The messages of one frame: per sensor (and sender) its pose, velocity, acceleration."""
    out: list[bytes] = []
    for i in range(sensors):
        for sender in senders:
            t = t0 + i * 0.001
            out += [pose(sender, i, i + 0.5, t), velocity(sender, i, -i, t)]
            out.append(acceleration(sender, i, 2.0 * i, t))
    return out


def general(monkeypatch: pytest.MonkeyPatch) -> None:
    """Turn the report fast path off: every read takes the scan + gather path."""
    monkeypatch.setattr(VrpnSession, "_report_run", lambda self, work, start, *a, **k: start)


def summary(events: list[object]) -> list[object]:
    """Events as comparable values (a TrackerReports batch as its columns)."""
    out: list[object] = []
    for e in events:
        if isinstance(e, TrackerReports):
            dt = None if e.dt is None else e.dt.tolist()
            columns = (e.sensor, e.vector, e.quaternion, e.time, e.order)
            out.append((e.sender, e.kind, dt, *(c.tolist() for c in columns)))
        else:
            out.append(e)
    return out


def per_kind(events: list[object]) -> dict[tuple[str, str], list[object]]:
    """Every report's values by (sender, kind), in order, however the batches were cut."""
    found: dict[tuple[str, str], list[object]] = {}
    for e in batches(events):
        rows = found.setdefault((e.sender, e.kind), [])
        for i in range(len(e)):
            dt = None if e.dt is None else float(e.dt[i])
            rows.append(
                (
                    int(e.sensor[i]),
                    e.vector[i].tolist(),
                    e.quaternion[i].tolist(),
                    dt,
                    float(e.time[i]),
                    int(e.order[i]),
                )
            )
    return found


def feeds(messages: list[bytes], how: str) -> list[object]:
    """A fresh connected client fed `messages`: one TCP read, one datagram, or datagrams of
    at most 1472 bytes of whole messages (as a server packs them), in one wake-up."""
    client = connected_client()
    if how == "tcp":
        return list(client.feed(b"".join(messages), 1.0))
    if how == "udp":
        return list(client.feed_datagram(b"".join(messages), PEER, 1.0))
    grams: list[bytes] = [b""]
    for m in messages:
        if len(grams[-1]) + len(m) > 1472:
            grams.append(b"")
        grams[-1] += m
    return list(client.feed_datagrams([(g, PEER) for g in grams], 1.0))


HOWS = ["tcp", "udp", "datagrams"]


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("senders", ["A", "AB", "BA"])
@pytest.mark.parametrize("sensors", [10, 70])  # 70 records: more than one struct call checks
def test_interleaved_kinds_decode_like_the_general_path(
    how: str, senders: str, sensors: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages = interleaved(senders, sensors) + interleaved(senders, sensors=4, t0=11.0)
    fast = feeds(messages, how)
    assert len(batches(fast)) == 3 * len(senders)  # one batch per sender and kind
    general(monkeypatch)
    assert summary(fast) == summary(feeds(messages, how))


def test_interleaved_kinds_fed_byte_by_byte_give_the_same_reports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stream = b"".join(interleaved("AB", sensors=3))
    whole = per_kind(feeds([stream], "tcp"))
    client = connected_client()
    pieces = [e for i in range(len(stream)) for e in client.feed(stream[i : i + 1], 1.0)]
    assert per_kind(pieces) == whole
    general(monkeypatch)
    assert per_kind(feeds([stream], "tcp")) == whole
    assert sum(len(rows) for rows in whole.values()) == 18


def padded_pose(sender: str, sensor: int, x: float) -> bytes:
    """A pose whose body has 4 bytes more than a Pos_Quat's (length 92, padded to 96)."""
    body = TrackerPosQuat(sensor=sensor, position=(x, 2.0, 3.0), quaternion=(0.0, 0.0, 0.6, 0.8))
    return encode_frame(SENDER_IDS[sender], TYPE_IDS[POS], body.encode() + b"\x01\x02\x03\x04")


def short_pose(sender: str) -> bytes:
    """A Pos_Quat message whose body is cut short: the general path drops it."""
    return encode_frame(SENDER_IDS[sender], TYPE_IDS[POS], bytes(32))


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize(
    "odd",
    [
        padded_pose("A", 7, 70.0),
        short_pose("A"),
        encode_frame(SENDER_IDS["A"], 9, b"undescribed type"),
        encode_frame(5, TYPE_IDS[VEL], bytes(72)),  # an undescribed sender
    ],
    ids=["padded", "short", "undescribed-type", "undescribed-sender"],
)
@pytest.mark.parametrize("sensors", [4, 70])
def test_interleaved_kinds_with_an_odd_message_inside_decode_like_the_general_path(
    how: str, odd: bytes, sensors: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages = interleaved("A", sensors=sensors)
    messages.insert(5, odd)  # in the middle of the second sensor's record
    fast = feeds(messages, how)
    general(monkeypatch)
    slow = feeds(messages, how)
    assert per_kind(fast) == per_kind(slow)
    others = [e for e in summary(fast) if not isinstance(e, tuple)]
    assert others == [e for e in summary(slow) if not isinstance(e, tuple)]
    if how != "tcp" or sensors <= 64:
        assert summary(fast) == summary(slow)
    # (a long TCP read: the records before the odd one are a run of their own, as batches)


def test_datagrams_cut_inside_a_record_decode_like_the_general_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    messages = interleaved("A", sensors=4)
    grams = [b"".join(messages[:2]), b"".join(messages[2:7]), b"".join(messages[7:])]
    fast = connected_client().feed_datagrams([(g, PEER) for g in grams], 1.0)
    general(monkeypatch)
    slow = connected_client().feed_datagrams([(g, PEER) for g in grams], 1.0)
    assert summary(list(fast)) == summary(list(slow))
    assert len(batches(list(fast))) == 3


def test_a_whole_frame_of_every_kind_writes_what_one_batch_at_a_time_writes() -> None:
    """One apply of an interleaved frame (one update) leaves the table as applying each
    kind's batch on its own does, but for the source time: the newest of a sensor's reports."""
    events = feeds(interleaved("AB", sensors=5), "datagrams")
    assert len(batches(events)) == 6
    together, apart = World(), World()
    assert len(updates_of(together, events)) == 1
    one_by_one = VrpnAdapter(apart, "src")
    for batch in batches(events):
        one_by_one.tracker(batch, 100.0)
    a, b = together.table("src"), apart.table("src")
    assert list(a.ids) == list(b.ids) and len(a.ids) == 10
    order = [list(b.ids).index(device) for device in a.ids]
    for column in ("position", "orientation", "velocity", "receive_time"):
        assert np.array_equal(getattr(a, column)[: len(a.ids)], getattr(b, column)[order]), column
    newest: dict[str, float] = {}
    for batch in batches(events):
        for sensor, t in zip(batch.sensor.tolist(), batch.time.tolist(), strict=True):
            device = f"{batch.sender}/{sensor}"
            newest[device] = max(newest.get(device, -1.0), t)
    assert a.source_time[: len(a.ids)].tolist() == [newest[device] for device in a.ids]
    for name in ("acceleration_x", "acceleration_y", "acceleration_z"):
        assert np.array_equal(a.telemetry[name][: len(a.ids)], b.telemetry[name][order]), name
