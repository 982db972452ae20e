"""End-to-end latency through a gateway process, at 10k updates/s on loopback, against the bare
socket relay of the same path measured in the same run.

1. gateway: a VRPN server process (the sender) sends 100 tracker sensors at 100 Hz (10k
   updates/s) whose position x is the sender's `time.monotonic()` as their datagram leaves
   (CLOCK_MONOTONIC is one clock for every process of the machine: the encoded datagrams
   carry a stand-in x, replaced by the time just before each `sendto`). A gateway process,
   `robowire bridge vrpn://Bench@… --to vrpn://…?tracker=Out` (UDP+TCP in: the reports arrive
   as datagrams), serves them; a reader in this process, a TCP-only VRPN client, takes the
   time its bytes arrived (the session is fed them) minus x for every report: datagram sent ->
   source -> world -> sink -> bytes at the reader, the bare path's span. Position y is the
   time before the sender encoded the frame, and the reader also takes its time after
   decoding minus y: the same with the two test ends' own Python (encoding 100 reports,
   decoding them) in it, printed as "with both ends' coding".
2. baseline: the same path without robowire: the sender process sends one datagram per frame
   holding the 100 stamps, a relay process (a bare blocking `recv` / `sendall` loop) writes it
   to a TCP connection, and this process reads it and takes the same difference per stamp.

2b. the floor of the table's "vs peer": the same stamps through a bare asyncio forwarder
   (uvloop; `datagram_received` writes each datagram to the TCP transport) instead of the
   blocking relay, and the gateway, side by side, 3 rounds, at 10k updates/s (100 sensors)
   and 1k (10 sensors, the same 100 frames/s): the gateway's p99 over the forwarder's, the
   median of the rounds' ratios (target <= 1.5).

3. in process: the gateway of 1 run in this process instead, timing each update from the
   moment the source read its datagram (the world update's `receive_time`) to the moment the
   sink's `write` handed it to the reader's connection: robowire's own share.

Printed: p50 / p99 / max of each, the ratios of 1 to 2, and the gateway process's CPU share
over the window of 1 (load-independent where latency is not: a busy machine delays every
process of the chain). The first `WARMUP` seconds after the reader connected are not counted
(connections settling, first frames).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import socket
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import rounds
from bench.bench_serve import cpu_seconds

SENSORS = 100
RATE = 100.0  # frames per second: SENSORS * RATE = 10k updates/s
SECONDS = 6.0
WARMUP = 1.5
SRC = Path(__file__).resolve().parents[1] / "src"


def _free_port() -> int:
    while True:
        with socket.socket() as tcp:
            tcp.bind(("127.0.0.1", 0))
            port = int(tcp.getsockname()[1])
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                try:
                    udp.bind(("127.0.0.1", port))
                except OSError:
                    continue
        return port


def _pace(frame: int, start: float) -> None:  # (RATE frames/s)
    delay = start + frame / RATE - time.monotonic()
    if delay > 0:
        time.sleep(delay)


# -- 1. through the gateway ------------------------------------------------------------------

WIRE_DOUBLE = struct.Struct(">d")  # VRPN's byte order
STAND_IN = -12345.678901  # position x until the datagram leaves (no time is negative)
STAND_IN_BYTES = WIRE_DOUBLE.pack(STAND_IN)


def _vrpn_sender(port: int, seconds: float, sensors_count: int = SENSORS) -> None:
    """A VRPN server whose tracker reports carry their send time in position x."""
    from robowire.protocols.vrpn.server import VrpnServer
    from robowire.transport import run
    from robowire.transport.udp import send_datagrams

    async def main() -> None:
        server = VrpnServer(["Bench"], sensors=lambda _name: sensors_count)
        serving = asyncio.create_task(server.run("127.0.0.1", port, lambda _addr: None))
        while not list(server.connected()):
            await asyncio.sleep(0.01)
        sensors = np.arange(sensors_count, dtype=np.int32)
        positions = np.zeros((sensors_count, 3))
        positions[:, 0] = STAND_IN
        quaternions = np.tile([0.0, 0.0, 0.0, 1.0], (sensors_count, 1))
        start = time.monotonic()
        frame = 0
        while time.monotonic() - start < seconds:
            positions[:, 1] = time.monotonic()
            server.broadcast_poses(
                "Bench", sensors, positions, quaternions, time=time.time(), flush=False
            )
            for link in server.connected():
                assert link.session is not None and link.sock is not None
                for data, addr in link.session.datagrams_to_send():  # stamped as each leaves
                    stamp = WIRE_DOUBLE.pack(time.monotonic())
                    send_datagrams(link.sock, [(data.replace(STAND_IN_BYTES, stamp), addr)])
                link.flush()  # what else the session has to send (TCP)
            frame += 1
            delay = start + frame / RATE - time.monotonic()
            await asyncio.sleep(max(delay, 0.0))
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)

    run(main())


class Reading:
    """What the reader took: per report, its bytes' arrival - x (`arrived`) and the time it
    was decoded - y (`coded`); the gateway process's CPU share (1.0: one core)."""

    def __init__(self) -> None:
        self.arrived: list[float] = []
        self.coded: list[float] = []
        self.cpu = 0.0


