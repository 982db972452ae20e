"""The live commands: `demo`, `listen`, `sim`, `serve`, `bridge` and `up` (a site file)."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import click

from robowire.access import Access
from robowire.addresses import parse_endpoint
from robowire.cli.common import (
    ALLOW_CONTROL,
    COUNT,
    DURATION,
    PORT,
    POSITIVE,
    PROTOCOL_CHOICE,
    STATUS_PORT,
    access_of,
    access_options,
    add_status_server,
    allow_control_of,
    fail,
    gateway_exit_code,
    main,
    rule_options,
    rules_of,
    run_announced,
    run_async,
    wait_ready,
)
from robowire.gateway import Gateway, open_sim, open_sink, open_source, project
from robowire.service import SimOptions, Source
from robowire.sinks import JsonLinesSink, TableSink
from robowire.sinks.table import TABLE_PACE

# Every landed simulator, and the URL that listens to it.
DEMO_SIMS = {
    "spyglass": "spyglass://{host}:{port}",
    "vrpn": "vrpn://Tracker0,Analog0,Button0,Dial0@{host}:{port}",
    "xrp": "xrp://{host}:{port}?enable=1&left=0.3&right=0.2",  # a robot driving a wide circle
    "ugcs": "ugcs://{host}:{port}",
}
"""Simulators that listen: each starts first, then a source connects to it."""

DEMO_SENDERS = {"vrsp": "vrsp://127.0.0.1:0"}
"""Simulators that send: the source binds first, then the simulator sends to it."""

DEMO_SETTINGS = {"ugcs": {"patrol": "40"}}
"""`--set` of the demo's simulators: the UgCS vehicles fly a looping 40 m square."""


@main.command()
@DURATION
@click.option("--count", type=COUNT, default=None, metavar="N", help="Devices per simulator.")
@click.option(
    "--viewer-port",
    type=PORT,
    default=8080,
    show_default=True,
    metavar="P",
    help="Port of the web viewer on 127.0.0.1 (0: any free port).",
)
@ALLOW_CONTROL
@access_options
def demo(
    duration: float | None,
    count: int | None,
    viewer_port: int,
    allow_control: bool,
    allow_hosts: tuple[str, ...],
    allow_origins: tuple[str, ...],
    token: str | None,
) -> None:
    """Run every simulator on loopback, listen to all of them and show the live world, in
    the terminal and in the web viewer (its URL is printed).

    \b
    Example:
      robowire demo --duration 10
      robowire demo --viewer-port 0      # the viewer on any free port
      robowire demo --allow-control      # drive the XRP, fly the UgCS drones from the viewer
    """
    from robowire.viewer.server import ViewerSink

    access = access_of(allow_hosts, allow_origins, token, allow_control)

    async def go() -> int:
        gateway = Gateway()
        viewer = ViewerSink("127.0.0.1", viewer_port)
        viewer.gate.access = access
        if allow_control:
            allow_control_of(viewer, gateway)
        sims = []
        for name in DEMO_SIMS:
            settings = dict(DEMO_SETTINGS.get(name, {}))
            sims.append((name, open_sim(name, SimOptions(port=0, count=count, options=settings))))
        receivers = [open_source(url) for url in DEMO_SENDERS.values()]
        gateway.add(viewer, *(sim for _, sim in sims), *receivers)
        task = asyncio.create_task(gateway.run(duration))
        if not await wait_ready(task, viewer):
            return gateway_exit_code(gateway)
        click.echo(f"viewer: {viewer.url}", err=True)
        sources = []
        for name, sim in sims:
            if not await wait_ready(task, sim):
                return gateway_exit_code(gateway)
            assert sim.address is not None
            url = DEMO_SIMS[name].format(host=sim.address[0], port=sim.address[1])
            click.echo(f"demo: {name} simulator on {url}", err=True)
            sources.append(open_source(url))
        for name, receiver in zip(DEMO_SENDERS, receivers, strict=True):
            if not await wait_ready(task, receiver):
                return gateway_exit_code(gateway)
            assert receiver.address is not None
            host, port = receiver.address
            sender = open_sim(name, SimOptions(count=count, target=f"{host}:{port}"))
            click.echo(f"demo: {name} simulator sending to {host}:{port}", err=True)
            gateway.add(sender)
        click.echo("demo: Ctrl-C ends the demo", err=True)
        gateway.add(*sources, TableSink([*sources, *receivers]))
        await task
        return gateway_exit_code(gateway)

    run_async(go)


