"""VRPN log files (.vrpn) as sources: the real server's log gives what the real client printed."""

from __future__ import annotations

import asyncio
import json
import re
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robowire.addresses import parse_endpoint
from robowire.errors import DecodeError
from robowire.gateway import Gateway, open_source
from robowire.protocols.vrpn import (
    ButtonChange,
    ButtonStates,
    DialUpdate,
    Frame,
    MessageReceived,
    Role,
    TrackerReports,
    VrpnSession,
)
from robowire.protocols.vrpn.logfile import encode_log_entry, iter_log, read_log

LOG = "log_server_out.vrpn"
OPENED = ("Tracker0", "Button0", "Dial0")  # the devices the client opened from the log
NUMBERS = r"\(([^)]*)\)"
TRACKER = re.compile(rf"^\s+(pos|vel|acc) {NUMBERS}; quat\w* {NUMBERS}(?:, dt\s+(\S+))?")
BUTTON = re.compile(r"^Button \S+, number (\d+) was just (pressed|released)")
STATES = re.compile(r"^Button \S+ has \d+ buttons with states: ([\d ]+)")
DIAL = re.compile(r"^Dial \S+, number (\d+) was moved by\s+(\S+)")
SENSOR = re.compile(r"^Tracker \S+, sensor (\d+):")


def numbers(text: str) -> tuple[float, ...]:
    return tuple(float(x) for x in text.split(","))


def printed(captures: Path) -> list[tuple[object, ...]]:
    """Every report `vrpn_print_devices ...@file://` printed, in order, as values."""
    out: list[tuple[object, ...]] = []
    sensor = -1
    for line in (captures / "log_server_out.client.txt").read_text().splitlines():
        if m := SENSOR.match(line):
            sensor = int(m.group(1))
        elif m := TRACKER.match(line):
            dt = float(m.group(4)) if m.group(4) else None
            out.append((m.group(1), sensor, numbers(m.group(2)), numbers(m.group(3)), dt))
        elif m := BUTTON.match(line):
            out.append(("button", int(m.group(1)), int(m.group(2) == "pressed")))
        elif m := STATES.match(line):
            out.append(("states", tuple(int(x) for x in m.group(1).split())))
        elif m := DIAL.match(line):
            out.append(("dial", int(m.group(1)), float(m.group(2))))
    return out


def rounded(values: np.ndarray | tuple[float, ...]) -> tuple[float, ...]:
    return tuple(round(float(v), 2) + 0.0 for v in values)  # the client prints %5.2f


def ours(events: list[object]) -> list[tuple[object, ...]]:
    """The same reports from our session's events, in the order the messages were logged."""
    rows: list[tuple[int, tuple[object, ...]]] = []
    for e in events:
        if getattr(e, "sender", None) not in OPENED:
            continue
        if isinstance(e, TrackerReports):
            word = {"Pos_Quat": "pos", "Velocity": "vel", "Acceleration": "acc"}[e.kind.split()[-1]]
            for i in range(len(e)):
                dt = None if e.dt is None else round(float(e.dt[i]), 2)
                row = (word, int(e.sensor[i]), rounded(e.vector[i]), rounded(e.quaternion[i]), dt)
                rows.append((int(e.order[i]), row))
        elif isinstance(e, MessageReceived):
            m = e.message
            if isinstance(m, ButtonChange):
                rows.append((e.order, ("button", m.button, m.state)))
            elif isinstance(m, ButtonStates):
                rows.append((e.order, ("states", m.states)))
            elif isinstance(m, DialUpdate):
                rows.append((e.order, ("dial", m.dial, round(m.delta, 2))))
    return [row for _, row in sorted(rows, key=lambda r: r[0])]


def session_events(path: Path) -> list[object]:
    client = VrpnSession(Role.CLIENT, now=0.0)
    events: list[object] = []
    for record in read_log(str(path)):
        events += client.feed(record.data, 0.0)
    assert client.stats.dropped == 0
    return events


def test_real_log_gives_what_the_real_client_printed(captures: Path) -> None:
    expected = printed(captures)
    assert len(expected) == 1200 + 34  # every report line (grep -c), tracker, button, dial
    got = ours(session_events(captures / LOG))
    assert got == expected


