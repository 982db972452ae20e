"""XRP: status decode against a bare struct loop, command-to-sensor round trip on loopback,
and the CPU share of 50 simulated robots at their real rates (all measured in this one run).

1. decode: the firmware's 128-byte status datagram, decoded N times by a bare
   `struct.unpack` loop (the floor), by the codec's fast status path, by the generic
   block-by-block decoder (typed dataclasses), and by the WPILib-side session (seq rule +
   status snapshot). Printed: datagrams/s and the ratio to the bare loop.
2. round trip: our WPILib side (ClientSession) and our robot (RobotSession + Fleet, motor
   lag set to 0 so that only the protocol and scheduling are timed) on 127.0.0.1 sockets.
   The client flips motor 0 between +1 and -1; the time from sending the command to the first
   status whose encoder rate has the new sign. The robot reports at 20 Hz, so the floor is
   the wait for its next 50 ms status; printed as p50/p99 and as multiples of that period.
3. fleet: `XrpSim` with 50 robots in a child process, each driven by a WPILib-side client at
   50 Hz from this process; the child's CPU time over wall time, against the same for 1 robot;
   and the statuses a client's socket took a wake-up (each client is what `XrpSource` runs, a
   socket per robot): about one, so live the session decodes one by one (the table's XRP row,
   `decode_single_*`); wake-ups of 64 (a behind or bursty link, the "XRP burst" row,
   `decode_*`) take the batch path.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import statistics
import time
from collections.abc import Callable
from multiprocessing.connection import Connection

from robowire.protocols.xrp import codec
from robowire.protocols.xrp.client import start_client
from robowire.protocols.xrp.events import StatusBatch, StatusReceived
from robowire.protocols.xrp.model import Fleet
from robowire.protocols.xrp.services import XrpSim
from robowire.protocols.xrp.session_robot import STATUS_PERIOD, RobotSession
from robowire.protocols.xrp.session_wpilib import BATCH_MIN, ClientSession
from robowire.service import SimOptions
from robowire.transport import new_event_loop
from robowire.transport.udp import run_datagram
from robowire.wire import Address
from robowire.world import World

DECODES = 50_000
ROUNDS = 3  # side-by-side rounds of the decode ratio; the median is the table's figure
WAKEUP = 64  # datagrams a wake-up hands the session in the batched decode
ROBOT = ("10.0.0.2", 3540)
ROUND_TRIPS = 60
FLEET_SECONDS = 4.0


# -- 1. decode ---------------------------------------------------------------------------------


def _status_datagrams(n: int) -> list[bytes]:
    """`n` statuses of a driving robot, numbered 0, 1, ... (mod 2^16) as the firmware does."""
    fleet = Fleet(1)
    robot = RobotSession(fleet)
    fleet.counting[0] = True
    fleet.command[0] = (0.5, -0.3, 0.2, 0.0)
    values = []
    for k in range(min(n, 2000)):
        decoded = codec.decode_status(robot.status_datagram(k * 0.05))
        assert decoded is not None
        values.append(decoded[1])
    return [codec.encode_status(k & 0xFFFF, values[k % len(values)]) for k in range(n)]


def _rate(fn: object, data: list[bytes]) -> float:
    start = time.perf_counter()
    fn(data)  # type: ignore[operator]
    return len(data) / (time.perf_counter() - start)


def _session() -> ClientSession:
    """A WPILib side that has heard the robot's first status (seq 0, which WPILib drops)."""
    client = ClientSession(ROBOT)
    client.feed_datagram(_status_datagrams(1)[0], ROBOT, 0.0)
    return client


def one_by_one(items: list[bytes]) -> None:
    """The session fed each datagram on its own (`feed_datagram`, as before issue 39)."""
    feed = _session().feed_datagram
    for d in items:
        feed(d, ROBOT, 0.0)


def batched(wakeup: int) -> Callable[[list[bytes]], None]:
    """The session fed `wakeup` datagrams a call (`feed_datagrams`, as the UDP driver does with
    what one wake-up read); the (datagram, sender) lists are what the driver hands over."""

    def run(items: list[bytes]) -> None:
        feed = _session().feed_datagrams
        for k in range(0, len(items), wakeup):
            feed([(d, ROBOT) for d in items[k : k + wakeup]], 0.0)

    return run


