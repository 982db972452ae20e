"""Soak: the protocols at load for a bounded time, memory and queues sampled.

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

The gateway runs on the loop the CLI runs it on (`robowire.transport.loop`: uvloop).

The verdict (the last line; `--json` prints it as one JSON object): memory flat when the
slope over the second half (Theil-Sen, see `slope`) of RSS less the most the bounded buffers
held so far (`buffered_peak`: the recorder's queue, sampled, and the sources' own high-water
marks, `Source.buffered_peak`: a Zenoh source's inbox and hold; a bounded buffer filling on a
starved machine is not a leak, and the process keeps the memory once it drains, so its peak,
not its size) is under `--max-slope` MiB a minute (`rss_net_slope_mib_min`;
`rss_slope_mib_min` is RSS's own);
queues bounded when every queue still drains in the second half: its smallest size there is
under `QUEUE_SLACK` or under twice its smallest in the first half (a queue that grows
without end never comes back down; one that fills for a while on a starved machine does), or
when it sits at its bound (the recorder's, 64 MiB: it dropped its oldest updates in the second
half, counted in `recorder_drops`; a recorder slower than its input is issue 23's item 2). And
the overload policy's promises (docs/architecture.md, "Overload"), over the second half: the
reading viewer got at least `--min-fps` frames a second, and it and the commander never had
to connect again (`viewer_reconnects`); no source disconnected (`disconnects`: reconnections)
and the VRPN source never said "no pong" (`vrpn_silences`); the loop answered a timer within
`--max-lag-ms` at the 99th percentile (`loop_lag_p99_ms`: what a command or a keep-alive waits
at most, beyond its own cost); and a control command (an XRP `stop` sent from a second viewer
client with control every `COMMAND_PERIOD` seconds) went out, as the robot's packet, within
`--max-lag-ms` of being sent at the 99th percentile (`command_p99_ms`; none may fail once the
robot answered).
It also reports what each source shed (`shed`), the recorder's drops, the CPU shares and how
often the loop fell behind (`fell_behind`: the overload policy's budgets apply only then). Exit
status 0 when all hold, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

from robowire import config, workers
from robowire.access import Access
from robowire.control import Controller
from robowire.gateway import Gateway, open_source
from robowire.protocols.xrp.services import XrpSource
from robowire.recording import McapRecorder
from robowire.service import Service, Source
from robowire.transport.budget import pressure
from robowire.transport.loop import run as run_loop
from robowire.viewer.server import SUBPROTOCOL, ViewerSink

SRC = Path(__file__).resolve().parents[2] / "src"
QUEUE_SLACK = 1 << 20  # bytes (or messages) a queue may hold more in the second half
FEED = "change feed (bytes)"  # the recorder's queue: past its bound its oldest are dropped
LAG_PERIOD = 0.02  # seconds between the loop-lag probe's timers
COMMAND_PERIOD = 0.5  # seconds between the commander's commands
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


def below_ephemeral() -> range:
    """The ports this soak hands out: below where the kernel's ephemeral ports begin, so that
    no socket that binds port 0 or connects (the gateway's own sources, or any process of the
    machine) takes a port between its handing out and its simulator binding it, a second later."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default
    return range(10000, max(low, 20000))


def free_ports(kind: int, count: int = 1) -> int:
    """The first of `count` consecutive ports free on 127.0.0.1 for TCP and UDP, not handed
    out before by this process (`below_ephemeral`; where in that range depends on the process,
    so that soaks run at once start apart)."""
    ports = below_ephemeral()
    spread = len(ports) - count
    base = ports.start + (os.getpid() * 997) % spread
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
            base = ports.start + (base - ports.start + count + 7) % spread
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
    frames: int = 0  # the viewer client's, so far
    recorder_drops: int = 0
    fell_behind: int = 0  # times the gateway's loop fell behind (`pressure()`), so far
    viewer_reconnects: int = 0  # so far
    sims_exited: list[str] = field(default_factory=list)  # simulators that ended, so far
    shed: dict[str, int] = field(default_factory=dict)  # per source, so far
    reconnects: int = 0
    silences: int = 0  # "no pong" warnings so far
    lags: list[float] = field(default_factory=list)  # loop lags (s) since the last sample
    commands: list[float] = field(default_factory=list)  # command latencies (s), since then
    commands_failed: int = 0  # so far
    commanding: bool = True  # False: no XRP source in this process (workers) to command
    buffered_peak: int = 0  # the most bytes the bounded buffers held so far (see the verdict)


def open_ws(url: str) -> Any:
    """A WebSocket client of the viewer that waits as long as the gateway takes (a starved
    gateway answers late; how late is what the soak measures, not a reason to hang up)."""
    return connect(
        url, subprotocols=[Subprotocol(SUBPROTOCOL)], max_size=None, open_timeout=None,
        ping_interval=None,
    )  # fmt: skip