async def _read_vrpn(port: int, seconds: float, pid: int | None = None) -> Reading:
    """A TCP-only VRPN client of tracker Out, over the counted window; the CPU share is of
    process `pid` (the gateway's) over the same window."""
    from robowire.protocols.vrpn.driver import connect
    from robowire.protocols.vrpn.events import TrackerReports
    from robowire.protocols.vrpn.session import Role, VrpnSession

    reading = Reading()
    counting_from = float("inf")  # WARMUP seconds after connecting

    class Stamped(VrpnSession):
        arrived = 0.0  # `now` of the bytes being fed: when the read returned them

        def feed(self, data: bytes, now: float) -> list[Any]:
            self.arrived = now
            return super().feed(data, now)

    def session(_peer: object, _udp: object) -> VrpnSession:
        return Stamped(Role.CLIENT, ping_senders=["Out"], now=time.monotonic())

    def on_events(link: Any, events: list[object]) -> None:
        now = time.monotonic()
        if now < counting_from:
            return
        arrived = link.session.arrived
        for event in events:
            if isinstance(event, TrackerReports) and event.kind == "vrpn_Tracker Pos_Quat":
                vector = np.asarray(event.vector)
                reading.arrived.extend((arrived - vector[:, 0]).tolist())
                reading.coded.extend((now - vector[:, 1]).tolist())

    for _ in range(200):  # the gateway's sink may not listen yet
        try:
            link = await connect("127.0.0.1", port, session, on_events, udp=False, timeout=2.0)
            break
        except Exception:
            await asyncio.sleep(0.05)
    else:
        raise RuntimeError("the gateway's VRPN sink never answered")
    counting_from = time.monotonic() + WARMUP
    await asyncio.sleep(WARMUP)
    cpu = cpu_seconds(pid) if pid is not None else 0.0
    await asyncio.sleep(seconds - WARMUP)
    if pid is not None:
        reading.cpu = (cpu_seconds(pid) - cpu) / (time.monotonic() - counting_from)
    link.close()
    return reading


