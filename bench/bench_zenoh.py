"""Zenoh between two processes: device updates/s, against Zenoh's own put/subscribe rate.

As workers run it (`robowire up` with `worker = …`, docs/config.md): a publishing process and
this one, on loopback. The publisher is a child process holding a synthetic swarm (position +
orientation + one telemetry field per drone, every drone moving every step): robowire's is a
gateway whose world takes each step (`World.update`, what a source does) and a `zenoh://`
sink that publishes it; this process is a gateway `listen`ing to it. Counted: device states
that reach this world per second, from the first frame to the last (each STATE frame taken
in is one state of every drone in it; a latest-state link may merge steps, and only what
arrives counts). The floor, in the same run: a bare Zenoh publisher in a child process
putting the same payload (the encoded STATE frame) as fast as it can, congestion control
BLOCK, and a subscriber here whose callback takes the bytes, as robowire's does. Both sides'
CPU time per message is printed too (the publisher's from the child, this process's own).
Each side runs `ROUNDS` times, in turn, and the best of each is compared (this machine is
shared: one busy spell must not decide the ratio). Last, the bare pair again with the
publisher putting at robowire's rate: what Zenoh itself costs per message at that pace (it
batches puts that come back to back; spaced ones cost it several times more each). And the
ceiling both processes' CPU per message sets on this machine (its cores / that CPU), against
what 0.5x of Zenoh alone would allow.

The publisher takes the next step once its sink has written the last (an event its `write`
sets: no spin counted in its CPU). robowire runs twice a round: with the sink's default
batching per tick and with `?batch=0`; what batching costs in latency is printed (each step
to its frame in this world, both ways, and how long frames waited in the sink). In this
saturated pipeline the step-to-world latency is mostly the frames queued between the two
processes; the sink's own count is the batching's share.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from struct import unpack_from
from typing import Any, NamedTuple

import numpy as np

from bench import rounds
from robowire.gateway import Gateway, open_sink, open_source
from robowire.workers import keep_big_buffers
from robowire.world import World
from robowire.zenoh import codec
from robowire.zenoh.codec import HEADER
from robowire.zenoh.net import Link
from robowire.zenoh.sink import BATCH_TICK, ZenohSink, state_frame
from robowire.zenoh.source import StateReceived

SIZES = ((100, 5000), (10_000, 1000))  # (drones, steps)
DISTINCT = 50  # steps of the swarm made (and taken in turn): a 10,000-drone step is 640 kB
ROUNDS = rounds.ROUNDS  # each side this many times, in turn: the best of each compared (rates)
# and the median of the rounds' CPU-per-message ratios (the table's "vs peer")
TICK_MS = BATCH_TICK * 1e3  # the sink's batching tick (its default)
WAIT = 60.0
QUIET = 2.0  # seconds without a frame after which the receiver stops waiting
ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


Step = tuple[np.ndarray, np.ndarray, np.ndarray]


def steps_of(n: int, count: int) -> list[Step]:
    """The swarm's columns for each step, made before the clock starts (the simulation is
    not what is measured)."""
    angle = np.linspace(0, 2 * np.pi, n)
    orientation = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    out = []
    for k in range(count + 1):
        turned = angle + k * 0.01
        position = np.stack([np.cos(turned) * 50, np.sin(turned) * 50, np.full(n, float(k))], 1)
        out.append((position, orientation, np.full(n, 12.0 - k * 1e-3)))
    return out


def step(world: World, slots: np.ndarray, columns: Step) -> None:
    position, orientation, battery = columns
    world.update(
        "show",
        slots,
        receive_time=time.time(),
        position=position,
        orientation=orientation,
        telemetry={"battery": (battery, "V")},
    )


def payload(n: int) -> bytes:
    world = World()
    slots = world.table("show").slots([str(i) for i in range(n)], "drone")
    step(world, slots, steps_of(n, 0)[0])
    table = world.tables["show"]
    fields = frozenset({"position", "orientation", "battery"})
    return codec.encode(state_frame(table, slots, fields))


# -- the publishing child --------------------------------------------------------------------


def child_bare(port: int, n: int, steps: int, rate: float = 0.0) -> None:
    """Puts as fast as it can or, with `rate`, that many a second (sleeping between)."""
    import zenoh

    session = zenoh.open(zenoh.Config.from_json5(Link("127.0.0.1", port, "listen").config()))
    publisher = session.declare_publisher(
        "bench/show", congestion_control=zenoh.CongestionControl.BLOCK
    )
    data = payload(n)
    print("ready", flush=True)
    sys.stdin.readline()
    cpu = time.process_time()
    due = time.perf_counter()
    for _ in range(steps):
        if rate:
            due += 1.0 / rate
            time.sleep(max(0.0, due - time.perf_counter()))
        publisher.put(data)
    print(f"cpu {time.process_time() - cpu}", flush=True)
    sys.stdin.readline()
    os._exit(0)  # zenoh's threads: no teardown to wait for


async def child_gateway(port: int, n: int, steps: int, tick_ms: float) -> None:
    loop = asyncio.get_running_loop()
    gateway = Gateway()
    sink = open_sink(f"zenoh://127.0.0.1:{port}?batch={tick_ms}")
    assert isinstance(sink, ZenohSink)
    gateway.add(sink)
    pulled = asyncio.Event()  # the sink has taken a step (set by its `write`)
    write = sink.write

    def written(world: World, items: Any) -> bool:
        going = write(world, items)
        pulled.set()
        return going

    sink.write = written  # type: ignore[method-assign]
    task = asyncio.create_task(gateway.run())
    await sink.ready.wait()
    columns = steps_of(n, DISTINCT)
    slots = gateway.world.table("show").slots([str(i) for i in range(n)], "drone")
    step(gateway.world, slots, columns[0])
    print("ready", flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)
    cpu = time.process_time()
    for k in range(1, steps + 1):  # one frame per step: the next when the sink has this one
        pulled.clear()
        step(gateway.world, slots, columns[k % len(columns)])
        await pulled.wait()
    print(f"cpu {time.process_time() - cpu}", flush=True)
    held = sink.held
    print(f"held {held.frames} {held.puts} {held.waited} {held.longest}", flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)
    gateway.stop()
    await task
    os._exit(0)


class Publisher:
    """A publishing child process: `ready`, then `go()` and `cpu()`."""

    def __init__(self, role: str, port: int, n: int, steps: int, arg: float = 0.0) -> None:
        """`arg`: the bare publisher's rate (0: as fast as it can), the gateway's batching
        tick in ms."""
        args = [sys.executable, "-m", "bench.bench_zenoh", role, str(port), str(n), str(steps)]
        args.append(str(arg))
        self.role = role
        self.held: tuple[float, ...] = ()
        self.proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV, cwd=ROOT
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        if self.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the {role} publisher did not start")

    def go(self) -> None:
        self.stdin.write("go\n")
        self.stdin.flush()

    def end(self) -> float:
        """Its CPU seconds over the puts (waits for it to finish putting)."""
        cpu = float(self.stdout.readline().split()[1])
        if self.role == "gateway":  # what its batching held: frames, puts, seconds, longest
            self.held = tuple(float(x) for x in self.stdout.readline().split()[1:])
        self.stdin.write("end\n")
        self.stdin.flush()
        self.proc.wait(WAIT)
        return cpu


# -- this side --------------------------------------------------------------------------------


class Arrivals:
    """When each message arrived (called on any thread), and this process's CPU meanwhile."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.cpu = time.process_time()
        self.lock = threading.Lock()

    def arrived(self, count: int = 1) -> None:
        now = time.perf_counter()
        with self.lock:
            self.times += [now] * count

    def done(self, expected: int) -> bool:
        last = self.times[-1] if self.times else None
        quiet = last is not None and time.perf_counter() - last > QUIET
        return len(self.times) >= expected or quiet

    def rate(self) -> tuple[float, float]:
        """(messages/s from the first to the last, CPU seconds per message)."""
        count = len(self.times)
        took = self.times[-1] - self.times[0] if count > 1 else float("nan")
        return (count - 1) / took, (time.process_time() - self.cpu) / max(count, 1)


