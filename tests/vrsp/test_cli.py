"""The `robowire` command with VRSP, run as separate processes on 127.0.0.1: decode on a pcap
and on a raw datagram, listen on a real socket, serve to a real receiver, and one-line errors.
The datagrams are the hand-built vectors of test_codec (bytes written out by hand)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import dpkt
import pytest

from robowire.protocols.vrsp.events import SwarmFrame
from robowire.protocols.vrsp.session import ReceiverSession
from support import free_udp_port

from .test_codec import HAND_DATA, HAND_DEF

SRC = Path(__file__).resolve().parents[2] / "src"
ENV = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
ROBOWIRE = [sys.executable, "-m", "robowire.cli"]

pytestmark = pytest.mark.timeout(90)


def robowire(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ROBOWIRE, *args], env=ENV, capture_output=True, text=True, timeout=timeout
    )


def write_pcap(path: Path, datagrams: list[bytes]) -> None:
    with open(path, "wb") as f:
        writer = dpkt.pcap.Writer(f)
        for i, data in enumerate(datagrams):
            udp = dpkt.udp.UDP(sport=50000, dport=9742, data=data)
            udp.ulen = 8 + len(data)
            ip = dpkt.ip.IP(src=bytes([127, 0, 0, 1]), dst=bytes([127, 0, 0, 1]), p=17, data=udp)
            ip.len = 20 + len(udp)
            eth = dpkt.ethernet.Ethernet(
                src=bytes(6), dst=bytes(6), type=dpkt.ethernet.ETH_TYPE_IP, data=ip
            )
            writer.writepkt(bytes(eth), ts=1000.0 + i)


def test_decode_a_pcap_shows_the_definition_used_for_each_data_packet(tmp_path: Path) -> None:
    path = tmp_path / "hand.pcap"
    write_pcap(path, [HAND_DATA, HAND_DEF, HAND_DATA, b"junk"])
    run = robowire("decode", "vrsp", str(path))
    assert "3 messages, 1 errors" in run.stderr  # the junk is an error line; decoding went on
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert [line.get("type", "error") for line in lines] == [
        "VRSP_DATA", "VRSP_DEF", "VRSP_DATA", "error",
    ]  # fmt: skip
    early, definition, data, junk = lines
    assert early["definition"] is None and early["frame"] == 7  # no DEF yet: header only
    assert definition["instance"] == 0x01020304 and definition["device_count"] == 2
    assert definition["root"] == {"latitude": 1.5, "longitude": -2.25, "altitude": 100.0}
    assert definition["definitions"][0]["definition"]["DeviceModel"] == "X1"
    assert definition["definitions"][0]["ids"] == [5, 7]
    assert data["definition"] == {"datagram": 1, "instance": 0x01020304}
    assert data["records"] == [
        {"id": 5, "definition": 0, "position": [1.0, 2.0, -0.5], "color": [255, 128, 0],
         "heading": 90.0},
    ]  # fmt: skip
    assert data["time"] == 1002.0 and data["frame"] == 7
    assert "not a VRSP packet" in junk["error"]


def test_decode_a_raw_datagram_file(tmp_path: Path) -> None:
    path = tmp_path / "def.bin"
    path.write_bytes(HAND_DEF)
    run = robowire("decode", "vrsp", str(path))
    assert run.returncode == 0, run.stderr
    (line,) = [json.loads(x) for x in run.stdout.splitlines()]
    assert line["type"] == "VRSP_DEF" and line["definitions"][0]["ids"] == [5, 7]


def test_listen_takes_a_real_udp_stream() -> None:
    port = free_udp_port()
    listen = subprocess.Popen(
        [*ROBOWIRE, "listen", f"vrsp://127.0.0.1:{port}", "--json", "--count", "1"],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            deadline = time.monotonic() + 30
            while listen.poll() is None and time.monotonic() < deadline:
                sock.sendto(HAND_DEF, ("127.0.0.1", port))  # until it listens: UDP is lossy
                sock.sendto(HAND_DATA, ("127.0.0.1", port))
                time.sleep(0.2)
        out, err = listen.communicate(timeout=30)
    finally:
        listen.kill()
    assert listen.returncode == 0, err
    line = json.loads(out.splitlines()[0])
    assert line["device"] == "5" and line["kind"] == "drone"
    assert line["position"] == [1.0, -0.5, 2.0]  # x east, z north, y up
    assert line["telemetry"]["heading"] == {"value": 90.0, "unit": "deg"}
    assert line["telemetry"]["led_green"] == {"value": 128.0, "unit": "1"}


def test_serve_sends_the_world_to_a_real_receiver(tmp_path: Path) -> None:
    path = tmp_path / "hand.pcap"
    write_pcap(path, [HAND_DEF, HAND_DATA])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.settimeout(1.0)
        port = sock.getsockname()[1]
        serve = subprocess.Popen(
            [*ROBOWIRE, "serve", f"vrsp://127.0.0.1:{port}?rate=20", "--from", f"vrsp:{path}",
             "--duration", "20"],
            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        receiver = ReceiverSession()
        got: list[SwarmFrame] = []
        try:
            deadline = time.monotonic() + 30
            while len(got) < 3 and time.monotonic() < deadline:
                try:
                    data, addr = sock.recvfrom(65535)
                except TimeoutError:
                    continue
                events = receiver.feed_datagram(data, addr, 0.0)
                got += [e for e in events if isinstance(e, SwarmFrame)]
        finally:
            serve.kill()
            _, err = serve.communicate(timeout=30)
    assert len(got) == 3, err
    frame = got[-1]
    assert frame.table.root == pytest.approx((1.5, -2.25, 100.0), abs=1e-6)
    assert frame.swarm.position.tolist() == [[1.0, 2.0, -0.5]]  # back in the wire's frame
    assert [f.frame for f in got] == sorted(f.frame for f in got)
    assert "sending to 127.0.0.1" in err


def test_bad_options_are_one_line() -> None:
    run = robowire("listen", "vrsp://127.0.0.1:9?framing=maybe", "--duration", "1")
    assert run.returncode != 0
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and "framing" in lines[0], run.stderr
    run = robowire("serve", "vrsp://127.0.0.1:9?size=70000", "--from", "vrsp://127.0.0.1:9")
    assert run.returncode != 0 and len(run.stderr.splitlines()) == 1, run.stderr
    assert "size" in run.stderr


def test_sim_to_listen_end_to_end() -> None:
    """`robowire sim vrsp` -> `robowire listen vrsp://` on loopback, both real processes."""
    port = free_udp_port()
    listen = subprocess.Popen(
        [*ROBOWIRE, "listen", f"vrsp://127.0.0.1:{port}", "--json", "--count", "40",
         "--duration", "60"],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    sim = subprocess.Popen(
        [*ROBOWIRE, "sim", "vrsp", "--drones", "20", "--to", f"127.0.0.1:{port}",
         "--set", "lat=10", "--set", "lon=20", "--set", "alt=5", "--duration", "60"],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        out, err = listen.communicate(timeout=80)
    finally:
        sim.kill()
        listen.kill()
        _, sim_err = sim.communicate(timeout=30)
    assert listen.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 40
    assert {line["device"] for line in lines} == {str(i) for i in range(1, 21)}
    for line in lines:
        assert line["kind"] == "drone"
        lat, lon, alt = line["geodetic"]
        assert abs(lat - 10) < 0.01 and abs(lon - 20) < 0.01 and alt > 5  # above the root
        assert line["position"][2] == pytest.approx(alt - 5, abs=1e-3)  # up is up
        assert line["attributes"]["model"]
    assert f"sending to 127.0.0.1:{port}" in sim_err


def test_listen_reads_a_capture_through_the_receiver(tmp_path: Path) -> None:
    path = tmp_path / "hand.pcap"
    write_pcap(path, [HAND_DATA, HAND_DEF, HAND_DATA])  # the first DATA has no DEF yet
    run = robowire("listen", f"vrsp:{path}", "--json")
    assert run.returncode == 0, run.stderr
    (line,) = [json.loads(x) for x in run.stdout.splitlines()]
    assert line["device"] == "5" and line["position"] == [1.0, -0.5, 2.0]
    assert line["geodetic"][0] == pytest.approx(1.5 + 2.0 / 110_574, abs=1e-4)  # 2 m north


def test_sim_sends_to_loopback_on_the_port_given() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.settimeout(1.0)
        port = sock.getsockname()[1]
        sim = subprocess.Popen(
            [*ROBOWIRE, "sim", "vrsp", "--drones", "5", "--port", str(port), "--duration", "60"],
            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        names: set[bytes] = set()
        try:
            deadline = time.monotonic() + 60
            while len(names) < 2 and time.monotonic() < deadline:
                try:
                    data, _ = sock.recvfrom(65535)
                except TimeoutError:
                    continue
                names.add(data[:10])
        finally:
            sim.kill()
            sim.communicate(timeout=30)
    assert names == {b"\x08VRSP_DEF\x01", b"\x09VRSP_DATA"}


def test_sim_rejects_a_bad_destination_in_one_line() -> None:
    run = robowire("sim", "vrsp", "--to", "127.0.0.1:x", "--duration", "1")
    assert run.returncode != 0
    assert run.stderr.splitlines() == [
        "robowire: error: --to 127.0.0.1:x: the port must be a number"
    ]
