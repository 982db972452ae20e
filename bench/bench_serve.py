"""VRPN server and client cost against mainline VRPN, side by side in one run.

Server: three server processes, each read by the same bare TCP client (its own process: it
sends the VRPN cookie, then reads, counts whole messages by their length fields and discards
them):

* sim: the real CLI, `robowire sim vrpn --count 10 --rate 1000` (Pos_Quat, Velocity and
  Acceleration of 10 sensors each frame: 30k messages/s when it keeps up);
* mainline: VRPN's own `vrpn_server` with `vrpn_Tracker_NULL Tracker0 10 1000` (the same three
  messages per sensor per frame; its 1 ms sleep per loop paces it a little below 1 kHz);
* floor: an asyncio server on the same event loop (uvloop when installed) that paces itself
  the way the simulator does (a timer callback per frame) and writes, every frame, the same
  number of pre-encoded bytes (one write per frame, as the simulator's one flush per frame).

Then the same two servers at a second load, many senders as a mocap system with many rigid
bodies serves: `sim vrpn --count 1 --rate 100 --set trackers=100` against 100
`vrpn_Tracker_NULL TrackerN 1 100` (30k messages/s again, in 100 frames/s; `LOADS`).

Client: the mainline server read by mainline `vrpn_print_devices` (TCP only, printing every
100th report of each sensor, so that printf is not what is timed) and by robowire's client
(`vrpn.driver.connect` + `VrpnSession`, TCP only, reports decoded into numpy columns and
counted), each in its own process.

Each process's CPU comes from /proc/<pid>/stat over the same window. Printed: messages/s
read, CPU share, CPU per 1,000 messages/s, and the ratios (the table's "vs peer" of the VRPN
rows: sim / mainline server, our client / vrpn_print_devices). The contestants alternate
(mainline, sim, floor, mainline, sim, floor, ...) for 3 rounds; each ratio is the median of
the rounds' ratios, printed with its spread (bench/rounds.py): the machine is shared. The
mainline binaries are found at ../shared/peers/vrpn from the repository root, or
ROBOWIRE_VRPN_SERVER / ROBOWIRE_VRPN_PRINT_DEVICES.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bench
from bench import rounds

SENSORS = 10
RATE = 1000
WARMUP = 2.0
WINDOW = 8.0
WINDOW_QUICK = 4.0
ROOT = Path(__file__).resolve().parents[1]
SRC = str(ROOT / "src")
PEERS = ROOT.parent / "shared" / "peers" / "vrpn"
MAINLINE_SERVER = Path(os.environ.get("ROBOWIRE_VRPN_SERVER") or PEERS / "vrpn_server")
PRINT_DEVICES = Path(os.environ.get("ROBOWIRE_VRPN_PRINT_DEVICES") or PEERS / "vrpn_print_devices")
STRIDE = 100  # vrpn_print_devices prints every STRIDE-th report of each sensor
COOKIE = b"vrpn: ver. 07.38  0\0\0\0\0\0"
FRAME_BYTES = SENSORS * (88 + 96 + 96)  # one frame: Pos_Quat (88), Velocity, Acceleration (96)


@dataclass(frozen=True)
class Load:
    """What both servers serve: `trackers` NULL trackers of `sensors` sensors at `rate` Hz."""

    trackers: int
    sensors: int
    rate: int
    key: str  # its figures' prefix ("" for the first)

    @property
    def text(self) -> str:
        if self.trackers == 1:
            return f"{self.sensors} sensors at {self.rate} Hz"
        return f"{self.trackers} trackers x {self.sensors} sensor at {self.rate} Hz"


LOADS = (
    Load(1, SENSORS, RATE, ""),
    # many senders, as a mocap system with many rigid bodies serves (the same 30k msg/s)
    Load(100, 1, 100, "many_"),
)

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
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Link, "127.0.0.1", 0)
    with open(port_file, "w") as f:
        f.write(str(server.sockets[0].getsockname()[1]))

    def tick(next_frame):  # a timer callback per frame, as the simulator's steps are
        for link in links:  # the same bytes per frame as the simulator's frame
            if link.transport.get_write_buffer_size() < 1 << 20:
                link.transport.write(frame)
        next_frame += 1.0 / rate
        delay = next_frame - monotonic()
        if delay < -0.1:
            next_frame = monotonic()
            delay = 0.0
        loop.call_later(max(delay, 0.0), tick, next_frame)

    tick(monotonic())
    await asyncio.Event().wait()

run(main())
"""


