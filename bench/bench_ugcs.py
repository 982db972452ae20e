"""UgCS: 1,000 simulated vehicles on one VSM at 5 Hz into one UCS endpoint, and frame decoding.

1. fleet: `UgcsSim` (1,000 vehicles, telemetry at 5 Hz) in a child process; in this process
   the UCS-side source (`UcsSource`: session, adapter, world) connected to it on 127.0.0.1 for
   `--seconds` (20 by default). Printed: the telemetry lag, from the time the VSM set a value
   (`begin_of_epoch + ms_since_epoch`, wall clock) to the moment its Device_status was applied
   to the world here (p50/p99 over every Device_status; also the part until the bytes were
   read here, which is the VSM's and the socket's), and the CPU share of each process
   (CPU time over wall time; 1.0 = one core). Targets: p99 < 100 ms; each side <= 0.5.
2. decode: the bytes the UCS side received until 4 s after the last registration (the
   registrations and the telemetry between and after them), split into frames;
   `Vsm_message.ParseFromString` on each payload alone is the baseline; then the frame reader
   on the whole stream (framing + parse), and the UCS session (framing, parse, name mapping,
   held values, events); and, as the floor of any session that reads the values
   through protobuf's Python objects, parsing each payload and reading every telemetry field's
   id, time and value (nothing else). Printed: frames/s and the ratio to the baseline (targets:
   >= 0.7 for the reader, >= 0.6 for the session: the table's "vs peer"). Each ratio is the
   median of 3 rounds (bench/rounds.py), a round the best of 1 run (the session's 2) to the
   best of as many runs of the baseline, one after the other, in CPU time (frames/s: the
   ratio times the baseline's best rate); the session's
   registrations are frozen out of the garbage collector first, as `UcsSource` does
   (`gcfreeze`), so that a full collection of them is not timed.

    python -m bench ugcs                  # or: python bench/bench_ugcs.py --seconds 10
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import multiprocessing
import statistics
import sys
import time
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

import bench
from bench import rounds
from robowire.addresses import parse_endpoint
from robowire.protocols.ugcs import codec
from robowire.protocols.ugcs.codec import FrameReader, pb
from robowire.protocols.ugcs.events import DeviceRegistered, TelemetryColumns, TelemetryReceived
from robowire.protocols.ugcs.gcfreeze import freeze, thaw
from robowire.protocols.ugcs.services import UcsSource
from robowire.protocols.ugcs.session_ucs import UcsSession
from robowire.service import SimOptions
from robowire.timebase import monotonic
from robowire.transport import new_event_loop
from robowire.world import World

VEHICLES = 1000
RATE = 5.0
SECONDS = 20.0
SECONDS_QUICK = 8.0
WARMUP = 4.0  # s of the run not measured (registrations, take-off)
RECORD = 4.0  # s of received bytes kept for the decode benchmark, after the registrations


# -- the VSM in a child process ------------------------------------------------------------------


def _params(name: str, given: dict[str, Any]) -> dict[str, Any]:
    """Every parameter of model command `name` (None = NA), `given` ones set (wire units)."""
    from robowire.protocols.ugcs import definitions

    return {p.name: given.get(p.name) for p in definitions.COMMAND_BY_NAME[name].parameters}


def _fly(sim: Any) -> None:
    """Every vehicle flies a 300 m square at 30 m: its telemetry changes at every tick."""
    fleet = sim.fleet
    lat0, lon0 = math.radians(fleet.origin[0]), math.radians(fleet.origin[1])
    alt0 = fleet.origin[2]
    north = 300.0 / 6_371_000.0
    east = north / math.cos(lat0)
    corners = [(lat0 + north, lon0), (lat0 + north, lon0 + east), (lat0, lon0 + east), (lat0, lon0)]
    items = [("takeoff_mission", _params("takeoff_mission", {"altitude_amsl": alt0 + 30}))]
    items += [
        (
            "move",
            _params(
                "move",
                {
                    "latitude": lat,
                    "longitude": lon,
                    "altitude_amsl": alt0 + 30,
                    "acceptance_radius": 3.0,
                },
            ),
        )
        for lat, lon in corners
    ]
    attributes = _params("mission_upload", {"altitude_origin": alt0})
    for i in range(fleet.count):
        fleet.mission_upload(i, attributes, items)
        fleet.command(i, "arm", {})
        fleet.command(i, "auto", {})


def _vsm(pipe: Connection, count: int, rate: float) -> None:
    from robowire.protocols.ugcs.services import UgcsSim

    async def run() -> None:
        options = SimOptions(port=0, count=count, rate=rate, options={"gps_warmup": "0.5"})
        sim = UgcsSim(options)
        task = asyncio.create_task(sim.run(World()))
        await sim.ready.wait()
        await asyncio.sleep(1.0)  # every vehicle has a 3D fix
        _fly(sim)
        pipe.send(sim.address)
        loop = asyncio.get_running_loop()
        marks: list[tuple[float, float]] = []
        while True:  # "mark" -> (cpu, wall) now; "stop" -> end
            command = await loop.run_in_executor(None, pipe.recv)
            marks.append((time.process_time(), time.perf_counter()))
            pipe.send(marks[-1])
            if command == "stop":
                break
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    loop = new_event_loop()
    try:
        loop.run_until_complete(run())
    finally:
        loop.close()


# -- the UCS side in this process -----------------------------------------------------------------


class _Recording(UcsSession):
    """The UCS session, keeping what it is fed until `RECORD` s after the latest
    registration (a loaded machine may take longer than the warm-up to register them all)."""

    keep_until = math.inf
    received: list[bytes]
    read_at = 0.0  # wall ms at which the latest bytes came in

    def feed(self, data: bytes, now: float) -> list[Any]:
        self.read_at = time.time() * 1000.0
        keep = now < self.keep_until
        if keep:
            self.received.append(bytes(data))
        events = super().feed(data, now)
        if keep and any(type(event) is DeviceRegistered for event in events):
            self.keep_until = now + RECORD
        return events


class _MeasuredSource(UcsSource):
    """The real source; also notes each Device_status's lag and keeps the first bytes of its
    first connection."""

    def __init__(self, url: str) -> None:
        super().__init__(parse_endpoint(url))
        self.lags: list[float] = []
        self.read_lags: list[float] = []
        self.measuring = False
        self.received: list[bytes] = []
        self.sessions_made = 0

    def _new_session(self) -> UcsSession:
        conn = next(self._conn_ids)
        session = _Recording(monotonic(), peer_id=self.peer_id, conn=conn)
        session.received = self.received
        if self.sessions_made:  # a connection after the first: its bytes are not kept
            session.keep_until, session.received = -math.inf, []
            print(f"   (connection {conn} after the first: its bytes are not decoded)")
        self.sessions_made += 1
        self.sessions[conn] = session
        return session

    def deliver(self, events: Any, now: float) -> None:
        super().deliver(events, now)
        if not self.measuring:
            return
        applied = time.time() * 1000.0
        read_at = max((s.read_at for s in self.sessions.values() if isinstance(s, _Recording)),
                      default=applied)  # fmt: skip
        lags, read_lags = self.lags, self.read_lags
        for event in events:
            if type(event) is TelemetryReceived and event.values:
                newest = max(v.time_ms for v in event.values)
                lags.append(applied - newest)
                read_lags.append(read_at - newest)
            elif type(event) is TelemetryColumns and len(event.frame):
                starts = np.flatnonzero(np.diff(event.frame, prepend=-1))
                newest_ms = np.maximum.reduceat(event.time_ms, starts)  # per Device_status
                lags.extend((applied - newest_ms).tolist())
                read_lags.extend((read_at - newest_ms).tolist())


async def _fleet(seconds: float, count: int) -> tuple[_MeasuredSource, dict[str, float], World]:
    parent, child = multiprocessing.Pipe()
    process = multiprocessing.Process(target=_vsm, args=(child, count, RATE), daemon=True)
    process.start()
    loop = asyncio.get_running_loop()
    host, port = await loop.run_in_executor(None, parent.recv)
    world = World()
    source = _MeasuredSource(f"ugcs://{host}:{port}")
    task = asyncio.create_task(source.run(world))
    try:
        await asyncio.sleep(WARMUP)

        async def mark(command: str) -> tuple[float, float]:
            parent.send(command)
            result: tuple[float, float] = await loop.run_in_executor(None, parent.recv)
            return result

        vsm_cpu0, vsm_wall0 = await mark("mark")
        cpu0, wall0 = time.process_time(), time.perf_counter()
        source.measuring = True
        await asyncio.sleep(seconds)
        source.measuring = False
        cpu1, wall1 = time.process_time(), time.perf_counter()
        vsm_cpu1, vsm_wall1 = await mark("stop")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        process.join(5.0)
        if process.is_alive():
            process.kill()
    shares = {
        "ucs": (cpu1 - cpu0) / (wall1 - wall0),
        "vsm": (vsm_cpu1 - vsm_cpu0) / (vsm_wall1 - vsm_wall0),
    }
    return source, shares, world


# -- decode ---------------------------------------------------------------------------------------


def _best(fn: Any, repeat: int = 3) -> float:
    """The least CPU time of `repeat` runs of `fn` (CPU time: on a shared machine, the time
    this process was not running is not counted)."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def _decode(stream: bytes) -> dict[str, float]:
    payloads = [payload for _, payload in codec.split_frames(stream, final=False)]
    parse = pb.Vsm_message.FromString
    last_registration = max(
        (i for i, p in enumerate(payloads) if parse(p).HasField("register_device")), default=-1
    )
    setup, rest = payloads[: last_registration + 1], payloads[last_registration + 1 :]
    n = len(rest)
    if not n:
        print("   decode: no telemetry received")
        return {}
    setup_bytes = b"".join(codec.frame(p) for p in setup)
    rest_bytes = b"".join(codec.frame(p) for p in rest)
    chunks = [rest_bytes[i : i + 65536] for i in range(0, len(rest_bytes), 65536)]  # reads

    def baseline() -> None:
        for payload in rest:
            parse(payload)

    def reader() -> None:
        frames = FrameReader()
        for chunk in chunks:
            frames.feed(chunk)

    def session() -> None:
        for chunk in chunks:
            ucs.feed(chunk, 1.0)

    def registrations() -> None:
        UcsSession(0.0, peer_id=1).feed(setup_bytes, 1.0)

    def walk() -> None:  # the floor of any session that reads values through protobuf objects
        for payload in rest:
            message = parse(payload)
            if message.HasField("device_status"):
                for field in message.device_status.telemetry_fields:
                    field.field_id, field.ms_since_epoch, field.value.ListFields()

    bases: list[float] = []

    def paired(fn: Any, repeat: int = 3) -> list[float]:
        """`rounds.ROUNDS` ratios of the baseline's time to `fn`'s, each the best of `repeat`
        runs of both taken in turn (on a shared machine both see the same noise); the
        baseline's times go to `bases`."""
        ratios = []
        for _ in range(rounds.ROUNDS):
            times, base_times = [], []
            for _ in range(repeat):
                base_times.append(_best(baseline, 1))
                times.append(_best(fn, 1))
            bases.extend(base_times)
            ratios.append(min(base_times) / min(times))
        return ratios

    reader_ratio = statistics.median(paired(reader, 1))
    ucs = UcsSession(0.0, peer_id=1)
    ucs.feed(setup_bytes, 1.0)
    freeze()  # what UcsSource does after a read that registered many devices
    try:  # the same frames each time: the same work (held values, events)
        session_ratios = paired(session, 2)
    finally:
        thaw()
    session_ratio = statistics.median(session_ratios)
    walk_ratio = statistics.median(paired(walk, 1))
    base = min(bases)
    print(f"   decode: {n} frames after the registrations ({len(rest_bytes) / 1e6:.1f} MB)")
    for name, ratio, note in (
        ("ParseFromString alone", 1.0, ""),
        ("frame reader", reader_ratio, "(target >= 0.7)"),
        ("UCS session", session_ratio, "(framing, parse, names, held values, events)"),
        ("parse + read each field", walk_ratio,
         "(fields read through protobuf objects: such a session's floor)"),
    ):  # fmt: skip
        print(f"     {name:23} {n / base * ratio:12,.0f} frames/s   {ratio:.2f}x   {note}")
    print(f"     UCS session / ParseFromString: {rounds.text(session_ratios)}")
    took = _best(registrations, 1)
    print(f"     ({len(setup)} registration frames: {len(setup) / took:,.0f}/s)")
    return {
        "decode_parse_rate": n / base,
        "decode_reader_ratio": reader_ratio,
        "decode_rate": n / base * session_ratio,
        **rounds.figures("decode_ratio", session_ratios),
        "decode_walk_ratio": walk_ratio,
        "registration_rate": len(setup) / took,
    }


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(prog="bench_ugcs", description=__doc__.splitlines()[0])
    seconds = SECONDS_QUICK if bench.QUICK else SECONDS
    parser.add_argument("--seconds", type=float, default=seconds, help="measured run length")
    parser.add_argument("--count", type=int, default=VEHICLES, help="simulated vehicles")
    # `python -m bench ugcs --seconds 10` passes its words on in sys.argv: take ours from there
    args, _ = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    loop = new_event_loop()
    try:
        source, shares, world = loop.run_until_complete(_fleet(args.seconds, args.count))
    finally:
        loop.close()
    lags = np.asarray(source.lags)
    table = world.tables.get(source.name)
    vehicles = 0 if table is None else len(table)
    print(f"   fleet: {args.count} vehicles at {RATE:g} Hz for {args.seconds:g} s; "
          f"{vehicles} in the world, {len(lags)} Device_status applied "
          f"({len(lags) / args.seconds:,.0f}/s)")  # fmt: skip
    figures = {
        "ingest_rate": len(lags) / args.seconds,
        "ucs_cpu": shares["ucs"],
        "vsm_cpu": shares["vsm"],
    }
    if len(lags):
        p50, p99 = np.percentile(lags, [50, 99])
        figures |= {"lag_p50_ms": float(p50), "lag_p99_ms": float(p99)}
        print(f"     telemetry lag  p50 {p50:6.1f} ms   p99 {p99:6.1f} ms   (target p99 < 100)")
        print(f"     (mean {statistics.fmean(lags):.1f} ms, max {lags.max():.1f} ms)")
        r50, r99 = np.percentile(np.asarray(source.read_lags), [50, 99])
        print(f"     of which until our read: p50 {r50:6.1f} ms   p99 {r99:6.1f} ms   (the VSM's "
              "tick, its 200 ms window per field, the socket)")  # fmt: skip
    print(f"     CPU share      VSM {shares['vsm']:.2f}   UCS {shares['ucs']:.2f}   "
          "(of one core; target <= 0.50 each)")  # fmt: skip
    return figures | _decode(b"".join(source.received))


if __name__ == "__main__":
    main(sys.argv[1:])
