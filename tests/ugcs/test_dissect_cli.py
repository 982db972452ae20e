"""`robowire decode ugcs` on the golden capture (jsonl) and on a pcap; `robowire sim ugcs` run as
a process."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import dpkt
import pytest
from google.protobuf import text_format

from robowire.protocols.ugcs.dissect import dissect
from robowire.protocols.ugcs.proto import ucs_vsm_pb2 as pb

SRC = Path(__file__).resolve().parents[2] / "src"
ENV = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures" / "ugcs"
CAPTURE = CAPTURES / "capture_hello_basic.jsonl"
DECODED = CAPTURES / "capture_hello_basic.decoded.txt"

pytestmark = pytest.mark.timeout(60)


def robowire(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "robowire.cli", *args],
        env=ENV, capture_output=True, text=True, timeout=30,
    )  # fmt: skip


def golden() -> list[tuple[str, int, pb.Vsm_message]]:
    """(direction, payload length, message) of every frame in the independently decoded text."""
    out = []
    blocks = re.split(r"^# frame ", DECODED.read_text(encoding="utf-8"), flags=re.M)[1:]
    for block in blocks:
        header, _, body = block.partition("\n")
        direction = header.split()[3]
        found = re.search(r"payload_len=(\d+)", header)
        assert found, header
        length = int(found.group(1))
        out.append((direction, length, text_format.Parse(body, pb.Vsm_message())))
    return out


def test_every_frame_of_the_golden_capture_decodes_as_the_reference_says() -> None:
    assert CAPTURE.is_file() and DECODED.is_file()  # a missing file fails, never skips
    rows = list(dissect(str(CAPTURE)))
    want = golden()
    assert len(want) == 16
    assert not [r for r in rows if "error" in r]
    assert len(rows) == len(want)
    for row, (direction, length, _msg) in zip(rows, want, strict=True):
        assert row["direction"] == direction
        assert row["length"] == length
        assert row["message"] == json.loads(json.dumps(row["message"]))  # JSON-ready
    kinds = [r["type"] for r in rows]
    assert kinds[:5] == [
        "register_peer",
        "register_peer",
        "register_device",
        "device_response",
        "device_status",
    ]
    assert "ping" in kinds and "device_commands" in kinds


def test_decoded_messages_equal_the_reference_messages() -> None:
    from google.protobuf import json_format

    rows = list(dissect(str(CAPTURE)))
    for row, (_, _, msg) in zip(rows, golden(), strict=True):
        ours = json_format.ParseDict(row["message"], pb.Vsm_message())
        assert ours == msg


def _tcp(src: tuple[str, int], dst: tuple[str, int], seq: int, payload: bytes, flags: int) -> bytes:
    tcp = dpkt.tcp.TCP(sport=src[1], dport=dst[1], seq=seq, flags=flags, data=payload)
    tcp.off = 5
    ip = dpkt.ip.IP(src=socket.inet_aton(src[0]), dst=socket.inet_aton(dst[0]), p=6, data=tcp)
    ip.len = len(ip)
    return bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=ip))


def test_decode_pcap_both_directions_split_across_segments(tmp_path: Path) -> None:
    ucs, vsm = ("127.0.0.1", 40000), ("127.0.0.1", 5556)
    streams: dict[str, bytes] = {"ucs->vsm": b"", "vsm->ucs": b""}
    for line in CAPTURE.read_text().splitlines():
        item = json.loads(line)
        streams[item["dir"]] += bytes.fromhex(item["hex"])
    path = tmp_path / "ugcs.pcap"
    with path.open("wb") as f:
        writer = dpkt.pcap.Writer(f)
        ts = 1.0
        for direction, (src, dst) in (("vsm->ucs", (vsm, ucs)), ("ucs->vsm", (ucs, vsm))):
            data = streams[direction]
            writer.writepkt(_tcp(src, dst, 100, b"", dpkt.tcp.TH_SYN), ts=ts)
            seq = 101
            for start in range(0, len(data), 97):  # segments that cut frames anywhere
                chunk = data[start : start + 97]
                ts += 0.001
                writer.writepkt(_tcp(src, dst, seq, chunk, dpkt.tcp.TH_ACK), ts=ts)
                seq += len(chunk)
    rows = list(dissect(str(path)))
    assert not [r for r in rows if "error" in r]
    assert len(rows) == 16
    assert sum(r["direction"] == "ucs->vsm" for r in rows) == sum(
        d == "ucs->vsm" for d, _, _ in golden()
    )


def test_a_damaged_stream_is_one_error_and_the_other_direction_goes_on(tmp_path: Path) -> None:
    lines = CAPTURE.read_text().splitlines()
    bad = json.dumps({"t": 0.5, "conn": "c1", "dir": "ucs->vsm", "hex": "021005"})
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([*lines[:4], bad, "not json", *lines[4:]]) + "\n")
    rows = list(dissect(str(path)))
    errors = [r for r in rows if "error" in r]
    assert len(errors) == 2  # the frame without device_id, the line that is not JSON
    from_vsm = sum(d == "vsm->ucs" for d, _, _ in golden())
    assert sum(r.get("direction") == "vsm->ucs" and "error" not in r for r in rows) == from_vsm


def test_cli_decode_as_a_process() -> None:
    run = robowire("decode", "ugcs", str(CAPTURE))
    assert run.returncode == 0, run.stderr
    rows = [json.loads(x) for x in run.stdout.splitlines() if x.startswith("{")]
    assert len(rows) == 16


def test_cli_sim_as_a_process_speaks_first() -> None:
    sim = subprocess.Popen(
        [sys.executable, "-m", "robowire.cli", "sim", "ugcs", "--port", "0", "--count", "2",
         "--duration", "20"],
        env=ENV, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert sim.stderr is not None
        line = sim.stderr.readline()  # the CLI says where it listens on stderr
        found = re.search(r"listening on ([\d.]+):(\d+)", line)
        assert found, line
        with socket.create_connection((found.group(1), int(found.group(2))), timeout=10) as s:
            data = s.recv(64)
        size = data[0]
        msg = pb.Vsm_message.FromString(data[1 : 1 + size])
        assert msg.device_id == 0 and msg.register_peer.peer_type == 1
    finally:
        sim.terminate()
        sim.wait(10)


@pytest.mark.parametrize("setting", ["keep_alive=-1", "first_id=0", "first_id=1.5"])
def test_cli_sim_bad_setting_is_one_line(setting: str) -> None:
    run = robowire("sim", "ugcs", "--set", setting, "--duration", "1")
    assert run.returncode != 0
    assert len(run.stderr.splitlines()) == 1, run.stderr
    assert setting.split("=")[0] in run.stderr


def test_cli_sim_on_a_busy_port_is_one_line() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        run = robowire("sim", "ugcs", "--port", str(port), "--duration", "2")
    assert run.returncode != 0
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert str(port) in lines[0] and "in use" in lines[0]


@pytest.mark.parametrize(
    ("setting", "word"),
    [("camera=yes", "camera"), ("origin=1,2", "origin"), ("rate=3", "'rate'")],
)
def test_cli_sim_settings_are_checked(setting: str, word: str) -> None:
    run = robowire("sim", "ugcs", "--set", setting, "--duration", "1")
    assert run.returncode != 0
    assert len(run.stderr.splitlines()) == 1, run.stderr
    assert word in run.stderr
