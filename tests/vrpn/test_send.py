"""The vectorised send side, bytes alone: a frame encoded once (`ReportEncoder`) and queued by
`send_batch` gives exactly the bytes the per-report encoder (`send` of one message object
each) gave, on TCP and in UDP datagrams, for any seq a session is at."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from robowire.errors import ConfigError
from robowire.protocols.vrpn import (
    Role,
    TrackerAcceleration,
    TrackerPosQuat,
    TrackerVelocity,
    VrpnSession,
    encode_cookie,
)
from robowire.protocols.vrpn.adapter import (
    MOTION_DEFAULTS,
    REPORTS,
    tracker_kinds,
    tracker_reports,
    tracker_values,
)
from robowire.protocols.vrpn.codec import scan, split_time
from robowire.protocols.vrpn.messages import (
    AnalogChannel,
    Body,
    ButtonChange,
    ButtonStates,
    DialUpdate,
    Ping,
    TextMessage,
    TrackerSetUpdateRate,
)
from robowire.protocols.vrpn.model import DeviceModel, Frame
from robowire.protocols.vrpn.registry import (
    SERVER_TYPE_NAMES,
    FrameBatch,
    ReportEncoder,
    split_times,
)

WALL = 1_700_000_000.123456


def connected(udp: bool = False, earlier: int = 0) -> VrpnSession:
    """A server session past the handshake, its queues empty, `earlier` messages already sent
    on the channel the reports take (so its seq is not where a new one starts)."""
    session = VrpnSession(
        Role.SERVER,
        senders=["Tracker0", "Other"],
        types=SERVER_TYPE_NAMES,
        udp_inbound=("127.0.0.1", 40001) if udp else None,
        now=0.0,
    )
    session.feed(encode_cookie(), 0.0)
    if udp:
        session.peer_udp = ("127.0.0.1", 40002)
    for _ in range(earlier):
        session.send("Tracker0", Ping(), time=WALL, reliable=not udp)
    session.data_to_send()
    session.datagrams_to_send()
    return session


def per_report(session: VrpnSession, sender: str, messages: list[Body], times: list[float]) -> None:
    for message, time in zip(messages, times, strict=True):
        session.send(sender, message, time=time, reliable=False)


def frame_batch(
    session: VrpnSession, frame_time: float, pose_only: bool
) -> tuple[Frame, FrameBatch]:
    model = DeviceModel(10, 1000, pose_only=pose_only)
    frame = model.frame(12.345)
    kinds = tracker_kinds(frame)
    encoder = ReportEncoder(kinds, [None, MOTION_DEFAULTS, MOTION_DEFAULTS])
    types = tuple(session.register_type(k) for k in kinds)
    values = tracker_values(frame)
    batch = encoder.encode(
        session.register_sender("Tracker0"), types, frame.sensors, values, time=frame_time
    )
    return frame, batch


@pytest.mark.parametrize("pose_only", [False, True])
@pytest.mark.parametrize("earlier", [0, 7])
def test_sim_frame_on_tcp_is_the_per_report_bytes(pose_only: bool, earlier: int) -> None:
    vectorised, reference = connected(earlier=earlier), connected(earlier=earlier)
    frame, batch = frame_batch(vectorised, WALL, pose_only)
    vectorised.send_batch(batch)
    reports = tracker_reports(frame)
    per_report(reference, "Tracker0", reports, [WALL] * len(reports))
    expected = reference.data_to_send()
    assert len(expected) == 10 * (88 if pose_only else 280)
    assert vectorised.data_to_send() == expected
    assert vectorised.stats.messages_out == reference.stats.messages_out
    # the session's seq goes on from where the batch left it, as after the per-report sends
    vectorised.send("Tracker0", Ping(), time=WALL, reliable=False)
    reference.send("Tracker0", Ping(), time=WALL, reliable=False)
    assert vectorised.data_to_send() == reference.data_to_send()


@pytest.mark.parametrize("earlier", [0, 3])
def test_sim_frame_in_udp_datagrams_is_the_per_report_bytes(earlier: int) -> None:
    vectorised, reference = connected(True, earlier), connected(True, earlier)
    vectorised.send("Other", Ping(), time=WALL, reliable=False)  # a message queued before
    reference.send("Other", Ping(), time=WALL, reliable=False)
    frame, batch = frame_batch(vectorised, WALL, False)
    vectorised.send_batch(batch)
    reports = tracker_reports(frame)
    per_report(reference, "Tracker0", reports, [WALL] * len(reports))
    expected = reference.datagrams_to_send()
    assert len(expected) == 2 and all(len(d) <= 1472 for d, _ in expected)
    assert vectorised.datagrams_to_send() == expected
    assert vectorised.data_to_send() == reference.data_to_send() == b""


def test_one_batch_serves_sessions_at_different_seqs() -> None:
    """The server encodes once and each session writes its own seq into the same buffer."""
    sessions = [connected(earlier=n) for n in (0, 5, 2)]
    references = [connected(earlier=n) for n in (0, 5, 2)]
    frame, batch = frame_batch(sessions[0], WALL, False)
    for session in sessions:
        session.send_batch(batch)
    reports = tracker_reports(frame)
    for session, reference in zip(sessions, references, strict=True):
        per_report(reference, "Tracker0", reports, [WALL] * len(reports))
        assert session.data_to_send() == reference.data_to_send()


def test_rows_with_their_own_senders_and_times() -> None:
    """The sink's shape: one Pos_Quat per row, each row its own tracker and header time."""
    session, reference = connected(), connected()
    rng = np.random.default_rng(1)
    n = 6
    positions, quaternions = rng.normal(size=(n, 3)), rng.normal(size=(n, 4))
    times = WALL + rng.random(n) * 10
    times[2] = 1_700_000_000.9999997  # rounds up into the next second
    times[3] = -1.0  # no time: a zero timeval
    names = ["Tracker0", "Other", "Tracker0", "Other", "Other", "Tracker0"]
    sensors = [0, 3, 1, 0, 2, 5]
    encoder = ReportEncoder(REPORTS[:1])
    ids = [session.register_sender(name) for name in names]
    batch = encoder.encode(
        ids,
        [session.register_type(REPORTS[0])],
        sensors,
        [np.concatenate([positions, quaternions], axis=1)],
        time=times,
    )
    session.send_batch(batch)
    for k in range(n):
        reference.send(
            names[k],
            TrackerPosQuat(
                sensor=sensors[k],
                position=tuple(positions[k].tolist()),
                quaternion=tuple(quaternions[k].tolist()),
            ),
            time=float(times[k]),
            reliable=False,
        )
    assert session.data_to_send() == reference.data_to_send()


