"""The one benchmark table: per-protocol rows built from the figures the bench modules return,
written as text, JSON (`bench-results.json`) and a latency-against-load plot (PNG).

Every bench module's `main()` prints its own lines and returns its figures as a flat
`{name: number}` dict; `python -m bench` collects them as `{module: {name: number}}` (module =
the file name without `bench_`). This file knows which figure goes in which cell (`ROWS`); it
measures nothing, so tests can feed it a fake result set.
"""

from __future__ import annotations

import datetime
import math
import os
import platform
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Figures = dict[str, dict[str, float]]  # module -> figure name -> value

SCHEMA = 1


@dataclass(frozen=True)
class Column:
    key: str  # the JSON name of the cell
    title: str  # the table's header
    unit: str  # how the cell is written: "rate", "x", "ms", "share"


COLUMNS = (
    Column("decode_rate", "decode/s", "rate"),
    Column("decode_ratio", "x base", "x"),
    Column("ingest_rate", "ingest/s", "rate"),
    Column("latency_p50_ms", "p50 ms", "ms"),
    Column("latency_p99_ms", "p99 ms", "ms"),
    Column("cpu_share", "CPU", "share"),
    Column("peer_ratio", "vs peer", "peer"),
)


@dataclass(frozen=True)
class Peer:
    """The "vs peer" cell: our figure as a ratio to a peer's, measured side by side in the
    same bench, and the target it must meet (`at_most`: a cost ratio, else a speed ratio)."""

    module: str
    figure: str
    target: float
    at_most: bool
    peer: str  # who the ratio is against, for the docs

    @property
    def target_text(self) -> str:
        return f"{'<=' if self.at_most else '>='}{self.target:g}"

    def met(self, value: float) -> bool:
        return value <= self.target if self.at_most else value >= self.target


@dataclass(frozen=True)
class Row:
    protocol: str
    load: str  # the target load the ingest, latency and CPU cells are measured at
    cells: Mapping[str, tuple[str, str]]  # column key -> (module, figure name)
    peer: Peer | None = None


def _gateway_row(protocol: str, load: str, prefix: str) -> Row:
    """A row of bench/bench_latency.py's figures at one load (named with `prefix`)."""
    cells = {
        "ingest_rate": "rate", "latency_p50_ms": "p50_ms", "latency_p99_ms": "p99_ms",
        "cpu_share": "cpu",
    }  # fmt: skip
    return Row(
        protocol,
        load,
        {column: ("latency", prefix + name) for column, name in cells.items()},
        Peer("latency", f"{prefix}peer_ratio_p99", 1.5, True, "a bare asyncio UDP forwarder"),
    )


