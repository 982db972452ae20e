"""The viewer's `links` message resolved a part at a time (`LinkPass`): the same pairs as at
once, each pair once, in order, whatever the parts."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from robowire.viewer.links import LinkPass, link_pairs
from robowire.world import World

NODES = 40


def network(neighbours: list[list[int]]) -> World:
    world = World()
    for node, peers in enumerate(neighbours):
        links = [str(p) for p in peers]  # a peer may be no device (ids past the last node)
        world.update_device("s", str(node), receive_time=1.0, position=(0, 0, 0), links=links)
    return world


def expected(neighbours: list[list[int]]) -> list[tuple[int, int]]:
    """Each pair of devices linked either way, lower first, once, in order (slot = node)."""
    count = len(neighbours)
    pairs = {(min(a, b), max(a, b)) for a, peers in enumerate(neighbours) for b in peers}
    return sorted((a, b) for a, b in pairs if a != b and b < count)


networks = st.lists(st.lists(st.integers(0, NODES + 5), max_size=12), min_size=1, max_size=NODES)


@given(networks, st.integers(1, 30))
def test_links_resolved_in_parts_are_the_pairs_of_the_whole_network(
    neighbours: list[list[int]], entries: int
) -> None:
    table = network(neighbours).tables["s"]
    links = LinkPass(table)
    steps = 1
    while not links.step(table, entries):
        steps += 1
    assert [tuple(p) for p in links.pairs().tolist()] == expected(neighbours)
    assert np.array_equal(links.pairs(), link_pairs(table))
    assert steps <= len(neighbours)  # a part is at least one device's links


def test_a_pass_begins_again_when_the_source_gains_a_device_meanwhile() -> None:
    neighbours = [[1, 2], [0], [0, 3]]  # 3 is no device yet
    world = network(neighbours)
    table = world.tables["s"]
    links = LinkPass(table)
    assert not links.step(table, 1)
    world.update_device("s", "3", receive_time=2.0, position=(0, 0, 0), links=["2"])
    while not links.step(table, 1):
        pass
    assert [tuple(p) for p in links.pairs().tolist()] == [(0, 1), (0, 2), (2, 3)]