def test_rows_sharing_one_header_time_are_the_per_report_bytes() -> None:
    """A sink's usual pull: every row of a frame has the same header time, given as an array
    (one per row); the bytes are those of per-report sends, also when the encoder's buffer
    held rows of distinct times before and after."""
    session, reference = connected(), connected()
    rng = np.random.default_rng(2)
    n = 5
    values = np.concatenate([rng.normal(size=(n, 3)), rng.normal(size=(n, 4))], axis=1)
    encoder = ReportEncoder(REPORTS[:1])
    ids = [session.register_sender("Tracker0")] * n
    types = [session.register_type(REPORTS[0])]
    rounding_up = 1_700_000_000.9999997  # rounds up into the next second
    for times in (
        np.full(n, rounding_up),
        WALL + np.arange(n) * 0.001,
        np.full(n, WALL),
        np.full(n, -1.0),  # no time: zero timevals
    ):
        session.send_batch(encoder.encode(ids, types, range(n), [values], time=times))
        for k in range(n):
            reference.send(
                "Tracker0",
                TrackerPosQuat(
                    sensor=k,
                    position=tuple(values[k, :3].tolist()),
                    quaternion=tuple(values[k, 3:].tolist()),
                ),
                time=float(times[k]),
                reliable=False,
            )
        assert session.data_to_send() == reference.data_to_send()


