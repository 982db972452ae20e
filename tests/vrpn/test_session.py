"""VRPN sessions in memory: client and server pairs with `now` set by hand."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robowire.errors import LocalProtocolError
from robowire.protocols.vrpn import (
    ButtonChange,
    ButtonStates,
    Connected,
    MessageReceived,
    PeerSilent,
    PongReceived,
    Role,
    State,
    TextMessage,
    TrackerPosQuat,
    TrackerReports,
    TrackerWorkspace,
    VrpnSession,
    encode_cookie,
    encode_frame,
)
from robowire.protocols.vrpn.registry import SERVER_TYPE_NAMES
from robowire.wire import ConnectionLost, PacketDropped


def pair(udp: bool = False, keepalive: float = 5.0) -> tuple[VrpnSession, VrpnSession]:
    server = VrpnSession(
        Role.SERVER,
        senders=["Tracker0", "Button0"],
        types=SERVER_TYPE_NAMES,
        udp_inbound=("127.0.0.1", 40001) if udp else None,
    )
    client = VrpnSession(
        Role.CLIENT,
        ping_senders=["Tracker0"],
        udp_inbound=("127.0.0.1", 40002) if udp else None,
        keepalive=keepalive,
    )
    return client, server


def pump(
    client: VrpnSession, server: VrpnSession, now: float = 0.0, byte_by_byte: bool = False
) -> tuple[list[object], list[object]]:
    """Move TCP bytes (and UDP datagrams) both ways until both sides are quiet."""
    client_events: list[object] = []
    server_events: list[object] = []
    for _ in range(20):
        to_server, to_client = client.data_to_send(), server.data_to_send()
        grams_to_client = server.datagrams_to_send()
        grams_to_server = client.datagrams_to_send()
        if not (to_server or to_client or grams_to_client or grams_to_server):
            break
        for data, session, events in (
            (to_server, server, server_events),
            (to_client, client, client_events),
        ):
            if byte_by_byte:
                for i in range(len(data)):
                    events += session.feed(data[i : i + 1], now)
            elif data:
                events += session.feed(data, now)
        for datagram, addr in grams_to_client:
            assert addr == ("127.0.0.1", 40002)
            client_events += client.feed_datagram(datagram, ("127.0.0.1", 40001), now)
        for datagram, _addr in grams_to_server:
            server_events += server.feed_datagram(datagram, ("127.0.0.1", 40002), now)
    return client_events, server_events


def reports(events: list[object]) -> list[TrackerReports]:
    return [e for e in events if isinstance(e, TrackerReports)]


@pytest.mark.parametrize("byte_by_byte", [False, True])
def test_tcp_only_handshake_and_poses(byte_by_byte: bool) -> None:
    client, server = pair()
    client_events, server_events = pump(client, server, byte_by_byte=byte_by_byte)
    assert any(isinstance(e, Connected) for e in client_events)
    assert any(isinstance(e, Connected) for e in server_events)
    assert client.state is server.state is State.CONNECTED
    assert "Tracker0" in client.remote_senders.values()
    assert server.remote_senders[0] == "VRPN Control"
    assert client.peer_udp is None and server.peer_udp is None
    positions = np.arange(6.0).reshape(2, 3)
    quats = np.tile([0.0, 0.0, 0.0, 1.0], (2, 1))
    server.send_poses("Tracker0", [0, 1], positions, quats, time=1700000000.25)
    assert server.datagrams_to_send() == []  # TCP-only: everything on TCP
    client_events, _ = pump(client, server, byte_by_byte=byte_by_byte)
    batches = reports(client_events)
    assert len(batches) == (2 if byte_by_byte else 1)
    assert {(b.sender, b.kind) for b in batches} == {("Tracker0", "vrpn_Tracker Pos_Quat")}
    assert np.concatenate([b.sensor for b in batches]).tolist() == [0, 1]
    assert np.array_equal(np.concatenate([b.vector for b in batches]), positions)
    assert np.array_equal(np.concatenate([b.quaternion for b in batches]), quats)
    assert np.concatenate([b.time for b in batches]).tolist() == [1700000000.25] * 2


def test_udp_mode_sends_low_latency_over_udp_after_description() -> None:
    client, server = pair(udp=True)
    pump(client, server)
    assert server.peer_udp == ("127.0.0.1", 40002)
    assert client.peer_udp == ("127.0.0.1", 40001)
    server.send_poses("Tracker0", np.arange(10), np.zeros((10, 3)), np.tile([0, 0, 0, 1], (10, 1)))
    server.send("Button0", ButtonChange(button=1, state=1))  # reliable: TCP
    datagrams = server.datagrams_to_send()
    assert len(datagrams) == 1 and len(datagrams[0][0]) == 880
    tcp = server.data_to_send()
    assert len(tcp) == 32
    events = client.feed_datagram(datagrams[0][0], ("127.0.0.1", 5), 0.0)
    assert reports(events)[0].sensor.tolist() == list(range(10))
    events = client.feed(tcp, 0.0)
    (message,) = [e for e in events if isinstance(e, MessageReceived)]
    assert message.sender == "Button0" and message.message == ButtonChange(button=1, state=1)


def test_udp_datagrams_hold_whole_messages_under_1472_bytes() -> None:
    client, server = pair(udp=True)
    pump(client, server)
    server.send_poses("Tracker0", np.arange(40), np.zeros((40, 3)), np.zeros((40, 4)))
    datagrams = server.datagrams_to_send()
    assert [len(d) // 88 for d, _ in datagrams] == [16, 16, 8]
    total = sum(len(reports(client.feed_datagram(d, ("h", 1), 0.0))[0]) for d, _ in datagrams)
    assert total == 40


def test_truncated_datagram_is_dropped_not_fatal() -> None:
    client, server = pair(udp=True)
    pump(client, server)
    server.send_poses("Tracker0", [0], [[1, 2, 3]], [[0, 0, 0, 1]])
    ((datagram, _),) = server.datagrams_to_send()
    events = client.feed_datagram(datagram[:-8], ("h", 1), 0.0)
    assert isinstance(events[0], PacketDropped) and client.stats.dropped == 1
    assert client.state is State.CONNECTED


def test_a_send_before_connect_raises_and_sends_nothing() -> None:
    _client, server = pair()
    for send in (
        lambda: server.send("Tracker0", TrackerWorkspace()),
        lambda: server.send_poses("Tracker0", [0], [[1.0, 2.0, 3.0]], [[0.0, 0.0, 0.0, 1.0]]),
    ):
        with pytest.raises(LocalProtocolError, match="AWAIT_COOKIE"):
            send()
    assert server.data_to_send() == encode_cookie()  # only the cookie


def test_a_send_after_the_close_raises() -> None:
    client, server = pair()
    pump(client, server)
    server.feed_eof(1.0)
    with pytest.raises(LocalProtocolError, match="CLOSED"):
        server.send("Tracker0", TrackerWorkspace())


def test_ping_pong_and_liveness() -> None:
    client, server = pair(keepalive=0.0)
    pump(client, server)
    assert client.next_deadline() == 0.0
    client.tick(0.0)
    client_events, server_events = pump(client, server, now=0.01)
    pings = [e for e in server_events if isinstance(e, MessageReceived)]
    assert pings[0].type == "vrpn_Base ping_message" and pings[0].sender == "Tracker0"
    pong = [e for e in client_events if isinstance(e, PongReceived)]
    assert pong and pong[0].round_trip == pytest.approx(0.01)
    assert client.next_deadline() is None  # keepalive 0: like C++, one cycle only


def test_silent_server_warns_then_closes() -> None:
    client, server = pair()
    pump(client, server)
    client.tick(0.0)
    client_events, _ = pump(client, server)
    assert any(isinstance(e, PongReceived) for e in client_events)
    assert client.next_deadline() == 5.0  # keepalive: the next cycle
    events: list[object] = []
    now = 5.0
    while not client.close_expected() and now < 30:
        events += client.tick(now)
        client.data_to_send()  # the pings go nowhere now
        now += 0.5
    assert any(isinstance(e, PeerSilent) for e in events)
    lost = [e for e in events if isinstance(e, ConnectionLost)]
    assert lost and "no pong" in lost[0].reason and 15 <= now <= 16


def test_a_server_without_the_device_is_only_warned_about() -> None:
    client = VrpnSession(Role.CLIENT, ping_senders=["Missing"])
    server = VrpnSession(Role.SERVER, senders=["Tracker0"])
    pump(client, server)
    events: list[object] = []
    for step in range(60):
        events += client.tick(step * 0.5)
        pump(client, server)
    assert any(isinstance(e, PeerSilent) for e in events)
    assert not client.close_expected()


def test_server_pongs_only_its_devices() -> None:
    client, server = pair()
    pump(client, server)
    client.register_sender("Nobody")
    pump(client, server)
    from robowire.protocols.vrpn import Ping

    client.send("Nobody", Ping())
    client_events, _ = pump(client, server)
    assert not [e for e in client_events if isinstance(e, MessageReceived)]


def test_major_version_mismatch_closes_with_one_line() -> None:
    server = VrpnSession(Role.SERVER)
    events = server.feed(encode_cookie().replace(b"07.38", b"08.38"), 0.0)
    (lost,) = events
    assert isinstance(lost, ConnectionLost) and "major version mismatch" in lost.reason
    assert "\n" not in lost.reason and server.close_expected()


def test_minor_version_difference_is_accepted() -> None:
    server = VrpnSession(Role.SERVER)
    events = server.feed(encode_cookie().replace(b"07.38", b"07.01"), 0.0)
    assert isinstance(events[0], Connected)


@pytest.mark.parametrize(
    "garbage",
    [
        b"GET / HTTP/1.1\r\n\r\n" + bytes(10),
        encode_cookie() + struct.pack(">IIIiiI", 12, 0, 0, 0, 0, 0),
        encode_cookie() + struct.pack(">IIIiiI", 1 << 20, 0, 0, 0, 0, 0),
    ],
    ids=["not-vrpn", "length-below-24", "length-too-big"],
)
def test_bad_streams_close_cleanly(garbage: bytes) -> None:
    server = VrpnSession(Role.SERVER)
    events = server.feed(garbage, 0.0)
    assert isinstance(events[-1], ConnectionLost)
    assert server.close_expected()
    assert server.feed(b"more", 0.0) == []


def test_short_body_and_undescribed_ids() -> None:
    client, server = pair()
    pump(client, server)
    # a Pos_Quat with a 16-byte body, then a message with ids never described
    pos_quat = server.register_type("vrpn_Tracker Pos_Quat")
    tracker = server.register_sender("Tracker0")
    bad = encode_frame(tracker, pos_quat, bytes(16)) + encode_frame(1500, 1700, bytes(8))
    events = client.feed(bad, 0.0)
    assert [type(e) for e in events] == [PacketDropped]
    assert client.stats.extra["undescribed"] == 1
    assert client.state is State.CONNECTED


def test_descriptions_at_any_time_are_echoed() -> None:
    client, server = pair()
    pump(client, server)
    server.send("NewDevice", TextMessage(text="hello"))
    client_events, _ = pump(client, server)
    (message,) = [e for e in client_events if isinstance(e, MessageReceived)]
    assert message.sender == "NewDevice" and message.message == TextMessage(text="hello")
    assert "NewDevice" in client.local_senders  # registered and announced back
    assert "NewDevice" in server.remote_senders.values()


# -- golden: the real server's stream into our client session --------------------------------

CLIENT_LINE = re.compile(r"^\s+(pos|vel|acc) \(([^)]*)\); quat\w* \(([^)]*)\)(?:, dt\s+(\S+))?")


def printed_reports(captures: Path) -> list[tuple[int, str, str]]:
    """(sensor, kind, formatted values) for each report the real client printed."""
    out: list[tuple[int, str, str]] = []
    sensor = -1
    for line in (captures / "tcp_tracker.client.txt").read_text().splitlines():
        if m := re.match(r"Tracker .*, sensor (\d+):", line):
            sensor = int(m.group(1))
        elif m := CLIENT_LINE.match(line):
            out.append((sensor, m.group(1), line.split(":", 1)[-1].strip()))
    return out


def print_like_vrpn(batch: TrackerReports, i: int) -> tuple[int, str, str]:
    """Format one report as vrpn_print_devices does (%5.2f)."""

    def f(values: np.ndarray) -> str:
        return ", ".join(f"{v:5.2f}" for v in values)

    v, q = batch.vector[i], batch.quaternion[i]
    if batch.kind.endswith("Pos_Quat"):
        return int(batch.sensor[i]), "pos", f"pos ({f(v)}); quat ({f(q)})"
    word = "vel" if batch.kind.endswith("Velocity") else "acc"
    assert batch.dt is not None
    return (
        int(batch.sensor[i]),
        word,
        f"{word} ({f(v)}); quat{word} ({f(q)}), dt {batch.dt[i]:5.2f}",
    )


def client_reports(events: list[object]) -> list[tuple[int, str, str]]:
    rows = []
    for batch in reports(events):
        if batch.sender == "Tracker0":
            rows += [(int(batch.order[i]), print_like_vrpn(batch, i)) for i in range(len(batch))]
    return [r for _, r in sorted(rows)]


@pytest.mark.parametrize("chunk", [1 << 16, 1448, 1])
def test_golden_server_stream_into_client_session(captures: Path, chunk: int) -> None:
    data = (captures / "tcp_tracker.s2c.bin").read_bytes()
    client = VrpnSession(Role.CLIENT, ping_senders=["Tracker0"])
    events: list[object] = []
    for i in range(0, len(data), chunk):
        events += client.feed(data[i : i + chunk], 0.0)
    assert client.stats.dropped == 0 and not client.close_expected()
    expected = printed_reports(captures)
    assert len(expected) == 426
    got = client_reports(events)
    assert [(s, k, " ".join(t.split())) for s, k, t in got] == [
        (s, k, " ".join(t.split())) for s, k, t in expected
    ]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400), st.booleans())
def test_random_bytes_never_raise_from_a_session(data: bytes, after_cookie: bool) -> None:
    session = VrpnSession(Role.SERVER, senders=["Tracker0"], udp_inbound=("127.0.0.1", 5000))
    prefix = encode_cookie() if after_cookie else b""
    events = session.feed(prefix + data, 0.0)
    events += session.feed_datagram(data, ("127.0.0.1", 1), 0.0)
    events += session.tick(1.0)
    for event in events:
        assert isinstance(
            event, Connected | ConnectionLost | PacketDropped | MessageReceived | TrackerReports
        ) or type(event).__name__ in {"Described", "PongReceived"}


def test_a_big_message_fed_byte_by_byte_is_not_rescanned_each_time() -> None:
    client, server = pair()
    pump(client, server)
    server.send("Button0", ButtonStates(states=tuple(range(256))))
    data = server.data_to_send()
    events: list[object] = []
    for i in range(len(data)):
        events += client.feed(data[i : i + 1], 0.0)
    (message,) = [e for e in events if isinstance(e, MessageReceived)]
    assert message.message.states == tuple(range(256))  # type: ignore[union-attr]
    bad = struct.pack(">IIIiiI", 1 << 30, 0, 0, 0, 0, 0)
    lost: list[object] = []
    for i in range(len(bad)):
        lost += client.feed(bad[i : i + 1], 0.0)
    assert isinstance(lost[-1], ConnectionLost)


def test_no_cookie_in_time_closes_that_connection() -> None:
    server = VrpnSession(Role.SERVER, now=100.0)
    assert server.next_deadline() == 110.0
    assert server.feed(encode_cookie()[:10], 105.0) == []  # a truncated cookie
    assert server.tick(109.0) == []
    (lost,) = server.tick(110.0)
    assert isinstance(lost, ConnectionLost) and "cookie" in lost.reason
    late = VrpnSession(Role.CLIENT)  # no clock when built: it starts at the first tick
    assert late.next_deadline() is None
    late.tick(50.0)
    assert late.next_deadline() == 60.0


def test_decode_speed_meets_the_issue() -> None:
    """At least 500,000 Pos_Quat reports/s through the client session (measured ~2.6M/s)."""
    import time

    count = 100_000
    head = encode_cookie() + b"".join(
        encode_frame(i, kind, codec_name(name))
        for i, kind, name in ((1, -1, "Tracker0"), (4, -2, "vrpn_Tracker Pos_Quat"))
    )
    body = TrackerPosQuat(sensor=1, position=(1, 2, 3)).encode()
    stream = head + encode_frame(1, 4, body) * count
    reads = [stream[i : i + 65536] for i in range(0, len(stream), 65536)]
    best = float("inf")
    for _ in range(3):
        client = VrpnSession(Role.CLIENT)
        start = time.perf_counter()
        got = sum(
            len(e) for r in reads for e in client.feed(r, 0.0) if isinstance(e, TrackerReports)
        )
        best = min(best, time.perf_counter() - start)
        assert got == count
    assert count / best > 500_000


def codec_name(name: str) -> bytes:
    from robowire.protocols.vrpn.codec import encode_name

    return encode_name(name)


def test_golden_client_stream_into_our_server_session(captures: Path) -> None:
    """The real vrpn_print_devices bytes: our server maps its ids and pongs its 5 pings."""
    from robowire.protocols.vrpn.dissect import StreamDecoder

    data = (captures / "tcp_tracker.c2s.bin").read_bytes()
    server = VrpnSession(
        Role.SERVER, senders=["Tracker0", "Button0", "Dial0"], types=SERVER_TYPE_NAMES
    )
    events = server.feed(data, 0.0)
    assert isinstance(events[0], Connected) and server.stats.dropped == 0
    pings = [e for e in events if isinstance(e, MessageReceived)]
    assert [(p.sender, p.type) for p in pings] == [("Tracker0", "vrpn_Base ping_message")] * 5
    assert server.remote_types[16] == "vrpn_Base ping_message"
    out = StreamDecoder("ours").feed(server.data_to_send())
    assert all("error" not in r for r in out)
    pongs = [r for r in out if r["type"] == "vrpn_Base pong_message"]
    assert len(pongs) == 5 and {r["sender"] for r in pongs} == {"Tracker0"}
    # the client's names we did not have were registered and described back to it
    described = {r["name"] for r in out if r["type"] == "SENDER_DESCRIPTION"}
    assert {"Jsonnet", "vrpn_Forwarder_Brain"} <= described


def test_sequence_numbers_count_per_channel_from_zero() -> None:
    from robowire.protocols.vrpn import decode_datagram, scan

    client = VrpnSession(Role.CLIENT, udp_inbound=("127.0.0.1", 40002))
    server = VrpnSession(Role.SERVER, senders=["Tracker0"], udp_inbound=("127.0.0.1", 40001))
    client.feed(server.data_to_send(), 0.0)
    first_tcp = server.feed(client.data_to_send(), 0.0) and server.data_to_send()
    tcp_index = scan(first_tcp)
    assert tcp_index.seq.tolist() == list(range(len(tcp_index)))  # descriptions count too
    assert tcp_index.type[0] == -3  # UDP_DESCRIPTION first in UDP+TCP mode
    server.send_poses("Tracker0", [0, 1], np.zeros((2, 3)), np.zeros((2, 4)))
    server.send("Tracker0", TrackerWorkspace())
    ((datagram, _),) = server.datagrams_to_send()
    assert [f.seq for f in decode_datagram(datagram)] == [0, 1]
    # two new type descriptions (Pos_Quat, Workspace), then the Workspace: TCP goes on counting
    n = len(tcp_index)
    assert scan(server.data_to_send()).seq.tolist() == [n, n + 1, n + 2]