# Which module figure fills which cell. A cell whose module did not run (or lacks the figure)
# is written "-" and is null in the JSON.
ROWS = (
    Row(
        "VRPN",
        "10 sensors at 1 kHz",
        {
            "decode_rate": ("vrpn", "decode_rate"),
            "decode_ratio": ("vrpn", "decode_ratio"),
            "ingest_rate": ("ingest", "vrpn_rate"),
            "latency_p50_ms": ("load", "vrpn.10000.p50_ms"),
            "latency_p99_ms": ("load", "vrpn.10000.p99_ms"),
            "cpu_share": ("load", "vrpn.10000.cpu"),
        },
        # CPU per message of `sim vrpn` over the mainline vrpn_server's (bench/bench_serve.py)
        Peer("serve", "server_peer_ratio", 1.0, True, "mainline vrpn_server"),
    ),
    Row(
        "VRPN trackers",
        "100 trackers x 1 at 100 Hz",
        {"ingest_rate": ("serve", "many_sim_rate"), "cpu_share": ("serve", "many_sim_cpu")},
        # the same with many senders: `sim vrpn --set trackers=100` over 100 mainline trackers
        Peer("serve", "many_peer_ratio", 1.0, True, "mainline vrpn_server, 100 trackers"),
    ),
    Row(
        "VRPN client",
        "mainline server, 10 x 1 kHz",
        {"ingest_rate": ("serve", "client_rate"), "cpu_share": ("serve", "client_cpu")},
        # CPU per message of our client over vrpn_print_devices', reading the mainline server
        Peer("serve", "client_peer_ratio", 1.0, True, "mainline vrpn_print_devices"),
    ),
    Row(
        "XRP",
        "50 robots",
        {
            "decode_rate": ("xrp", "decode_single_rate"),
            "decode_ratio": ("xrp", "decode_single_ratio"),
            "ingest_rate": ("xrp", "fleet_status_rate"),
            "latency_p50_ms": ("xrp", "round_trip_p50_ms"),
            "latency_p99_ms": ("xrp", "round_trip_p99_ms"),
            "cpu_share": ("xrp", "fleet_cpu"),
        },
        # the session's decode as a live robot feeds it (a status a wake-up: one by one, what
        # `XrpSource` meets; bench_xrp counts its wake-ups) over the bare loop's
        Peer("xrp", "decode_single_ratio", 0.5, False, "a bare struct.unpack loop"),
    ),
    Row(
        "XRP burst",
        "wake-ups of 64 statuses",
        {"decode_rate": ("xrp", "decode_rate"), "decode_ratio": ("xrp", "decode_ratio")},
        # the same when a wake-up holds a run of statuses (a link that fell behind, a burst):
        # one `StatusBatch` a wake-up
        Peer("xrp", "decode_ratio", 0.5, False, "a bare struct.unpack loop"),
    ),
    Row(
        "UgCS",
        "1,000 vehicles at 5 Hz",
        {
            "decode_rate": ("ugcs", "decode_rate"),
            "decode_ratio": ("ugcs", "decode_ratio"),
            "ingest_rate": ("ugcs", "ingest_rate"),
            "latency_p50_ms": ("ugcs", "lag_p50_ms"),
            "latency_p99_ms": ("ugcs", "lag_p99_ms"),
            "cpu_share": ("ugcs", "ucs_cpu"),
        },
        Peer("ugcs", "decode_ratio", 0.6, False, "protobuf's parser alone"),
    ),
    Row(
        "VRSP",
        "10,000 drones at 30 Hz",
        {
            "decode_rate": ("vrsp", "decode_rate"),
            "decode_ratio": ("vrsp", "decode_ratio"),
            "ingest_rate": ("vrsp", "ingest_rate"),
            "latency_p50_ms": ("load", "vrsp.300000.p50_ms"),
            "latency_p99_ms": ("load", "vrsp.300000.p99_ms"),
            "cpu_share": ("vrsp", "receiver_cpu"),
        },
    ),
    Row(
        "SpyGlass",
        "1,000 nodes",
        {
            "decode_rate": ("spyglass", "decode_rate"),
            "decode_ratio": ("spyglass", "decode_ratio"),
            "ingest_rate": ("spyglass", "ingest_rate"),
            "latency_p50_ms": ("spyglass", "lag_p50_ms"),
            "latency_p99_ms": ("spyglass", "lag_p99_ms"),
            "cpu_share": ("spyglass", "source_cpu"),
        },
        Peer("spyglass", "decode_ratio", 0.8, False, "a bare struct.unpack_from loop"),
    ),
    # the gateway end to end (bench/bench_latency.py): VRPN datagram -> `robowire bridge`
    # process -> VRPN TCP reader; filled when that module ran. "vs peer": its p99 over a bare
    # asyncio UDP -> TCP forwarder's, side by side (the VM's floor)
    _gateway_row("gateway", "10k updates/s", ""),
    _gateway_row("gateway 1k", "1k updates/s", "1k_"),
    # Zenoh between two gateway processes (bench/bench_zenoh.py): CPU per message of both
    # processes summed, over Zenoh's own put/subscribe of the same payloads (both processes)
    Row(
        "Zenoh",
        "10,000-drone frames",
        {"ingest_rate": ("zenoh", "rate_10000")},
        Peer("zenoh", "cpu_ratio_10000", 2.0, True, "Zenoh's own put/subscribe, CPU"),
    ),
    Row(
        "Zenoh 100",
        "100-drone frames",
        {"ingest_rate": ("zenoh", "rate_100")},
        Peer("zenoh", "cpu_ratio_100", 2.0, True, "Zenoh's own put/subscribe, CPU"),
    ),
    # the MCAP recorder (bench/bench_mcap.py): x base = its CPU time over the `mcap` writer's
    # alone on the same messages, after the first update; CPU = recording the show live
    Row(
        "recorder",
        "10,000 drones at 30 Hz",
        {
            "decode_ratio": ("mcap", "steady_ratio"),
            "cpu_share": ("mcap", "steady_cpu"),
        },
        Peer("mcap", "steady_ratio", 1.5, True, "the mcap writer alone"),
    ),
    # record --format rosbag2 (bench/bench_rosbag2.py): CPU = recording the show live as a ROS 2
    # bag; vs peer = its CPU over mcap-ros2-support's writer's on the same messages (same run)
    Row(
        "rosbag2",
        "10,000 drones at 30 Hz",
        {"cpu_share": ("rosbag2", "cpu")},
        Peer("rosbag2", "ratio", 1.5, True, "mcap-ros2-support's writer"),
    ),
    # the Foxglove sink (bench/bench_foxglove.py): CPU = serving the show at 30 Hz, every drone
    # moved, to one client reading every channel (its pulls, the SDK server, the relay)
    Row("Foxglove", "10,000 drones at 30 Hz", {"cpu_share": ("foxglove", "cpu")}),
    # `serve ros2://` (bench/bench_ros2.py): CPU = /tf + markers of the show at 30 Hz to a
    # reader in another process; vs peer = the same messages as cyclonedds IdlStruct objects
    Row(
        "ROS 2",
        "10,000 drones at 30 Hz",
        {"cpu_share": ("ros2", "cpu")},
        Peer("ros2", "peer_ratio", 3.0, False, "cyclonedds' per-object IdlStruct serialisation"),
    ),
    # `listen ros2://` (bench/ros2_listen.py, run by bench_ros2): CPU = reading /tf of 1,000
    # transforms at 100 Hz into the world (goal <= 20%); vs peer = CPU per sample of
    # cyclonedds' own typed reader taking the same samples as Python objects, over ours
    Row(
        "ROS 2 listen",
        "1,000 transforms at 100 Hz",
        {"cpu_share": ("ros2", "listen_cpu")},
        Peer("ros2", "listen_peer_ratio", 3.0, False, "cyclonedds' per-object deserialisation"),
    ),
)