def test_split_times_is_split_time() -> None:
    t = np.array([0.0, -3.0, 1.5, WALL, 1_700_000_000.9999996, 2.0**32 + 0.25, 12.0000005])
    sec, usec = split_times(t)
    assert list(zip(sec.tolist(), usec.tolist(), strict=True)) == [split_time(x) for x in t]


def test_motion_defaults_are_the_message_defaults_the_sim_sends() -> None:
    v = TrackerVelocity(sensor=0, velocity=(1.0, 2.0, 3.0), velocity_quaternion_dt=1.0)
    a = TrackerAcceleration(sensor=0, acceleration=(1.0, 2.0, 3.0), acceleration_quaternion_dt=1.0)
    for message in (v, a):
        encoder = ReportEncoder([message.WIRE_NAME], [MOTION_DEFAULTS])
        batch = encoder.encode(0, [0], [0], [[[1.0, 2.0, 3.0]]], time=0.0)
        assert bytes(batch.data[24:]) == message.encode()


def test_world_encoder_builds_report_columns_from_the_update() -> None:
    """The sink's encoder: every pose of an update in one set of columns (wire xyzw order,
    the source time or else the receive time), rows without a position left out, each new
    device named once; velocities likewise."""
    from robowire.protocols.vrpn.adapter import WorldEncoder
    from robowire.world import World

    world = World()
    slots = world.table("src").slots(["a", "b", "c/1"], "tracker")
    position = np.array([[1.0, 2.0, 3.0], [np.nan, np.nan, np.nan], [4.0, 5.0, 6.0]])
    orientation = np.array([[1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.5, 0.1, 0.2, 0.3]])
    first = world.update(
        "src",
        slots,
        receive_time=100.0,
        source_time=np.array([50.0, 51.0, np.nan]),
        position=position,
        orientation=orientation,
        velocity=np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6], [np.nan] * 3]),
    )
    encoder = WorldEncoder()
    out = encoder.encode(world, [first])
    assert out.new_devices == ["a", "b", "c_1"]
    poses = out.poses
    assert poses is not None and out.velocities is not None
    assert [poses.names[i] for i in poses.senders.tolist()] == ["a", "c_1"]
    assert poses.sensors.tolist() == [0, 0]
    assert poses.values.tolist() == [[1, 2, 3, 0, 0, 0, 1], [4, 5, 6, 0.1, 0.2, 0.3, 0.5]]
    assert poses.times.tolist() == [50.0, 100.0]
    velocities = out.velocities
    assert [velocities.names[i] for i in velocities.senders.tolist()] == ["a", "b"]
    assert velocities.values.tolist() == [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]
    assert velocities.times.tolist() == [50.0, 51.0]  # the source time, as poses
    again = encoder.encode(
        world, [world.update("src", slots[2:], receive_time=101.0, position=position[2:])]
    )
    assert again.new_devices == [] and again.poses is not None
    assert again.poses.names == ["c_1"] and again.poses.times.tolist() == [101.0]
    single = WorldEncoder("All").encode(world, [first])
    assert single.new_devices == ["All"] and single.poses is not None
    assert single.poses.names == ["All"] and single.poses.sensors.tolist() == [0, 2]
    # every row with a pose, of one tracker: each row as it is, in the update's order
    moved = np.array([[7.0, 8.0, 9.0], [4.0, 5.0, 6.0], [1.0, 2.0, 3.0]])
    whole = world.update(
        "src", slots[::-1], receive_time=102.0, position=moved, orientation=orientation
    )
    every = WorldEncoder("All").encode(world, [whole])
    assert every.poses is not None and every.poses.names == ["All"]
    assert every.poses.senders.tolist() == [0, 0, 0] and every.poses.sensors.tolist() == [2, 1, 0]
    assert every.poses.values.tolist() == [
        [7, 8, 9, 0, 0, 0, 1],
        [4, 5, 6, 0, 0, 0, 1],
        [1, 2, 3, 0.1, 0.2, 0.3, 0.5],
    ]


