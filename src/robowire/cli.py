"""The `robowire` command.

Every command has --help with an example; every error is one line on stderr and a non-zero
exit; Ctrl-C ends a run cleanly. Protocol code is imported only when a command needs it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, NoReturn

import click
from click.exceptions import NoArgsIsHelpError

from robowire import __version__, protocols
from robowire.access import Access
from robowire.endpoints import parse_endpoint
from robowire.errors import ConfigError, RobowireError
from robowire.gateway import Gateway, open_sim, open_sink, open_source
from robowire.service import CaptureSource, Service, SimOptions, Source
from robowire.sinks import JsonLinesSink, TableSink
from robowire.timebase import monotonic
from robowire.transport import run as run_loop

log = logging.getLogger("robowire")

PROTOCOL_CHOICE = click.Choice(protocols.names(), case_sensitive=False)
POSITIVE = click.FloatRange(min=0, min_open=True)
DURATION = click.option(
    "--duration",
    type=POSITIVE,
    default=None,
    metavar="S",
    help="Stop after S seconds (default: run until Ctrl-C).",
)
COUNT = click.IntRange(min=1)
PORT = click.IntRange(0, 65535)
ALLOW_CONTROL = click.option(
    "--allow-control",
    is_flag=True,
    help="Let the web viewer's browsers command devices (drive an XRP, UgCS commands); off "
    "by default.",
)
ACCESS = [
    click.option(
        "--allow-host",
        "allow_hosts",
        multiple=True,
        metavar="NAME",
        help="Also answer requests for this host name (repeatable; the viewer and the status "
        "port answer only localhost, loopback and their own address by default).",
    ),
    click.option(
        "--allow-origin",
        "allow_origins",
        multiple=True,
        metavar="ORIGIN",
        help="Also let pages of ORIGIN (e.g. https://ops.example:8443) open the viewer's "
        "WebSocket (repeatable).",
    ),
    click.option(
        "--token",
        envvar="ROBOWIRE_TOKEN",
        default=None,
        metavar="TOKEN",
        help="The token in the viewer's URL (default: a random one with --allow-control). A "
        "token set here or in ROBOWIRE_TOKEN is needed to view and for /status too.",
    ),
]
STATUS_PORT = click.option(
    "--status-port",
    type=PORT,
    default=None,
    metavar="P",
    help="Answer `robowire status` on http://127.0.0.1:P/status (0: any free port).",
)


RULES = [
    click.option(
        "--devices",
        multiple=True,
        metavar="GLOB",
        help="Offer only devices whose id matches GLOB (repeatable; e.g. 'Tracker0/*').",
    ),
    click.option(
        "--kinds", multiple=True, metavar="KIND", help="Offer only devices of KIND (repeatable)."
    ),
    click.option(
        "--rate", type=POSITIVE, default=None, metavar="HZ", help="At most HZ sends per second."
    ),
    click.option(
        "--device-rate",
        type=POSITIVE,
        default=None,
        metavar="HZ",
        help="At most HZ updates per second per device (changes between are merged).",
    ),
]


def rule_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The per-sink rules that are cheap to give on the command line (docs/config.md)."""
    for option in reversed(RULES):
        command = option(command)
    return command


