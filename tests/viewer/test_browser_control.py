"""Driving the simulated XRP robot from the viewer's page with the keyboard (`--allow-control`).

Real processes: `robowire sim xrp --port 0` and `robowire serve http://127.0.0.1:0 --from
xrp://127.0.0.1:PORT --allow-control`; Debian's chromium on the viewer. The robot's pose comes
from its own encoders and gyro (odometry in the XRP adapter), so it moves in the viewer only if
the simulated motors turned.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(180)  # (a wait is up to 60 s: see Viewer.wait)
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(scope="module")
def viewer(cli: Callable[..., Any], open_viewer: Any) -> Any:
    sim = cli("sim", "xrp", "--port", "0")
    port = sim.wait_for(r"listening on 127\.0\.0\.1:(\d+)").group(1)
    server = cli(
        "serve", "http://127.0.0.1:0", "--from", f"xrp://127.0.0.1:{port}", "--allow-control"
    )
    url = server.wait_for(r"viewer listening on (http://127\.0\.0\.1:\d+/\?token=[\w-]+);").group(1)
    page = open_viewer(url)
    page.source = f"xrp@127.0.0.1:{port}"
    return page


def _position(viewer: Any) -> list[float]:
    position: list[float] = viewer.js("robowire.store.position(robowire.find('xrp'))")
    return position


def test_keyboard_drives_the_xrp_robot_and_commands_report_their_status(viewer: Any) -> None:
    viewer.wait("window.robowire && robowire.find('xrp') !== null")
    viewer.wait("robowire.store.position(robowire.find('xrp')).every(Number.isFinite)")
    # the page took the token printed at start out of its address and keeps it for the tab
    assert "token" not in viewer.page.url and "?token=" in viewer.url
    assert viewer.js("sessionStorage.getItem('robowire.token')") == viewer.url.split("=")[1]
    viewer.js("robowire.select(robowire.find('xrp'))")
    control = viewer.page.locator("#control")
    assert control.is_visible()
    # enable the robot (the source was started without ?enable=1): a final "ok"
    control.locator("button[data-command=enable]").click()
    viewer.wait("document.querySelector('#control .log .state-ok') !== null")
    assert "enable" in control.locator(".log").inner_text()
    start = _position(viewer)
    # hold W: drive commands at ~10 Hz; the robot moves forward (East from where it started)
    viewer.page.locator("#scene").focus()
    viewer.page.keyboard.down("w")
    viewer.wait(
        f"Math.hypot(...robowire.store.position(robowire.find('xrp')).slice(0, 2)"
        f".map((v, i) => v - {start[:2]}[i])) > 0.1"
    )
    assert "left" in control.locator(".drive").inner_text()
    viewer.page.keyboard.up("w")
    assert control.locator("#drive-state").inner_text() == "stopped"
    # released: the robot stops (its position stays put between two reads 1 s apart)
    viewer.wait(
        """() => {
          const p = robowire.store.position(robowire.find('xrp'));
          const last = window.__last; window.__last = p;
          return last && Math.hypot(p[0] - last[0], p[1] - last[1]) < 0.005;
        }""",
        every=1.0,
    )
    moved = _position(viewer)
    assert moved[0] - start[0] > 0.1  # it went forward: +x (East) is where it faced at start
    assert viewer.errors == []


@pytest.fixture(scope="module")
def ugcs_viewer(cli: Callable[..., Any], open_viewer: Any) -> Any:
    sim = cli("sim", "ugcs", "--port", "0", "--count", "1")
    port = sim.wait_for(r"listening on 127\.0\.0\.1:(\d+)").group(1)
    server = cli(
        "serve", "http://127.0.0.1:0", "--from", f"ugcs://127.0.0.1:{port}", "--allow-control"
    )
    url = server.wait_for(r"viewer listening on (http://127\.0\.0\.1:\d+/\?token=[\w-]+);").group(1)
    return open_viewer(url)


def test_a_mission_drawn_on_the_map_is_uploaded_to_the_ugcs_vehicle(ugcs_viewer: Any) -> None:
    viewer = ugcs_viewer
    viewer.wait("window.robowire && robowire.store.devices.some(d => d.kind === 'ugcs')")
    viewer.wait(
        "(() => { const d = robowire.store.devices.find(d => d.kind === 'ugcs');"
        " return d && robowire.control.commands[d.source.name] !== undefined; })()"
    )
    viewer.wait(
        "robowire.store.geodetic(robowire.store.devices.find(d => d.kind === 'ugcs'))"
        ".every(Number.isFinite)"
    )
    viewer.js("robowire.select(robowire.store.devices.find(d => d.kind === 'ugcs'))")
    control = viewer.page.locator("#control")
    control.locator("button[data-command=mission_upload]").click()
    control.get_by_role("button", name="Draw on map").click()
    box = viewer.page.locator("#geo").bounding_box()
    assert box is not None
    for dx, dy in ((-40, -30), (30, -40), (40, 30)):
        viewer.page.mouse.click(box["x"] + box["width"] / 2 + dx, box["y"] + box["height"] / 2 + dy)
    assert "3 waypoints" in control.inner_text()
    waypoints = viewer.js("robowire.control.mission")
    assert len(waypoints) == 3 and all(-90 <= lat <= 90 for lat, _ in waypoints)
    control.get_by_role("button", name=re.compile("^Send")).click()
    viewer.wait(
        "[...document.querySelectorAll('#control .log div')].some(d => "
        "/mission_upload/.test(d.textContent) "
        "&& /: (ok|failed|timeout|refused)/.test(d.textContent))"
    )
    log = control.locator(".log").inner_text()
    assert re.search(r"mission_upload → \S+: ok", log), log
    ARTIFACTS.mkdir(exist_ok=True)
    viewer.page.screenshot(path=str(ARTIFACTS / "viewer-control.png"))
    print(f"viewer screenshot: {ARTIFACTS / 'viewer-control.png'}")
    assert viewer.errors == []
