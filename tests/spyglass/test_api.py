"""The package re-exports its public API (the CLI glue builds on these names)."""

import robowire.protocols.spyglass as spyglass


def test_public_names() -> None:
    for name in spyglass.__all__:
        assert hasattr(spyglass, name), name
    assert spyglass.DEFAULT_PORT == 7870
    assert {cls.TYPE for cls in spyglass.PACKET_TYPES} >= {
        "Neighborhood-Packet",
        "Data-Packet",
        "Trajectory-Packet-3",
        "Coordinates-List-Packet-2",
    }
