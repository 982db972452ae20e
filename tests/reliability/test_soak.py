"""The 90 s soak (a tenth of the target loads) keeps memory flat and every queue bounded,
and the overload policy degrades outputs, never to none.

It runs the soak module as a process (`python -m tests.reliability.soak`, see its docstring)
and checks its JSON verdict: memory and queue sizes, that data flowed, that no source
disconnected, that the reading viewer kept getting frames and that control commands went out.
Its timing targets (10 frames a second, a 100 ms loop lag and command latency) are `make
soak`'s; here the machine is shared with the whole test suite, so they are loosened to "at
least one frame a second, a lag and a command latency under 1.5 s" (99th percentiles).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
MAX_SLOPE = 12.0  # MiB a minute over the second half; a leak of one update's copy a frame is
# far more (a VRSP frame of 1,000 drones is ~100 kB, 30 a second: 180 MiB/min), while one
# burst of a starved machine's backlog (bigger reads, bigger arrays) steps RSS up a few MiB
# once: over 30 s, that is a slope of several MiB/min (measured: 3.7 MiB at load 5). On a
# quiet machine RSS steps up 4-5 MiB once, 35-40 s in, and then stays (a 120 s run: 86.5 ->
# 90.7 MiB at 39 s, 87.3 MiB at the end; the same before the overload policy's turns): the
# run is 90 s so that the second half, whose slope is judged, starts after it


def test_90_s_at_a_tenth_of_the_target_load_keep_memory_flat_and_queues_bounded() -> None:
    command = [
        sys.executable, "-m", "tests.reliability.soak", "--duration", "90", "--scale", "0.1",
        "--interval", "3", "--max-slope", str(MAX_SLOPE), "--min-fps", "1",
        "--max-lag-ms", "1500", "--json",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=240)
    assert done.stdout.strip(), done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(done.stderr[-3000:], result)
    assert result["samples"] >= 10
    assert result["flowing"], "the sources stopped receiving"
    assert result["memory_flat"], f"RSS grows {result['rss_slope_mib_min']} MiB/min"
    assert result["queues_bounded"], f"growing: {result['growing_queues']}"
    assert result["recorder_and_viewer_drops_second_half"] == 0
    assert result["disconnects"] == 0 and result["vrpn_silences"] == 0
    assert result["viewer_fps"] >= 1, "the viewer degrades to fewer frames, never to none"
    assert not result["sims_exited"], "a simulator ended (its port taken?): see stderr"
    assert result["commands"] >= 10 and result["commands_failed"] == 0
    assert done.returncode == 0
