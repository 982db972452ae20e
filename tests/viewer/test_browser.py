"""The web viewer in a real headless Chromium (Debian's), driven by Playwright.

Real processes on loopback: `robowire serve http://127.0.0.1:0 --from vrsp://127.0.0.1:PORT`
(the viewer) and `robowire sim vrsp --drones 30 --to 127.0.0.1:PORT` (30 drones, ids 1..30,
with positions, LED colours, headings and latitude/longitude). One browser page is shared by
the tests below, in order: it loads, lists the drones, sees them move, shows a selected drone's
telemetry, draws them on the map and shows the source's status; a screenshot is saved to
test-artifacts/viewer.png.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

DRONES = 30
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def viewer(cli: Callable[..., Any], free_udp_port: Callable[[], int], open_viewer: Any) -> Any:
    port = free_udp_port()
    server = cli("serve", "http://127.0.0.1:0", "--from", f"vrsp://127.0.0.1:{port}")
    url = server.wait_for(r"viewer listening on (http://127\.0\.0\.1:\d+/)").group(1)
    cli("sim", "vrsp", "--drones", str(DRONES), "--to", f"127.0.0.1:{port}")
    page = open_viewer(url)
    page.source = f"vrsp@127.0.0.1:{port}"
    return page


def test_page_loads_and_lists_the_simulated_drones(viewer: Any) -> None:
    viewer.wait(f"window.robowire && robowire.store.devices.length >= {DRONES}")
    devices = viewer.js("robowire.devices()")
    assert sorted(d["name"] for d in devices) == sorted(str(i) for i in range(1, DRONES + 1))
    assert {d["kind"] for d in devices} == {"drone"}
    assert {d["source"] for d in devices} == {viewer.source}
    # the list: a group header for the source with its count, rows for the drones in view
    header = viewer.page.locator("#list .row.group").first
    assert header.inner_text() == f"{viewer.source} ({DRONES})"
    # search narrows the (virtualised) list to the matching drones
    viewer.page.fill("#search", "17")
    viewer.wait("[...document.querySelectorAll('#list .row:not([hidden]) .name')].length === 1")
    names = viewer.page.locator("#list .row:not([hidden]) .name").all_inner_texts()
    assert names == ["17"]
    viewer.page.fill("#search", "")
    assert viewer.page.locator("#conn").inner_text() == "live"


def test_positions_change_over_time(viewer: Any) -> None:
    viewer.wait(
        f"robowire.devices().filter(d => d.position.every(Number.isFinite)).length === {DRONES}"
    )
    before = {d["name"]: d["position"] for d in viewer.js("robowire.devices()")}
    frame = viewer.js("robowire.store.frame")
    viewer.wait(f"robowire.store.frame >= {frame + 10}")
    time.sleep(1.0)
    after = {d["name"]: d["position"] for d in viewer.js("robowire.devices()")}
    moved = [n for n in before if before[n] != after[n]]
    assert len(moved) > DRONES // 2, (before, after)
    assert viewer.js("robowire.stats.rendered") > 10


def test_clicking_a_drone_in_the_3d_view_shows_its_telemetry_with_units(viewer: Any) -> None:
    # frame the drones and keep the camera still (as a user who has moved it)
    viewer.js("robowire.scene.fitAll(); robowire.scene.camera.userMoved = true")
    for _ in range(3):  # the drones fly: click where drone 5 is drawn now, again if it moved
        xy = viewer.js(
            """() => {
            const d = robowire.find('5'), p = robowire.store.position(d);
            const s = robowire.scene.camera.project(p[0], p[1], p[2], [0, 0]);
            const r = document.getElementById('scene').getBoundingClientRect();
            return [r.left + s[0], r.top + s[1]];
          }"""
        )
        viewer.page.mouse.click(xy[0], xy[1])
        if viewer.js("robowire.selected !== null"):
            break
    assert viewer.js("robowire.selected !== null")
    name = viewer.js("robowire.selected.name")
    assert name.isdigit()  # one of the drones (a neighbour may be drawn on top of drone 5)
    # select drone 5 from the list to know exactly which one the panel shows
    viewer.page.fill("#search", "5")
    viewer.page.locator("#list .row:not([hidden]) .name", has_text=re.compile(r"^5$")).click()
    viewer.wait("robowire.selected && robowire.selected.name === '5'")
    viewer.wait("document.querySelector('#panel-body tr[data-field=heading]') !== null")
    assert viewer.page.locator("#panel-title").inner_text() == "5 (drone)"
    rows = viewer.page.locator("#panel-body tr[data-field]")
    fields = {
        r.get_attribute("data-field"): (
            r.locator("td.v").inner_text(),
            r.locator("td.u").inner_text(),
        )
        for r in rows.all()
    }
    # VRSP drones report an LED colour and a heading; the pose comes with metres and degrees
    for led in ("led_red", "led_green", "led_blue"):
        assert 0 <= float(fields[led][0]) <= 255
    assert fields["heading"][1] == "°"
    assert fields["east"][1] == "m" and fields["north"][1] == "m" and fields["up"][1] == "m"
    assert fields["latitude"][1] == "°" and fields["longitude"][1] == "°"
    assert -90 <= float(fields["latitude"][0]) <= 90
    assert fields["id"][0] == "5"
    # the sparklines fill as telemetry arrives
    viewer.wait(
        "[...document.querySelectorAll('#panel-body canvas')].some(c => "
        "c.getContext('2d').getImageData(0, 0, c.width, c.height).data.some(v => v > 0))"
    )
    viewer.page.fill("#search", "")


def test_the_map_shows_the_drones_with_latitude_and_longitude(viewer: Any) -> None:
    viewer.wait(f"document.getElementById('geo-info').textContent === '{DRONES} with lat/lon'")
    # a click on drone 12's dot on the map selects it
    xy = viewer.js(
        """() => {
        const d = robowire.find('12'), g = robowire.store.geodetic(d);
        const geo = document.getElementById('geo'), r = geo.getBoundingClientRect();
        const view = robowire.geo, s = view.toXY(g[0], g[1], [0, 0]);
        return [r.left + s[0], r.top + s[1]];
      }"""
    )
    viewer.page.mouse.click(xy[0], xy[1])
    viewer.wait("robowire.selected && /^\\d+$/.test(robowire.selected.name)")


def test_the_status_panel_shows_the_source_connected_with_a_rate(viewer: Any) -> None:
    row = viewer.page.locator(f'#status-body tr[data-service="{viewer.source}"]')
    viewer.wait(
        "(() => { const r = document.querySelector(`#status-body tr[data-service='"
        + viewer.source
        + "']`); return r && r.cells[2].textContent === 'connected' "
        "&& parseFloat(r.cells[5].textContent) > 0; })()"
    )
    cells = row.locator("td").all_inner_texts()
    assert cells[1] == "source"
    assert int(cells[4]) == DRONES


def test_screenshot_and_no_console_errors(viewer: Any) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / "viewer.png"
    viewer.page.screenshot(path=str(path))
    print(f"viewer screenshot: {path}")
    assert path.stat().st_size > 10_000
    assert viewer.errors == []