def table_rows(figures: Figures) -> dict[str, dict[str, Any]]:
    """{protocol: {"load": text, column key: value or None, "peer_target": text or None}}
    for every row."""
    out: dict[str, dict[str, Any]] = {}
    for row in ROWS:
        cells: dict[str, Any] = {"load": row.load}
        for column in COLUMNS:
            where = row.cells.get(column.key)
            if column.key == "peer_ratio" and row.peer is not None:
                where = (row.peer.module, row.peer.figure)
            value = None if where is None else figures.get(where[0], {}).get(where[1])
            cells[column.key] = None if value is None or math.isnan(value) else float(value)
        cells["peer_target"] = None if row.peer is None else row.peer.target_text
        if row.peer is not None:  # the spread of the rounds the median is of (bench/rounds.py)
            module = figures.get(row.peer.module, {})
            for end in ("low", "high"):
                value = module.get(f"{row.peer.figure}_{end}")
                cells[f"peer_{end}"] = None if value is None else float(value)
        out[row.protocol] = cells
    return out


def _peer_cell(cells: Mapping[str, Any], peer: Peer | None) -> str:
    """ "2.85x (<=3)", or "2.85x [2.61-3.02] (<=3)" with the spread of the runs the median
    is of; "miss" when the target is not met."""
    value = cells["peer_ratio"]
    if peer is None or value is None:
        return "-"
    low, high = cells.get("peer_low"), cells.get("peer_high")
    spread = "" if low is None or high is None else f" [{low:.2f}-{high:.2f}]"
    return f"{value:.2f}x{spread} ({peer.target_text}){'' if peer.met(value) else ' miss'}"