def bench_decode() -> dict[str, float]:
    data = _status_datagrams(DECODES + 1)[1:]  # seq 1 on: each is the one after the last
    unpack = codec.STATUS_STRUCT.unpack

    def bare(items: list[bytes]) -> None:
        for d in items:
            unpack(d)

    def fast(items: list[bytes]) -> None:
        decode = codec.decode_status
        for d in items:
            decode(d)

    def generic(items: list[bytes]) -> None:
        decode = codec.decode_packet
        for d in items:
            decode(d)

    # the target's ratio: rounds of the bare loop then the session, side by side
    session, single, ratios, single_ratios = [], [], [], []
    for _ in range(ROUNDS):
        base = _rate(bare, data)
        session.append(_rate(batched(WAKEUP), data))
        single.append(_rate(one_by_one, data))
        ratios.append(session[-1] / base)
        single_ratios.append(single[-1] / base)
    results = {
        "bare struct.unpack loop": max(_rate(bare, data) for _ in range(3)),
        "codec.decode_status (fast path)": max(_rate(fast, data) for _ in range(3)),
        "codec.decode_packet (typed blocks)": max(_rate(generic, data) for _ in range(3)),
    }
    base = results["bare struct.unpack loop"]
    for label, rate in results.items():
        print(f"   decode {label:44s} {rate:12,.0f}/s   {base / rate:5.2f}x the bare loop's time")
    for label, rates, per_round in (
        (f"session, wake-ups of {WAKEUP} (feed_datagrams)", session, ratios),
        ("session, one by one (feed_datagram)", single, single_ratios),
    ):
        print(
            f"   decode {label:44s} {statistics.median(rates):12,.0f}/s   "
            f"{_spread(per_round)} the bare loop's speed"
        )
    for wakeup in (BATCH_MIN, 16, 256):  # one round each, for the shape of the curve
        rate, floor = _rate(batched(wakeup), data), _rate(bare, data)
        label = f"session, wake-ups of {wakeup}"
        print(f"   decode {label:44s} {rate:12,.0f}/s   {rate / floor:.2f}x")
    return {
        "decode_bare_rate": base,
        "decode_fast_rate": results["codec.decode_status (fast path)"],
        "decode_generic_rate": results["codec.decode_packet (typed blocks)"],
        "decode_rate": statistics.median(session),
        "decode_ratio": statistics.median(ratios),
        "decode_ratio_low": min(ratios),
        "decode_ratio_high": max(ratios),
        "decode_single_rate": statistics.median(single),
        "decode_single_ratio": statistics.median(single_ratios),
        "decode_single_ratio_low": min(single_ratios),
        "decode_single_ratio_high": max(single_ratios),
    }


def _spread(ratios: list[float]) -> str:
    """ "0.62x [0.58-0.66]": the median of the rounds and their spread."""
    return f"{statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}]"


# -- 2. round trip -----------------------------------------------------------------------------


async def _round_trips() -> list[float]:
    loop = asyncio.get_running_loop()
    fleet = Fleet(1, lag=0.0, quantum=0.0)
    robot = RobotSession(fleet)
    bound: asyncio.Future[Address] = loop.create_future()
    server = asyncio.create_task(
        run_datagram(robot, lambda e: fleet.apply(0, e), local_addr=("127.0.0.1", 0),
                     on_listening=bound.set_result)
    )  # fmt: skip
    address = await bound
    client = ClientSession(address)
    client.enabled = True
    waiting: dict[str, float] = {}
    samples: list[float] = []
    done = asyncio.Event()
    sign = [1.0]

    def on_events(events: list[object]) -> None:
        for event in events:
            if not isinstance(event, (StatusReceived, StatusBatch)) or "sent" not in waiting:
                continue
            if event.status.encoder_rate(0) * sign[0] > 0:
                samples.append(loop.time() - waiting.pop("sent"))
                done.set()

    task, driver = await start_client(client, on_events, address)
    try:
        await asyncio.sleep(0.3)
        for k in range(ROUND_TRIPS + 5):
            sign[0] = -sign[0]
            done.clear()
            client.set_motor(0, sign[0])
            waiting["sent"] = loop.time()
            client.send_now()
            driver.flush()
            await asyncio.wait_for(done.wait(), 2.0)
            await asyncio.sleep(0.013 * (k % 4))  # spread the phase against the 50 ms timer
    finally:
        task.cancel()
        server.cancel()
        await asyncio.gather(task, server, return_exceptions=True)
    return samples[5:]