@main.command()
@click.argument("urls", nargs=-1, required=True, metavar="URL...")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per world update.")
@click.option(
    "--count", type=COUNT, default=None, metavar="N", help="With --json: stop after N lines."
)
@DURATION
@STATUS_PORT
def listen(
    urls: tuple[str, ...],
    as_json: bool,
    count: int | None,
    duration: float | None,
    status_port: int | None,
) -> None:
    """Listen to sources and show the live world (a table, or JSON lines).

    \b
    URL is a protocol endpoint or a file, e.g.:
      spyglass://127.0.0.1:7870   vrpn://Tracker0@127.0.0.1:3883   xrp://127.0.0.1:3540
      ugcs://127.0.0.1:5556       vrsp://0.0.0.0:9742              zenoh://127.0.0.1:7447
      Tracker0@mocap:3883         run.mcap                         recording.rec
      vrpn:capture.pcap           xrp:capture.txt                  Tracker0@file://run.vrpn
      ros2://?domain=0&topics=/tf*&frame=world     (ROS 2 robots over DDS: docs/ros2.md)
    Any source takes ?time=sender|receive|corrected.
    \b
    Example:
      robowire listen spyglass://127.0.0.1:7870 --json --count 3
      robowire listen zenoh://127.0.0.1:7447      # the world another gateway publishes
    """

    async def go() -> int:
        gateway = Gateway(pace=None if as_json else TABLE_PACE)  # a table needs no haste
        gateway.add_sources(urls)
        sink = (
            JsonLinesSink(count=count, on_done=gateway.stop)
            if as_json
            else TableSink(list(gateway.services))
        )
        gateway.add(sink)
        add_status_server(gateway, status_port)
        await gateway.run(duration)
        return gateway_exit_code(gateway)

    run_async(go)


@main.command()
@click.argument("protocol", type=PROTOCOL_CHOICE)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=PORT, default=None, help="Port (default: the protocol's own).")
@click.option(
    "--count", "--drones", "count", type=COUNT, default=None, metavar="N", help="How many devices."
)
@click.option("--rate", type=POSITIVE, default=None, metavar="HZ", help="Updates per second.")
@click.option(
    "--to",
    "target",
    default=None,
    metavar="HOST[:PORT]",
    help="Where a sim that sends (VRSP) or dials out (UgCS reverse mode) goes.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="A protocol-specific setting (repeatable).",
)
@DURATION
def sim(
    protocol: str,
    host: str,
    port: int | None,
    count: int | None,
    rate: float | None,
    target: str | None,
    seed: int,
    settings: tuple[str, ...],
    duration: float | None,
) -> None:
    """Run a simulated device that speaks PROTOCOL on a real socket.

    \b
    Example:
      robowire sim spyglass --count 50 --port 7870
    """
    options: dict[str, str] = {}
    for item in settings:
        key, eq, value = item.partition("=")
        if not eq:
            fail(f"--set {item!r}: expected KEY=VALUE")
        options[key] = value

    async def go() -> int:
        simulator = open_sim(
            protocol.lower(),
            SimOptions(
                host=host,
                port=port,
                count=count,
                rate=rate,
                seed=seed,
                target=target,
                options=options,
            ),
        )
        gateway = Gateway().add(simulator)
        return await run_announced(gateway, simulator, duration, f"{protocol} simulator")

    run_async(go)


def _serve(
    to: str,
    sources: tuple[str, ...],
    duration: float | None,
    allow_control: bool = False,
    rules: dict[str, Any] | None = None,
    status_port: int | None = None,
    access: Access | None = None,
) -> None:
    viewer = parse_endpoint(to).protocol == "http"
    if allow_control and not viewer:
        fail("--allow-control: only the web viewer (http://) takes commands")
    if access not in (None, Access()) and not viewer and status_port is None:
        fail("--allow-host, --allow-origin, --token: only for the web viewer and --status-port")

    async def go() -> int:
        from robowire.viewer.server import ViewerSink

        gateway = Gateway()
        opened = open_sink(to)
        if access is not None and isinstance(opened, ViewerSink):
            opened.gate.access = access
        if allow_control:
            allow_control_of(opened, gateway)
        sink = project(opened, rules_of(rules), rules.get("rate") if rules else None)
        gateway.add_sources(sources)
        gateway.add(sink)
        add_status_server(gateway, status_port, access)
        protocol = parse_endpoint(to).protocol
        what = "viewer" if protocol == "http" else f"{protocol} sink"
        return await run_announced(gateway, sink, duration, what)

    run_async(go)