def _cell(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "rate":
        for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(value) >= limit:
                return f"{value / limit:.1f}{suffix}"
        return f"{value:.0f}"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "ms":
        return f"{value:.1f}" if value < 100 else f"{value:.0f}"
    return f"{value:.1%}"


def render(figures: Figures) -> str:
    """The table as aligned text (also valid Markdown)."""
    rows = table_rows(figures)
    header = ["protocol", "target load", *(c.title for c in COLUMNS)]
    peers = {row.protocol: row.peer for row in ROWS}
    body = [
        [
            name,
            cells["load"],
            *(
                _peer_cell(cells, peers[name]) if c.unit == "peer" else _cell(cells[c.key], c.unit)
                for c in COLUMNS
            ),
        ]
        for name, cells in rows.items()
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), rule, *(line(r) for r in body)])


def commit_id(cwd: Path | None = None) -> str:
    """The checkout's commit (with "-dirty" if it has changes), or "unknown"."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("-dirty" if dirty else "")


def machine() -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
    }


def document(
    figures: Figures,
    *,
    commit: str,
    date: str | None = None,
    machine_info: Mapping[str, Any] | None = None,
    quick: bool = False,
) -> dict[str, Any]:
    """The JSON document: who/when/where, the table, and every figure of every module."""
    return {
        "schema": SCHEMA,
        "commit": commit,
        "date": date or datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": dict(machine() if machine_info is None else machine_info),
        "quick": quick,
        "table": table_rows(figures),
        "figures": {m: {k: float(v) for k, v in f.items()} for m, f in sorted(figures.items())},
    }


def compare(
    old: Mapping[str, Any], new: Mapping[str, Any]
) -> list[tuple[str, float, float, float]]:
    """(module.figure, old, new, new/old) for every figure both documents have; the ratio is
    nan when old is 0 or either value is not a number."""
    out = []
    old_f, new_f = old.get("figures", {}), new.get("figures", {})
    for module in sorted(set(old_f) & set(new_f)):
        for name in sorted(set(old_f[module]) & set(new_f[module])):
            a, b = old_f[module][name], new_f[module][name]
            if a is None or b is None:
                continue
            ratio = b / a if a else math.nan
            out.append((f"{module}.{name}", float(a), float(b), ratio))
    return out


def render_compare(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    lines = [
        f"old {old.get('commit', '?')} ({old.get('date', '?')})",
        f"new {new.get('commit', '?')} ({new.get('date', '?')})",
    ]
    rows = compare(old, new)
    width = max((len(name) for name, *_ in rows), default=10)
    lines.append(f"{'figure'.ljust(width)}  {'old':>12}  {'new':>12}  new/old")
    for name, a, b, ratio in rows:
        lines.append(f"{name.ljust(width)}  {a:12.4g}  {b:12.4g}  {ratio:7.2f}")
    return "\n".join(lines)


def latency_curves(figures: Figures) -> dict[str, list[tuple[float, float, float]]]:
    """{protocol: [(updates/s, p50 ms, p99 ms), ...] by load} from the `load` module's
    figures, named `<protocol>.<updates/s>.p50_ms` / `.p99_ms`."""
    curves: dict[str, dict[float, dict[str, float]]] = {}
    for name, value in figures.get("load", {}).items():
        parts = name.split(".")
        if len(parts) != 3 or parts[2] not in ("p50_ms", "p99_ms"):
            continue
        curves.setdefault(parts[0], {}).setdefault(float(parts[1]), {})[parts[2]] = value
    return {
        protocol: [
            (load, v["p50_ms"], v["p99_ms"])
            for load, v in sorted(levels.items())
            if "p50_ms" in v and "p99_ms" in v
        ]
        for protocol, levels in sorted(curves.items())
    }


def plot(figures: Figures, path: Path, title: str = "") -> bool:
    """Latency p50/p99 against load, log-log, one colour per protocol; False if there is
    nothing to plot or matplotlib is not installed."""
    curves = {p: c for p, c in latency_curves(figures).items() if c}
    if not curves:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("   (no plot: matplotlib is not installed; pip install -e '.[dev]')", file=sys.stderr)
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for protocol, points in curves.items():
        loads = [p[0] for p in points]
        line = ax.plot(loads, [p[1] for p in points], "o-", label=f"{protocol} p50")[0]
        ax.plot(
            loads, [p[2] for p in points], "s--", color=line.get_color(), label=f"{protocol} p99"
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("load, updates/s (127.0.0.1 UDP)")
    ax.set_ylabel("latency sim datagram -> world, ms")
    ax.set_title(title or "robowire source latency against load")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True
