from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robowire.protocols.vrsp.codec import VrspData, VrspDef, decode_packet, empty_swarm
from robowire.protocols.vrsp.definitions import (
    Cue,
    DefType,
    DeviceDefinition,
    MountType,
    Payload,
    Swarm,
)

# golden files live in the repository (tests/data/README.md says where they came from)
DATA = Path(__file__).parents[1] / "data" / "captures" / "vrsp"


@pytest.fixture(scope="session")
def data() -> Path:
    assert DATA.is_dir(), f"test data missing: {DATA}"  # fails, never skips
    return DATA


PLAIN = DeviceDefinition(definition_id=0, model="X1", lumens=900.0)
LOADED = DeviceDefinition(
    definition_id=1,
    model="X7",
    payloads=(
        Payload(def_type=DefType.PYRO, cues=(Cue(id=1, vdl="Silver Waterfall 10s"),)),
        Payload(
            def_type=DefType.LIGHT,
            mount=MountType.GIMBAL_2DOF,
            color=(255, 255, 255),
            lumens=1200.0,
            light_type="Spotlight",
            spot_angle=15.0,
        ),
        Payload(def_type=DefType.LASER, mount=MountType.GIMBAL_3DOF),
    ),
)


def swarm_of(ids: list[int], k: int = 0) -> Swarm:
    swarm = empty_swarm(len(ids), k)
    swarm.ids[:] = ids
    return swarm


def blocks_of(plain: list[int], loaded: list[int]) -> list[tuple[DeviceDefinition, np.ndarray]]:
    return [(PLAIN, np.array(plain, np.uint16)), (LOADED, np.array(loaded, np.uint16))]


def as_def(datagram: bytes) -> VrspDef:
    packet = decode_packet(datagram)
    assert isinstance(packet, VrspDef)
    return packet


def as_data(datagram: bytes) -> VrspData:
    packet = decode_packet(datagram)
    assert isinstance(packet, VrspData)
    return packet
