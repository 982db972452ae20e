"""The full-load soak with one process and with workers, side by side (issue 23, item 4).

Runs `python -m tests.reliability.soak --json` twice on the same load: the gateway alone
(every source, the viewer and the recorder in one process), then with the sources in worker
processes joined by Zenoh (`--workers 2`, as a site file's `worker = …` does), and prints
what the soak reports for each: CPU of the gateway (with its workers) and of the simulators,
drops, the viewer's frames a second, the loop's lag, disconnects, RSS and its slope over the
second half (the verdict's; with workers RSS includes the workers' Zenoh shared-memory pools
the gateway maps, 64 MiB each, counted as their pages are touched: bounded), and the shed
count (with
workers, the sources' in the workers too, as the gateway's status carries each worker's, and
`workers`: what the gateway's bus source shed of their STATE frames), summed per protocol.
The machine is shared: the load average before and after is printed, for a run to be read
against.
`ROBOWIRE_SOAK_SECONDS` (default 60) and `ROBOWIRE_SOAK_SCALE` (default 1: the full load) set
the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SECONDS = float(os.environ.get("ROBOWIRE_SOAK_SECONDS", "60"))
SCALE = float(os.environ.get("ROBOWIRE_SOAK_SCALE", "1"))
WORKERS = 2


def run(workers: int) -> dict[str, Any]:
    args = [sys.executable, "-m", "tests.reliability.soak", "--json"]
    args += ["--duration", str(SECONDS), "--scale", str(SCALE), "--interval", "5"]
    if workers:
        args += ["--workers", str(workers)]
    path = os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    done = subprocess.run(
        args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=SECONDS * 3 + 120
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"the soak printed no verdict: {done.stderr.strip()[-500:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def shed(result: dict[str, Any]) -> str:
    """The soak's shed count, if this soak reports one."""
    total = result.get("shed_total", result.get("shed"))
    if isinstance(total, dict):
        total = sum(total.values())
    return "-" if total is None else str(total)


def shed_by_protocol(result: dict[str, Any]) -> str:
    """What the sources shed, summed per protocol (`xrp@127.0.0.1:…` -> xrp; the gateway's
    bus source, `workers@…`, is what it shed of the workers' frames); "" if none shed."""
    by: dict[str, int] = {}
    for name, count in (result.get("shed") or {}).items():
        key = name.split("@", 1)[0]
        by[key] = by.get(key, 0) + int(count)
    return ", ".join(f"{k} {v:,}" for k, v in sorted(by.items()) if v)


def main() -> dict[str, float]:
    figures: dict[str, float] = {}
    load = os.getloadavg()[0]  # the soak wants a quiet machine: say how busy this one was
    print(f"   full-load soak, {SECONDS:g} s at scale {SCALE:g} (load average {load:.1f}):")
    for label, workers in (("one process", 0), (f"{WORKERS} workers", WORKERS)):
        result = run(workers)
        drops = result.get("recorder_drops", result.get("recorder_and_viewer_drops_second_half"))
        print(
            f"     {label:12s} gateway CPU {result['gateway_cpu']:5.0%}"
            f"  simulators {result['sims_cpu']:5.0%}  shed {shed(result):>6s}"
            f"  drops {drops}  viewer fps {result.get('viewer_fps', '-')}"
            f"  lag p99 {result.get('loop_lag_p99_ms', '-')} ms"
            f"  disconnects {result.get('disconnects', '-')}"
            f"  RSS {result['rss_start_mib']} -> {result['rss_end_mib']} MiB"
            f" (slope {result.get('rss_net_slope_mib_min', '-')} MiB/min)"
            f"  {'PASS' if result['ok'] else 'FAIL'}"
        )
        if shed_by_protocol(result):
            print(f"     {'':12s} shed per protocol: {shed_by_protocol(result)}")
        key = "workers" if workers else "single"
        figures[f"{key}_cpu"] = float(result["gateway_cpu"])
        if shed(result) != "-":
            figures[f"{key}_shed"] = float(shed(result))
        if "viewer_fps" in result:
            figures[f"{key}_viewer_fps"] = float(result["viewer_fps"])
    print(f"   (load average {os.getloadavg()[0]:.1f} at the end)")
    return figures


if __name__ == "__main__":
    main()
