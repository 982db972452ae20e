"""ROS 2 without ROS: the world on ROS 2 topics over DDS, and ROS 2 robots into the world
(docs/ros2.md).

    names.py    device names <-> legal ROS names and frames; ROS <-> DDS topic and type names
    types.py    every message type used, as data; RIHS01 type hashes; cyclonedds IDL classes
    cdr.py      CDR (XCDR1) encoders, columnar from numpy for /tf and the markers; pure
    dds.py      the DDS node (participant, QoS, raw writers/readers, ros_discovery_info)
    sink.py     `serve ros2://`

Not a wire protocol of the registry: the `ros2` scheme is in the sink registry
(`robowire.sinks.SINKS`). The sink imports `cyclonedds` only when used.
"""

from __future__ import annotations
