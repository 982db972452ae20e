"""Soak: the demo's five protocols at load for a bounded time, memory and queues sampled.

    python -m tests.reliability.soak --duration 600            # full load, 10 minutes
    python -m tests.reliability.soak --duration 60 --scale 0.1 # what `make test` runs
    make soak                                                  # the first line

Every simulator runs as its own process (`robowire sim ...`), at the target loads of the
protocol issues times `--scale` (device counts; rates are kept): VRPN 10 sensors at 1 kHz,
XRP 50 robots, UgCS 1,000 vehicles at 5 Hz, VRSP 10,000 drones at 30 Hz, SpyGlass 1,000
nodes. This process is the gateway: one source per simulator (one per XRP robot), the web
viewer with one browser-like client that reads every frame, and the MCAP recorder (to a
temporary file). Every `--interval` seconds it samples its RSS and CPU share, the simulators'
CPU, asyncio tasks, open descriptors and every queue: the world's change feed backlog (the
recorder's queue, bytes), the viewer clients' text queues, and the sinks' drop counts.

The verdict (the last line; `--json` prints it as one JSON object): memory flat when the
slope of RSS over the second half (Theil-Sen, see `slope`) is under `--max-slope` MiB a minute;
queues bounded when every queue still drains in the second half: its smallest size there is
under `QUEUE_SLACK` or under twice its smallest in the first half (a queue that grows
without end never comes back down; one that fills for a while on a starved machine does).
Every queue has a bound besides (the recorder's 64 MiB, counted drops past it). Exit
status 0 when both hold, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect
from websockets.typing import Subprotocol

from robowire import config, workers
from robowire.gateway import Gateway, open_source
from robowire.recording import McapRecorder
from robowire.service import Service, Source
from robowire.viewer.server import SUBPROTOCOL, ViewerSink

SRC = Path(__file__).resolve().parents[2] / "src"
QUEUE_SLACK = 1 << 20  # bytes (or messages) a queue may hold more in the second half
PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Load:
    protocol: str
    count: int
    rate: float | None


FULL = [
    Load("vrpn", 10, 1000.0),
    Load("xrp", 50, None),
    Load("ugcs", 1000, 5.0),
    Load("vrsp", 10000, 30.0),
    Load("spyglass", 1000, None),
]


_given: set[int] = set()  # ports handed out already (a simulator may not have bound yet)


def free_ports(kind: int, count: int = 1) -> int:
    """The first of `count` consecutive ports free on 127.0.0.1 for TCP and UDP, not handed
    out before by this process."""
    base = 20000 + os.getpid() % 20000
    while True:
        span = set(range(base, base + count))
        held: list[socket.socket] = []
        try:
            if span & _given:
                raise OSError("handed out")
            for port in span:
                for k in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
                    sock = socket.socket(socket.AF_INET, k)
                    held.append(sock)
                    sock.bind(("127.0.0.1", port))
            _given.update(span)
            return base
        except OSError:
            base = 20000 + (base + count + 7 - 20000) % 40000
        finally:
            for sock in held:
                sock.close()


def rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def slope(points: Sequence[tuple[float, float]]) -> float:
    """The Theil-Sen slope of y against x: the median of the slopes between every two points
    (0 with fewer than two). A leak raises every pair; one step (a queue that filled once on
    a starved machine and whose memory the allocator keeps) moves the median little."""
    slopes = [
        (y2 - y1) / (x2 - x1)
        for i, (x1, y1) in enumerate(points)
        for x2, y2 in points[i + 1 :]
        if x2 != x1
    ]
    return statistics.median(slopes) if slopes else 0.0


@dataclass
class Sample:
    t: float
    rss: int
    cpu: float  # this process's CPU share since the last sample (1.0 = one core)
    sims_cpu: float  # the simulators' together
    tasks: int
    fds: int
    queues: dict[str, int] = field(default_factory=dict)
    drops: int = 0
    messages: int = 0


class Browser:
    """A viewer client that says `ready` and reads every frame."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.frames = 0

    async def run(self) -> None:
        async with connect(self.url, subprotocols=[Subprotocol(SUBPROTOCOL)], max_size=None) as ws:
            while True:
                await ws.send('{"type": "ready"}')
                while not isinstance(await ws.recv(), bytes):
                    pass
                self.frames += 1