@main.command()
@click.argument("url")
@click.option(
    "--from",
    "sources",
    multiple=True,
    required=True,
    metavar="URL",
    help="A source whose devices are served (repeatable).",
)
@DURATION
@ALLOW_CONTROL
@access_options
@rule_options
@STATUS_PORT
def serve(
    url: str,
    sources: tuple[str, ...],
    duration: float | None,
    allow_control: bool,
    allow_hosts: tuple[str, ...],
    allow_origins: tuple[str, ...],
    token: str | None,
    status_port: int | None,
    **rules: Any,
) -> None:
    """Offer the world, gathered from sources, to peers speaking URL's protocol.

    \b
    Example:
      robowire serve spyglass://127.0.0.1:7871 --from recording.rec
      robowire serve foxglove://127.0.0.1:8765 --from vrsp://0.0.0.0:9742
      robowire serve http://127.0.0.1:8080 --from spyglass://127.0.0.1:7870   # web viewer
      robowire serve http://127.0.0.1:8080 --from xrp://127.0.0.1:3540 --allow-control
      robowire serve http://0.0.0.0:8080 --from xrp://127.0.0.1:3540 --allow-host lab-pc.local
      robowire serve vrpn://127.0.0.1:3884 --from vrpn://Tracker0@mocap --device-rate 10
      robowire serve vrpn://127.0.0.1:3883 --from vrsp://0.0.0.0:9742 --status-port 8081
      robowire serve zenoh://0.0.0.0:7447 --from vrsp://0.0.0.0:9742   # for other gateways
      robowire serve ros2:// --from vrpn://Tracker0@mocap   # ROS 2 topics over DDS: /tf, ...
    """
    access = access_of(allow_hosts, allow_origins, token, allow_control)
    _serve(url, sources, duration, allow_control, rules, status_port, access)


@main.command()
@click.argument("source")
@click.option("--to", "target", required=True, metavar="URL", help="Where to offer it.")
@DURATION
@rule_options
@STATUS_PORT
def bridge(
    source: str, target: str, duration: float | None, status_port: int | None, **rules: Any
) -> None:
    """Translate one source into another protocol, live.

    \b
    Example:
      robowire bridge spyglass://127.0.0.1:7870 --to vrpn://127.0.0.1:3883
      robowire bridge ugcs://127.0.0.1:5556 --to vrsp://127.0.0.1:9742 --kinds ugcs
      robowire bridge vrsp://0.0.0.0:9742 --to vrpn://127.0.0.1:3883 --status-port 8081
    """
    _serve(target, (source,), duration, rules=rules, status_port=status_port)


@main.command()
@click.option(
    "-c", "--config", "path", required=True, metavar="FILE.toml", help="The site file to run."
)
@click.option(
    "--worker",
    metavar="NAME",
    help="Run only what the site gives to worker NAME (docs/config.md: workers).",
)
@click.option("--supervised", is_flag=True, hidden=True)  # spawned by a gateway: watch stdin
@DURATION
@STATUS_PORT
def up(
    path: str,
    worker: str | None,
    supervised: bool,
    duration: float | None,
    status_port: int | None,
) -> None:
    """Run the simulators, sinks and sources a site file names (see docs/config.md).

    Sources and sinks with `worker = "NAME"` run in worker processes that the gateway starts
    and supervises (`--worker NAME` runs one by hand, on this or another machine).

    \b
    Example:
      robowire up -c examples/site.toml
      SITE_VR_PORT=9000 robowire up -c examples/site.toml --duration 60
      robowire up -c examples/workers.toml
      robowire up -c examples/workers.toml --worker show   # one worker, run by hand
    """

    from robowire import config, workers

    site = config.load(path)
    services = workers.site_services(site, path, worker)  # every URL checked before it runs
    workers.keep_big_buffers()

    async def go() -> int:
        gateway = Gateway().add(*services)
        add_status_server(gateway, status_port)
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, gateway.stop)
        if supervised:
            workers.watch_parent(gateway.stop, loop)
        task = asyncio.create_task(gateway.run(duration))
        for service in services:
            if isinstance(service, Source):
                continue
            if not await wait_ready(task, service):
                break
            if isinstance(service, workers.Worker) and service.spawn:
                said = f"{service.name} running as pid {service.pid}"
                click.echo(f"{said} (status on {service.status_url})", err=True)
            elif isinstance(service, workers.Worker):
                said = f"{service.name} runs elsewhere: start it there with"
                click.echo(f"{said} `robowire up -c {path} --worker {service.worker}`", err=True)
            elif isinstance(service, workers.StatusBeacon):
                continue  # (the worker's status, for the gateway: nothing to connect to)
            elif service.address is not None:
                host, port = service.address
                where = getattr(service, "url", None) or f"{host}:{port}"
                click.echo(f"{service.role} {service.name} {service.announce} {where}", err=True)
        await task
        return gateway_exit_code(gateway)

    run_async(go)
