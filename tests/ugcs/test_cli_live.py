"""`robowire serve ugcs://` and `robowire sim ugcs` as processes: a raw UCS on a plain socket
sees world devices (a SpyGlass simulator's nodes) as UgCS vehicles, and a clean Ctrl-C
unregisters them."""

from __future__ import annotations

import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from robowire.protocols.ugcs.proto import ucs_vsm_defs_pb2 as defs
from robowire.protocols.ugcs.proto import ucs_vsm_pb2 as pb

from .rawucs import frame

SRC = Path(__file__).resolve().parents[2] / "src"
ENV = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
ROBOWIRE = [sys.executable, "-m", "robowire.cli"]

pytestmark = pytest.mark.timeout(90)


@contextmanager
def server(*args: str) -> Iterator[tuple[str, int]]:
    """A `robowire sim|serve` process; yields the address it printed. Ends it with Ctrl-C."""
    process = subprocess.Popen([*ROBOWIRE, *args], stderr=subprocess.PIPE, text=True, env=ENV)
    rest: list[str] = []
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.search(r"on (127\.0\.0\.1):(\d+); Ctrl-C ends it", line)
        assert found, line
        stream = process.stderr
        reader = threading.Thread(target=lambda: rest.extend(stream), daemon=True)
        reader.start()
        yield found.group(1), int(found.group(2))
    finally:
        process.send_signal(signal.SIGINT)
        try:
            assert process.wait(15) == 130  # Ctrl-C is a clean end
            assert "Traceback" not in "".join(rest)
        finally:
            if process.poll() is None:
                process.kill()


class Ucs:
    """The UCS side on a blocking socket, from the sheet: LEB128 length + Vsm_message."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=20)
        self.buf = b""

    def read(self) -> pb.Vsm_message | None:
        while True:
            size = shift = used = 0
            for index, byte in enumerate(self.buf, 1):
                size |= (byte & 0x7F) << shift
                shift += 7
                if not byte & 0x80:
                    used = index
                    break
            if used and len(self.buf) >= used + size:
                payload, self.buf = self.buf[used : used + size], self.buf[used + size :]
                return pb.Vsm_message.FromString(payload)
            data = self.sock.recv(65536)
            if not data:
                return None
            self.buf += data

    def send(self, msg: pb.Vsm_message) -> None:
        self.sock.sendall(frame(msg))


def test_serve_offers_world_devices_as_vehicles_and_unregisters_them_on_ctrl_c() -> None:
    with server("sim", "spyglass", "--port", "0", "--count", "3", "--rate", "20") as sim:
        with server(
            "serve", "ugcs://127.0.0.1:0", "--from", f"spyglass://{sim[0]}:{sim[1]}"
        ) as vsm:
            ucs = Ucs(vsm)
            first = ucs.read()
            assert first is not None and first.HasField("register_peer")
            hello = pb.Vsm_message(device_id=0)
            hello.register_peer.peer_id = 99
            hello.register_peer.version_major = 4
            hello.register_peer.version_minor = 4
            ucs.send(hello)
            registered: dict[int, dict[str, int]] = {}
            positions: dict[int, float] = {}
            while len(positions) < 3:
                msg = ucs.read()
                assert msg is not None
                if msg.HasField("register_device"):
                    fields = {
                        f.name: f.field_id
                        for sub in msg.register_device.subsystems
                        for f in sub.telemetry_fields
                    }
                    registered[msg.device_id] = fields
                    ack = pb.Vsm_message(device_id=msg.device_id, message_id=msg.message_id)
                    ack.device_response.code = defs.STATUS_OK
                    ucs.send(ack)
                elif msg.HasField("device_status"):
                    lat_id = registered[msg.device_id]["latitude"]
                    for t in msg.device_status.telemetry_fields:
                        if t.field_id == lat_id and t.value.HasField("double_value"):
                            positions[msg.device_id] = t.value.double_value
            # ENU nodes placed from the default origin (56.9496 N): radians on the wire
            for lat in positions.values():
                assert math.degrees(lat) == pytest.approx(56.9496, abs=0.01)
        # serve got Ctrl-C: every vehicle is unregistered before the connection closes
        gone = set()
        while (msg := ucs.read()) is not None:
            if msg.HasField("unregister_device"):
                gone.add(msg.device_id)
        assert gone == set(registered)
