"""The viewer's status panel shows a source's wire counts (`lost`, `duplicated`, `reordered`,
`reconnected`: the non-zero ones, in `robowire status`'s words), in a real headless Chromium.

Real processes on loopback: `robowire serve http://…` reading VRSP, `robowire sim vrsp` sending
through the fault proxy (`python -m tests.faults proxy --udp`, 20 % loss, nothing else): the
panel's `wire` cell says `lost N`, N the gateway's own count (`GET /status`), and nothing of
the kinds the proxy did not do.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from support import SRC

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def proxy(free_udp_port: Callable[[], int]) -> Iterator[tuple[int, int]]:
    """A lossy UDP relay: (the port it listens on, the port it relays to)."""
    listen, to = free_udp_port(), free_udp_port()
    relay = subprocess.Popen(
        [sys.executable, "-m", "tests.faults", "proxy", "--udp", "--seed", "1",
         "--listen", f"127.0.0.1:{listen}", "--to", f"127.0.0.1:{to}", "--loss", "20"],
        cwd=SRC.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    yield listen, to
    relay.terminate()
    relay.wait(10)


@pytest.fixture(scope="module")
def viewer(cli: Callable[..., Any], proxy: tuple[int, int], open_viewer: Any) -> Any:
    listen, to = proxy
    server = cli("serve", "http://127.0.0.1:0", "--from", f"vrsp://127.0.0.1:{to}")
    url = server.wait_for(r"viewer listening on (http://127\.0\.0\.1:\d+/)").group(1)
    cli("sim", "vrsp", "--drones", "5", "--to", f"127.0.0.1:{listen}")
    page = open_viewer(url)
    page.source = f"vrsp@127.0.0.1:{to}"
    return page


def test_the_status_panel_shows_what_the_wire_lost(viewer: Any) -> None:
    source, url = viewer.source, viewer.url
    cell = f"document.querySelector(`#status-body tr[data-service='{source}']`)?.cells[10]"
    viewer.wait(f"/^lost [1-9]/.test({cell}?.textContent ?? '')")
    header = viewer.page.locator("#status thead th").all_inner_texts()
    assert header[10] == "wire"
    shown = viewer.js(f"{cell}.textContent")
    assert re.fullmatch(r"lost [\d,]+", shown), shown  # no dup, reord or reconn: none happened
    with urllib.request.urlopen(f"{url}status", timeout=5) as reply:  # the gateway's own count
        status = next(s for s in json.load(reply)["services"] if s["name"] == source)
    assert status["duplicated"] == status["reordered"] == status["reconnected"] == 0
    lost = int(shown.split()[1].replace(",", ""))
    assert 0 < lost <= status["lost"]  # (the panel shows a status of up to a second before)
    assert not viewer.errors, viewer.errors


def test_the_status_panel_shows_only_the_wire_counts_that_are_not_0(viewer: Any) -> None:
    """Every count, in `robowire status`'s words and order (`lost 1,234, dup 2, reord 3,
    reconn 1`); a sink or a clean source shows nothing there."""
    shown = viewer.js(
        """async (services) => {
          const { StatusTable } = await import('/static/status.js');
          const body = document.createElement('tbody');
          new StatusTable(body, null).update({ type: 'status', services });
          return Array.from(body.rows, (r) => r.cells[10].textContent);
        }""",
        [
            {"name": "wifi", "role": "source", "state": "connected", "lost": 1234,
             "duplicated": 2, "reordered": 3, "reconnected": 1},
            {"name": "robot", "role": "source", "state": "connected", "lost": 0,
             "duplicated": 0, "reordered": 5, "reconnected": 0},
            {"name": "clean", "role": "source", "state": "connected", "lost": 0,
             "duplicated": 0, "reordered": 0, "reconnected": 0},
            {"name": "viewer", "role": "sink", "state": "listening"},
        ],
    )  # fmt: skip
    assert shown == ["lost 1,234, dup 2, reord 3, reconn 1", "reord 5", "", ""]