def start_sims(loads: Sequence[Load], env: dict[str, str]) -> tuple[list[Any], list[str]]:
    """The simulator processes and the source URLs that listen to them."""
    procs: list[Any] = []
    urls: list[str] = []
    for load in loads:
        args = [sys.executable, "-m", "robowire.cli", "sim", load.protocol, "--count"]
        args.append(str(load.count))
        if load.rate is not None:
            args += ["--rate", str(load.rate)]
        if load.protocol == "vrsp":
            port = free_ports(socket.SOCK_DGRAM)
            args += ["--to", f"127.0.0.1:{port}"]
            urls.append(f"vrsp://127.0.0.1:{port}")
        elif load.protocol == "xrp":
            port = free_ports(socket.SOCK_DGRAM, load.count)
            args += ["--port", str(port)]
            urls += [
                f"xrp://127.0.0.1:{port + i}?enable=1&left=0.3&right=0.2" for i in range(load.count)
            ]
        else:
            port = free_ports(socket.SOCK_STREAM)
            args += ["--port", str(port)]
            urls.append(
                {
                    "vrpn": f"vrpn+tcp://Tracker0@127.0.0.1:{port}",
                    "ugcs": f"ugcs://127.0.0.1:{port}",
                    "spyglass": f"spyglass://127.0.0.1:{port}",
                }[load.protocol]
            )
        procs.append(
            subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        )
    return procs, urls


def in_workers(urls: Sequence[str], count: int, folder: str) -> list[Service]:
    """The gateway's services when `count` worker processes take the sources in (spread
    round-robin) and the recorder stays here: a site file run as `robowire up` would."""
    bus = free_ports(socket.SOCK_STREAM)
    site = [f'[workers]\nbus = "zenoh://127.0.0.1:{bus}"\n']
    site += [f'[[source]]\nurl = "{u}"\nworker = "w{i % count}"\n' for i, u in enumerate(urls)]
    site.append(f'[[sink]]\nrecord = "{folder}/soak.mcap"\n')
    path = Path(folder) / "site.toml"
    path.write_text("".join(site))
    return workers.site_services(config.load(path), str(path))


async def soak(
    duration: float, scale: float, interval: float, log: Any, worker_count: int = 0
) -> list[Sample]:
    loads = [Load(x.protocol, max(1, round(x.count * scale)), x.rate) for x in FULL]
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    gateway = Gateway()
    viewer = ViewerSink("127.0.0.1", 0)
    folder = tempfile.TemporaryDirectory(prefix="robowire-soak-")
    procs, urls = start_sims(loads, env)
    if worker_count:
        services = in_workers(urls, worker_count, folder.name)
        recorder = next(s for s in services if isinstance(s, McapRecorder))
        gateway.add(viewer, *services)
    else:
        recorder = McapRecorder(os.path.join(folder.name, "soak.mcap"))
        gateway.add(viewer, recorder, *(open_source(url) for url in urls))
    sources: list[Source] = [s for s in gateway.services if isinstance(s, Source)]
    spawned = [s for s in gateway.services if isinstance(s, workers.Worker)]

    def own_cpu() -> float:  # this process's and its workers' CPU seconds
        return time.process_time() + sum(cpu_seconds(w.pid) for w in spawned if w.pid)

    print(
        "soak: "
        + ", ".join(
            f"{x.protocol} {x.count}" + (f" at {x.rate:g} Hz" if x.rate else "") for x in loads
        )
        + f"; {duration:g} s, a sample every {interval:g} s"
        + (f"; sources in {worker_count} worker processes" if worker_count else ""),
        file=log,
    )
    run = asyncio.create_task(gateway.run())
    browser_task: asyncio.Task[None] | None = None
    samples: list[Sample] = []
    try:
        while viewer.address is None:
            if run.done():
                run.result()
                raise RuntimeError(f"the gateway ended: {gateway.failures}")
            await asyncio.sleep(0.05)
        browser = Browser(f"ws://127.0.0.1:{viewer.address[1]}/ws")
        browser_task = asyncio.create_task(browser.run())
        loop = asyncio.get_running_loop()
        start = last_wall = loop.time()
        last_cpu = own_cpu()
        last_sims = sum(cpu_seconds(p.pid) for p in procs)
        while loop.time() - start < duration:
            await asyncio.sleep(interval)
            if run.done():
                raise RuntimeError(f"the gateway ended: {gateway.failures}")
            wall, cpu = loop.time(), own_cpu()
            sims = sum(cpu_seconds(p.pid) for p in procs)
            span = max(wall - last_wall, 1e-9)
            queues = {
                "change feed (bytes)": gateway.world.feed.backlog(),
                "viewer outboxes": sum(len(c._outbox) for c in viewer.clients),
                "viewer socket buffers (bytes)": sum(
                    c.ws.transport.get_write_buffer_size() for c in viewer.clients
                ),
            }
            sample = Sample(
                t=wall - start,
                rss=rss(),
                cpu=(cpu - last_cpu) / span,
                sims_cpu=(sims - last_sims) / span,
                tasks=len(asyncio.all_tasks()),
                fds=len(os.listdir("/proc/self/fd")),
                queues=queues,
                drops=viewer.stats.dropped + recorder.stats.dropped,
                messages=sum(s.stats.messages_in for s in sources),
            )
            samples.append(sample)
            last_wall, last_cpu, last_sims = wall, cpu, sims
            print(
                f"{sample.t:6.0f} s  rss {sample.rss / 2**20:7.1f} MiB  cpu {sample.cpu:4.0%}"
                f"  sims {sample.sims_cpu:4.0%}  tasks {sample.tasks}  fds {sample.fds}"
                f"  queues {'/'.join(str(q) for q in queues.values())}  drops {sample.drops}"
                f"  messages {sample.messages}  frames {browser.frames}"
                f"  ({' '.join(str(s.stats.messages_in) for s in sources[:6])})",
                file=log,
                flush=True,
            )
    finally:
        if browser_task is not None:
            browser_task.cancel()
            await asyncio.gather(browser_task, return_exceptions=True)
        gateway.stop()
        await asyncio.gather(run, return_exceptions=True)
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)
        folder.cleanup()
    return samples


