"""Screenshot of `robowire demo` in the web viewer (the README's picture: docs/viewer.png).

    PYTHONPATH=src python tools/screenshot.py [-o docs/viewer.png] [--count 60] [--wait 16]

Starts `robowire demo --viewer-port 0` (every simulator, the gateway, the viewer), opens the
printed URL in Debian's headless chromium (Playwright) at 1280x800, waits for the devices to
move, selects one drone so the panel shows its telemetry, saves the PNG and ends the demo.
Needs /usr/bin/chromium (apt-get install chromium) and the `playwright` Python package.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from robowire.viewer.browser import launch, missing

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--out", default=str(ROOT / "docs" / "viewer.png"))
    parser.add_argument("--count", type=int, default=60, help="devices per simulator")
    parser.add_argument("--wait", type=float, default=16.0, help="seconds before the shot")
    parser.add_argument("--select", default="vrsp", help="select a device of this source")
    args = parser.parse_args()
    if reason := missing():
        print(f"error: {reason}", file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright

    path = os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{path}"}
    command = ["demo", "--viewer-port", "0", "--count", str(args.count)]
    demo = subprocess.Popen(
        [sys.executable, "-m", "robowire.cli", *command],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert demo.stderr is not None
        url = None
        for line in demo.stderr:
            if m := re.search(r"(http://127\.0\.0\.1:\d+/)", line):
                url = m.group(1)
                break
        if url is None:
            print("error: the demo printed no viewer URL", file=sys.stderr)
            return 1
        with sync_playwright() as pw:
            browser = launch(pw)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(url)
            page.wait_for_function("window.robowire && robowire.store.devices.length > 0")
            time.sleep(args.wait / 2)
            page.evaluate(
                """(prefix) => {
                  const d = robowire.store.devices.find(
                    (d) => d.source.name.startsWith(prefix) && d.name === '7')
                    ?? robowire.store.devices.find((d) => d.source.name.startsWith(prefix));
                  if (d) robowire.select(d);
                  robowire.fitSource(prefix);
                }""",
                args.select,
            )
            time.sleep(args.wait / 2)
            page.screenshot(path=args.out)
            browser.close()
        print(f"saved {args.out}")
        return 0
    finally:
        demo.terminate()
        try:
            demo.wait(10)
        except subprocess.TimeoutExpired:
            demo.kill()
            demo.wait()


if __name__ == "__main__":
    sys.exit(main())
