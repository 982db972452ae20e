"""The live table: every source keeps rows however many devices another one has."""

from rich.console import Console

from robowire.service import Source
from robowire.sinks.table import device_table
from robowire.world import World


class Named(Source):
    async def run(self, world: World) -> None:  # pragma: no cover - never run here
        pass


def render(world: World, *services: Source, rows: int = 10) -> str:
    console = Console(width=160, record=True)
    console.print(device_table(world, services, max_rows=rows))
    return console.export_text()


def test_a_large_network_does_not_hide_a_small_source():
    world = World()
    for i in range(1, 101):
        world.update_device("net", str(i), receive_time=1.0, position=(i, 0, 0))
    for name in ("Tracker0/0", "Tracker0/1"):
        world.update_device("vrpn", name, receive_time=2.0, position=(0, 0, 1))
    text = render(world)
    assert "Tracker0/0" in text and "Tracker0/1" in text
    assert "… and 92 more devices" in text
    # nodes in their natural order (2 before 10), the first ones kept
    rows = [line.split()[1] for line in text.splitlines() if line.strip().startswith("net")]
    assert rows == [str(i) for i in range(1, 9)]


def test_counters_line_per_service():
    world = World()
    world.update_device("net", "1", receive_time=1.0, position=(0, 0, 0))
    source = Named("net")
    source.stats.messages_in = 7
    source.stats.drop("bad")
    assert "net: 7 messages in, 1 dropped" in render(world, source)


def test_counters_line_says_the_rate_when_given():
    source = Named("net")
    source.stats.messages_in = 3100
    text = device_table(World(), [source], rate=lambda s: 2000.0 if s is source else 0.0).plain
    assert "net: 3100 messages in, 0 dropped, 2,000/s" in text