def verdict(samples: Sequence[Sample], max_slope: float) -> dict[str, Any]:
    """Flat memory and bounded queues, from the samples (see the module's docstring)."""
    half = len(samples) // 2
    first, second = samples[:half], samples[half:]
    rss_slope = slope([(s.t / 60.0, s.rss / 2**20) for s in second])  # MiB a minute
    growing = []
    for name in samples[0].queues if samples else ():
        floor_before = min((s.queues[name] for s in first), default=0)
        floor_after = min((s.queues[name] for s in second), default=0)
        if floor_after > max(QUEUE_SLACK, 2 * floor_before):  # it never drains any more
            growing.append(name)
    drops = second[-1].drops - second[0].drops if second else 0
    flowing = bool(second) and second[-1].messages > second[0].messages
    return {
        "samples": len(samples),
        "rss_start_mib": round(samples[0].rss / 2**20, 1) if samples else None,
        "rss_end_mib": round(samples[-1].rss / 2**20, 1) if samples else None,
        "rss_slope_mib_per_min": round(rss_slope, 3),
        "memory_flat": rss_slope < max_slope,
        "growing_queues": growing,
        "recorder_and_viewer_drops_second_half": drops,
        "queues_bounded": not growing,
        "flowing": flowing,
        "tasks": [samples[0].tasks, samples[-1].tasks] if samples else None,
        "fds": [samples[0].fds, samples[-1].fds] if samples else None,
        "cpu_mean": round(sum(s.cpu for s in second) / max(1, len(second)), 2),
        "sims_cpu_mean": round(sum(s.sims_cpu for s in second) / max(1, len(second)), 2),
        "ok": rss_slope < max_slope and not growing and flowing,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.reliability.soak",
        description="Run the five protocols at load through a gateway with the viewer and a "
        "recorder; sample memory, CPU and queues; print a verdict.",
        epilog="example: python -m tests.reliability.soak --duration 600",
    )
    parser.add_argument("--duration", type=float, default=600.0, help="seconds (default 600)")
    parser.add_argument("--scale", type=float, default=1.0, help="device counts x this")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between samples")
    parser.add_argument(
        "--max-slope", type=float, default=1.0, help="MiB a minute of RSS allowed (second half)"
    )
    parser.add_argument("--json", action="store_true", help="the verdict as one JSON line")
    parser.add_argument(
        "--workers",
        type=int,
        default=0,
        metavar="N",
        help="take the sources in in N worker processes joined by Zenoh (docs/config.md); "
        "the gateway's CPU is then its own and its workers'",
    )
    args = parser.parse_args(argv)
    if args.duration <= 0 or args.scale <= 0 or args.interval <= 0:
        parser.error("--duration, --scale and --interval must be positive")
    samples = asyncio.run(soak(args.duration, args.scale, args.interval, sys.stderr, args.workers))
    result = verdict(samples, args.max_slope)
    if args.json:
        print(json.dumps(result))
    else:
        queues = (
            "bounded"
            if result["queues_bounded"]
            else "GROWING: " + ", ".join(result["growing_queues"])
        )
        print(
            f"soak: RSS {result['rss_start_mib']} -> {result['rss_end_mib']} MiB, slope over "
            f"the second half {result['rss_slope_mib_per_min']} MiB/min "
            f"({'flat' if result['memory_flat'] else 'GROWING'}); queues "
            f"{queues} ({result['recorder_and_viewer_drops_second_half']} drops in the "
            f"second half)"
            f"; CPU {result['cpu_mean']:.0%} gateway, {result['sims_cpu_mean']:.0%} simulators"
            f"; {'PASS' if result['ok'] else 'FAIL'}"
        )
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