def bare(n: int, steps: int, rate: float = 0.0) -> tuple[float, float, float, int]:
    """Zenoh alone: (messages/s, publisher CPU s/msg, subscriber CPU s/msg, payload size);
    with `rate`, the publisher puts that many a second, not as fast as it can."""
    import zenoh

    port = free_port()
    publisher = Publisher("bare", port, n, steps, rate)
    session = zenoh.open(zenoh.Config.from_json5(Link("127.0.0.1", port, "connect").config()))
    arrivals = Arrivals()

    def count(sample: zenoh.Sample) -> None:
        sample.payload.to_bytes()  # the subscriber has the bytes in Python, as robowire does
        arrivals.arrived()

    subscriber = session.declare_subscriber("bench/show", count)
    time.sleep(0.5)  # the subscription reaches the publisher
    arrivals.cpu = time.process_time()
    publisher.go()
    end = time.perf_counter() + WAIT
    while not arrivals.done(steps) and time.perf_counter() < end:
        time.sleep(0.01)
    rate, cpu = arrivals.rate()
    sent_cpu = publisher.end()
    subscriber.undeclare()
    session.close()
    return rate, sent_cpu / steps, cpu, len(payload(n))


class Run(NamedTuple):
    """One round of robowire's pair."""

    rate: float  # STATE frames/s into this world
    pub_cpu: float  # the publisher's CPU s per step
    in_cpu: float  # this side's CPU s per frame
    received: int  # frames taken in
    latency: list[float]  # seconds from each step to its frame in this world
    held: tuple[float, ...]  # what the sink's batching held: frames, puts, seconds, longest


