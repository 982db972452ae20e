"""ROS 2 without ROS: the world on ROS 2 topics over DDS, and ROS 2 robots into the world
(docs/ros2.md).

    names.py    device names <-> legal ROS names and frames; ROS <-> DDS topic and type names
    types.py    every message type used, as data; RIHS01 type hashes; cyclonedds IDL classes
    cdr.py      CDR (XCDR1) encoders, columnar from numpy for /tf and the markers; pure
    dds.py      the DDS node (participant, QoS, raw writers/readers, ros_discovery_info)
    topics.py   world updates -> (topic, type, QoS, bytes): what the world is on ROS 2; pure
    sink.py     `serve ros2://`: topics' messages written through a DDS node
    decode.py   CDR bytes of the types `listen ros2://` reads -> columns; pure
    tf.py       the TF tree: frames composed to `world` (or `?frame=`); pure
    source.py   `listen ros2://`: discovery, a reader per readable topic, the adapter

Not a wire protocol of the registry: the `ros2` scheme is in the sink registry
(`robowire.sinks.SINKS`) and in `robowire.addresses.SOURCES`. The sink and the source import
`cyclonedds` only when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robowire.endpoints import Endpoint

if TYPE_CHECKING:
    from robowire.ros2.sink import Ros2Sink
    from robowire.ros2.source import Ros2Source


def open_sink(endpoint: Endpoint) -> Ros2Sink:
    from robowire.ros2.sink import open_sink as opened

    return opened(endpoint)


def open_source(endpoint: Endpoint) -> Ros2Source:
    from robowire.ros2.source import open_source as opened

    return opened(endpoint)