# -- the sink's inverse mapping: VRPN devices go out as they came ---------------------------------


def _received(sender: str, message: Body, time: float) -> Any:
    from robowire.protocols.vrpn.events import MessageReceived

    kind = message.WIRE_NAME
    return MessageReceived(
        sender=sender, type=kind, message=message, time=time, channel="tcp", order=0
    )


def _vrpn_world() -> tuple[Any, str, Any]:
    """A world as `listen vrpn://` writes it: tracker sensors, an analog, buttons, dials."""
    from robowire.protocols.vrpn.adapter import VrpnAdapter
    from robowire.world import World

    world = World()
    source = "vrpn@a:3883"
    world.table(source).protocol = "vrpn"
    adapter = VrpnAdapter(world, source)
    for message in (
        ButtonStates(states=(0, 1)),
        AnalogChannel(channels=tuple(float(i) for i in range(12))),
        DialUpdate(delta=0.25, dial=1),
    ):
        sender = {ButtonStates: "Button0", AnalogChannel: "Analog0", DialUpdate: "Dial0"}
        adapter.apply([_received(sender[type(message)], message, 10.0)], 10.0)
    return world, source, adapter


def test_the_sink_sends_a_vrpn_source_s_devices_under_their_own_names_and_kinds() -> None:
    from robowire.protocols.vrpn.adapter import WorldEncoder, vrpn_address
    from robowire.world import LogEvent

    world, source, adapter = _vrpn_world()
    slots = world.table(source).slots(["Tracker0/0", "Tracker0/3"], "tracker")
    update = world.update(
        source,
        slots,
        receive_time=11.0,
        source_time=np.array([10.5, 10.6]),
        position=np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
        orientation=np.array([[1.0, 0.0, 0.0, 0.0]] * 2),
        velocity=np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]),
        telemetry={f"acceleration_{c}": (np.array([7.0, 8.0]), "m/s2") for c in "xyz"},
    )
    encoder = WorldEncoder()
    text = LogEvent(source, "Tracker0", "hello", "warning", 10.7)
    out = encoder.encode(world, [*_sender_updates(world, source), update, text])
    assert sorted(out.new_devices) == ["Analog0", "Button0", "Dial0", "Tracker0"]
    for columns in (out.poses, out.velocities, out.accelerations):
        assert columns is not None and columns.names == ["Tracker0"]
        assert columns.sensors.tolist() == [0, 3] and columns.times.tolist() == [10.5, 10.6]
    assert out.accelerations is not None and out.accelerations.values.tolist() == [
        [7.0] * 3,
        [8.0] * 3,
    ]
    sent = {(sender, type(body).__name__): body for sender, body, _, _ in out.messages}
    assert sent[("Analog0", "AnalogChannel")] == AnalogChannel(
        channels=tuple(float(i) for i in range(12))  # channel_10 after channel_9, not _1
    )
    assert sent[("Button0", "ButtonStates")] == ButtonStates(states=(0, 1))
    assert sent[("Dial0", "DialUpdate")] == DialUpdate(delta=0.25, dial=1)
    assert sent[("Tracker0", "TextMessage")] == TextMessage(text="hello", severity=1)
    assert vrpn_address("Tracker0/3") == ("Tracker0", 3) and vrpn_address("A/b") == ("A/b", None)

    # later: a button change is one Change, a dial's new total goes out as its delta

    adapter.apply(
        [
            _received("Button0", ButtonChange(button=0, state=1), 12.0),
            _received("Dial0", DialUpdate(delta=0.5, dial=1), 12.0),
        ],
        12.0,
    )
    later = encoder.encode(world, _sender_updates(world, source))
    bodies = [(sender, body) for sender, body, _, _ in later.messages]
    assert ("Button0", ButtonChange(button=0, state=1)) in bodies
    assert ("Dial0", DialUpdate(delta=0.5, dial=1)) in bodies
    assert not any(isinstance(body, ButtonStates) for _, body in bodies)
    assert encoder.buttons == {"Button0": (1, 1)}