async def through_gateways(n: int, steps: int, tick_ms: float) -> Run:
    """robowire's pair, the publisher's small frames batched per `tick_ms` (0: per pull)."""
    port = free_port()
    publisher = Publisher("gateway", port, n, steps, tick_ms)
    gateway = Gateway()
    source = open_source(f"zenoh://127.0.0.1:{port}")
    gateway.add(source)
    task = asyncio.create_task(gateway.run())
    while len(gateway.world) < n:  # every drone is here: the DEVICES frame is through
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.5)  # the snapshot asked for at start is in: steady state from here
    arrivals = Arrivals()
    adapter: Any = source.adapter
    apply = adapter.apply

    latency: list[float] = []

    def counted(events: Any, receive_time: float) -> int:
        taken = int(apply(events, receive_time))
        now = time.time()
        states = [e for e in events if isinstance(e, StateReceived)]
        latency.extend(now - unpack_from("<d", e.packed.payload, HEADER.size)[0] for e in states)
        arrivals.arrived(len(states))
        return taken

    adapter.apply = counted
    publisher.go()
    end = time.perf_counter() + WAIT
    while not arrivals.done(steps):
        if time.perf_counter() > end:
            break
        await asyncio.sleep(0.005)
    rate, cpu = arrivals.rate()
    sent_cpu = publisher.end()
    gateway.stop()
    await task
    return Run(rate, sent_cpu / steps, cpu, len(arrivals.times), latency, publisher.held)


def batching_cost(n: int, steps: int, runs: list[Run], unbatched: list[Run]) -> dict[str, float]:
    """Print and give what batching costs in latency: each step to its frame in the far
    world, batched and not (medians of the rounds' percentiles), and how long frames waited
    in the sink for their tick's end (its own count)."""
    figures = {}
    for name, group in (("batched", runs), ("unbatched", unbatched)):
        for q in (50, 99):
            values = [float(np.percentile(r.latency, q)) for r in group if r.latency]
            figures[f"{name}_latency_p{q}_{n}"] = float(np.median(values)) * 1e3 if values else 0.0
    frames, puts, waited = (sum(r.held[i] for r in runs) for i in range(3))
    longest = max(r.held[3] for r in runs)
    sent = steps * len(runs)  # frames the publisher wrote (one a step)
    mean = waited / frames if frames else 0.0
    figures[f"batch_wait_us_{n}"] = mean * 1e6
    print(
        f"     latency, step -> far world, p50/p99 ms: batched per {TICK_MS:g} ms tick"
        f" {figures[f'batched_latency_p50_{n}']:.2f}/{figures[f'batched_latency_p99_{n}']:.2f},"
        f" unbatched {figures[f'unbatched_latency_p50_{n}']:.2f}/"
        f"{figures[f'unbatched_latency_p99_{n}']:.2f}; in the sink {frames / sent:.0%} of"
        f" frames waited for their tick ({frames / max(puts, 1):.1f} a put), {mean * 1e6:.0f} us"
        f" on average, {longest * 1e6:.0f} us at most"
    )
    return figures


