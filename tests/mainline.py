"""The mainline VRPN tools (`vrpn_server`, `vrpn_print_devices`, VRPN 07.38) for interop tests.

They are found next to the checkout, in `../shared/peers/vrpn/` (its README says how they were
built); ROBOWIRE_VRPN_SERVER / ROBOWIRE_VRPN_PRINT_DEVICES point at other builds. A checkout
without them skips the tests that need them (`needs_server`, `needs_client`), saying where it
looked.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

PEERS = Path(__file__).resolve().parents[1].parent / "shared" / "peers" / "vrpn"
SERVER = Path(os.environ.get("ROBOWIRE_VRPN_SERVER") or PEERS / "vrpn_server")
PRINT_DEVICES = Path(os.environ.get("ROBOWIRE_VRPN_PRINT_DEVICES") or PEERS / "vrpn_print_devices")

needs_server = pytest.mark.skipif(
    not SERVER.is_file(),
    reason=f"no mainline vrpn_server at {SERVER} (../shared/peers/vrpn or ROBOWIRE_VRPN_SERVER)",
)
needs_client = pytest.mark.skipif(
    not PRINT_DEVICES.is_file(),
    reason=f"no mainline vrpn_print_devices at {PRINT_DEVICES} "
    "(../shared/peers/vrpn or ROBOWIRE_VRPN_PRINT_DEVICES)",
)


def start_print_devices(*names: str) -> subprocess.Popen[str]:
    """The mainline client printing every report of `names`, line-buffered, until stopped."""
    return subprocess.Popen(
        ["stdbuf", "-oL", str(PRINT_DEVICES), *names],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def stop_print_devices(client: subprocess.Popen[str]) -> str:
    """SIGINT the client (its own way out) and return everything it printed."""
    client.send_signal(signal.SIGINT)
    try:
        return client.communicate(timeout=10)[0]
    except subprocess.TimeoutExpired:
        client.kill()
        return client.communicate()[0]
