"""What every `robowire` command shares: the main group (one-line errors, protocols' own
subcommands), the options several commands take, running a command's coroutine, and saying
where a server listens."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn

import click
from click.exceptions import NoArgsIsHelpError

from robowire import __version__, protocols
from robowire.access import Access
from robowire.errors import ConfigError, RobowireError
from robowire.gateway import Gateway
from robowire.projection import Rules
from robowire.service import Service
from robowire.status import StatusServer
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


def access_of(
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


def allow_control_of(sink: object, gateway: Gateway) -> None:
    """--allow-control: the viewer takes commands for the gateway's controllable sources."""
    from robowire.control import Controller
    from robowire.viewer.server import ViewerSink

    if not isinstance(sink, ViewerSink):
        raise ConfigError("--allow-control: only the web viewer (http://) takes commands")
    sink.controller = Controller(lambda: gateway.services)
    click.echo(
        "viewer: control allowed to a page opened with the token in the viewer's URL", err=True
    )


def rules_of(rules: dict[str, Any] | None) -> Rules | None:
    """The `rule_options` given, as the sink's `Rules` (None: none given)."""
    if not rules:
        return None
    return Rules(devices=rules["devices"], kinds=rules["kinds"], device_rate=rules["device_rate"])


def add_status_server(gateway: Gateway, port: int | None, access: Access | None = None) -> None:
    """--status-port P: a `StatusServer` on 127.0.0.1:P (under `access` when given); its URL
    is said once it listens."""
    if port is None:
        return
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


async def run_announced(
    gateway: Gateway, server: Service, duration: float | None, what: str
) -> int:
    """Run the gateway; once `server` listens, say where (its port may have been 0)."""
    task = asyncio.create_task(gateway.run(duration))
    if await wait_ready(task, server) and server.address is not None:
        host, port = server.address
        where = getattr(server, "url", None) or f"{host}:{port}"  # a clickable URL if it has one
        click.echo(f"{what} {server.announce} {where}; Ctrl-C ends it", err=True)
    await task
    return gateway_exit_code(gateway)


async def wait_ready(run: asyncio.Task[None], service: Service) -> bool:
    """Wait until `service` is ready (True), or the run has ended (False; its error raised)."""
    ready = asyncio.create_task(service.ready.wait())
    await asyncio.wait({run, ready}, return_when=asyncio.FIRST_COMPLETED)
    ready.cancel()
    if not service.ready.is_set():
        await run  # raises the error that ended the run
        return False
    return True
