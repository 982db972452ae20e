"""The helper commands: `status` (of a running gateway) and `wireshark` (the plugin)."""

from __future__ import annotations

import json
import sys

import click

from robowire.cli.common import fail, main


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


@main.group()
def wireshark() -> None:
    """robowire's Wireshark plugin: a dissector for each of robowire's protocols.

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