CLIENT = r"""
import asyncio, sys, time
sys.path.insert(0, sys.argv[3])
from robowire.transport import run
from robowire.timebase import monotonic
from robowire.protocols.vrpn import Role, VrpnSession
from robowire.protocols.vrpn.driver import connect
from robowire.protocols.vrpn.events import TrackerReports

port, seconds = int(sys.argv[1]), float(sys.argv[2])
count = [0]

def on_events(_link, events):
    for event in events:
        if type(event) is TrackerReports:
            count[0] += len(event)

def session(_peer, udp):
    return VrpnSession(Role.CLIENT, ping_senders=["Tracker0"], udp_inbound=udp, now=monotonic())

async def main():
    link = await connect("127.0.0.1", port, session, on_events, udp=False)
    samples = []
    end = time.time() + seconds
    while True:
        now = time.time()
        samples.append((now, count[0]))
        if now >= end:
            break
        await asyncio.sleep(0.05)
    link.close()
    print(repr(samples))

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


def start_sim(port: int, *extra: str, load: Load | None = None) -> subprocess.Popen[bytes]:
    """`robowire sim vrpn` as the CLI runs it (this checkout's sources), at `load` (the
    first of LOADS by default)."""
    load = load or LOADS[0]
    args = ["sim", "vrpn", "--count", str(load.sensors), "--rate", str(load.rate)]
    args += ["--port", str(port)]
    if load.trackers > 1:
        args += ["--set", f"trackers={load.trackers}"]
    return subprocess.Popen(
        [sys.executable, "-c", "from robowire.cli import main; main()", *args, *extra],
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_port(
    port: int, timeout: float = 20.0, process: subprocess.Popen[bytes] | None = None
) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server for port {port} exited ({process.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


def serving(
    start: Callable[[int], subprocess.Popen[bytes]], tries: int = 3
) -> tuple[subprocess.Popen[bytes], int]:
    """A server process `start`ed on a free port and listening there; on another port when it
    could not (another process can take a port between `free_port` and the server's bind:
    seen once in a round of this shared machine)."""
    for attempt in range(tries):
        port = free_port()
        process = start(port)
        try:
            wait_port(port, process=process)
            return process, port
        except RuntimeError:
            process.terminate()
            process.wait(10)
            if attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


def window() -> float:
    return WINDOW_QUICK if bench.QUICK else WINDOW


def rate_between(samples: list[tuple[float, int]], t0: float, t1: float) -> float:
    """Messages/s between t0 and t1 from (time, messages so far) samples."""

    def at(t: float) -> float:
        before = [s for s in samples if s[0] <= t] or samples[:1]
        return float(before[-1][1])

    return (at(t1) - at(t0)) / (t1 - t0)


def result(messages: float, cpu: float) -> dict[str, float]:
    return {"rate": messages, "cpu": cpu, "per_k": cpu / (messages / 1000.0)}


def measure(server: subprocess.Popen[bytes], port: int) -> dict[str, float]:
    """Read `server` with the bare client for WARMUP + window s; its CPU over the window."""
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(port), str(WARMUP + window() + 0.5)],
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(WARMUP)
    t0, c0 = time.time(), cpu_seconds(server.pid)
    time.sleep(window())
    t1, c1 = time.time(), cpu_seconds(server.pid)
    out, _ = reader.communicate(timeout=30)
    samples: list[tuple[float, int]] = eval(out)  # our own child's repr of a list of tuples
    return result(rate_between(samples, t0, t1), (c1 - c0) / (t1 - t0))


def run_sim(*extra: str, load: Load | None = None) -> dict[str, float]:
    sim, port = serving(lambda port: start_sim(port, *extra, load=load))
    try:
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


def start_mainline(port: int, config: Path, load: Load | None = None) -> subprocess.Popen[bytes]:
    """Mainline `vrpn_server` serving `load`'s trackers (`vrpn_Tracker_NULL Tracker0 10 1000`
    by default) on 127.0.0.1."""
    load = load or LOADS[0]
    config.write_text(
        "".join(
            f"vrpn_Tracker_NULL\tTracker{i}\t{load.sensors}\t{load.rate}\n"
            for i in range(load.trackers)
        )
    )
    return subprocess.Popen(
        [str(MAINLINE_SERVER), "-f", str(config), "-quiet", "-NIC", "127.0.0.1", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def run_mainline(tmp: Path, load: Load | None = None) -> dict[str, float]:
    server, port = serving(lambda port: start_mainline(port, tmp / "null.cfg", load))
    try:
        return measure(server, port)
    finally:
        server.terminate()
        server.wait(10)


def measure_client(client: subprocess.Popen[Any], count: Any) -> dict[str, float]:
    """The client's CPU and the messages/s it handled (`count()`: messages so far) over the
    window after WARMUP."""
    time.sleep(WARMUP)
    t0, c0, n0 = time.time(), cpu_seconds(client.pid), count()
    time.sleep(window())
    t1, c1, n1 = time.time(), cpu_seconds(client.pid), count()
    return result((n1 - n0) / (t1 - t0), (c1 - c0) / (t1 - t0))


def run_print_devices(port: int, tmp: Path) -> dict[str, float]:
    """vrpn_print_devices (TCP only, every STRIDE-th report printed) reading the server."""
    out = tmp / "print_devices.txt"
    with out.open("wb") as sink:
        client = subprocess.Popen(
            ["stdbuf", "-oL", str(PRINT_DEVICES), "-trackerstride", str(STRIDE),
             f"Tracker0@tcp://127.0.0.1:{port}"],
            stdout=sink,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            # each printed report starts with "Tracker Tracker0@...": STRIDE reports handled
            return measure_client(client, lambda: out.read_bytes().count(b"Tracker ") * STRIDE)
        finally:
            client.terminate()
            client.wait(10)


def run_our_client(port: int) -> dict[str, float]:
    """robowire's client (driver + session, TCP only) reading the server."""
    seconds = WARMUP + window() + 0.5
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, str(port), str(seconds), SRC],
        env=env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(WARMUP)
    t0, c0 = time.time(), cpu_seconds(client.pid)
    time.sleep(window())
    t1, c1 = time.time(), cpu_seconds(client.pid)
    out, _ = client.communicate(timeout=30)
    samples: list[tuple[float, int]] = eval(out)  # our own child's repr of a list of tuples
    return result(rate_between(samples, t0, t1), (c1 - c0) / (t1 - t0))


