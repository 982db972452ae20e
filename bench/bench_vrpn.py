"""VRPN: decode speed against a bare struct loop, and a 10-sensor 1 kHz server to two clients.

Decode: one in-memory stream (cookie, descriptions, N Pos_Quat reports) fed in 64 KiB reads
(a) to robowire's client session (reports out as numpy columns, names resolved), (b) through
the codec's vectorised scan + gather alone, and (c) to a bare `struct.unpack_from` loop over
the same bytes that only unpacks each 88-byte message. Printed: reports/s and the ratios.

Serve: `robowire sim vrpn` with 10 sensors at 1 kHz (Pos_Quat only) in its own process for
10 s, read at the same time by the real C++ client in PyPI `motioncapture` (a subprocess) and
by robowire's own client, both in UDP+TCP mode. Printed: per client the update rate it saw
against the rate sent, and the server process's CPU share.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from robowire.protocols.vrpn import Role, VrpnSession, encode_cookie, encode_frame, scan
from robowire.protocols.vrpn.codec import encode_name
from robowire.protocols.vrpn.registry import TrackerReports, gather_reports

REPORTS = 300_000
SENSORS = 10
RATE = 1000.0
SERVE_SECONDS = 10.0


def build_stream(count: int) -> bytes:
    head = encode_cookie()
    head += encode_frame(0, -1, encode_name("VRPN Control"))
    head += encode_frame(1, -1, encode_name("Tracker0"))
    head += encode_frame(4, -2, encode_name("vrpn_Tracker Pos_Quat"))
    rng = np.random.default_rng(0)
    bodies = [
        struct.pack(">ii3d4d", i % SENSORS, i % SENSORS, *rng.normal(size=3), 0, 0, 0, 1)
        for i in range(1000)
    ]
    frames = [encode_frame(1, 4, bodies[i % 1000], sec=1, usec=i % 1_000_000) for i in range(count)]
    return head + b"".join(frames)


def chunks(data: bytes, size: int = 1 << 16) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def best_of(runs: int, work: Any) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def decode_bench() -> None:
    stream = build_stream(REPORTS)
    reads = chunks(stream)
    body_start = 24 + 48 + 40 + 56  # cookie and the three descriptions

    def session() -> None:
        client = VrpnSession(Role.CLIENT)
        got = 0
        for data in reads:
            for event in client.feed(data, 0.0):
                if isinstance(event, TrackerReports):
                    got += len(event)
        assert got == REPORTS, got

    def codec_only() -> None:
        index = scan(stream, body_start)
        sensor, values = gather_reports(stream, index.offsets, "vrpn_Tracker Pos_Quat")
        assert len(sensor) == REPORTS and values.shape == (REPORTS, 7)

    message = struct.Struct(">IIIiiIii3d4d")

    def bare() -> None:
        unpack = message.unpack_from
        out = [unpack(stream, offset) for offset in range(body_start, len(stream), 88)]
        assert len(out) == REPORTS

    t_session = best_of(3, session)
    t_codec = best_of(3, codec_only)
    t_bare = best_of(3, bare)
    print(f"   decode {REPORTS} Pos_Quat reports from memory (64 KiB reads), best of 3:")
    print(f"     client session (names, numpy columns) {REPORTS / t_session:>12,.0f} reports/s")
    print(f"     codec scan + gather only              {REPORTS / t_codec:>12,.0f} reports/s")
    print(f"     bare struct.unpack_from loop          {REPORTS / t_bare:>12,.0f} reports/s")
    print(f"     ratio session / bare struct loop      {t_bare / t_session:>12.2f} x")
    print(f"     ratio codec / bare struct loop        {t_bare / t_codec:>12.2f} x")


# -- serve --------------------------------------------------------------------------------------


def _serve_process(port_queue: Any, result_queue: Any, seconds: float) -> None:
    from robowire.protocols.vrpn.sim import VrpnSim
    from robowire.service import SimOptions
    from robowire.transport import run
    from robowire.world import World

    async def main() -> None:
        sim = VrpnSim(SimOptions(port=0, count=SENSORS, rate=RATE, options={"reports": "pos"}))
        task = asyncio.create_task(sim.run(World()))
        await sim.ready.wait()
        port_queue.put(sim.address[1] if sim.address else 0)
        go = await asyncio.to_thread(port_queue.get)  # the clients are connected: start timing
        assert go == "go"
        frames0, cpu0, wall0 = sim.frames, time.process_time(), time.perf_counter()
        await asyncio.sleep(seconds)
        frames, cpu, wall = (
            sim.frames - frames0,
            time.process_time() - cpu0,
            time.perf_counter() - wall0,
        )
        result_queue.put({"frames": frames, "cpu": cpu, "wall": wall})
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    run(main())


MC_SCRIPT = Path(__file__).resolve().parents[1] / "tests" / "vrpn" / "mc_client.py"


async def our_client(port: int, started: asyncio.Event, stop: asyncio.Event) -> dict[str, float]:
    from robowire.protocols.vrpn.driver import connect

    counts = {"reports": 0, "first": 0.0, "last": 0.0}
    timing = {"on": False}
    loop = asyncio.get_running_loop()

    def on_events(_link: Any, events: list[object]) -> None:
        if not timing["on"]:
            return
        for event in events:
            if isinstance(event, TrackerReports):
                counts["reports"] += len(event)

    link = await connect(
        "127.0.0.1",
        port,
        lambda _p, udp: VrpnSession(Role.CLIENT, udp_inbound=udp),
        on_events,
        udp=True,
    )
    await started.wait()
    timing["on"] = True
    counts["first"] = loop.time()
    await stop.wait()
    counts["last"] = loop.time()
    link.close()
    return counts


def serve_bench() -> None:
    try:
        import motioncapture  # noqa: F401
    except ImportError:
        print("   serve: skipped, PyPI motioncapture (the C++ client) is not installed")
        return
    ctx = multiprocessing.get_context("spawn")
    port_queue, result_queue = ctx.Queue(), ctx.Queue()
    server = ctx.Process(target=_serve_process, args=(port_queue, result_queue, SERVE_SECONDS))
    server.start()
    port = port_queue.get(timeout=20)
    mc = subprocess.Popen(
        [sys.executable, str(MC_SCRIPT), f"127.0.0.1:{port}", "0", str(SERVE_SECONDS + 2)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )

    async def main() -> dict[str, float]:
        started, stop = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(our_client(port, started, stop))
        await asyncio.sleep(2.0)  # both clients connected and described
        port_queue.put("go")
        started.set()
        t0 = time.perf_counter()
        result = await asyncio.to_thread(result_queue.get, True, SERVE_SECONDS + 20)
        stop.set()
        counts = await task
        counts["wall"] = time.perf_counter() - t0
        counts.update({f"server_{k}": v for k, v in result.items()})
        return counts

    from robowire.transport import run

    counts = run(main())
    out, _ = mc.communicate(timeout=60)
    server.join(10)
    frames = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    # motioncapture keeps only the latest report per body and polls in a loop: count its polls
    # and the polls that brought a fresh pose, from its first pose on
    first = next((i for i, f in enumerate(frames) if "Tracker0" in f["bodies"]), len(frames))
    window = frames[first:]
    fresh = sum(1 for f in window if "Tracker0" in f["bodies"])
    mc_span = window[-1]["t"] - window[0]["t"] if len(window) > 1 else float("nan")
    sent_rate = counts["server_frames"] / counts["server_wall"]
    ours = counts["reports"] / SENSORS / (counts["last"] - counts["first"])
    print(f"   serve {SENSORS} sensors at {RATE:.0f} Hz for {SERVE_SECONDS:.0f} s (UDP+TCP):")
    print(f"     rate sent by our server           {sent_rate:8.1f} updates/s per sensor")
    print(
        f"     robowire client saw               {ours:8.1f} updates/s per sensor"
        f"  ({ours / sent_rate:.1%} of sent)"
    )
    ok = mc_span == mc_span and mc_span > 0
    mc_rate = fresh / mc_span if ok else float("nan")
    polls = len(window) / mc_span if ok else float("nan")
    print(
        f"     C++ client (motioncapture) saw    {mc_rate:8.1f} fresh poses/s of Tracker0"
        f"  (it polled {polls:.0f}/s and keeps only the latest report per poll)"
    )
    share = counts["server_cpu"] / counts["server_wall"]
    print(f"     server CPU share                  {share:8.1%} of one core")


def main() -> None:
    decode_bench()
    serve_bench()


if __name__ == "__main__":
    main()