def test_log_entries_keep_their_recorded_times(captures: Path) -> None:
    records = list(read_log(str(captures / LOG)))
    assert records[0].data.startswith(b"vrpn: ver. 07.38") and records[0].time is None
    times = [r.time for r in records[1:]]
    assert len(times) == 1278
    # the server logged for 4.5 s, from the first description (00 04 36 02 µs) to the drop
    assert times[0] == pytest.approx(0x6B03F212 + 0x00043602 * 1e-6)
    assert times[-1] - times[0] == pytest.approx(4.5075, abs=0.001)


async def read_into_world(spec: str) -> Gateway:
    gateway = Gateway().add(open_source(parse_endpoint(spec)))
    await asyncio.wait_for(gateway.run(), 20)  # ends by itself at the end of the file
    return gateway


@pytest.mark.parametrize("prefix", ["", "vrpn:"])
async def test_log_is_a_source_by_suffix_or_prefix(captures: Path, prefix: str) -> None:
    gateway = await read_into_world(prefix + str(captures / LOG))
    assert not gateway.failures
    (source,) = gateway.services
    assert source.stats.dropped == 0
    assert source.name == f"vrpn:{captures / LOG}"
    for sensor in (0, 1):
        device = gateway.world.device(source.name, f"Tracker0/{sensor}")
        assert device is not None and device.position == (0.0, 0.0, 0.0)


def cut_and_garbled(captures: Path, tmp_path: Path) -> dict[str, tuple[Path, int, str]]:
    """name -> (file, offset of the damaged entry, words of the reason)."""
    data = (captures / LOG).read_bytes()
    entries = [offset for offset, _ in iter_log(data)]
    cut_at = entries[100] + 30  # inside the 101st entry's body
    garbled = bytearray(data)
    garbled[entries[200] + 16 : entries[200] + 20] = b"\x7f\xff\xff\xff"  # its payload length
    files = {
        "cut": (data[:cut_at], entries[100], "ends inside an entry"),
        "garbled": (bytes(garbled), entries[200] + 16, "bad payload length"),
    }
    out = {}
    for name, (content, offset, reason) in files.items():
        path = tmp_path / f"{name}.vrpn"
        path.write_bytes(content)
        out[name] = (path, offset, reason)
    return out