class Browser:
    """A viewer client that reads every frame and asks for two ahead, as the page does; it
    connects again when the connection ends, as the page does (`reconnects`)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.frames = 0
        self.reconnects = 0

    async def run(self) -> None:
        while True:
            try:
                await self.read()
            except (OSError, ConnectionClosed):
                self.reconnects += 1
                await asyncio.sleep(0.5)

    async def read(self) -> None:
        async with open_ws(self.url) as ws:
            await ws.send('{"type": "ready"}')
            while True:
                await ws.send('{"type": "ready"}')
                while not isinstance(await ws.recv(), bytes):
                    pass
                self.frames += 1


class Commander:
    """A viewer client with control: every `COMMAND_PERIOD` seconds it sends `robot` a `stop`
    and, once the gateway has answered, appends how long after sending it the robot's packet
    went out (`sent`: the times `robot` sent a packet at once, which only commands do)."""

    def __init__(self, url: str, robot: XrpSource) -> None:
        self.url = url
        self.robot = robot
        self.sent: list[float] = []
        self.latencies: list[float] = []
        self.failed = 0
        self.reconnects = 0
        self.answered = 0
        self.step = ""
        send_now = robot._send_now

        def timed() -> None:
            send_now()
            self.sent.append(time.monotonic())

        robot._send_now = timed  # type: ignore[method-assign]

    def state(self) -> str:
        """Where the commander is (said when no command was answered)."""
        return f"robot {self.robot.name} up {self.robot.up}, at {self.step!r}"

    async def run(self) -> None:
        self.step = "waiting for the robot"
        while not self.robot.up:  # (it is up once the robot answered)
            await asyncio.sleep(COMMAND_PERIOD)
        idents = itertools.count()
        while True:  # a connection that ends is said (stderr) and made again, as the page does
            try:
                await self.command(idents)
            except (OSError, ConnectionClosed) as exc:
                self.reconnects += 1
                print(f"soak: the commander's connection ended ({exc!r})", file=sys.stderr)
                await asyncio.sleep(COMMAND_PERIOD)

    async def command(self, idents: Iterator[int]) -> None:
        self.step = "connecting"
        async with open_ws(self.url) as ws:
            for ident in idents:
                self.step = f"connected, before command {ident}"
                await asyncio.sleep(COMMAND_PERIOD)
                command = {
                    "type": "command", "id": ident, "source": self.robot.name,
                    "device": self.robot.device_id, "command": "stop",
                }  # fmt: skip
                began = time.monotonic()
                await ws.send(json.dumps(command))
                self.step = f"waiting for the answer to command {ident}"
                while True:
                    message = await ws.recv()
                    if isinstance(message, str) and f'"id":{ident},' in message:
                        self.answered += 1
                        break
                went = [t for t in self.sent if t >= began]
                if went:
                    self.latencies.append(went[0] - began)
                else:
                    self.failed += 1
                self.sent.clear()


class Silences(logging.Handler):
    """Counts the VRPN source's "no pong from the server" warnings."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "no pong" in record.getMessage():
            self.count += 1