def through_gateway(sensors: int = SENSORS) -> Reading:
    source_port, sink_port = _free_port(), _free_port()
    sender = multiprocessing.Process(target=_vrpn_sender, args=(source_port, SECONDS + 30, sensors))
    sender.start()
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    gateway = subprocess.Popen(
        [sys.executable, "-m", "robowire.cli", "bridge", f"vrpn://Bench@127.0.0.1:{source_port}",
         "--to", f"vrpn://127.0.0.1:{sink_port}?tracker=Out", "--duration", str(SECONDS + 30)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        from robowire.transport import run

        return run(_read_vrpn(sink_port, SECONDS, gateway.pid))
    finally:
        gateway.terminate()
        gateway.wait(10)
        sender.terminate()
        sender.join(10)


# -- 3. in process: arrival at the source -> leaving the sink ------------------------------


async def _in_process(source_port: int) -> list[float]:
    """The gateway in this process: per update, the time its datagram was read by the source
    (the world update's `receive_time`) to the moment the VRPN sink's `write` has handed it
    to the reader's connection. The reader (part 1's) runs on the same loop."""
    from robowire.addresses import parse_endpoint
    from robowire.gateway import Gateway, open_source
    from robowire.protocols.vrpn.services import VrpnSink
    from robowire.timebase import monotonic
    from robowire.world import LogEvent, Update, World

    source = open_source(f"vrpn://Bench@127.0.0.1:{source_port}")
    samples: list[float] = []
    counting_from = time.monotonic() + WARMUP

    class TimedSink(VrpnSink):
        def write(self, world: World, items: list[Update | LogEvent]) -> bool:
            going = super().write(world, items)
            left = source.clock.wall(monotonic())
            if time.monotonic() >= counting_from:
                for item in items:
                    if isinstance(item, Update) and item.source == source.name:
                        samples.extend([left - item.receive_time] * len(item))
            return going

    sink = TimedSink(parse_endpoint("vrpn://127.0.0.1:0?tracker=Out"))
    gateway = Gateway().add(source, sink)
    run = asyncio.create_task(gateway.run(SECONDS + 30))
    await sink.ready.wait()
    assert sink.address is not None
    await _read_vrpn(sink.address[1], SECONDS)
    gateway.stop()
    await run
    return samples


def in_process() -> list[float]:
    source_port = _free_port()
    sender = multiprocessing.Process(target=_vrpn_sender, args=(source_port, SECONDS + 30))
    sender.start()
    try:
        from robowire.transport import run

        return run(_in_process(source_port))
    finally:
        sender.terminate()
        sender.join(10)


# -- 2. bare sockets -------------------------------------------------------------------------


def _stamps(sensors: int) -> struct.Struct:
    return struct.Struct(f"<{sensors}d")


def _bare_sender(udp_port: int, seconds: float, sensors: int = SENSORS) -> None:
    stamps = _stamps(sensors)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        start = time.monotonic()
        frame = 0
        while time.monotonic() - start < seconds:
            now = time.monotonic()
            sock.sendto(stamps.pack(*([now] * sensors)), ("127.0.0.1", udp_port))
            frame += 1
            _pace(frame, start)


def _bare_relay(udp_port: int, tcp_port: int) -> None:
    """recv a datagram, sendall it on TCP: what a gateway does, with nothing in between."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp, socket.socket() as tcp:
        udp.bind(("127.0.0.1", udp_port))
        tcp.connect(("127.0.0.1", tcp_port))
        tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            data = udp.recv(65535)
            tcp.sendall(data)


def _asyncio_relay(udp_port: int, tcp_port: int) -> None:
    """The same on an asyncio event loop (uvloop when installed, as robowire runs): a
    datagram's `datagram_received` writes it to the TCP connection's transport. The floor of
    any asyncio gateway on this machine, the loop's wake-ups after its idle included."""
    from robowire.transport import run

    class Forward(asyncio.DatagramProtocol):
        def __init__(self, out: asyncio.WriteTransport) -> None:
            self.out = out

        def datagram_received(self, data: bytes, addr: object) -> None:
            self.out.write(data)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        tcp, _ = await loop.create_connection(asyncio.Protocol, "127.0.0.1", tcp_port)
        sock = tcp.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await loop.create_datagram_endpoint(
            lambda: Forward(tcp), local_addr=("127.0.0.1", udp_port)
        )
        await asyncio.Event().wait()

    run(main())


def bare_sockets(sensors: int = SENSORS, relay_of: Any = _bare_relay) -> list[float]:
    """Stamps of `sensors` per frame through `relay_of` (the blocking relay, or the asyncio
    one), read here: per stamp, its arrival minus its send time. Behind the blocking relay
    the reader is a blocking `recv` loop (the baseline since issue 23); behind the asyncio
    forwarder it is an asyncio reader taking the time its `data_received` runs, as the
    gateway's reader does (`_read_vrpn`): only the middle of the two paths differs."""
    stamps = _stamps(sensors)
    udp_port = _free_port()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        relay = multiprocessing.Process(target=relay_of, args=(udp_port, listener.getsockname()[1]))
        relay.start()
        conn, _ = listener.accept()
    sender = multiprocessing.Process(target=_bare_sender, args=(udp_port, SECONDS, sensors))
    latencies: list[float] = []
    try:
        time.sleep(0.2)  # the relay binds its UDP port
        sender.start()
        if relay_of is _asyncio_relay:
            from robowire.transport import run

            run(_read_stamps(conn, stamps, latencies))
            return latencies
        end = time.monotonic() + SECONDS
        counting_from = time.monotonic() + WARMUP
        buffer = b""
        conn.settimeout(1.0)
        while time.monotonic() < end:
            try:
                chunk = conn.recv(1 << 16)
            except TimeoutError:
                continue
            now = time.monotonic()
            buffer += chunk
            whole = len(buffer) // stamps.size * stamps.size
            if now >= counting_from:
                for offset in range(0, whole, stamps.size):
                    latencies.extend(now - t for t in stamps.unpack_from(buffer, offset))
            buffer = buffer[whole:]
    finally:
        conn.close()
        sender.terminate()
        sender.join(10)
        relay.terminate()
        relay.join(10)
    return latencies


async def _read_stamps(conn: socket.socket, stamps: struct.Struct, out: list[float]) -> None:
    """The stamps arriving on `conn` over SECONDS, read on this process's event loop: per
    stamp, the time its bytes' `data_received` ran minus it (after WARMUP)."""
    counting_from = time.monotonic() + WARMUP

    class Reader(asyncio.Protocol):
        buffer = b""

        def data_received(self, data: bytes) -> None:
            now = time.monotonic()
            buffer = self.buffer + data
            whole = len(buffer) // stamps.size * stamps.size
            if now >= counting_from:
                for offset in range(0, whole, stamps.size):
                    out.extend(now - t for t in stamps.unpack_from(buffer, offset))
            self.buffer = buffer[whole:]

    conn.setblocking(False)
    transport, _ = await asyncio.get_running_loop().connect_accepted_socket(Reader, sock=conn)
    await asyncio.sleep(SECONDS)
    transport.close()


def _quantiles(values: list[float]) -> tuple[float, float, float]:
    cuts = statistics.quantiles(values, n=100)
    return cuts[49] * 1e3, cuts[98] * 1e3, max(values) * 1e3


LOADS = ((SENSORS, ""), (10, "1k_"))  # (sensors at RATE, figures' prefix): 10k and 1k updates/s


def against_the_floor(sensors: int) -> tuple[list[Reading], list[list[float]]]:
    """`rounds.ROUNDS` side-by-side runs at `sensors` x RATE: the asyncio forwarder, then the
    gateway; (the gateway's readings, the forwarder's latencies)."""
    readings, floors = [], []
    for _ in range(rounds.ROUNDS):
        floors.append(bare_sockets(sensors, _asyncio_relay))
        readings.append(through_gateway(sensors))
    return readings, floors


def main() -> dict[str, float]:
    """Prints the figures; returns them for `python -m bench`'s table (its "gateway" rows)."""
    bare = bare_sockets()
    figures: dict[str, float] = {}
    runs: dict[str, tuple[list[Reading], list[list[float]]]] = {}
    for sensors, key in LOADS:
        runs[key] = against_the_floor(sensors)
    readings, floors = runs[""]
    reading = sorted(readings, key=lambda r: _quantiles(r.arrived)[1] if r.arrived else 1e9)[1]
    through, cpu = reading.arrived, reading.cpu
    inside = in_process()
    if not bare or not through:
        print(f"   no samples (bare {len(bare)}, gateway {len(through)})")
        return {}
    b50, b99, bmax = _quantiles(bare)
    g50, g99, gmax = _quantiles(through)
    c50, c99, cmax = _quantiles(reading.coded)
    rate = SENSORS * RATE
    print(f"   {rate:,.0f} updates/s on loopback, {SECONDS - WARMUP:.1f} s counted each")
    print(f"   bare UDP->relay->TCP   p50 {b50:7.3f} ms  p99 {b99:7.3f} ms  max {bmax:7.2f} ms"
          f"  ({len(bare):,} stamps)")  # fmt: skip
    print(f"   robowire gateway       p50 {g50:7.3f} ms  p99 {g99:7.3f} ms  max {gmax:7.2f} ms"
          f"  ({len(through):,} reports; gateway CPU {100 * cpu:.1f}% of a core; the run of "
          f"median p99 of {rounds.ROUNDS})")  # fmt: skip
    print(f"   ratio gateway/bare     p50 {g50 / b50:7.1f}x     p99 {g99 / b99:7.1f}x")
    print(f"   with both ends' coding p50 {c50:7.3f} ms  p99 {c99:7.3f} ms  max {cmax:7.2f} ms"
          "  (the sender's encode before, the reader's decode after)")  # fmt: skip
    if inside:
        i50, i99, imax = _quantiles(inside)
        print(f"   in process (source read -> sink write) p50 {i50:7.3f} ms  p99 {i99:7.3f} ms  "
              f"max {imax:7.2f} ms  ({len(inside):,} updates)")  # fmt: skip
    read = len(through) / ((SECONDS - WARMUP) * rate)
    print(f"   reports read per update sent: {read:.2f} (below 1: the sink coalesced frames)")
    figures |= {
        "rate": len(through) / (SECONDS - WARMUP),  # reports/s the reader took in
        "p50_ms": g50,
        "p99_ms": g99,
        "max_ms": gmax,
        "cpu": cpu,  # the gateway process's CPU share over the counted window
        "bare_p50_ms": b50,
        "bare_p99_ms": b99,
        "ratio_p50": g50 / b50,
        "ratio_p99": g99 / b99,
        "coded_p50_ms": c50,
        "coded_p99_ms": c99,
    }
    if inside:
        figures |= {"in_process_p50_ms": i50, "in_process_p99_ms": i99}
    print(f"   against a bare asyncio UDP->TCP forwarder (uvloop), side by side, "
          f"{rounds.ROUNDS} rounds each:")  # fmt: skip
    for sensors, key in LOADS:
        readings, floors = runs[key]
        pairs = [
            (_quantiles(r.arrived), _quantiles(f))
            for r, f in zip(readings, floors, strict=True)
            if r.arrived and f
        ]
        if not pairs:
            print(f"     {sensors * RATE:>7,.0f} updates/s: no samples")
            continue
        ratios = [g[1] / f[1] for g, f in pairs]
        p99s, floor99s = [g[1] for g, _ in pairs], [f[1] for _, f in pairs]
        print(f"     {sensors * RATE:>7,.0f} updates/s  gateway p99 "
              + " ".join(f"{v:.3f}" for v in p99s) + "  forwarder p99 "
              + " ".join(f"{v:.3f}" for v in floor99s)
              + f" ms  ratio p99 {rounds.text(ratios)}  (target <= 1.5)")  # fmt: skip
        figures |= {
            f"{key}floor_p99_ms": statistics.median(floor99s),
            f"{key}gateway_p99_ms": statistics.median(p99s),
            **rounds.figures(f"{key}peer_ratio_p99", ratios),
        }
        if key:  # the second load's own cells
            figures |= {
                f"{key}p50_ms": statistics.median(g[0] for g, _ in pairs),
                f"{key}p99_ms": statistics.median(p99s),
                f"{key}rate": statistics.median(
                    len(r.arrived) / (SECONDS - WARMUP) for r in readings
                ),
                f"{key}cpu": statistics.median(r.cpu for r in readings),
            }
    return figures


if __name__ == "__main__":
    main()
