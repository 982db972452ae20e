"""Workers: `robowire up -c site.toml` runs a source and a recorder in worker processes joined
by Zenoh; the gateway's world gets the devices, the worker's recording has them, the gateway
restarts a worker that crashed (saying so once) and leaves no worker behind when it dies."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from mcap.reader import make_reader

from robowire import config, workers
from robowire.addresses import parse_endpoint
from robowire.errors import ConfigError
from robowire.gateway import Gateway
from robowire.runner import Runner
from robowire.service import Sink, Source
from robowire.world import LogEvent, Update, World
from robowire.zenoh.net import link_of
from robowire.zenoh.sink import ZenohSink
from robowire.zenoh.source import ZenohSource
from support import Process, free_port, until

pytestmark = pytest.mark.timeout(240)

SITE = """
[workers]
bus = "zenoh://127.0.0.1:{bus}"

[[sim]]
protocol = "vrpn"
port = {vrpn}
count = 3
rate = 50

[[source]]
url = "vrpn://Tracker0@127.0.0.1:{vrpn}"
name = "mocap"
worker = "ingest"

[[sink]]
record = "{here}/gateway.mcap"

[[sink]]
record = "{here}/worker.mcap"
worker = "rec"
"""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    path = tmp_path / "site.toml"
    path.write_text(SITE.format(bus=free_port(), vrpn=free_port(), here=tmp_path))
    return path


def recorded(path: Path) -> Counter[str]:
    """Messages per topic of an MCAP file, read with the `mcap` package."""
    with path.open("rb") as stream:
        reader = make_reader(stream)
        return Counter(channel.topic for _, channel, _ in reader.iter_messages())


def children(pid: int) -> set[int]:
    """The processes `pid` started that are still running."""
    found = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found |= {int(p) for p in (task / "children").read_text().split()}
        except FileNotFoundError:  # a thread that ended since the listing started no one
            continue
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def status(port: int) -> dict[str, dict[str, object]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as answer:
        return {s["name"]: s for s in json.load(answer)["services"]}


def test_the_gateway_and_each_worker_run_their_share_of_the_site(site: Path) -> None:
    parsed = config.load(site)
    gateway = workers.site_services(parsed, str(site))
    assert [s.name for s in gateway if isinstance(s, workers.Worker)] == [
        "worker ingest",
        "worker rec",
    ]
    assert not any(s.name == "mocap" for s in gateway)  # the worker reads it
    bus_sink = next(s for s in gateway if isinstance(s, ZenohSink))
    assert bus_sink.link.mode == "listen" and bus_sink.sources == frozenset()
    ingest = workers.site_services(parsed, str(site), "ingest")
    assert [type(s).__name__ for s in ingest] == ["VrpnSource", "ZenohSink", "StatusBeacon"]
    assert isinstance(ingest[0], Source) and ingest[0].name == "mocap"
    assert isinstance(ingest[1], ZenohSink) and ingest[1].sources == {"mocap"}
    rec = workers.site_services(parsed, str(site), "rec")
    assert [type(s).__name__ for s in rec] == ["McapRecorder", "ZenohSource", "StatusBeacon"]
    assert isinstance(rec[1], ZenohSource) and rec[1].link.mode == "connect"
    with pytest.raises(ConfigError, match=r"no source or sink has worker = 'nope'"):
        workers.site_services(parsed, str(site), "nope")


async def test_a_worker_run_source_reaches_the_gateway_and_a_worker_run_recorder(
    site: Path,
) -> None:
    status_port = free_port()
    up = Process("up", "-c", str(site), "--status-port", str(status_port))
    try:
        up.wait_for(r"worker rec running as pid \d+")
        await until(
            lambda: int(status(status_port)["workers@127.0.0.1:" + _bus(site)]["messages"]) > 50,
            "the gateway hears the worker's source",
        )
        await until(
            lambda: int(status(status_port)["worker ingest"]["messages"]) > 50,
            "the gateway shows what the worker's sources took in",
        )
        await until(  # and the worker's source itself, as `robowire status` shows a source
            lambda: int(status(status_port).get("mocap", {}).get("messages", 0)) > 50,
            "the gateway shows the worker's source",
        )
        mocap = status(status_port)["mocap"]
        assert (mocap["role"], mocap["state"], mocap["worker"]) == ("source", "connected", "ingest")
        assert mocap["devices"] == 3 and mocap["shed"] == 0
        await until(  # worker rec's own status is asked for every POLL_SECONDS too
            lambda: any(s["worker"] == "rec" for s in status(status_port).values()),
            "the gateway shows worker rec's recorder",
        )
        recorder = next(s for s in status(status_port).values() if s["worker"] == "rec")
        assert recorder["role"] == "sink" and recorder["name"].endswith("worker.mcap")
        shown = [s["name"] for s in status(status_port).values() if s["worker"] is not None]
        assert len(shown) == 2, shown  # not the workers' bus or status endpoints
    finally:
        up.proc.send_signal(signal.SIGTERM)  # a clean end: the workers close their files
        assert up.proc.wait(30) == 0, up.lines
    gateway, worker = recorded(site.parent / "gateway.mcap"), recorded(site.parent / "worker.mcap")
    assert gateway["/robowire/mocap"] > 10, gateway
    assert worker["/robowire/mocap"] > 10, worker
    assert not any("Traceback" in line for line in up.lines), up.lines


async def test_killing_the_gateway_leaves_no_worker(site: Path) -> None:
    up = Process("up", "-c", str(site))
    try:
        pids = {int(up.wait_for(rf"worker {w} running as pid (\d+)")[1]) for w in ("ingest", "rec")}
        assert pids <= children(up.proc.pid)
        up.proc.kill()  # no chance to clean up: the workers see their stdin end
        up.proc.wait()
        await until(lambda: not any(alive(pid) for pid in pids), "every worker gone")
    finally:
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


async def test_a_worker_that_crashes_is_restarted_and_said_once(site: Path) -> None:
    status_port = free_port()
    up = Process("up", "-c", str(site), "--status-port", str(status_port))
    try:
        current = int(up.wait_for(r"worker ingest running as pid (\d+)")[1])
        others = children(up.proc.pid) - {current}  # worker rec
        seen = {current}
        for _ in range(2):  # two crashes in a row: the second is not said again
            os.kill(current, signal.SIGKILL)
            await until(lambda: bool(children(up.proc.pid) - others - seen), "a new worker")
            (current,) = children(up.proc.pid) - others - seen
            seen.add(current)
        said = [line for line in up.lines if "exited with status" in line]
        assert said == ["robowire: worker ingest exited with status -9; restarting it"]
        assert status(status_port)["worker ingest"]["dropped"] == 2
        bus = "workers@127.0.0.1:" + _bus(site)
        before = int(status(status_port)[bus]["messages"])
        await until(
            lambda: int(status(status_port)[bus]["messages"]) > before,
            "the restarted worker's source reaches the gateway",
        )
    finally:
        up.stop()


async def test_a_remote_worker_shows_in_the_gateway_status_while_it_runs(site: Path) -> None:
    """`remote = ["ingest"]`: the gateway does not start it; `up --worker ingest`, run by hand
    (here on the same machine), says its status on the bus, and the gateway shows it and its
    source, then `waiting` once it has stopped."""
    site.write_text(site.read_text().replace("[workers]\n", '[workers]\nremote = ["ingest"]\n'))
    status_port = free_port()
    up = Process("up", "-c", str(site), "--status-port", str(status_port))
    worker: Process | None = None
    try:
        up.wait_for(r"worker rec running as pid \d+")
        assert not any("worker ingest running" in line for line in up.lines)  # not spawned
        assert any("worker ingest runs elsewhere: start it there with" in x for x in up.lines)
        assert status(status_port)["worker ingest"]["state"] == "waiting"
        worker = Process("up", "-c", str(site), "--worker", "ingest")
        await until(
            lambda: int(status(status_port).get("mocap", {}).get("messages", 0)) > 50,
            "the gateway shows the remote worker's source",
        )
        shown = status(status_port)
        assert shown["worker ingest"]["state"] == "connected"
        assert int(shown["worker ingest"]["messages"]) > 50
        assert (shown["mocap"]["worker"], shown["mocap"]["state"]) == ("ingest", "connected")
        worker.proc.send_signal(signal.SIGTERM)
        assert worker.proc.wait(30) == 0, worker.lines
        await until(
            lambda: (
                status(status_port)["worker ingest"]["state"] == "waiting"
                and "mocap" not in status(status_port)
            ),
            "a stopped remote worker is waiting, its source no longer shown",
        )
    finally:
        if worker is not None:
            worker.stop()
        up.stop()
    assert not any("Traceback" in line for line in up.lines + (worker.lines if worker else []))


@pytest.mark.parametrize(
    "payload",
    [
        b"not json",
        b"[]",
        b'{"services": 3}',
        b'{"services": "abc"}',
        b'{"services": [1]}',
        b'{"services": [{"name": "mocap"}]}',
        b'{"services": [{"name": "mocap", "role": "source"}]}',
        b'{"services": [{"name": 5, "role": "source", "state": "connected", "address": null,'
        b' "messages": 1, "rate": 0, "dropped": 0, "errors": 0, "last_drop": null, "devices": 0}]}',
        b'{"services": [{"name": "mocap", "role": "source", "state": "connected", "address": null,'
        b' "messages": "many", "rate": 0, "dropped": 0, "errors": 0, "last_drop": null,'
        b' "devices": 0}]}',
    ],
)
def test_what_is_not_a_status_message_on_a_workers_key_is_dropped(payload: bytes) -> None:
    """Anyone on the bus may put on the key: the status the gateway shows stays as it was."""
    bus = parse_endpoint("zenoh://127.0.0.1:7450")
    worker = workers.Worker("ingest", "site.toml", bus, spawn=False)
    good = {"name": "mocap", "role": "source", "state": "connected", "address": None,
            "messages": 120, "rate": 50.0, "dropped": 0, "errors": 0, "last_drop": None,
            "devices": 3, "shed": 7}  # fmt: skip
    worker.said(json.dumps({"services": [good]}).encode())
    before = worker.remote_status()
    worker.said(payload)
    assert worker.remote_status() == before
    assert [(s.name, s.worker, s.shed) for s in before] == [("mocap", "ingest", 7)]
    assert worker.stats.messages_out == 120


def _bus(site: Path) -> str:
    return site.read_text().split("zenoh://127.0.0.1:")[1].split('"')[0]


def test_the_example_site_with_workers_is_valid() -> None:
    path = Path(__file__).parents[2] / "examples" / "workers.toml"
    site = config.load(path, env={})
    assert site.worker_names == ("show", "rec")
    names = [s.name for s in workers.site_services(site, str(path))]
    assert "mocap" in names and "show" not in names
    assert {"worker show", "worker rec"} <= set(names)


class Idle(Source):
    async def run(self, world: World) -> None:
        self.connected()
        await asyncio.Future()


class Bus(Sink):
    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        return True


async def test_what_a_source_in_a_worker_shed_shows_in_the_gateway_status(monkeypatch) -> None:
    """A worker says its status on the bus (`StatusBeacon`); the gateway's `Worker` shows it,
    and a remote worker that falls silent is `waiting`, its services no longer shown."""
    monkeypatch.setattr(workers, "POLL_SECONDS", 0.1)
    bus = parse_endpoint(f"zenoh://127.0.0.1:{free_port()}")
    source = Idle("mocap")  # a worker's source that shed 7 reports while its worker was behind
    assert source.budget is not None
    source.budget.shed, source.stats.messages_in = 7, 120
    beacon = workers.StatusBeacon("ingest", link_of(bus, "connect"))
    inside = Runner().add(source, Bus(workers._bus_name(bus)), beacon)  # the worker's side
    worker = workers.Worker("ingest", "site.toml", bus, spawn=False)  # not spawned: remote
    gateway = Gateway().add(workers._bus_sink(bus, frozenset(), "listen"), worker)
    outside = asyncio.create_task(gateway.run())
    running = asyncio.create_task(inside.run())
    try:
        # (connected: a worker starts its sources after its servers, the beacon among them,
        # so its first status message may name its source before the source runs: waiting)
        await until(
            lambda: any(s.name == "mocap" and s.state == "connected" for s in gateway.status()),
            lambda: f"the gateway shows the worker's source connected: {gateway.status()}",
            seconds=30,
        )
        rows = gateway.status()
        shown = [(s.name, s.worker, s.state) for s in rows if s.name in ("worker ingest", "mocap")]
        assert shown == [("worker ingest", None, "connected"), ("mocap", "ingest", "connected")]
        mocap = next(s for s in rows if s.name == "mocap")
        assert (mocap.role, mocap.shed, mocap.messages) == ("source", 7, 120)
        assert not any(s.worker and s.role not in ("source", "sink") for s in rows)  # no beacon
        inside.stop()
        await running
        await until(
            lambda: (
                [(s.name, s.state) for s in gateway.status() if "ingest" in f"{s.name} {s.worker}"]
                == [("worker ingest", "waiting")]
            ),
            "a silent remote worker is waiting, and its services are not shown",
            seconds=30,
        )
    finally:
        inside.stop()
        gateway.stop()
        await asyncio.gather(running, outside)
