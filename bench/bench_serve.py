"""VRPN server send cost: `robowire sim vrpn --count 10 --rate 1000` against the floor of
Python socket writes.

Two server processes, each read by the same bare TCP client (its own process: it sends the
VRPN cookie, then reads, counts whole messages by their length fields and discards them):

* sim: the real CLI, `robowire sim vrpn --count 10 --rate 1000` (Pos_Quat, Velocity and
  Acceleration of 10 sensors each frame: 30k messages/s when it keeps up);
* floor: an asyncio server on the same event loop (uvloop when installed) that paces itself
  the way the simulator does and writes, every frame, the same number of pre-encoded bytes
  (one write per frame, as the simulator's one flush per frame).

Each process's CPU comes from /proc/<pid>/stat over the same window. Printed: messages/s
read, CPU share, CPU per 1,000 messages/s, and the ratio sim / floor. The two alternate
(floor, sim, floor, sim) and the lower of each pair is kept: the machine is shared.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SENSORS = 10
RATE = 1000
WARMUP = 2.0
WINDOW = 8.0
SRC = str(Path(__file__).resolve().parents[1] / "src")
COOKIE = b"vrpn: ver. 07.38  0\0\0\0\0\0"
FRAME_BYTES = SENSORS * (88 + 96 + 96)  # one frame: Pos_Quat (88), Velocity, Acceleration (96)

READER = r"""
import socket, struct, sys, time
port, seconds = int(sys.argv[1]), float(sys.argv[2])
sock = socket.create_connection(("127.0.0.1", port))
sock.sendall(b"vrpn: ver. 07.38  0\0\0\0\0\0")
buf = bytearray()
skip = 24
messages = 0
samples = []
end = time.time() + seconds
next_sample = 0.0
unpack = struct.Struct(">I").unpack_from
while True:
    now = time.time()
    if now >= next_sample:
        samples.append((now, messages))
        next_sample = now + 0.05
        if now >= end:
            break
    data = sock.recv(1 << 18)
    if not data:
        break
    buf += data
    if skip:
        cut = min(skip, len(buf))
        del buf[:cut]
        skip -= cut
    offset = 0
    size = len(buf)
    while size - offset >= 24:
        length = unpack(buf, offset)[0]
        used = 24 + ((length - 24 + 7) & ~7)
        if size - offset < used:
            break
        offset += used
        messages += 1
    del buf[:offset]
sock.close()
print(repr(samples))
"""

FLOOR = r"""
import asyncio, sys, time
sys.path.insert(0, sys.argv[3])
from robowire.transport import run
from robowire.timebase import monotonic

from robowire.protocols.vrpn.codec import encode_frame

port_file, sensors, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[4])
frame = b"".join(  # a frame's worth of whole messages, encoded once
    encode_frame(1, 4 + k, bytes(64 if k == 0 else 72)) for _ in range(sensors) for k in range(3)
)
links = []

class Link(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        transport.write(b"vrpn: ver. 07.38  0\0\0\0\0\0")
        links.append(self)
    def connection_lost(self, exc):
        links.remove(self)

async def main():
    server = await asyncio.get_running_loop().create_server(Link, "127.0.0.1", 0)
    with open(port_file, "w") as f:
        f.write(str(server.sockets[0].getsockname()[1]))
    next_frame = monotonic()
    while True:
        for link in links:  # the same bytes per frame as the simulator's frame
            if link.transport.get_write_buffer_size() < 1 << 20:
                link.transport.write(frame)
        next_frame += 1.0 / rate
        delay = next_frame - monotonic()
        if delay < -0.1:
            next_frame = monotonic()
            delay = 0.0
        await asyncio.sleep(max(delay, 0.0))

run(main())
"""


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` (from /proc, no psutil)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC}


def start_sim(port: int, *extra: str) -> subprocess.Popen[bytes]:
    """`robowire sim vrpn` as the CLI runs it (this checkout's sources)."""
    args = ["sim", "vrpn", "--count", str(SENSORS), "--rate", str(RATE), "--port", str(port)]
    return subprocess.Popen(
        [sys.executable, "-c", "from robowire.cli import main; main()", *args, *extra],
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_port(port: int, timeout: float = 20.0) -> None:
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


def measure(server: subprocess.Popen[bytes], port: int) -> dict[str, float]:
    """Read `server` with the bare client for WARMUP + WINDOW s; its CPU over the window."""
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(port), str(WARMUP + WINDOW + 0.5)],
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(WARMUP)
    t0, c0 = time.time(), cpu_seconds(server.pid)
    time.sleep(WINDOW)
    t1, c1 = time.time(), cpu_seconds(server.pid)
    out, _ = reader.communicate(timeout=30)
    samples: list[tuple[float, int]] = eval(out)  # our own child's repr of a list of tuples

    def at(t: float) -> float:
        before = [s for s in samples if s[0] <= t] or samples[:1]
        return float(before[-1][1])

    messages = (at(t1) - at(t0)) / (t1 - t0)
    share = (c1 - c0) / (t1 - t0)
    return {"rate": messages, "cpu": share, "per_k": share / (messages / 1000.0)}


def run_sim(*extra: str) -> dict[str, float]:
    port = free_port()
    sim = start_sim(port, *extra)
    try:
        wait_port(port)
        return measure(sim, port)
    finally:
        sim.terminate()
        sim.wait(10)


def run_floor() -> dict[str, float]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        port_file = Path(tmp) / "port"
        floor = subprocess.Popen(
            [sys.executable, "-c", FLOOR, str(port_file), str(SENSORS), SRC, str(RATE)],
            env=env(),
        )
        try:
            end = time.time() + 20
            while not (port_file.exists() and port_file.read_text()) and time.time() < end:
                time.sleep(0.05)
            port = int(port_file.read_text())
            return measure(floor, port)
        finally:
            floor.terminate()
            floor.wait(10)


def best(runs: list[dict[str, float]]) -> dict[str, float]:
    return min(runs, key=lambda r: r["per_k"])


def show(label: str, r: dict[str, Any]) -> None:
    print(
        f"     {label:<40} {r['rate']:>9,.0f} msg/s  {r['cpu']:>6.1%} of a core"
        f"  {r['per_k']:>7.3%} per 1k msg/s"
    )


def main() -> None:
    print(
        f"   VRPN server, {SENSORS} sensors at {RATE} Hz (pose, velocity, acceleration), "
        f"a bare TCP client reading; {WINDOW:.0f} s windows, best of 2:"
    )
    floors, sims = [], []
    for _ in range(2):
        floors.append(run_floor())
        sims.append(run_sim())
    floor, sim = best(floors), best(sims)
    show("robowire sim vrpn (CLI process)", sim)
    show(f"floor: {FRAME_BYTES} pre-encoded bytes per frame", floor)
    print(f"     ratio sim / floor (CPU per 1k msg/s)      {sim['per_k'] / floor['per_k']:>6.2f} x")
    print("     target: sim <= 0.36% of a core per 1k msg/s")


if __name__ == "__main__":
    main()