def _sender_updates(world: Any, source: str) -> list[Any]:
    """The latest state of a source's sender devices, as a sink's pull gives it."""
    from robowire.world import Update

    table = world.table(source)
    slots = np.array([table.index[n] for n in ("Analog0", "Button0", "Dial0")], dtype=np.intp)
    return [Update(source, slots, frozenset(table.telemetry), 12.0)]


def test_two_vrpn_sources_with_one_sender_name_are_told_apart_by_sender() -> None:
    from robowire.protocols.vrpn.adapter import WorldEncoder
    from robowire.world import World

    world = World()
    updates = []
    for source in ("vrpn@a:3883", "vrpn@b:3883"):
        world.table(source).protocol = "vrpn"
        slots = world.table(source).slots(["Tracker0/0", "Tracker0/1"], "tracker")
        updates.append(world.update(source, slots, receive_time=1.0, position=np.zeros((2, 3))))
    out = WorldEncoder().encode(world, updates)
    assert out.new_devices == ["Tracker0", "vrpn_b_3883_Tracker0"]
    assert out.poses is not None
    rows = [
        (out.poses.names[i], s)
        for i, s in zip(out.poses.senders.tolist(), out.poses.sensors.tolist(), strict=True)
    ]
    assert rows == [
        ("Tracker0", 0),
        ("Tracker0", 1),
        ("vrpn_b_3883_Tracker0", 0),
        ("vrpn_b_3883_Tracker0", 1),
    ]


# -- the simulator: frames planned ahead, sent one per step ----------------------------------------


class Wire:
    """The transport of one client connection: keeps what the server writes."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.writes = 0

    def write(self, data: bytes) -> None:
        self.data += data
        self.writes += 1

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 3883)}.get(name)

    def close(self) -> None:
        pass


def client_of(sim: Any) -> tuple[Wire, VrpnSession]:
    """A TCP client connected to `sim`'s server, past the cookie exchange (the handshake is
    in the wire's data), and the server's session of it."""
    from robowire.protocols.vrpn.driver import VrpnLink

    server = sim.server
    link = VrpnLink(server.make_session, server._events, on_open=server.links.add)
    wire = Wire()
    link.connection_made(wire)  # type: ignore[arg-type]
    link.data_received(encode_cookie())
    assert link.session is not None and link.session.connected
    return wire, link.session


async def test_frames_planned_ahead_are_the_bytes_of_frames_made_one_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The simulator computes and encodes `PLAN_SECONDS` of frames in one pass; on the wire
    each step's frame is what one made at that step gives: the pose at its time, stamped
    with it, seq numbers going on across plans and around the analog, button and dial
    messages (a second client's seq apart from the first's), and a plan made anew when
    steps were skipped or a client set a new rate."""
    from robowire.protocols.vrpn import services
    from robowire.service import SimOptions

    sims = [services.VrpnSim(SimOptions(port=0, count=3, rate=1000)) for _ in range(2)]
    ahead, alone = sims
    alone.clock = ahead.clock  # one wall clock for both
    monkeypatch.setattr(services, "monotonic", lambda: 0.0)  # every step on time
    alone.server.clock_offset = ahead.server.clock_offset
    clients = [[client_of(sim) for _ in range(2)] for sim in sims]
    for sim_clients in clients:
        for wire, _ in sim_clients:
            wire.data.clear()  # the handshake, stamped with the time each connected
        sim_clients[1][1].send("Button0", ButtonStates(states=(1, 0)), time=WALL)

    def run(sim: Any, until: float) -> None:
        while (due := sim.next_deadline()) is not None and due < until:
            sim.step(due)

    for sim, plan_seconds in ((ahead, services.PLAN_SECONDS), (alone, 0.0)):
        monkeypatch.setattr(services, "PLAN_SECONDS", plan_seconds)
        monkeypatch.setattr(services, "PLAN_FRAMES", 20 if plan_seconds else 1)
        sim.step(100.0)
        run(sim, 100.12)  # past two plans, an analog report and a dial's
        sim.step(100.5)  # the loop was held up: the missed steps skipped
        run(sim, 101.2)  # a button change at 1 s
        sim.model.set_rate(300.0)  # a client's set_update_rate
        run(sim, 101.4)
    assert ahead.frames == alone.frames == 120 + 700 + 60
    for (wire, _), (reference, _) in zip(*clients, strict=True):
        assert len(wire.data) > ahead.frames * 3 * 280
        assert wire.data == reference.data
        seqs = scan(wire.data).seq.astype(np.int64)
        assert (np.diff(seqs) == 1).all()  # each message numbered after the one before


