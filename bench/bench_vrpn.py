"""VRPN: decode speed against a bare struct loop, and a 10-sensor 1 kHz server to two clients.

Decode: one in-memory stream (cookie, descriptions, N Pos_Quat reports) fed in live-sized
reads (880 bytes: one frame of 10 poses, a TCP read or one datagram) and in 64 KiB reads
(a) to robowire's client session (reports out as numpy columns, names resolved) and (b) to a
bare `struct.unpack_from` loop over the same reads that only unpacks each 88-byte message;
and the codec's vectorised scan + gather alone over the whole stream. Printed: reports/s and
the ratios.

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
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import bench
from robowire.protocols.vrpn import Role, VrpnSession, encode_cookie, encode_frame, scan
from robowire.protocols.vrpn.codec import encode_name
from robowire.protocols.vrpn.events import TrackerReports
from robowire.protocols.vrpn.registry import gather_reports

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


def decode_bench() -> dict[str, float]:
    out: dict[str, float] = {}
    stream = build_stream(REPORTS)
    body_start = 24 + 48 + 40 + 56  # cookie and the three descriptions
    head, body = stream[:body_start], stream[body_start:]
    message = struct.Struct(">IIIiiIii3d4d")
    print(f"   decode {REPORTS} Pos_Quat reports from memory, best of 3:")
    for label, size in (("880-byte reads (10 poses)", 880), ("64 KiB reads", 1 << 16)):
        size -= size % 88  # whole messages per read, as a live peer's writes arrive
        reads = chunks(body, size)

        def session(reads: list[bytes] = reads, touch: bool = False) -> None:
            client = VrpnSession(Role.CLIENT)
            client.feed(head, 0.0)
            got = 0
            for data in reads:
                for event in client.feed(data, 0.0):
                    if isinstance(event, TrackerReports):
                        got += len(event)
                        if touch:  # the derived columns are computed on first use
                            event.time  # noqa: B018
                            event.order  # noqa: B018
            assert got == REPORTS, got

        def bare(reads: list[bytes] = reads) -> None:
            unpack = message.unpack_from
            got = 0
            for data in reads:
                out = [unpack(data, offset) for offset in range(0, len(data), 88)]
                got += len(out)
            assert got == REPORTS

        t_session = best_of(3, session)
        t_touch = best_of(3, lambda: session(touch=True))
        t_bare = best_of(3, bare)
        r_session, r_touch, r_bare = REPORTS / t_session, REPORTS / t_touch, REPORTS / t_bare
        print(f"     {label}: {len(reads)} reads")
        print(f"       session feed (names, numpy columns)        {r_session:>12,.0f} reports/s")
        print(f"       ... and its time, order columns used       {r_touch:>12,.0f} reports/s")
        print(f"       bare struct.unpack_from loop               {r_bare:>12,.0f} reports/s")
        print(f"       ratio session / bare struct loop           {t_bare / t_session:>12.2f} x")
        print(f"       ratio session + time, order / bare loop    {t_bare / t_touch:>12.2f} x")
        us = t_session / len(reads) * 1e6
        print(f"       session feed per read                      {us:>12.1f} us")
        tag = "live" if size < 4096 else "64k"
        out |= {f"decode_{tag}_rate": r_session, f"decode_{tag}_bare_rate": r_bare,
                f"decode_{tag}_ratio": t_bare / t_session}  # fmt: skip

    def codec_only() -> None:
        index = scan(stream, body_start)
        sensor, values = gather_reports(stream, index.offsets, "vrpn_Tracker Pos_Quat")
        assert len(sensor) == REPORTS and values.shape == (REPORTS, 7)

    def bare_all() -> None:
        unpack = message.unpack_from
        out = [unpack(stream, offset) for offset in range(body_start, len(stream), 88)]
        assert len(out) == REPORTS

    t_codec = best_of(3, codec_only)
    t_bare = best_of(3, bare_all)
    print("     whole stream in one buffer:")
    print(f"       codec scan + gather only              {REPORTS / t_codec:>12,.0f} reports/s")
    print(f"       ratio codec / bare struct loop        {t_bare / t_codec:>12.2f} x")
    # the table's figures: the session on 64 KiB reads against the bare loop on the same reads
    out["decode_rate"], out["decode_ratio"] = out["decode_64k_rate"], out["decode_64k_ratio"]
    out["codec_rate"], out["codec_ratio"] = REPORTS / t_codec, t_bare / t_codec
    return out


# -- serve --------------------------------------------------------------------------------------


def _serve_process(port_queue: Any, result_queue: Any, seconds: float, phases: int) -> None:
    from robowire.protocols.vrpn.services import VrpnSim
    from robowire.service import SimOptions
    from robowire.transport import run
    from robowire.world import World

    async def main() -> None:
        sim = VrpnSim(SimOptions(port=0, count=SENSORS, rate=RATE, options={"reports": "pos"}))
        task = asyncio.create_task(sim.run(World()))
        await sim.ready.wait()
        port_queue.put(sim.address[1] if sim.address else 0)
        for _ in range(phases):
            go = await asyncio.to_thread(port_queue.get)  # a client is connected: time it
            assert go == "go"
            assert sim.server is not None
            links = list(sim.server.connected())
            skipped0 = sum(link.skipped for link in links)
            frames0, cpu0, wall0 = sim.frames, time.process_time(), time.perf_counter()
            await asyncio.sleep(seconds)
            result_queue.put(
                {
                    "frames": sim.frames - frames0,
                    "cpu": time.process_time() - cpu0,
                    "wall": time.perf_counter() - wall0,
                    "skipped": sum(link.skipped for link in links) - skipped0,
                    "clients": len(links),
                }
            )
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    run(main())


MC_SCRIPT = Path(__file__).resolve().parents[1] / "tests" / "vrpn" / "mc_client.py"


async def our_client(port: int, port_queue: Any, result_queue: Any) -> dict[str, Any]:
    """Our client (UDP+TCP) for one timed phase: count every tracker report it decodes."""
    from robowire.protocols.vrpn.driver import connect

    counts = {"reports": 0}
    timing = {"on": False}

    def on_events(_link: Any, events: list[object]) -> None:
        if timing["on"]:
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
    await asyncio.sleep(1.0)  # connected and described
    port_queue.put("go")
    timing["on"] = True
    t0 = time.perf_counter()
    result = await asyncio.to_thread(result_queue.get, True, SERVE_SECONDS + 20)
    timing["on"] = False
    span = time.perf_counter() - t0
    udp = link.session is not None and link.session.peer_udp is not None
    link.close()
    return {**result, "seen": counts["reports"], "span": span, "udp": udp}


def serve_bench() -> dict[str, float]:
    try:
        import motioncapture  # noqa: F401
    except ImportError:
        print("   serve: skipped, PyPI motioncapture (the C++ client) is not installed")
        return {}
    from robowire.transport import run

    ctx = multiprocessing.get_context("spawn")
    port_queue, result_queue = ctx.Queue(), ctx.Queue()
    server = ctx.Process(target=_serve_process, args=(port_queue, result_queue, SERVE_SECONDS, 2))
    server.start()
    port = port_queue.get(timeout=20)
    print(
        f"   serve {SENSORS} sensors at {RATE:.0f} Hz (Pos_Quat), {SERVE_SECONDS:.0f} s per client:"
    )

    # phase 1: the real C++ client, TCP-only so that "delivered" is exact: TCP loses nothing,
    # and a client that did not keep up would fill our buffer and make the server skip it
    # its output goes to a file: a pipe nobody reads would fill and stall its poll loop
    with tempfile.TemporaryFile("w+") as output:
        mc = subprocess.Popen(
            [
                sys.executable,
                str(MC_SCRIPT),
                f"tcp://127.0.0.1:{port}",
                "0",
                str(SERVE_SECONDS + 2),
            ],
            stdout=output,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        time.sleep(1.5)
        port_queue.put("go")
        cpp = result_queue.get(timeout=SERVE_SECONDS + 20)
        mc.wait(timeout=60)
        output.seek(0)
        out = output.read()
    frames = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    first = next((i for i, f in enumerate(frames) if "Tracker0" in f["bodies"]), len(frames))
    window = frames[first:]
    fresh = sum(1 for f in window if "Tracker0" in f["bodies"])
    span = window[-1]["t"] - window[0]["t"] if len(window) > 1 else float("nan")
    sent = cpp["frames"] / cpp["wall"]
    delivered = (cpp["frames"] * SENSORS - cpp["skipped"]) / SENSORS / cpp["wall"]
    print(f"     C++ client (motioncapture, TCP-only): rate sent {sent:7.1f}/s per sensor")
    print(
        f"       delivered to it and read            {delivered:7.1f}/s per sensor"
        f"  ({delivered / sent:.1%}; {cpp['skipped']} reports skipped as congested)"
    )
    print(
        f"       its poll loop saw                   {fresh / span:7.1f} fresh poses/s"
        f"  ({len(window) / span:.0f} polls/s, it keeps the latest report per poll)"
    )
    print(f"       server CPU share                    {cpp['cpu'] / cpp['wall']:7.1%} of one core")

    # phase 2: robowire's own client, UDP+TCP, counting every report it decodes
    ours = run(our_client(port, port_queue, result_queue))
    server.join(10)
    sent = ours["frames"] / ours["wall"]
    seen = ours["seen"] / SENSORS / ours["span"]
    mode = "UDP+TCP" if ours["udp"] else "TCP (no UDP description came)"
    print(f"     robowire client ({mode}):        rate sent {sent:7.1f}/s per sensor")
    print(
        f"       decoded by it                       {seen:7.1f}/s per sensor ({seen / sent:.1%})"
    )
    print(
        f"       server CPU share                    {ours['cpu'] / ours['wall']:7.1%} of one core"
    )
    return {
        "serve_cpp_delivered_share": delivered / (cpp["frames"] / cpp["wall"]),
        "serve_cpp_server_cpu": cpp["cpu"] / cpp["wall"],
        "serve_ours_decoded_share": seen / sent,
        "serve_ours_server_cpu": ours["cpu"] / ours["wall"],
    }


# -- the serve sink ---------------------------------------------------------------------------


def _sink_process(port_queue: Any, result_queue: Any, seconds: float) -> None:
    """A world of one VRPN source, 10 tracker sensors written at 1 kHz (pose, velocity and
    acceleration, as `listen vrpn://` writes them), served by `VrpnSink` (`serve vrpn://`)."""
    from robowire.addresses import parse_endpoint
    from robowire.protocols.vrpn.services import VrpnSink
    from robowire.transport import run
    from robowire.world import World

    async def main() -> None:
        world = World()
        table = world.table("vrpn@bench")
        table.protocol = "vrpn"
        slots = table.slots([f"Tracker0/{i}" for i in range(SENSORS)], "tracker")
        sink = VrpnSink(parse_endpoint("vrpn://127.0.0.1:0"))
        task = asyncio.create_task(sink.run(world))
        await sink.ready.wait()
        port_queue.put(sink.address[1] if sink.address else 0)
        angle = np.linspace(0.0, np.pi, SENSORS)
        orientation = np.tile([1.0, 0.0, 0.0, 0.0], (SENSORS, 1))

        def feed(t: float) -> None:
            a = angle + t
            position = np.stack([np.cos(a), np.sin(a), np.ones(SENSORS)], axis=1)
            velocity = np.stack([-np.sin(a), np.cos(a), np.zeros(SENSORS)], axis=1)
            world.update(
                "vrpn@bench",
                slots,
                receive_time=time.time(),
                source_time=time.time(),
                position=position,
                orientation=orientation,
                velocity=velocity,
                telemetry={
                    f"acceleration_{c}": (-position[:, k], "m/s2") for k, c in enumerate("xyz")
                },
            )

        go = await asyncio.to_thread(port_queue.get)  # a client is connected: time it
        assert go == "go"
        frames, cpu0, wall0 = 0, time.process_time(), time.perf_counter()
        start = next_frame = time.perf_counter()
        while time.perf_counter() - wall0 < seconds:
            feed(time.perf_counter() - start)
            frames += 1
            next_frame += 1.0 / RATE
            await asyncio.sleep(max(next_frame - time.perf_counter(), 0.0))
        result_queue.put(
            {
                "frames": frames,
                "cpu": time.process_time() - cpu0,
                "wall": time.perf_counter() - wall0,
                "sent": sink.reports_sent,
                "dropped": sink.stats.dropped,
            }
        )
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    run(main())


def sink_bench() -> dict[str, float]:
    """`serve vrpn://` with a world of 10 VRPN sensors written at 1 kHz, read by the C++
    client (motioncapture, TCP-only) for `SERVE_SECONDS`: the sink process's CPU share (the
    world writes included) and the poses the client's poll loop saw."""
    try:
        import motioncapture  # noqa: F401
    except ImportError:
        print("   sink: skipped, PyPI motioncapture (the C++ client) is not installed")
        return {}
    ctx = multiprocessing.get_context("spawn")
    port_queue, result_queue = ctx.Queue(), ctx.Queue()
    server = ctx.Process(target=_sink_process, args=(port_queue, result_queue, SERVE_SECONDS))
    server.start()
    port = port_queue.get(timeout=20)
    with tempfile.TemporaryFile("w+") as output:
        mc = subprocess.Popen(
            [sys.executable, str(MC_SCRIPT), f"tcp://127.0.0.1:{port}", "0", str(SERVE_SECONDS)],
            stdout=output,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        time.sleep(1.5)
        port_queue.put("go")
        result = result_queue.get(timeout=SERVE_SECONDS + 20)
        mc.wait(timeout=60)
        output.seek(0)
        lines = [json.loads(line) for line in output.read().splitlines() if line.startswith("{")]
    server.join(10)
    bodies = sorted({name for line in lines for name in line["bodies"]})
    print(f"   serve sink (`serve vrpn://`), {SENSORS} VRPN sensors written at {RATE:.0f} Hz:")
    print(
        f"     world writes {result['frames'] / result['wall']:7.1f}/s; poses sent "
        f"{result['sent'] / result['wall'] / SENSORS:7.1f}/s per sensor"
    )
    print(f"     C++ client (motioncapture, TCP-only) saw rigid bodies {bodies}")
    share = result["cpu"] / result["wall"]
    per = share / (result["sent"] / result["wall"] / 1000)  # the sink coalesces: per pose
    print(f"     sink process CPU share            {share:7.1%} of one core")
    print(f"       per 1,000 poses/s sent          {per:7.2%} of one core")
    return {
        "sink_poses_per_sensor": result["sent"] / result["wall"] / SENSORS,
        "sink_cpu": share,
        "sink_cpu_per_1000_poses": per,
    }


def main() -> dict[str, float]:
    figures = decode_bench()
    if not bench.QUICK:  # the table takes VRPN's CPU share from bench_load at the same load
        figures |= serve_bench()
        figures |= sink_bench()
    return figures


if __name__ == "__main__":
    main()
