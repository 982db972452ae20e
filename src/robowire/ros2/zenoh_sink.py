"""`robowire serve ros2+zenoh://HOST:PORT[?domain=N&prefix=NS&frame=F&qos=Q&devices=N&rate=HZ]`:
the world on ROS 2 over rmw_zenoh (docs/ros2.md, "Zenoh").

The same topics, types, QoS and options as `serve ros2://` (`Ros2Sink`, `topics.Topics`),
written through a `ZenohNode` at the router at HOST:PORT (rmw_zenohd, 7447 by default)
instead of a DDS node: keys, attachments and liveliness tokens as rmw_zenoh's. A router that
is not up yet is waited for (retried with backoff, said once), as the Zenoh sink does. When a
subscription appears in the graph (its liveliness token), the next pull sends its topic again
for every device, as `serve ros2://` does when a reader matches: a ROS 2 node started later
sees the devices that no longer change.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import TYPE_CHECKING

from robowire.endpoints import Endpoint
from robowire.errors import ConfigError
from robowire.ros2 import dds
from robowire.ros2.sink import Ros2Sink
from robowire.ros2.sink import open_sink as open_dds_sink
from robowire.ros2.topics import Topics
from robowire.ros2.zenoh_node import ZenohNode
from robowire.world import World
from robowire.zenoh.net import DEFAULT_PORT, Link, open_when_up

if TYPE_CHECKING:
    import zenoh


class ZenohRos2Sink(Ros2Sink):
    """Publishes the world's ROS 2 topics on rmw_zenoh (see the module docstring)."""

    def __init__(
        self, link: Link, domain: int, topics: Topics, pose_qos: dds.Profile, rate: float
    ) -> None:
        super().__init__(domain, "", topics, pose_qos, rate)
        self.link = link
        self.name = f"ros2+zenoh://{link.host}:{link.port}"
        self.announce = "publishing to"
        self.url = f"ROS 2 domain {domain} on rmw_zenoh at {link.locator} as node /robowire"
        self.session: zenoh.Session | None = None

    async def serve(self, world: World) -> None:
        session = self.session = await open_when_up(self.link, self.name)
        self.node = ZenohNode(session, self.domain, joined=self._joined.add)
        self.listening((self.link.host, self.link.port))
        await asyncio.Future()

    def finish(self, world: World) -> None:
        super().finish(world)  # (closes the node: its tokens and publishers)
        session, self.session = self.session, None
        if session is not None:
            with contextlib.suppress(Exception):  # a session the router already dropped
                session.close()  # type: ignore[no-untyped-call]


def open_sink(endpoint: Endpoint) -> ZenohRos2Sink:
    """The sink of a `ros2+zenoh://HOST:PORT?…` URL: `serve ros2://`'s options, and where the
    router is."""
    port = endpoint.port_or(DEFAULT_PORT)
    if port == 0:
        raise ConfigError(f"{endpoint.raw}: ros2+zenoh needs the router's port (rmw_zenohd: 7447)")
    settings = open_dds_sink(dataclasses.replace(endpoint, host_given=False, port=None))
    link = Link(endpoint.host, port, "connect")
    pose_qos = settings.profiles["pose"]
    return ZenohRos2Sink(link, settings.domain, settings.topics, pose_qos, settings.max_rate or 0)
