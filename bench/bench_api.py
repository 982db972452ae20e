"""The library face (issue 20): what `robowire.connect` and `robowire.publish` cost, each
against a baseline measured in the same run.

* `connect` to the VRPN simulator at 10 sensors x 1 kHz with a callback per update, against
  `robowire listen --json` on the same simulator: CPU seconds of each process over the same
  window (the simulator runs in a process of its own). Target: at most 1.5x.
* `pub.set_many` for 10,000 drones at 30 Hz through the VRSP sender, against `robowire sim
  vrsp --drones 10000` (the simulator's own show through the same sender): CPU share of one
  core of each process. Target: at most 25 % of a core.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import bench

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
ROBOWIRE = [sys.executable, "-m", "robowire.cli"]

CONNECT = """
import sys, time, robowire
seen = [0, 0]
def count(update):
    seen[0] += 1
    seen[1] += len(update)
with robowire.connect(sys.argv[1]) as live:
    live.on_update(count)
    time.sleep(float(sys.argv[2]))
print(seen[0], seen[1])
"""

PUBLISH = """
import sys, time, numpy as np, robowire
n, seconds = 10_000, float(sys.argv[2])
ids = np.arange(1, n + 1)
rng = np.random.default_rng(0)
base = rng.uniform(-100, 100, (n, 3))
colors = rng.uniform(0, 255, (n, 3))
frames = 0
with robowire.publish(sys.argv[1]) as show:
    start = time.monotonic()
    while (t := time.monotonic() - start) < seconds:
        show.set_many(ids, positions=base + np.sin(t), colors=colors)
        frames += 1
        time.sleep(max(0.0, frames / 30 - (time.monotonic() - start)))
print(frames)
"""


def _free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu_of(argv: list[str], seconds: float) -> tuple[float, float, str]:
    """CPU seconds, wall seconds and stdout (its first MiB; then its line count) of one
    process run to its end."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=ENV)
    assert proc.stdout is not None
    out, lines = b"", 0
    while chunk := proc.stdout.read(1 << 16):
        lines += chunk.count(b"\n")
        out += chunk if len(out) < (1 << 20) else b""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    text = out.decode(errors="replace") if len(out) < (1 << 20) else str(lines)
    return usage.ru_utime + usage.ru_stime, wall, text


def main() -> dict[str, float]:
    seconds = 4.0 if bench.QUICK else 10.0
    figures: dict[str, float] = {}

    port = _free_port(socket.SOCK_STREAM)
    sim = subprocess.Popen(
        [*ROBOWIRE, "sim", "vrpn", "--port", str(port), "--count", "10", "--rate", "1000"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=ENV,
    )
    try:
        time.sleep(2.0)
        url = f"vrpn://Tracker0@127.0.0.1:{port}"
        listen_cpu, _, lines = _cpu_of(
            [*ROBOWIRE, "listen", url, "--json", "--duration", str(seconds)], seconds
        )
        ours_cpu, _, counted = _cpu_of([sys.executable, "-c", CONNECT, url, str(seconds)], seconds)
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    updates, devices = (int(x) for x in counted.split())
    ratio = ours_cpu / listen_cpu
    print(f"   connect + callback, VRPN 10 x 1 kHz, {seconds:.0f} s:")
    print(f"       listen --json  CPU {listen_cpu:6.2f} s   {lines:>8} lines")
    print(f"       connect        CPU {ours_cpu:6.2f} s   {updates:>8} callbacks "
          f"({devices} device rows)")  # fmt: skip
    print(f"       ratio connect / listen --json      {ratio:5.2f}x   (target <= 1.5x)")
    figures["connect_cpu_ratio"] = ratio

    udp = _free_port(socket.SOCK_DGRAM)
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", udp))  # a receiver that never reads: the kernel drops for it
    try:
        sim_cpu, sim_wall, _ = _cpu_of(
            [*ROBOWIRE, "sim", "vrsp", "--drones", "10000", "--rate", "30",
             "--to", f"127.0.0.1:{udp}", "--duration", str(seconds)], seconds)  # fmt: skip
        pub_cpu, pub_wall, frames = _cpu_of(
            [sys.executable, "-c", PUBLISH, f"vrsp://127.0.0.1:{udp}", str(seconds)], seconds
        )
    finally:
        sink.close()
    share, sim_share = pub_cpu / pub_wall, sim_cpu / sim_wall
    print(f"   set_many, 10,000 drones at 30 Hz through the VRSP sender, {seconds:.0f} s:")
    print(f"       sim vrsp --drones 10000   {sim_share:6.1%} of a core")
    print(f"       publish + set_many        {share:6.1%} of a core   ({frames.strip()} frames, "
          "start-up included)")  # fmt: skip
    print(f"       ratio publish / sim                {share / sim_share:5.2f}x   "
          "(target: publish <= 25 % of a core)")  # fmt: skip
    figures["set_many_core_share"] = share
    figures["set_many_vs_sim"] = share / sim_share
    return figures


if __name__ == "__main__":
    main()