def main() -> dict[str, float]:
    keep_big_buffers()  # as `robowire up` does, in this process and the children
    figures = {}
    for n, steps in SIZES:
        floors, runs, unbatched = [], [], []
        for _ in range(ROUNDS):  # in turn: a busy spell of this shared machine hits all
            floors.append(bare(n, steps))
            runs.append(asyncio.run(through_gateways(n, steps, TICK_MS)))
            unbatched.append(asyncio.run(through_gateways(n, steps, 0.0)))
        floor, put_cpu, sub_cpu, size = max(floors)
        frames, pub_cpu, in_cpu, received, _, _ = max(runs, key=lambda r: r.rate)
        _, paced_put, paced_sub, _ = bare(n, steps, frames)
        ratio = frames / floor
        figures[f"ratio_{n}"] = ratio
        figures[f"rate_{n}"] = frames * n  # device updates/s taken in
        # Both processes share this machine's cores: a rate times the CPU both spend per
        # message can't exceed them, whatever else is made faster.
        cores = os.cpu_count() or 1
        ceiling = cores / (pub_cpu + in_cpu)
        figures[f"cpu_ceiling_{n}"] = ceiling
        print(
            f"   {n} drones, STATE payload {size / 1e3:.1f} kB, {steps} steps, two processes"
            f" (best of {ROUNDS} each):"
        )
        print(
            f"     zenoh put/subscribe alone:  {floor:8.0f} msg/s  {floor * n:12.0f} dev/s"
            f"   CPU/msg: put {put_cpu * 1e6:6.0f} us, subscribe {sub_cpu * 1e6:6.0f} us"
        )
        print(
            f"     gateway -> zenoh -> gateway:{frames:8.0f} msg/s  {frames * n:12.0f} dev/s"
            f"   CPU/msg: publish {pub_cpu * 1e6:6.0f} us, take in {in_cpu * 1e6:6.0f} us"
        )
        print(
            f"     zenoh alone at that rate:  {frames:8.0f} msg/s  {'':12s} dev/s"
            f"   CPU/msg: put {paced_put * 1e6:6.0f} us, subscribe {paced_sub * 1e6:6.0f} us"
        )
        print(
            f"     CPU per message, both processes: zenoh alone {(put_cpu + sub_cpu) * 1e6:.0f} us"
            f" (at robowire's rate {(paced_put + paced_sub) * 1e6:.0f}), robowire"
            f" {(pub_cpu + in_cpu) * 1e6:.0f} us: {cores} cores allow robowire {ceiling:.0f}"
            f" msg/s; 0.5x zenoh alone needs at most {cores / (0.5 * floor) * 1e6:.0f} us"
        )
        # the table's "vs peer": both processes' CPU per message over Zenoh's own, per round
        cpu_ratios = [(r[1] + r[2]) / (f[1] + f[2]) for r, f in zip(runs, floors, strict=True)]
        plain = [(r[1] + r[2]) / (f[1] + f[2]) for r, f in zip(unbatched, floors, strict=True)]
        figures |= rounds.figures(f"cpu_ratio_{n}", cpu_ratios)
        figures[f"cpu_us_{n}"] = (pub_cpu + in_cpu) * 1e6
        figures[f"zenoh_cpu_us_{n}"] = (put_cpu + sub_cpu) * 1e6
        figures[f"paced_ratio_{n}"] = (pub_cpu + in_cpu) / (paced_put + paced_sub)
        print(
            f"     CPU per message, robowire / zenoh alone (both processes): "
            f"{rounds.text(cpu_ratios)} (target <= 2); at robowire's rate "
            f"{(pub_cpu + in_cpu) / (paced_put + paced_sub):.2f}x; unbatched (?batch=0)"
            f" {rounds.text(plain)}"
        )
        figures |= rounds.figures(f"unbatched_cpu_ratio_{n}", plain)
        figures |= batching_cost(n, steps, runs, unbatched)
        each = ", ".join(f"{r[0]:.0f}/{f[0]:.0f}" for r, f in zip(runs, floors, strict=True))
        print(
            f"     robowire / zenoh alone: {ratio:.2f}x messages/s, {sub_cpu / in_cpu:.2f}x"
            f" CPU to take in (took in {received} of {steps} steps; rounds: {each} msg/s)"
        )
    return figures


if __name__ == "__main__":
    keep_big_buffers()
    role, port, n, steps = sys.argv[1], *(int(a) for a in sys.argv[2:5])
    if role == "bare":
        child_bare(port, n, steps, float(sys.argv[5]))
    else:
        asyncio.run(child_gateway(port, n, steps, float(sys.argv[5])))
