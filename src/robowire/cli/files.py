"""The file commands: `decode` (dissect a capture), `record` and `replay`."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from robowire import protocols
from robowire.cli.common import (
    DURATION,
    POSITIVE,
    PROTOCOL_CHOICE,
    STATUS_PORT,
    add_status_server,
    fail,
    gateway_exit_code,
    main,
    run_async,
)
from robowire.errors import RobowireError
from robowire.gateway import Gateway, open_recorder, open_replay, open_sink, open_source
from robowire.sinks import JsonLinesSink, TableSink
from robowire.timebase import monotonic
from robowire.world import World


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
@click.option(
    "--format",
    "form",
    type=click.Choice(["rosbag2"]),
    default=None,
    help="rosbag2: a ROS 2 bag (a new directory: metadata.yaml + MCAP), the topics of "
    "serve ros2://. Default: by the file's suffix.",
)
@DURATION
@STATUS_PORT
def record(
    urls: tuple[str, ...],
    output: str,
    foxglove_rate: float,
    form: str | None,
    duration: float | None,
    status_port: int | None,
) -> None:
    """Record sources into an MCAP file: the world (Foxglove's schemas, and robowire's own
    channel that replay reads) and every raw message received (docs/recording.md); or into
    a ROS 2 bag (--format rosbag2, docs/ros2.md).

    \b
    Example:
      robowire record spyglass://127.0.0.1:7870 -o run.mcap --duration 60
      robowire record vrpn://Tracker0@127.0.0.1:3883 -o run.vrpn --duration 10
      robowire record spyglass://127.0.0.1:7870 -o run.rec --duration 10
      robowire record vrpn://Tracker0@127.0.0.1:3883 -o flight --format rosbag2
    """
    if form is None:
        _check_writable(output)  # said before anything starts, not after the sources connected

    async def go() -> int:
        sources = [open_source(url) for url in urls]
        recorder = open_recorder(output, urls, sources, foxglove_rate, form)
        gateway = Gateway().add(*sources, recorder)
        add_status_server(gateway, status_port)
        progress = asyncio.create_task(_report_progress(recorder))
        try:
            await gateway.run(duration)
        finally:
            progress.cancel()
        dropped = recorder.stats.dropped  # updates that came faster than the file took them
        lost = f" ({dropped} updates dropped: the recorder fell behind)" if dropped else ""
        raw = getattr(recorder, "raw_messages", 0)
        also = f" and {raw} raw messages" if raw else ""
        written = getattr(recorder, "messages", 0)
        if getattr(recorder, "error", None) is None:  # (else its one error line says it)
            click.echo(f"record: {written} messages{also} written to {output}{lost}", err=True)
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
    """Replay a recording (robowire .mcap, SpyGlass .rec, VRPN .vrpn, PROTOCOL:capture.pcap,
    a ROS 2 bag: a rosbag2 directory, .mcap or .db3) into the live world with its recorded
    timing, and optionally serve it; or re-emit an MCAP recording's raw messages to a real
    peer in their own protocol.

    \b
    Example:
      robowire replay run.mcap --to foxglove://127.0.0.1:8765 --speed 2
      robowire replay run.mcap --level raw --json
      robowire replay run.mcap --to vrsp://127.0.0.1:9742     # the recorded VRSP datagrams
      robowire replay recording.rec --json --speed 10
      robowire replay show.pcap --loop --to vrpn://127.0.0.1:3883
      robowire replay flight_bag/ --to vrpn://127.0.0.1:3883     # a ROS 2 bag, as trackers
    """

    async def go() -> int:
        replayed = open_replay(file, target, speed, level, loop)
        if replayed.emitter is not None:
            return await _replay_raw(replayed.emitter, duration, quiet)
        sources = replayed.sources
        gateway = Gateway().add(*sources)
        if target is not None:
            gateway.add(open_sink(target))
        gateway.add(JsonLinesSink() if as_json else TableSink(list(sources)))
        add_status_server(gateway, status_port)
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