async def test_frames_caught_up_after_a_late_wake_up_go_out_in_one_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A step whose next step is due already (the loop woke late) leaves its frame queued:
    the frames caught up go out with the first step that is on time, in one write."""
    from robowire.protocols.vrpn import services
    from robowire.service import SimOptions

    now = [200.0]  # the loop's time: the steps from 100.0 on are late
    monkeypatch.setattr(services, "monotonic", lambda: now[0])
    sim = services.VrpnSim(SimOptions(port=0, count=3, rate=1000))
    wire, _ = client_of(sim)
    sim.step(100.0)
    writes, size = wire.writes, len(wire.data)  # (the analog, buttons and dials due at 0)
    for _ in range(20):
        sim.step(sim.next_deadline())
    assert (wire.writes, len(wire.data)) == (writes, size)  # queued, none written yet
    now[0] = 100.0205  # caught up: the step at 100.021 is not due yet
    sim.step(sim.next_deadline())
    assert wire.writes == writes + 1 and len(wire.data) == size + 21 * 3 * 280


async def test_many_trackers_send_each_row_from_its_tracker_with_its_own_sensor_numbers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--set trackers=3` with 2 sensors each: a frame has every tracker's reports, row r from
    tracker r // 2 as its sensor r % 2, with the pose of row r of one tracker of 6 sensors
    (what a mocap system with many rigid bodies serves); a set_update_rate to any of them
    sets the rate."""
    from robowire.protocols.vrpn import services
    from robowire.protocols.vrpn.events import MessageReceived
    from robowire.service import SimOptions

    monkeypatch.setattr(services, "monotonic", lambda: 0.0)
    many = services.VrpnSim(SimOptions(port=0, count=2, rate=100, options={"trackers": "3"}))
    one = services.VrpnSim(SimOptions(port=0, count=6, rate=100))
    one.clock, one.server.clock_offset = many.clock, many.server.clock_offset
    assert many.trackers == ["Tracker0", "Tracker1", "Tracker2"] and many.count == 2
    (wire, session), (reference, _) = client_of(many), client_of(one)
    wire.data.clear(), reference.data.clear()
    many.step(5.0)
    one.step(5.0)
    got, want = bytes(wire.data), bytes(reference.data)
    index, expected = scan(got), scan(want)
    tracker_ids = [session.register_sender(name) for name in many.trackers]
    assert len(index) == len(expected)
    first = np.flatnonzero(np.isin(index.sender, tracker_ids))
    assert len(first) == 18  # 6 rows x (Pos_Quat, Velocity, Acceleration)
    for k, at in enumerate(first.tolist()):
        row = k // 3
        offset = int(index.offsets[at])
        assert int(index.sender[at]) == tracker_ids[row // 2]
        body = got[offset + 24 : offset + int(index.lengths[at])]
        ref = want[offset + 24 : offset + int(index.lengths[at])]
        assert int.from_bytes(body[:4], "big") == row % 2  # the sensor, in its tracker
        assert body[8:] == ref[8:]  # the same pose, velocity, acceleration
    rate = TrackerSetUpdateRate(rate=20.0)
    many._on_message(
        next(iter(many.server.links)),
        MessageReceived(sender="Tracker2", type="", message=rate, time=0.0, channel="tcp", order=0),
    )
    assert many.rate == 20.0
    with pytest.raises(ConfigError):
        services.VrpnSim(SimOptions(port=0, count=2, options={"trackers": "1.5"}))