async def probe_lag(lags: list[float]) -> None:
    """How late the loop runs a timer, every `LAG_PERIOD` seconds (appended to `lags`)."""
    loop = asyncio.get_running_loop()
    while True:
        due = loop.time() + LAG_PERIOD
        await asyncio.sleep(LAG_PERIOD)
        lags.append(max(0.0, loop.time() - due))


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
    viewer.controller = Controller(lambda: gateway.services)
    viewer.gate.access = Access.of(allow_control=True)
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
    commander_task: asyncio.Task[None] | None = None
    commander: Commander | None = None
    samples: list[Sample] = []
    silences = Silences()
    logging.getLogger("robowire").addHandler(silences)
    lags: list[float] = []
    lag_task = asyncio.create_task(probe_lag(lags))
    try:
        while viewer.address is None:
            if run.done():
                run.result()
                raise RuntimeError(f"the gateway ended: {gateway.failures}")
            await asyncio.sleep(0.05)
        browser = Browser(f"ws://127.0.0.1:{viewer.address[1]}/ws")
        browser_task = asyncio.create_task(browser.run())
        robot = next((s for s in sources if isinstance(s, XrpSource)), None)  # (not in workers)
        if robot is not None:
            token = f"?token={viewer.gate.access.token}"
            commander = Commander(f"ws://127.0.0.1:{viewer.address[1]}/ws{token}", robot)
            commander_task = asyncio.create_task(commander.run())
        loop = asyncio.get_running_loop()
        start = last_wall = loop.time()
        last_cpu = own_cpu()
        last_sims = sum(cpu_seconds(p.pid) for p in procs)
        feed_peak = 0  # the most bytes the change feed's queue held, as sampled
        while loop.time() - start < duration:
            await asyncio.sleep(interval)
            if run.done():
                raise RuntimeError(f"the gateway ended: {gateway.failures}")
            wall, cpu = loop.time(), own_cpu()
            sims = sum(cpu_seconds(p.pid) for p in procs)
            span = max(wall - last_wall, 1e-9)
            queues = {
                FEED: gateway.world.feed.backlog(),
                "viewer outboxes": sum(len(c._outbox) for c in viewer.clients),
                "viewer socket buffers (bytes)": sum(
                    c.ws.transport.get_write_buffer_size() for c in viewer.clients
                ),
            }
            feed_peak = max(feed_peak, queues[FEED])
            sample = Sample(
                t=wall - start,
                rss=rss(),
                buffered_peak=feed_peak + sum(s.buffered_peak() for s in sources),
                cpu=(cpu - last_cpu) / span,
                sims_cpu=(sims - last_sims) / span,
                tasks=len(asyncio.all_tasks()),
                fds=len(os.listdir("/proc/self/fd")),
                queues=queues,
                drops=viewer.stats.dropped + recorder.stats.dropped,
                messages=sum(s.stats.messages_in for s in sources),
                frames=browser.frames,
                recorder_drops=recorder.stats.dropped,
                fell_behind=pressure().entered,
                viewer_reconnects=browser.reconnects + (commander.reconnects if commander else 0),
                sims_exited=[p.args[4] for p in procs if p.poll() is not None],
                shed={s.name: s.shed for s in gateway.status() if s.role == "source"},
                reconnects=sum(max(0, s.connections - 1) for s in sources),
                silences=silences.count,
                lags=lags[:],
                commands=commander.latencies[:] if commander else [],
                commands_failed=commander.failed if commander else 0,
                commanding=commander is not None,
            )
            lags.clear()
            if commander:
                commander.latencies.clear()
            samples.append(sample)
            last_wall, last_cpu, last_sims = wall, cpu, sims
            print(
                f"{sample.t:6.0f} s  rss {sample.rss / 2**20:7.1f} MiB"
                f"  peaks {sample.buffered_peak / 2**20:5.1f} MiB  cpu {sample.cpu:4.0%}"
                f"  sims {sample.sims_cpu:4.0%}  tasks {sample.tasks}  fds {sample.fds}"
                f"  queues {'/'.join(str(q) for q in queues.values())}  drops {sample.drops}"
                f"  messages {sample.messages}  frames {browser.frames}"
                f"  shed {sum(sample.shed.values())}"
                f"  lag p99 {1e3 * percentile(sample.lags, 99):.0f} ms"
                f"  command {1e3 * max(sample.commands, default=0.0):.0f} ms"
                f"  ({' '.join(str(s.stats.messages_in) for s in sources[:6])})",
                file=log,
                flush=True,
            )
    finally:
        logging.getLogger("robowire").removeHandler(silences)
        if commander_task is not None and commander is not None and not commander.answered:
            print(f"soak: no command was answered: {commander.state()}", file=sys.stderr)
        for task in (browser_task, commander_task, lag_task):
            if task is not None:
                task.cancel()
                (ended,) = await asyncio.gather(task, return_exceptions=True)
                if not isinstance(ended, asyncio.CancelledError | None):
                    print(f"soak: {task.get_coro()!r} failed: {ended!r}", file=sys.stderr)
        gateway.stop()
        await asyncio.gather(run, return_exceptions=True)
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)
        folder.cleanup()
    return samples


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`th percentile of `values` (nearest rank; 0 when there are none)."""
    if not values:
        return 0.0
    ranked = sorted(values)
    return ranked[min(len(ranked) - 1, max(0, round(q / 100 * len(ranked)) - 1))]


def verdict(
    samples: Sequence[Sample], max_slope: float, min_fps: float = 10.0, max_lag_ms: float = 100.0
) -> dict[str, Any]:
    """Flat memory, bounded queues and the overload policy's promises, from the samples (see
    the module's docstring)."""
    half = len(samples) // 2
    first, second = samples[:half], samples[half:]
    rss_slope = slope([(s.t / 60.0, s.rss / 2**20) for s in second])  # MiB a minute
    net_slope = slope([(s.t / 60.0, (s.rss - s.buffered_peak) / 2**20) for s in second])
    growing = []
    for name in samples[0].queues if samples else ():
        floor_before = min((s.queues[name] for s in first), default=0)
        floor_after = min((s.queues[name] for s in second), default=0)
        at_bound = name == FEED and second[-1].recorder_drops > second[0].recorder_drops
        if floor_after > max(QUEUE_SLACK, 2 * floor_before) and not at_bound:  # never drains
            growing.append(name)
    drops = second[-1].drops - second[0].drops if second else 0
    flowing = bool(second) and second[-1].messages > second[0].messages
    span = second[-1].t - second[0].t if len(second) > 1 else 0.0
    fps = (second[-1].frames - second[0].frames) / span if span > 0 else 0.0
    last = samples[-1] if samples else Sample(0.0, 0, 0.0, 0.0, 0, 0)
    lag_p99 = 1e3 * percentile([lag for s in second for lag in s.lags], 99)
    commands = [c for s in second for c in s.commands]
    command_p99 = 1e3 * percentile(commands, 99)
    responsive = (
        fps >= min_fps
        and not last.reconnects
        and not last.viewer_reconnects
        and not last.sims_exited
        and not last.silences
        and lag_p99 <= max_lag_ms
        and (bool(commands) or not last.commanding)
        and not last.commands_failed
        and command_p99 <= max_lag_ms
    )
    return {
        "samples": len(samples),
        "rss_start_mib": round(samples[0].rss / 2**20, 1) if samples else None,
        "rss_end_mib": round(samples[-1].rss / 2**20, 1) if samples else None,
        "rss_slope_mib_min": round(rss_slope, 3),
        "rss_net_slope_mib_min": round(net_slope, 3),
        "memory_flat": net_slope < max_slope,
        "growing_queues": growing,
        "recorder_and_viewer_drops_second_half": drops,
        "queues_bounded": not growing,
        "flowing": flowing,
        "tasks": [samples[0].tasks, samples[-1].tasks] if samples else None,
        "fds": [samples[0].fds, samples[-1].fds] if samples else None,
        "gateway_cpu": round(sum(s.cpu for s in second) / max(1, len(second)), 2),
        "sims_cpu": round(sum(s.sims_cpu for s in second) / max(1, len(second)), 2),
        "viewer_fps": round(fps, 1),
        "viewer_frames": last.frames,
        "disconnects": last.reconnects,
        "vrpn_silences": last.silences,
        "loop_lag_p99_ms": round(lag_p99, 1),
        "loop_lag_max_ms": round(1e3 * max((x for s in samples for x in s.lags), default=0.0), 1),
        "commands": len(commands),
        "commands_failed": last.commands_failed,
        "command_p99_ms": round(command_p99, 1),
        "command_max_ms": round(1e3 * max(commands, default=0.0), 1),
        "recorder_drops": last.recorder_drops,
        "shed": last.shed,
        "shed_total": sum(last.shed.values()),
        "fell_behind": last.fell_behind,
        "viewer_reconnects": last.viewer_reconnects,
        "sims_exited": last.sims_exited,
        "responsive": responsive,
        "ok": net_slope < max_slope and not growing and flowing and responsive,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.reliability.soak",
        description="Run the protocols at load through a gateway with the viewer and a "
        "recorder; sample memory, CPU and queues; print a verdict.",
        epilog="example: python -m tests.reliability.soak --duration 600",
    )
    parser.add_argument("--duration", type=float, default=600.0, help="seconds (default 600)")
    parser.add_argument("--scale", type=float, default=1.0, help="device counts x this")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between samples")
    parser.add_argument(
        "--max-slope", type=float, default=1.0, help="MiB a minute of RSS allowed (second half)"
    )
    parser.add_argument(
        "--min-fps", type=float, default=10.0, help="viewer frames a second (second half)"
    )
    parser.add_argument(
        "--max-lag-ms", type=float, default=100.0, help="the loop's timer lag, 99th percentile"
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
    samples = run_loop(soak(args.duration, args.scale, args.interval, sys.stderr, args.workers))
    result = verdict(samples, args.max_slope, args.min_fps, args.max_lag_ms)
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
            f"the second half {result['rss_slope_mib_min']} MiB/min, net of the bounded "
            f"buffers' peaks {result['rss_net_slope_mib_min']} MiB/min "
            f"({'flat' if result['memory_flat'] else 'GROWING'}); queues "
            f"{queues} ({result['recorder_and_viewer_drops_second_half']} drops in the "
            f"second half)"
            f"; CPU {result['gateway_cpu']:.0%} gateway, {result['sims_cpu']:.0%} simulators"
            f"; viewer {result['viewer_fps']} frames/s; {result['disconnects']} disconnects,"
            f" {result['vrpn_silences']} VRPN silences; loop lag p99"
            f" {result['loop_lag_p99_ms']} ms; commands out within"
            f" {result['command_p99_ms']} ms (p99); shed {result['shed_total']};"
            f" recorder drops {result['recorder_drops']}"
            f"; {'PASS' if result['ok'] else 'FAIL'}"
        )
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