def bench_round_trip() -> dict[str, float]:
    loop = new_event_loop()
    try:
        samples = loop.run_until_complete(_round_trips())
    finally:
        loop.close()
    samples.sort()
    p50 = statistics.median(samples)
    p99 = samples[min(len(samples) - 1, round(0.99 * (len(samples) - 1)))]
    print(
        f"   round trip command -> physics -> status, {len(samples)} samples: "
        f"p50 {p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms"
    )
    print(
        f"   ratio to the robot's {STATUS_PERIOD * 1e3:.0f} ms status period: "
        f"p50 {p50 / STATUS_PERIOD:.2f}x, p99 {p99 / STATUS_PERIOD:.2f}x"
    )
    return {"round_trip_p50_ms": p50 * 1e3, "round_trip_p99_ms": p99 * 1e3}


# -- 3. fleet CPU share ------------------------------------------------------------------------


def _sim_child(count: int, seconds: float, conn: Connection) -> None:
    async def run() -> None:
        sim = XrpSim(SimOptions(port=0, count=count))
        task = asyncio.create_task(sim.run(World()))
        await sim.ready.wait()
        conn.send(sim.addresses)
        conn.recv()  # the clients are running
        cpu0, wall0 = time.process_time(), time.perf_counter()
        await asyncio.sleep(seconds)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        sent = sum(r.stats.messages_out for r in sim.sessions)
        received = sum(r.stats.messages_in for r in sim.sessions)
        conn.send((cpu, wall, sent, received))
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    loop = new_event_loop()
    try:
        loop.run_until_complete(run())
    finally:
        loop.close()


async def _drive_fleet(conn: Connection, count: int) -> tuple[float, float, int, int, int, int]:
    """The child's (CPU s, wall s, sent, received), then the statuses these clients took in
    and the wake-ups of their sockets meanwhile."""
    addresses: list[Address] = conn.recv()
    tasks = []
    sessions = []
    drivers = []
    for address in addresses:
        session = ClientSession(address)
        session.enabled = True
        session.set_motor(0, 0.5)
        session.set_motor(1, -0.4)
        task, driver = await start_client(session, lambda e: None, address)
        tasks.append(task)
        sessions.append(session)
        drivers.append(driver)
    await asyncio.sleep(0.5)
    before = sum(s.stats.messages_in for s in sessions)
    woken = sum(d.wakeups for d in drivers)
    conn.send("go")
    result = await asyncio.get_running_loop().run_in_executor(None, conn.recv)
    statuses = sum(s.stats.messages_in for s in sessions) - before
    wakeups = sum(d.wakeups for d in drivers) - woken
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    cpu, wall, sent, received = result
    return cpu, wall, sent, received, statuses, wakeups


def _fleet(count: int) -> tuple[float, float, float]:
    """(the sim's CPU share, statuses/s per robot, statuses per wake-up of a client)."""
    parent, child = multiprocessing.get_context("spawn").Pipe()
    proc = multiprocessing.get_context("spawn").Process(
        target=_sim_child, args=(count, FLEET_SECONDS, child)
    )
    proc.start()
    loop = new_event_loop()
    try:
        cpu, wall, _sent, _received, statuses, wakeups = loop.run_until_complete(
            _drive_fleet(parent, count)
        )
    finally:
        loop.close()
        proc.join(10)
    return cpu / wall, statuses / wall / count, statuses / max(wakeups, 1)


def bench_fleet() -> dict[str, float]:
    share1, rate1, _ = _fleet(1)
    share50, rate50, per_wakeup = _fleet(50)
    print(f"   1 robot:   sim CPU share {share1 * 100:5.1f}%  status {rate1:5.1f} Hz per robot")
    print(f"   50 robots: sim CPU share {share50 * 100:5.1f}%  status {rate50:5.1f} Hz per robot")
    print(
        f"   ratio 50 robots / 1 robot CPU {share50 / max(share1, 1e-9):5.1f}x "
        f"({share50 / 50 * 100:.2f}% of a core per robot)"
    )
    # What the WPILib side meets live (`XrpSource`: a socket per robot, a status each 50 ms):
    # wake-ups of about one status, below BATCH_MIN, so the one-by-one decode is its cost.
    print(
        f"   50 WPILib sides (a socket each) took {per_wakeup:.2f} statuses a wake-up "
        f"(batched from {BATCH_MIN}): live, the session decodes one by one"
    )
    return {
        "fleet_statuses_per_wakeup": per_wakeup,
        "fleet1_cpu": share1,
        "fleet_cpu": share50,
        "fleet_status_hz": rate50,
        "fleet_status_rate": rate50 * 50,  # statuses/s received over loopback by 50 clients
    }


def main() -> dict[str, float]:
    return bench_decode() | bench_round_trip() | bench_fleet()


if __name__ == "__main__":
    main()
