"""Ingest: VRPN tracker datagrams over loopback UDP into the world, CPU share per update rate.

A sender PROCESS acts as a VRPN server of 10 trackers x 1,000 sensors (10,000 devices at
30 Hz: 300k Pos_Quat updates/s) and sends datagrams of 16 reports (1,408 bytes, ~18,750/s),
paced in 1 ms ticks. The receiving process (this one) runs the real client receive path that
`robowire listen vrpn://` runs: a `VrpnSource` (UDP+TCP: it sends the lob, the sender
connects back over TCP, cookies and descriptions are exchanged, the client announces its UDP
port) whose `VrpnLink` reads the UDP socket, feeds its `VrpnSession` and hands the events to
`Source.deliver` -> `VrpnAdapter` -> `World` (no sink subscribed).

Baseline, same run: the same sender sends the same datagrams at the same pace to a socket
read by the same batched UDP loop (`DatagramDriver`, 256 datagrams per wake-up) that only
counts them. Printed for both: the receiving process's CPU share (process_time / wall) and
updates/s received, then the ratio. Target: <= 50% of one core at 300k updates/s.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import socket
import time
from typing import Any

import numpy as np
import numpy.typing as npt

import bench
from robowire.transport import run
from robowire.transport.udp import DatagramDriver, open_udp_socket
from robowire.wire import Address, SessionStats

SENDERS = 10
SENSORS = 1000  # per sender
RATE = 30.0  # Hz per sensor
PER_DATAGRAM = 16
SECONDS = 10.0
TICK = 0.001
POS_QUAT = "vrpn_Tracker Pos_Quat"
REPORT = 88  # bytes: a Pos_Quat message, header and body


def _datagrams(sender_ids: list[int], type_id: int) -> list[bytes]:
    """One 30 Hz frame of every sensor: SENDERS * SENSORS reports, 16 per datagram."""
    from robowire.protocols.vrpn.registry import encode_pose_frames

    rng = np.random.default_rng(0)
    out: list[bytes] = []
    for sender_id in sender_ids:
        sensors = np.arange(SENSORS)
        frames = encode_pose_frames(
            sender_id,
            type_id,
            sensors,
            rng.normal(size=(SENSORS, 3)),
            np.tile([0.0, 0.0, 0.0, 1.0], (SENSORS, 1)),
            time=1.7e9,
            first_seq=0,
        )
        raw = frames.tobytes()
        size = frames.dtype.itemsize * PER_DATAGRAM
        out.extend(raw[i : i + size] for i in range(0, len(raw), size))
    return out


def _seqs(datagram: bytearray) -> npt.NDArray[np.uint32]:
    """A writable view of the header `seq` of each Pos_Quat message of `datagram` (88 bytes
    each, `seq` at 20)."""
    return np.frombuffer(datagram, dtype=">u4")[5 :: REPORT // 4]


def _paced(
    sock: socket.socket, target: Address, datagrams: list[bytes], seconds: float, drain: Any = None
) -> int:
    """Send the frames' datagrams round-robin at RATE frames/s in TICK steps, each report's
    header `seq` numbered on as a VRPN server numbers them (a receiver drops a datagram whose
    numbers it has had: a copy); returns sent."""
    per_second = len(datagrams) * RATE
    start = time.perf_counter()
    sent = 0
    failed = 0
    n = len(datagrams)
    buffers = [bytearray(d) for d in datagrams]
    numbered = [(data, _seqs(data)) for data in buffers]
    seq = 0
    next_drain = start
    while True:
        now = time.perf_counter()
        if now - start >= seconds:
            break
        due = int((now - start) * per_second)
        while sent < due:
            data, seqs = numbered[sent % n]
            seqs[:] = np.arange(seq, seq + len(seqs))
            seq += len(seqs)
            try:
                sock.sendto(data, target)
            except OSError:
                failed += 1
            sent += 1
        if drain is not None and now >= next_drain:
            drain()
            next_drain = now + 0.1
        time.sleep(TICK)
    return sent - failed


Handshake = tuple[socket.socket, Any, dict[str, int], int]


def vrpn_handshake(port_queue: Any, names: list[str]) -> Handshake:
    """A minimal VRPN server's start: puts its lob port on `port_queue`, takes the client's lob,
    connects back over TCP and handshakes. Returns (the TCP socket, now non-blocking, the
    session, sender ids by name, the Pos_Quat type id)."""
    from robowire.protocols.vrpn.codec import decode_lob
    from robowire.protocols.vrpn.session import Role, State, VrpnSession

    lobs = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    lobs.bind(("127.0.0.1", 0))
    port_queue.put(lobs.getsockname()[1])
    data, _ = lobs.recvfrom(512)
    host, port = decode_lob(data)
    tcp = socket.create_connection((host, port))
    session = VrpnSession(Role.SERVER, senders=names, types=[POS_QUAT], now=time.monotonic())
    tcp.sendall(session.data_to_send())
    tcp.settimeout(5.0)
    while session.state is not State.CONNECTED or session.peer_udp is None:
        chunk = tcp.recv(65536)
        if not chunk:
            raise SystemExit("client closed during the handshake")
        session.feed(chunk, time.monotonic())
        tcp.sendall(session.data_to_send())
    tcp.setblocking(False)
    return tcp, session, session.local_senders, session.register_type(POS_QUAT)


def drainer(tcp: socket.socket) -> Any:
    """A function reading and dropping what the client sends on TCP (never blocks)."""

    def drain() -> None:
        try:
            while tcp.recv(65536):
                pass
        except (BlockingIOError, OSError):
            pass

    return drain


def _vrpn_sender(port_queue: Any, result_queue: Any, seconds: float) -> None:
    """A minimal VRPN server: takes the lob, connects back, handshakes, then sends UDP."""
    names = [f"Tracker{i}" for i in range(SENDERS)]
    tcp, session, senders, type_id = vrpn_handshake(port_queue, names)
    datagrams = _datagrams([senders[name] for name in names], type_id)
    drain = drainer(tcp)

    time.sleep(0.3)  # the descriptions are read before the first report arrives
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sent = _paced(udp, session.peer_udp, datagrams, seconds, drain)
    result_queue.put(sent)
    time.sleep(0.5)
    tcp.close()


def _raw_sender(target: Address, result_queue: Any, seconds: float) -> None:
    datagrams = _datagrams(list(range(SENDERS)), 4)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    result_queue.put(_paced(udp, target, datagrams, seconds))


async def _measure(count: Any, seconds: float) -> tuple[float, float, int]:
    """Wait for the flow, then measure (cpu, wall, received) over `seconds`."""
    while count() == 0:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.5)
    c0, w0, n0 = time.process_time(), time.perf_counter(), count()
    await asyncio.sleep(seconds)
    return time.process_time() - c0, time.perf_counter() - w0, count() - n0


async def _receive_vrpn(seconds: float) -> tuple[float, float, int, int]:
    from robowire.addresses import parse_endpoint
    from robowire.protocols.vrpn.services import VrpnSource
    from robowire.world import World

    ctx = multiprocessing.get_context("spawn")
    port_queue, result_queue = ctx.Queue(), ctx.Queue()
    sender = ctx.Process(target=_vrpn_sender, args=(port_queue, result_queue, seconds + 2.0))
    sender.start()
    port = await asyncio.to_thread(port_queue.get, True, 30)
    world = World()
    source = VrpnSource(parse_endpoint(f"vrpn://127.0.0.1:{port}"))
    task = asyncio.create_task(source.run(world))
    try:
        cpu, wall, got = await _measure(lambda: source.stats.messages_in, seconds)
    finally:
        await asyncio.to_thread(result_queue.get, True, 30)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        sender.join(10)
    return cpu, wall, got, len(world.table(source.name))


class _Count:
    """A datagram 'session' that only counts (16 reports per datagram)."""

    def __init__(self) -> None:
        self.stats = SessionStats()

    def feed_datagram(self, data: bytes, addr: Address, now: float) -> list[object]:
        self.stats.messages_in += PER_DATAGRAM
        return []

    def tick(self, now: float) -> list[object]:
        return []

    def datagrams_to_send(self) -> list[tuple[bytes, Address | None]]:
        return []

    def next_deadline(self) -> float | None:
        return None


async def _receive_raw(seconds: float) -> tuple[float, float, int]:
    counter = _Count()
    sock = open_udp_socket(("127.0.0.1", 0))
    driver = DatagramDriver(counter, lambda events: None, sock, batch=256)
    ctx = multiprocessing.get_context("spawn")
    result_queue = ctx.Queue()
    target = sock.getsockname()
    sender = ctx.Process(target=_raw_sender, args=(target, result_queue, seconds + 2.0))
    sender.start()
    try:
        return await _measure(lambda: counter.stats.messages_in, seconds)
    finally:
        await asyncio.to_thread(result_queue.get, True, 30)
        sender.join(10)
        driver.close()


def main() -> dict[str, float]:
    seconds = 4.0 if bench.QUICK else SECONDS
    offered = SENDERS * SENSORS * RATE
    print(
        f"   {SENDERS} trackers x {SENSORS} sensors at {RATE:.0f} Hz = {offered:,.0f} Pos_Quat/s"
        f" offered, {PER_DATAGRAM} per datagram ({offered / PER_DATAGRAM:,.0f} datagrams/s),"
        f" {seconds:.0f} s each, 1 ms pacing:"
    )
    cpu0, wall0, got0 = run(_receive_raw(seconds))
    cpu1, wall1, got1, devices = run(_receive_vrpn(seconds))
    share0, share1 = cpu0 / wall0, cpu1 / wall1
    print(
        f"     baseline: batched UDP loop, count only  {got0 / wall0:>10,.0f} updates/s"
        f"  CPU {share0:6.1%} of one core"
    )
    print(
        f"     VRPN client -> session -> adapter -> world {got1 / wall1:>7,.0f} updates/s"
        f"  CPU {share1:6.1%} of one core  ({devices} devices)"
    )
    rate1 = got1 / wall1
    per_300k = share1 * 300_000 / rate1 if rate1 else float("nan")
    print(f"     CPU share scaled to 300k updates/s         {per_300k:>7.1%} of one core")
    print(f"     ratio VRPN path CPU / baseline CPU         {share1 / share0:>7.2f} x")
    print(f"     ratio updates received VRPN / baseline     {rate1 / (got0 / wall0):>7.2f} x")
    return {
        "offered_rate": offered,
        "baseline_rate": got0 / wall0,
        "baseline_cpu": share0,
        "vrpn_rate": rate1,
        "vrpn_cpu": share1,
        "vrpn_cpu_at_300k": per_300k,
        "vrpn_cpu_ratio": share1 / share0,
    }


if __name__ == "__main__":
    main()
