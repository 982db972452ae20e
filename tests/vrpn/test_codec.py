"""VRPN codec: literal bytes from the fact sheet, round trips for every type, bad input."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robowire.errors import DecodeError
from robowire.protocols import vrpn
from robowire.protocols.vrpn import codec, imager, messages, system
from robowire.protocols.vrpn.dissect import StreamDecoder, decode_records
from robowire.protocols.vrpn.registry import ALL_BODY_TYPES, BODY_TYPES

COOKIE = bytes.fromhex("76 72 70 6e 3a 20 76 65 72 2e 20 30 37 2e 33 38 20 20 30 00 00 00 00 00")


def test_cookie_bytes_are_the_mainlines() -> None:
    assert vrpn.encode_cookie() == COOKIE
    cookie = vrpn.decode_cookie(COOKIE)
    assert cookie.version == "vrpn: ver. 07.38" and cookie.log_mode == 0


def test_cookie_version_check_up_to_last_dot() -> None:
    minor = vrpn.decode_cookie(COOKIE.replace(b"07.38", b"07.01"))
    major = vrpn.decode_cookie(COOKIE.replace(b"07.38", b"08.38"))
    assert minor.compatible_with(vrpn.Cookie())
    assert not major.compatible_with(vrpn.Cookie())


@pytest.mark.parametrize(
    "raw",
    [COOKIE[:23], b"http: ver. 07.38  0" + bytes(5), COOKIE[:18] + b"7" + bytes(5)],
    ids=["short", "not-vrpn", "log-mode-7"],
)
def test_bad_cookies(raw: bytes) -> None:
    with pytest.raises(DecodeError):
        vrpn.decode_cookie(raw)


def test_header_length_is_unpadded_and_body_padded() -> None:
    frame = vrpn.encode_frame(1, -1, codec.encode_name("Tracker0"), sec=5, usec=6, seq=7)
    assert struct.unpack_from(">IIIiiI", frame) == (37, 5, 6, 1, -1, 7)
    assert len(frame) == 24 + 16
    ping = vrpn.encode_frame(1, 16)
    assert len(ping) == 24 and ping[:4] == b"\0\0\0\x18"


def test_padding_content_is_ignored() -> None:
    frame = bytearray(vrpn.encode_frame(3, 22, struct.pack(">di", 0.25, 1)))
    frame[-4:] = b"trol"  # stale buffer bytes, as the C++ peer sends them
    got = vrpn.decode_frame(bytes(frame))
    assert got is not None
    assert vrpn.DialUpdate.decode(got[0].body) == vrpn.DialUpdate(delta=0.25, dial=1)


@pytest.mark.parametrize("length", [0, 23, codec.MAX_LENGTH + 1, 0xFFFFFFFF])
def test_bad_length_fields(length: int) -> None:
    raw = struct.pack(">IIIiiI", length, 0, 0, 0, 0, 0) + bytes(64)
    with pytest.raises(DecodeError):
        vrpn.decode_frame(raw)
    assert vrpn.scan(raw).error is not None


def test_need_more_and_several_per_read() -> None:
    stream = vrpn.encode_frame(1, 16) + vrpn.encode_frame(1, 4, bytes(64))
    assert vrpn.decode_frame(stream[:23]) is None
    assert vrpn.decode_frame(stream, 24)[1] == 88  # type: ignore[index]
    index = vrpn.scan(stream + stream[24:60])
    assert len(index) == 2 and index.end == len(stream)
    assert index.type.tolist() == [16, 4]


def test_datagram_with_several_messages_and_truncation() -> None:
    body = vrpn.TrackerPosQuat(sensor=3, position=(1, 2, 3)).encode()
    datagram = vrpn.encode_frame(1, 4, body) * 6
    assert len(datagram) == 528
    assert len(vrpn.decode_datagram(datagram)) == 6
    with pytest.raises(DecodeError):
        vrpn.decode_datagram(datagram[:-8])


def test_quaternion_is_xyzw_on_the_wire() -> None:
    body = vrpn.TrackerPosQuat(sensor=1, quaternion=(0.0, 0.0, 0.0, 1.0)).encode()
    assert body[:8] == struct.pack(">ii", 1, 1)  # the filler repeats the sensor, as in C++
    assert body[-8:] == bytes.fromhex("3ff0000000000000")


def test_lob() -> None:
    assert vrpn.encode_lob("127.0.0.1", 58523) == b"127.0.0.1 58523\0"
    assert vrpn.decode_lob(b"127.0.0.1 58523\0") == ("127.0.0.1", 58523)
    for bad in (b"127.0.0.1 80\0", b"host-name 5000\0", b"::1 5000\0", b"127.0.0.1\0", b""):
        with pytest.raises(DecodeError):
            vrpn.decode_lob(bad)


# -- round trips for every body type ---------------------------------------------------------

f64 = st.floats(allow_nan=False, width=64)
f32 = st.floats(allow_nan=False, width=32)
i32 = st.integers(-(2**31), 2**31 - 1)
u16 = st.integers(0, 0xFFFF)
vec3 = st.tuples(f64, f64, f64)
quat = st.tuples(f64, f64, f64, f64)
text = st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=30).filter(
    lambda s: len(s.encode()) <= 95
)

FIELD_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {
    "position": vec3,
    "velocity": vec3,
    "acceleration": vec3,
    "minimum": vec3,
    "maximum": vec3,
    "quaternion": quat,
    "velocity_quaternion": quat,
    "acceleration_quaternion": quat,
    "channels": st.lists(f64, max_size=128).map(tuple),
    "values": st.lists(f64, max_size=128).map(tuple),
    "states": st.lists(i32, max_size=256).map(tuple),
    "text": st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=200).filter(
        lambda s: len(s.encode()) <= 1023
    ),
    "severity": st.integers(0, 2),
    "level": st.integers(0, 2**32 - 1),
    "pixels": st.binary(max_size=64),
    "count": u16,
    "channel": i32,
}


def strategy_for(cls: type) -> st.SearchStrategy[Any]:
    if cls is imager.ImagerDescription:
        channel = st.builds(
            imager.ImagerChannel,
            name=text.filter(lambda s: len(s.encode()) <= 99),
            units=text.filter(lambda s: len(s.encode()) <= 99),
            minimum=f32,
            maximum=f32,
            offset=f32,
            scale=f32,
            compression=st.integers(0, 2**32 - 1),
        )
        return st.builds(
            cls, depth=i32, rows=i32, columns=i32, channels=st.lists(channel, max_size=3).map(tuple)
        )
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for field in dataclasses.fields(cls):
        if field.name in FIELD_STRATEGIES:
            if issubclass(cls, imager.ImagerRegion) and field.name == "channel":
                kwargs[field.name] = st.integers(-(2**15), 2**15 - 1)
            else:
                kwargs[field.name] = FIELD_STRATEGIES[field.name]
        elif field.type in ("int",):
            kwargs[field.name] = (
                u16 if issubclass(cls, imager.ImagerBeginFrame | imager.ImagerRegion) else i32
            )
        elif field.type == "float":
            kwargs[field.name] = f64
    return st.builds(cls, **kwargs)


@pytest.mark.parametrize("cls", ALL_BODY_TYPES, ids=lambda c: c.WIRE_NAME)
def test_round_trip(cls: type[messages.Body]) -> None:
    @settings(max_examples=40, deadline=None)
    @given(strategy_for(cls))
    def check(message: messages.Body) -> None:
        body = message.encode()
        assert type(message).decode(body) == message
        frame = vrpn.encode_frame(4, 9, body, sec=1, usec=2, seq=3)
        got = vrpn.decode_frame(frame)
        assert got is not None and got[1] == len(frame) and len(frame) % 8 == 0
        assert type(message).decode(got[0].body) == message

    check()


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 1999), text.filter(bool), st.sampled_from([-1, -2]))
def test_description_round_trip(ident: int, name: str, kind: int) -> None:
    cls = system.SenderDescription if kind == -1 else system.TypeDescription
    message = cls(id=ident, name=name)
    frame = vrpn.encode_frame(message.header_sender, message.TYPE, message.encode())
    got = vrpn.decode_frame(frame)
    assert got is not None
    assert system.decode_system(got[0].type, got[0].sender, got[0].body) == message


def test_system_round_trips() -> None:
    for message in (
        system.UdpDescription(port=55324, host="127.0.0.1"),
        system.LogDescription(mode=3, incoming_name="in.vrpn", outgoing_name="out.vrpn"),
        system.DisconnectMessage(),
    ):
        body = message.encode()
        assert system.decode_system(message.TYPE, message.header_sender, body) == message


DECODERS = [cls.decode for cls in ALL_BODY_TYPES]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(-6, 1))
def test_random_bytes_raise_only_decode_error(data: bytes, system_type: int) -> None:
    for decode in (vrpn.decode_frame, vrpn.decode_datagram, vrpn.decode_cookie, vrpn.decode_lob):
        with contextlib.suppress(DecodeError):
            decode(data)
    vrpn.scan(data)
    for cls in ALL_BODY_TYPES:
        with contextlib.suppress(DecodeError):
            cls.decode(data)
    with contextlib.suppress(DecodeError):
        system.decode_system(system_type, 5, data)
    decoder = StreamDecoder("test")
    decoder.feed(data)


def test_every_type_has_a_distinct_wire_name() -> None:
    assert len(BODY_TYPES) == len(ALL_BODY_TYPES)


# -- golden vectors -------------------------------------------------------------------------

LINE = re.compile(r"@\s*(\d+) len=\s*(\d+) t=([\d.]+) snd=\s*(-?\d+) type=\s*(-?\d+) seq=\s*(\d+)")


def reference(captures: Path) -> dict[str, list[tuple[int, int, int, int, int]]]:
    out: dict[str, list[tuple[int, int, int, int, int]]] = {"c2s": [], "s2c": []}
    key = "c2s"
    for line in (captures / "tcp_tracker.decoded.txt").read_text().splitlines():
        if line.startswith("== server->client"):
            key = "s2c"
        if m := LINE.match(line):
            offset, length, _, sender, type_, seq = m.groups()
            out[key].append((int(offset), int(length), int(sender), int(type_), int(seq)))
    return out


@pytest.mark.parametrize("direction", ["c2s", "s2c"])
@pytest.mark.parametrize("chunk", [1 << 16, 1, 97])
def test_golden_streams_decode_without_errors(captures: Path, direction: str, chunk: int) -> None:
    data = (captures / f"tcp_tracker.{direction}.bin").read_bytes()
    if chunk == 1:
        data = data[:3000]
    decoder = StreamDecoder(direction)
    records = []
    for i in range(0, len(data), chunk):
        records += decoder.feed(data[i : i + chunk])
    assert decoder.errors == 0
    assert records[0]["type"] == "cookie"
    got = [(r["offset"], r["length"], r["sender_id"], r["type_id"], r["seq"]) for r in records[1:]]
    expected = reference(captures)[direction]
    assert got == expected[: len(got)]
    if chunk != 1:
        assert len(got) == len(expected)


def test_golden_pcap_both_directions(captures: Path) -> None:
    records = list(decode_records(vrpn_capture(captures)))
    assert not [r for r in records if "error" in r]
    by_type: dict[str, int] = {}
    for r in records:
        by_type[r["type"]] = by_type.get(r["type"], 0) + 1
    assert by_type["vrpn_Tracker Pos_Quat"] == 142
    assert by_type["vrpn_Base ping_message"] == by_type["vrpn_Base pong_message"] == 5
    dial = next(r for r in records if r["type"] == "vrpn_Dial update")
    assert dial["sender"] == "Dial0" and dial["delta"] == 0.25
    states = [r for r in records if r["type"] == "vrpn_Button States"]
    assert [len(r["states"]) for r in states] == [2, 256]


def vrpn_capture(captures: Path) -> Any:
    from robowire.capture import read_capture

    return read_capture(str(captures / "tcp_tracker.pcap"))


def test_dissector_shows_connection_requests() -> None:
    from robowire.capture import Record

    records = [
        Record(b"127.0.0.1 58523\0", 1.0, "udp", ("127.0.0.1", 5), ("127.0.0.1", 3883), "c>s"),
        Record(b"myhost 80\0", 2.0, "udp", ("127.0.0.1", 5), ("127.0.0.1", 3883), "c>s"),
    ]
    ok, bad = list(decode_records(records))
    assert (ok["type"], ok["host"], ok["port"]) == ("connection_request", "127.0.0.1", 58523)
    assert "port 80" in bad["error"]