def clients(tmp: Path) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """(vrpn_print_devices, our client): `rounds.ROUNDS` alternating runs of each against one
    mainline server."""
    server, port = serving(lambda port: start_mainline(port, tmp / "clients.cfg"))
    try:
        theirs, ours = [], []
        for _ in range(rounds.ROUNDS):
            theirs.append(run_print_devices(port, tmp))
            ours.append(run_our_client(port))
        return theirs, ours
    finally:
        server.terminate()
        server.wait(10)


def median(runs: list[dict[str, float]]) -> dict[str, float]:
    """The run of median CPU per message."""
    return sorted(runs, key=lambda r: r["per_k"])[len(runs) // 2]


def ratios(ours: list[dict[str, float]], theirs: list[dict[str, float]]) -> list[float]:
    """CPU per message, ours over theirs, per round (each pair run one after the other)."""
    return [a["per_k"] / b["per_k"] for a, b in zip(ours, theirs, strict=True)]


def show(label: str, r: dict[str, Any]) -> None:
    print(
        f"     {label:<40} {r['rate']:>9,.0f} msg/s  {r['cpu']:>6.1%} of a core"
        f"  {r['per_k']:>7.3%} per 1k msg/s"
    )


def main() -> dict[str, float]:
    import tempfile

    mainline = MAINLINE_SERVER.is_file() and PRINT_DEVICES.is_file()
    print(
        f"   VRPN server, {SENSORS} sensors at {RATE} Hz (pose, velocity, acceleration), "
        f"a bare TCP client reading; {window():.0f} s windows, {rounds.ROUNDS} rounds side by "
        "side (median):"
    )
    floors, sims, mains = [], [], []
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        for _ in range(rounds.ROUNDS):
            if mainline:
                mains.append(run_mainline(tmp))
            sims.append(run_sim())
            floors.append(run_floor())
        floor, sim = median(floors), median(sims)
        show("robowire sim vrpn (CLI process)", sim)
        show(f"floor: {FRAME_BYTES} pre-encoded bytes per frame", floor)
        figures = {
            "sim_rate": sim["rate"],
            "sim_cpu": sim["cpu"],
            "sim_cpu_per_1000": sim["per_k"],
            "floor_cpu_per_1000": floor["per_k"],
            "sim_floor_ratio": sim["per_k"] / floor["per_k"],
        }
        print(f"     ratio sim / floor (CPU per 1k msg/s)     {figures['sim_floor_ratio']:>6.2f} x")
        if not mainline:
            print(f"     mainline: n/a (no mainline binaries at {MAINLINE_SERVER.parent})")
            return figures
        main_server = median(mains)
        show("mainline vrpn_server, vrpn_Tracker_NULL", main_server)
        server_ratios = ratios(sims, mains)
        print(f"     ratio sim / mainline vrpn_server         {rounds.text(server_ratios)}"
              "  (target <= 1)")  # fmt: skip
        many = LOADS[1]
        print(f"   VRPN server, {many.text}, the same bare client; {rounds.ROUNDS} rounds:")
        many_sims, many_mains = [], []
        for _ in range(rounds.ROUNDS):
            many_mains.append(run_mainline(tmp, many))
            many_sims.append(run_sim(load=many))
        show(f"robowire sim vrpn --set trackers={many.trackers}", median(many_sims))
        show(f"mainline vrpn_server, {many.trackers} vrpn_Tracker_NULL", median(many_mains))
        many_ratios = ratios(many_sims, many_mains)
        print(f"     ratio sim / mainline vrpn_server         {rounds.text(many_ratios)}"
              "  (target <= 1)")  # fmt: skip
        figures |= {
            "many_sim_rate": median(many_sims)["rate"],
            "many_sim_cpu": median(many_sims)["cpu"],
            "many_sim_cpu_per_1000": median(many_sims)["per_k"],
            "many_mainline_cpu_per_1000": median(many_mains)["per_k"],
            **rounds.figures("many_peer_ratio", many_ratios),
        }
        print(f"   VRPN client reading the mainline server (TCP only), {rounds.ROUNDS} rounds:")
        theirs_runs, ours_runs = clients(tmp)
    theirs, ours = median(theirs_runs), median(ours_runs)
    show(f"mainline vrpn_print_devices (1/{STRIDE} printed)", theirs)
    show("robowire client (driver + session)", ours)
    client_ratios = ratios(ours_runs, theirs_runs)
    print(f"     ratio ours / vrpn_print_devices          {rounds.text(client_ratios)}")
    return (
        figures
        | {
            "mainline_server_rate": main_server["rate"],
            "mainline_server_cpu_per_1000": main_server["per_k"],
            "print_devices_rate": theirs["rate"],
            "print_devices_cpu_per_1000": theirs["per_k"],
            "client_rate": ours["rate"],
            "client_cpu": ours["cpu"],
            "client_cpu_per_1000": ours["per_k"],
        }
        | rounds.figures("server_peer_ratio", server_ratios)
        | rounds.figures("client_peer_ratio", client_ratios)
    )