def test_damaged_log_decodes_whole_entries_then_one_error_line(
    captures: Path, tmp_path: Path
) -> None:
    for name, (path, offset, reason) in cut_and_garbled(captures, tmp_path).items():
        done = subprocess.run(
            [sys.executable, "-m", "robowire.cli", "decode", "vrpn", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "Traceback" not in done.stderr, name
        lines = [json.loads(line) for line in done.stdout.splitlines()]
        whole = 1 + (100 if name == "cut" else 200)  # the cookie and the entries before
        assert [("error" in line) for line in lines] == [False] * whole + [True], name
        assert lines[-1]["offset"] == offset and reason in lines[-1]["error"], name
        assert lines[1]["type"] == "SENDER_DESCRIPTION" and lines[1]["name"] == "Tracker0"


async def test_damaged_log_as_a_source_keeps_what_came_before(
    captures: Path, tmp_path: Path
) -> None:
    path, _, _ = cut_and_garbled(captures, tmp_path)["garbled"]
    gateway = await read_into_world(str(path))
    assert not gateway.failures
    (source,) = gateway.services
    assert source.stats.dropped == 1 and "bad payload length" in source.stats.last_drop_reason
    whole = await read_into_world(str(captures / LOG))
    assert 0 < source.stats.messages_in < whole.services[0].stats.messages_in
    assert gateway.world.device(source.name, "Tracker0/0") is not None


def test_decode_names_the_logged_messages(captures: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "robowire.cli", "decode", "vrpn", str(captures / LOG)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0]["type"] == "cookie" and lines[0]["version"] == "vrpn: ver. 07.38"
    # the first entry, as §12 gives it: type -1, sender 1, 13 body bytes naming Tracker0
    assert lines[1]["offset"] == 24 and lines[1]["length"] == 24 + 13
    assert lines[-1]["type"] == "DISCONNECT_MESSAGE"
    kinds = [line["type"] for line in lines]
    assert kinds.count("vrpn_Tracker Pos_Quat") == sum(
        1 for r in printed(captures) if r[0] == "pos"
    )


entries = st.builds(
    Frame,
    sender=st.integers(0, 1999),
    type=st.integers(-5, 1999),
    sec=st.integers(0, 2**32 - 1),
    usec=st.integers(0, 999_999),
    body=st.binary(max_size=200),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(entries, max_size=10))
def test_entries_round_trip(frames: list[Frame]) -> None:
    data = (captures_cookie := b"vrpn: ver. 07.38  0" + bytes(5)) + b"".join(
        encode_log_entry(f) for f in frames
    )
    assert len(captures_cookie) == 24
    assert [f for _, f in iter_log(data)] == frames


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_after_the_cookie_raise_only_decode_error(data: bytes) -> None:
    try:
        for offset, _ in iter_log(b"vrpn: ver. 07.38  0" + bytes(5) + data):
            assert 24 <= offset < 24 + len(data)
    except DecodeError as exc:
        assert 24 <= exc.offset <= 24 + len(data)


SPEED_5_JSON = ("--speed", "5", "--json")


def test_replay_plays_the_log_with_its_recorded_timing(captures: Path) -> None:
    """`robowire replay run.vrpn`: the log spans 4.5 s; at speed 5 that is at least 0.9 s."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "robowire.cli", "replay", str(captures / LOG), *SPEED_5_JSON],
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert {row["device"] for row in rows} >= {"Tracker0/0", "Tracker0/1", "Button0", "Dial0"}
    assert elapsed >= 4.5 / 5 * 0.9


# -- writing: record ... -o run.vrpn -----------------------------------------------------------


def entries_of(data: bytes) -> list[tuple[int, int, int, bytes]]:
    """(type, sender, length, raw entry bytes) walked by hand from §12: six big-endian words,
    then exactly `length` body bytes (no padding)."""
    out = []
    offset = 24
    while offset < len(data):
        type_, sender, _, _, length, slot = struct.unpack_from(">iiIIii", data, offset)
        assert slot == 0  # the stale pointer slot is always written as 0
        out.append((type_, sender, length, data[offset : offset + 24 + length]))
        offset += 24 + length
    assert offset == len(data)  # nothing between or after entries
    return out


def description_entry(data: bytes, name: str) -> bytes:
    (raw,) = [
        e[3] for e in entries_of(data) if e[0] == -2 and e[3][28:].rstrip(b"\0") == name.encode()
    ]
    return raw


def test_record_writes_the_mainline_log_layout(captures: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.vrpn"
    done = subprocess.run(
        [sys.executable, "-m", "robowire.cli", "record", str(captures / LOG), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    real, ours_ = (captures / LOG).read_bytes(), out.read_bytes()
    assert ours_[:24] == real[:24]  # the file cookie, byte for byte
    written = entries_of(ours_)
    assert written[-1][:3] == (-5, 0, 0)  # the disconnect entry the mainline logs at a drop
    # a description entry is laid out as the real one: type, length, slot and body bytes equal
    # (the sender word is the described id and the times are the writer's own)
    for name in ("vrpn_Tracker Pos_Quat", "vrpn_Tracker Velocity"):
        mine, theirs = description_entry(ours_, name), description_entry(real, name)
        assert mine[:4] == theirs[:4] and mine[16:] == theirs[16:]
    # a pose report: same 24 + 64 bytes layout as the real server's
    real_pose = next(e for e in entries_of(real) if e[0] >= 0 and e[2] == 64)
    our_pose = [e for e in written if e[0] >= 0 and e[2] == 64]
    assert our_pose and len(our_pose[0][3]) == len(real_pose[3]) == 88
    # and our reader plays it back: the trackers' poses as the real client printed them
    client = VrpnSession(Role.CLIENT, now=0.0)
    events: list[object] = []
    for record in read_log(str(out)):
        events += client.feed(record.data, 0.0)
    assert client.stats.dropped == 0
    poses = [e for e in events if isinstance(e, TrackerReports) and e.kind.endswith("Pos_Quat")]
    # a VRPN file's devices are VRPN's own: the writer keeps the sender and its sensors
    assert {e.sender for e in poses} == {"Tracker0"}
    assert {int(n) for e in poses for n in e.sensor} == {0, 1}
    for e in poses:
        assert np.allclose(e.vector, 0.0) and np.allclose(e.quaternion, [0.0, 0.0, 0.0, 1.0])