def access_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Who may use the HTTP endpoints: the viewer and the status port (docs/security.md)."""
    for option in reversed(ACCESS):
        command = option(command)
    return command


def _access(
    allow_hosts: tuple[str, ...],
    allow_origins: tuple[str, ...],
    token: str | None,
    allow_control: bool,
) -> Access:
    """Who may use the HTTP endpoints, from the options (a bad one: an error line)."""
    if token is not None and not token.strip():
        fail("--token (or ROBOWIRE_TOKEN) is empty")
    for origin in allow_origins:
        if not origin.startswith(("http://", "https://")):
            fail(f"--allow-origin {origin!r}: expected http://HOST[:PORT] or https://...")
    return Access.of(allow_hosts, allow_origins, token, allow_control)


def fail(message: str, code: int = 1) -> NoReturn:
    click.echo(f"robowire: error: {message}", err=True)
    sys.exit(code)


def run_async(main: Callable[[], Coroutine[Any, Any, int | None]]) -> None:
    """Run a command's coroutine; RobowireError -> one line; Ctrl-C -> quiet exit 130."""
    try:
        code = run_loop(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except RobowireError as exc:
        fail(str(exc))
    sys.exit(code or 0)


def gateway_exit_code(gateway: Gateway) -> int:
    return 1 if gateway.failures else 0


class RobowireGroup(click.Group):
    """The main group; `robowire <protocol> ...` reaches a protocol's own subcommands.

    A usage error (a bad option value, an unknown command) is one line too, like every other.
    """

    def main(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) > 3 or not kwargs.get("standalone_mode", True):
            return super().main(*args, **kwargs)  # a caller that handles errors itself
        kwargs["standalone_mode"] = False
        try:
            result = super().main(*args, **kwargs)
        except NoArgsIsHelpError as exc:  # `robowire` alone: the help is the answer
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            fail(" ".join(exc.format_message().split()) + hint, exc.exit_code)
        except click.ClickException as exc:
            fail(" ".join(exc.format_message().split()), exc.exit_code)
        except click.Abort:  # Ctrl-C outside a run (a run handles it itself)
            sys.exit(130)
        except RobowireError as exc:  # bad input a command found before (or without) a run
            fail(str(exc))
        sys.exit(result if isinstance(result, int) else 0)

    def list_commands(self, ctx: click.Context) -> list[str]:
        own = super().list_commands(ctx)
        return own + [p.name for p in protocols.landed() if p.command is not None]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None or cmd_name not in protocols.names():
            return command
        try:
            extra = protocols.get(cmd_name).command
        except ConfigError as exc:
            fail(str(exc))
        if extra is None:
            fail(f"{cmd_name}: has no subcommands")
        return extra


@click.group(cls=RobowireGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="robowire")
@click.option("-v", "--verbose", count=True, help="More log lines (-vv: debug, with tracebacks).")
def main(verbose: int) -> None:
    """robowire: one toolkit and live gateway for VRPN, XRP, UgCS VSM, VRSP and SpyGlass.

    \b
    Example:
      robowire demo                       # every simulator -> gateway -> live view
      robowire sim spyglass --port 7870   # a simulated sensor network
      robowire listen spyglass://127.0.0.1:7870 --json --count 5
    """
    # Ctrl-C (SIGINT) ends every command cleanly, also when a script started us in the
    # background, where the shell set SIGINT to be ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)
    level = [logging.WARNING, logging.INFO, logging.DEBUG][min(verbose, 2)]
    logging.basicConfig(level=level, format="robowire: %(message)s", stream=sys.stderr)


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

    access = _access(allow_hosts, allow_origins, token, allow_control)

    async def go() -> int:
        gateway = Gateway()
        viewer = ViewerSink("127.0.0.1", viewer_port)
        viewer.gate.access = access
        if allow_control:
            _allow_control(viewer, gateway)
        sims = []
        for name in DEMO_SIMS:
            settings = dict(DEMO_SETTINGS.get(name, {}))
            sims.append((name, open_sim(name, SimOptions(port=0, count=count, options=settings))))
        receivers = [open_source(url) for url in DEMO_SENDERS.values()]
        gateway.add(viewer, *(sim for _, sim in sims), *receivers)
        task = asyncio.create_task(gateway.run(duration))
        if not await _ready(task, viewer):
            return gateway_exit_code(gateway)
        click.echo(f"viewer: {viewer.url}", err=True)
        sources = []
        for name, sim in sims:
            if not await _ready(task, sim):
                return gateway_exit_code(gateway)
            assert sim.address is not None
            url = DEMO_SIMS[name].format(host=sim.address[0], port=sim.address[1])
            click.echo(f"demo: {name} simulator on {url}", err=True)
            sources.append(open_source(url))
        for name, receiver in zip(DEMO_SENDERS, receivers, strict=True):
            if not await _ready(task, receiver):
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
    Any source takes ?time=sender|receive|corrected.
    \b
    Example:
      robowire listen spyglass://127.0.0.1:7870 --json --count 3
      robowire listen zenoh://127.0.0.1:7447      # the world another gateway publishes
    """

    async def go() -> int:
        gateway = Gateway()
        gateway.add_sources(urls)
        sink = (
            JsonLinesSink(count=count, on_done=gateway.stop)
            if as_json
            else TableSink(list(gateway.services))
        )
        gateway.add(sink)
        _add_status_server(gateway, status_port)
        await gateway.run(duration)
        return gateway_exit_code(gateway)

    run_async(go)


@main.command()
@click.argument("protocol", type=PROTOCOL_CHOICE)
@click.argument("file", metavar="FILE")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    default=True,
    help="JSON lines (the default; kept for scripts that say it).",
)
def decode(protocol: str, file: str, as_json: bool) -> None:
    """Dissect a capture: every message as one JSON object a line.

    FILE is a pcap/pcapng capture, a raw byte stream of one direction, a protocol's own
    recording (SpyGlass .rec, XRP text capture), or - for stdin. Bad bytes give a line with
    "error" and "offset", and decoding goes on; the exit status is 1 when any line was an
    error or nothing decoded, 0 when every byte was understood.

    \b
    Example:
      robowire decode spyglass recording.rec | head
    """
    if file != "-" and not Path(file).is_file():
        fail(f"no such file: {file}")
    messages = errors = 0
    try:
        for line in protocols.get(protocol.lower()).dissect(file):
            if "error" in line:
                errors += 1
            else:
                messages += 1
            click.echo(json.dumps(line, separators=(",", ":"), default=_json_default))
    except RobowireError as exc:
        fail(str(exc))
    except BrokenPipeError:
        sys.exit(0)
    click.echo(f"decode: {messages} messages, {errors} errors", err=True)
    if errors or not messages:  # the one rule for every protocol: clean input, or exit 1
        sys.exit(1)


def _json_default(value: object) -> object:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


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
        return await _run_announced(gateway, simulator, duration, f"{protocol} simulator")

    run_async(go)


def _allow_control(sink: object, gateway: Gateway) -> None:
    """--allow-control: the viewer takes commands for the gateway's controllable sources."""
    from robowire.control import Controller
    from robowire.viewer.server import ViewerSink

    if not isinstance(sink, ViewerSink):
        raise ConfigError("--allow-control: only the web viewer (http://) takes commands")
    sink.controller = Controller(lambda: gateway.services)
    click.echo(
        "viewer: control allowed to a page opened with the token in the viewer's URL", err=True
    )


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
        sink: Service = opened
        if access is not None and isinstance(opened, ViewerSink):
            opened.gate.access = access
        if allow_control:
            _allow_control(sink, gateway)
        if rules:
            from robowire.projection import ProjectedSink, Rules

            if rules.get("rate"):
                opened.max_rate = rules["rate"]
            shaped = Rules(
                devices=rules["devices"], kinds=rules["kinds"], device_rate=rules["device_rate"]
            )
            if not shaped.empty:
                sink = ProjectedSink(opened, shaped)
        gateway.add_sources(sources)
        gateway.add(sink)
        _add_status_server(gateway, status_port, access)
        protocol = parse_endpoint(to).protocol
        what = "viewer" if protocol == "http" else f"{protocol} sink"
        return await _run_announced(gateway, sink, duration, what)

    run_async(go)


def _add_status_server(gateway: Gateway, port: int | None, access: Access | None = None) -> None:
    """--status-port P: a `StatusServer` on 127.0.0.1:P (under `access` when given); its URL
    is said once it listens."""
    if port is None:
        return
    from robowire.status import StatusServer

    server = StatusServer("127.0.0.1", port)
    if access is not None:
        server.gate.access = access
    gateway.add(server)

    async def announce() -> None:
        await server.ready.wait()
        click.echo(f"status on {server.url}", err=True)

    task = asyncio.create_task(announce())
    _background.add(task)
    task.add_done_callback(_background.discard)


_background: set[asyncio.Task[None]] = set()


async def _run_announced(
    gateway: Gateway, server: Service, duration: float | None, what: str
) -> int:
    """Run the gateway; once `server` listens, say where (its port may have been 0)."""
    task = asyncio.create_task(gateway.run(duration))
    if await _ready(task, server) and server.address is not None:
        host, port = server.address
        where = getattr(server, "url", None) or f"{host}:{port}"  # a clickable URL if it has one
        click.echo(f"{what} {server.announce} {where}; Ctrl-C ends it", err=True)
    await task
    return gateway_exit_code(gateway)


async def _ready(run: asyncio.Task[None], service: Service) -> bool:
    """Wait until `service` is ready (True), or the run has ended (False; its error raised)."""
    ready = asyncio.create_task(service.ready.wait())
    await asyncio.wait({run, ready}, return_when=asyncio.FIRST_COMPLETED)
    ready.cancel()
    if not service.ready.is_set():
        await run  # raises the error that ended the run
        return False
    return True


@main.command()
@click.argument("url", required=False, default=None, metavar="[URL]")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON (one line).")
@click.option("--watch", is_flag=True, help="Ask again every second, until Ctrl-C.")
def status(url: str | None, as_json: bool, watch: bool) -> None:
    """Show every source and sink of a RUNNING gateway: state, rates, errors, drops, devices.

    URL is the gateway's web viewer (serve http://..., demo) or the port its command was given
    with --status-port; the default is http://127.0.0.1:8080.

    \b
    Example:
      robowire status                          # the viewer on 127.0.0.1:8080
      robowire status 127.0.0.1:8081 --json   # a gateway run with --status-port 8081
      robowire status --watch
    """
    import time

    from rich.console import Console
    from rich.live import Live

    from robowire.status_client import DEFAULT_URL, fetch_status, status_table, status_url

    where = status_url(url or DEFAULT_URL)
    message = fetch_status(where)  # an unreachable gateway: one error line, exit 1
    if as_json:
        while True:
            click.echo(json.dumps(message, separators=(",", ":")))
            if not watch:
                return
            time.sleep(1.0)
            message = fetch_status(where)
    console = Console(width=None if sys.stdout.isatty() else 160)  # a pipe gets whole names
    if not watch:
        console.print(status_table(message, where))
        return
    with Live(status_table(message, where), console=console, auto_refresh=False) as live:
        while True:
            time.sleep(1.0)
            live.update(status_table(fetch_status(where), where), refresh=True)


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
    """
    access = _access(allow_hosts, allow_origins, token, allow_control)
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
    import signal

    from robowire import config, workers

    site = config.load(path)
    services = workers.site_services(site, path, worker)  # every URL checked before it runs
    workers.keep_big_buffers()

    async def go() -> int:
        gateway = Gateway().add(*services)
        _add_status_server(gateway, status_port)
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, gateway.stop)
        if supervised:
            workers.watch_parent(gateway.stop, loop)
        task = asyncio.create_task(gateway.run(duration))
        for service in services:
            if isinstance(service, Source):
                continue
            if not await _ready(task, service):
                break
            if isinstance(service, workers.Worker):
                said = f"{service.name} running as pid {service.pid}"
                click.echo(f"{said} (status on {service.status_url})", err=True)
            elif service.address is not None:
                host, port = service.address
                where = getattr(service, "url", None) or f"{host}:{port}"
                click.echo(f"{service.role} {service.name} {service.announce} {where}", err=True)
        await task
        return gateway_exit_code(gateway)

    run_async(go)


@main.command()
@click.argument("urls", nargs=-1, required=True, metavar="URL...")
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="FILE.mcap",
    help="MCAP (or VRPN log .vrpn, SpyGlass .rec) to write.",
)
@click.option(
    "--foxglove-rate",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    metavar="HZ",
    help="MCAP: Foxglove world messages (/tf, /scene, /location) per source per second; 0: none.",
)
@DURATION
@STATUS_PORT
def record(
    urls: tuple[str, ...],
    output: str,
    foxglove_rate: float,
    duration: float | None,
    status_port: int | None,
) -> None:
    """Record sources into an MCAP file: the world (Foxglove's schemas, and robowire's own
    channel that replay reads) and every raw message received (docs/recording.md).

    \b
    Example:
      robowire record spyglass://127.0.0.1:7870 -o run.mcap --duration 60
      robowire record vrpn://Tracker0@127.0.0.1:3883 -o run.vrpn --duration 10
      robowire record spyglass://127.0.0.1:7870 -o run.rec --duration 10
    """
    from robowire.protocols.spyglass.services import RecSink
    from robowire.protocols.vrpn.services import VrpnLogSink
    from robowire.recording import McapRecorder

    _check_writable(output)  # said before anything starts, not after the sources connected

    async def go() -> int:
        gateway = Gateway()
        sources = [open_source(url) for url in urls]
        gateway.add(*sources)
        suffix = Path(output).suffix.lower()
        recorder: McapRecorder | VrpnLogSink | RecSink = (
            VrpnLogSink(output) if suffix == ".vrpn"
            else RecSink(output) if suffix == ".rec"
            else McapRecorder(output, foxglove_rate=foxglove_rate)
        )  # fmt: skip
        if isinstance(recorder, McapRecorder):  # the raw messages too, as received
            for url, source in zip(urls, sources, strict=True):
                recorder.tap_source(source, parse_endpoint(url).protocol, url)
        gateway.add(recorder)
        _add_status_server(gateway, status_port)
        progress = asyncio.create_task(_report_progress(recorder))
        try:
            await gateway.run(duration)
        finally:
            progress.cancel()
        dropped = recorder.stats.dropped  # updates that came faster than the file took them
        lost = f" ({dropped} updates dropped: the recorder fell behind)" if dropped else ""
        raw = getattr(recorder, "raw_messages", 0)
        also = f" and {raw} raw messages" if raw else ""
        click.echo(
            f"record: {recorder.messages} messages{also} written to {output}{lost}", err=True
        )
        return gateway_exit_code(gateway)

    run_async(go)


def _check_writable(path: str) -> None:
    target = Path(path)
    folder = target.parent
    if not folder.is_dir():
        fail(f"cannot write {path}: no such directory: {folder}")
    if target.is_dir():
        fail(f"cannot write {path}: it is a directory")
    if not os.access(target if target.exists() else folder, os.W_OK):
        fail(f"cannot write {path}: permission denied")


async def _report_progress(recorder: Any, every: float = 5.0) -> None:
    """One status line on stderr every few seconds while a long recording runs: the count so
    far and the rate since the last line."""
    before = recorder.messages + getattr(recorder, "raw_messages", 0)
    while True:
        await asyncio.sleep(every)
        now = recorder.messages + getattr(recorder, "raw_messages", 0)
        rate = (now - before) / every
        click.echo(f"record: {now} messages so far ({rate:,.0f}/s)", err=True)
        before = now


@main.command()
@click.argument("file", metavar="FILE")
@click.option(
    "--to",
    "target",
    default=None,
    metavar="URL",
    help="Serve the replay in a protocol; a recorded protocol's URL re-emits its raw messages.",
)
@click.option("--speed", type=POSITIVE, default=1.0, show_default=True, help="Replay speed factor.")
@click.option(
    "--level",
    type=click.Choice(["world", "raw"]),
    default="world",
    show_default=True,
    help="MCAP: replay the world updates, or the raw messages through the protocols' sessions.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the replayed updates as JSON lines.")
@click.option("--loop", is_flag=True, help="Start again at the end, until Ctrl-C or --duration.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@DURATION
@STATUS_PORT
def replay(
    file: str,
    target: str | None,
    speed: float,
    level: str,
    as_json: bool,
    loop: bool,
    quiet: bool,
    duration: float | None,
    status_port: int | None,
) -> None:
    """Replay a recording (robowire .mcap, SpyGlass .rec, VRPN .vrpn, PROTOCOL:capture.pcap)
    into the live world with its recorded timing, and optionally serve it; or re-emit an
    MCAP recording's raw messages to a real peer in their own protocol.

    \b
    Example:
      robowire replay run.mcap --to foxglove://127.0.0.1:8765 --speed 2
      robowire replay run.mcap --level raw --json
      robowire replay run.mcap --to vrsp://127.0.0.1:9742     # the recorded VRSP datagrams
      robowire replay recording.rec --json --speed 10
      robowire replay show.pcap --loop --to vrpn://127.0.0.1:3883
    """
    from robowire.recording import RawEmitter, contents, raw_sources

    async def go() -> int:
        gateway = Gateway()
        endpoint = parse_endpoint(file)
        if not endpoint.is_file:
            raise ConfigError(f"{file}: replay reads files (.mcap, .rec, PROTOCOL:capture.pcap)")
        endpoint = dataclasses.replace(endpoint, options={**endpoint.options, "speed": str(speed)})
        if endpoint.protocol == "mcap" and target is not None:
            assert endpoint.path is not None
            if not Path(endpoint.path).is_file():
                raise ConfigError(f"no such file: {endpoint.path}")
            to = parse_endpoint(target)
            if to.protocol in contents(endpoint.path).protocols():
                emitter = RawEmitter(endpoint.path, to, speed, loop)
                return await _replay_raw(emitter, duration, quiet)
        sources: list[Source]
        if endpoint.protocol == "mcap" and level == "raw":
            sources = list(raw_sources(endpoint, speed))
        else:  # every file source paces itself by its recorded times when given a speed
            sources = [open_source(endpoint)]
        for source in sources:
            if loop and isinstance(source, CaptureSource):
                source.loop = True
        gateway.add(*sources)
        if target is not None:
            gateway.add(open_sink(target))
        gateway.add(JsonLinesSink() if as_json else TableSink(list(sources)))
        _add_status_server(gateway, status_port)
        shown = not quiet and as_json and sys.stderr.isatty()  # the table shows its own counts
        bar = asyncio.create_task(_progress_bar(sources)) if shown else None
        try:
            await gateway.run(duration)
        finally:
            if bar is not None:
                bar.cancel()
                await asyncio.gather(bar, return_exceptions=True)
        return gateway_exit_code(gateway)

    run_async(go)


async def _replay_raw(emitter: Any, duration: float | None, quiet: bool) -> int:
    """Run a raw re-emission (no world, no sinks) until it has played, or --duration."""
    from robowire.world import World

    task = asyncio.create_task(emitter.run(World()))
    shown = not quiet and sys.stderr.isatty()
    bar = asyncio.create_task(_progress_bar([emitter])) if shown else None
    try:
        ready = asyncio.create_task(emitter.ready.wait())
        await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
        if emitter.address is not None:
            host, port = emitter.address
            click.echo(f"replay {emitter.announce} {host}:{port}", err=True)
        try:
            async with asyncio.timeout(duration):
                await task
        except TimeoutError:
            pass
    finally:
        for pending in (task, bar):
            if pending is not None:
                pending.cancel()
        await asyncio.gather(*(t for t in (task, bar) if t is not None), return_exceptions=True)
    click.echo(f"replay: {emitter.sent} raw messages sent", err=True)
    return 0


@main.group()
def wireshark() -> None:
    """robowire's Wireshark plugin: dissectors for all five protocols.

    \b
    Example:
      tshark -X lua_script:$(robowire wireshark path) -r capture.pcap -V
    """


@wireshark.command("path")
def wireshark_path() -> None:
    """Print the plugin's file (robowire.lua).

    \b
    Example:
      tshark -X lua_script:$(robowire wireshark path) -r capture.pcap
    """
    from robowire.wireshark import PLUGIN

    click.echo(str(PLUGIN))


@wireshark.command("install")
def wireshark_install() -> None:
    """Copy the plugin into Wireshark's personal plugin folder, and put robowire's UgCS .proto
    files on Wireshark's protobuf search path; prints where. Restart Wireshark after.

    \b
    Example:
      robowire wireshark install
    """
    from robowire.wireshark import install

    try:
        plugin, uat = install()
    except OSError as exc:
        fail(f"cannot install the Wireshark plugin: {exc}")
    click.echo(f"plugin: {plugin}")
    click.echo(f"protobuf search paths: {uat}")


async def _progress_bar(services: list[Any], every: float = 0.2) -> None:
    """A progress bar on stderr (a terminal): position / duration in the recording, and the
    message rate."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn

    progress = next((s.progress for s in services if hasattr(s, "progress")), None)
    columns = (
        TextColumn("replay"),
        BarColumn(),
        TextColumn("{task.fields[where]}"),
        TextColumn("{task.fields[rate]}"),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("replay", total=1.0, where="", rate="")
        before, then = 0, monotonic()
        while True:
            await asyncio.sleep(every)
            done = sum(getattr(s, "sent", 0) or s.stats.messages_in for s in services)
            now = monotonic()
            rate = (done - before) / max(now - then, 1e-6)
            before, then = done, now
            total = progress.duration if progress is not None else 0.0  # known once read
            at = progress.position if progress is not None else 0.0
            where = f"{at:.1f} / {total:.1f} s" if total else f"{done} messages"
            bar.update(
                task, completed=at / total if total else 0, where=where, rate=f"{rate:,.0f} msg/s"
            )


if __name__ == "__main__":
    main(prog_name="robowire")
