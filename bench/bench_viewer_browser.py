"""The web viewer with 10,000 VRSP drones in headless Chromium, against the same page with 10.

For each size, in one run: `robowire serve http://127.0.0.1:0 --from vrsp://127.0.0.1:PORT`
and `robowire sim vrsp --drones N --to 127.0.0.1:PORT` as real processes, one Debian
chromium page (Playwright) on the viewer. Once every drone is listed, the page's own counters
(`window.robowire.stats`) give, over the same window:

* rendered frames/s: requestAnimationFrame callbacks that drew the scene;
* applied state frames/s: binary state frames decoded and written into the instance arrays
  (each one asked for with `ready` after a drawn frame, so a slow page only lowers its own rate).

Chromium draws with SwiftShader here (software GL, on a shared 2-core machine): only the
ratios 10,000 / 10 mean something. Skipped with a message when chromium is missing.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from robowire.viewer.browser import launch, missing

SRC = str(Path(__file__).resolve().parents[1] / "src")
SIZES = (10, 10_000)
WARMUP = 3.0
WINDOW = 8.0


def _cli(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.Popen(
        [sys.executable, "-m", "robowire.cli", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _url(proc: subprocess.Popen[str]) -> str:
    assert proc.stderr is not None
    for line in proc.stderr:  # the first lines, until the viewer says where it is
        if m := re.search(r"(http://127\.0\.0\.1:\d+/)", line):
            return m.group(1)
    raise RuntimeError("the viewer printed no URL")


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def measure(browser: Any, drones: int) -> dict[str, float]:
    port = _free_udp_port()
    server = _cli("serve", "http://127.0.0.1:0", "--from", f"vrsp://127.0.0.1:{port}")
    sim = None
    try:
        url = _url(server)
        sim = _cli("sim", "vrsp", "--drones", str(drones), "--to", f"127.0.0.1:{port}")
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        try:
            page.goto(url)
            page.wait_for_function(
                f"window.robowire && robowire.store.devices.length >= {drones}", timeout=60_000
            )
            page.wait_for_timeout(WARMUP * 1000)
            counters = (
                "({r: robowire.stats.rendered, a: robowire.stats.applied,"
                " t: performance.now(), u: robowire.store.updates})"
            )
            a = page.evaluate(counters)
            page.wait_for_timeout(WINDOW * 1000)
            b = page.evaluate(counters)
        finally:
            page.close()
    finally:
        if sim is not None:
            _stop(sim)
        _stop(server)
    seconds = (b["t"] - a["t"]) / 1000
    return {
        "rendered": (b["r"] - a["r"]) / seconds,
        "applied": (b["a"] - a["a"]) / seconds,
        "updates": (b["u"] - a["u"]) / seconds,
    }


def main() -> None:
    if reason := missing():
        print(f"   skipped: {reason}")
        return
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            results = {n: measure(browser, n) for n in SIZES}
        finally:
            browser.close()
    base = results[SIZES[0]]
    for n, r in results.items():
        print(
            f"   {n:>6} drones: {r['rendered']:6.1f} rendered frames/s, "
            f"{r['applied']:6.1f} state frames/s, {r['updates']:9.0f} device updates/s"
        )
    big = results[SIZES[-1]]
    print(
        f"   ratio {SIZES[-1]} / {SIZES[0]} drones: rendered frames/s "
        f"{big['rendered'] / base['rendered']:.2f}, state frames/s "
        f"{big['applied'] / max(base['applied'], 1e-9):.2f} "
        "(software GL: ratios only)"
    )


if __name__ == "__main__":
    main()
