"""Run every benchmark module (`bench/bench_*.py`), or the ones named: `python -m bench udp`.

Each prints ratios measured side by side in one run: this machine is shared and noisy, so
absolute times mean little. At the end: one table per protocol (bench/table.py), written also
to JSON and, when the latency-against-load run happened, a PNG plot.

    python -m bench                          # everything, ~10 min
    python -m bench --quick                  # the table's modules with short windows, ~3-4 min
    python -m bench vrpn xrp --json out.json # some modules
    python -m bench --compare old.json new.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
import time
import traceback
from pathlib import Path

import bench
from bench import table

# the modules the table is built from (`--quick` runs only these)
TABLE_MODULES = (
    "vrpn", "serve", "xrp", "ugcs", "vrsp", "spyglass", "ingest", "load", "latency", "mcap",
    "foxglove", "zenoh", "ros2", "rosbag2",
)  # fmt: skip


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Run robowire's benchmarks and print one table per protocol.",
        epilog="example: python -m bench --quick --json /tmp/new.json",
    )
    parser.add_argument("names", nargs="*", help="run only modules whose name contains these")
    parser.add_argument("--quick", action="store_true", help="the table only, short windows")
    parser.add_argument(
        "--json", type=Path, default=Path("bench-results.json"), help="where the JSON goes"
    )
    parser.add_argument(
        "--png", type=Path, default=Path("bench-latency.png"), help="where the plot goes"
    )
    parser.add_argument(
        "--compare", nargs=2, type=Path, metavar=("OLD", "NEW"), help="ratios new/old per figure"
    )
    return parser


def run_modules(names: list[str], quick: bool) -> tuple[table.Figures, int]:
    modules = sorted(
        m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_")
    )
    if names:
        modules = [m for m in modules if any(n in m for n in names)]
    elif quick:
        modules = [m for m in modules if m.removeprefix("bench_") in TABLE_MODULES]
    figures: table.Figures = {}
    failed = 0
    for name in modules:
        short = name.removeprefix("bench_")
        print(f"== {short}", flush=True)
        start = time.perf_counter()
        try:
            result = importlib.import_module(f"bench.{name}").main()
            if isinstance(result, dict):
                figures[short] = {k: float(v) for k, v in result.items()}
        except Exception:  # one broken benchmark must not hide the others' figures
            failed += 1
            traceback.print_exc()
        print(f"   ({time.perf_counter() - start:.1f} s)", flush=True)
    return figures, failed


def main(argv: list[str]) -> int:
    # unknown words stay in sys.argv for the modules that read their own (bench_ugcs --seconds)
    args, _ = _parser().parse_known_args(argv)
    if args.compare:
        old, new = (json.loads(p.read_text()) for p in args.compare)
        print(table.render_compare(old, new))
        return 0
    bench.QUICK = args.quick
    figures, failed = run_modules(args.names, args.quick)
    print()
    print(table.render(figures))
    doc = table.document(figures, commit=table.commit_id(), quick=args.quick)
    args.json.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"\nfigures: {args.json}")
    if table.plot(figures, args.png, f"robowire {doc['commit'][:12]}, {doc['date']}"):
        print(f"latency against load: {args.png}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
