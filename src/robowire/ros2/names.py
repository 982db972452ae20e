"""Names on ROS 2: device names <-> legal ROS names and frames, ROS names <-> DDS names.

A ROS 2 name (design.ros2.org, "Topic and Service names") is tokens separated by `/`; a token
holds only `A-Z a-z 0-9 _`, does not start with a digit and has no `__`. TF frame ids follow
the same rule here (tf2 takes any string, but RViz, launch files and `ros2 run tf2_ros` users
type them as names). One table maps a device's name onto such a token path, the same for
topics and frames:

| device name           | ROS name            | rule                                             |
|-----------------------|---------------------|--------------------------------------------------|
| `drone_12`            | `drone_12`          | legal as it is: kept                             |
| `Tracker0/1`          | `Tracker0/_1`       | `/` separates tokens; a token may not start      |
|                       |                     | with a digit: `_` before it                      |
| `12`                  | `_12`               | (an id of digits alone: VRSP drones, SpyGlass    |
| `12` of kind `drone`  | `drone_12`          | nodes) gets its kind before it where it has one  |
| `rigid body.left`     | `rigid_body_left`   | any other character becomes `_` (vrpn_mocap's    |
|                       |                     | rule), runs of `_` one `_`                       |
| `` (empty), `/`       | `unnamed`           | a token must hold something                      |

Reversible where it can be: `device_name(ros_name(n)) == n` for every name that has only
letters, digits, `_` and single `/` (a `_` put before a digit is taken away again); a name
that needed its characters replaced comes back with `_` (`changed` tells a caller which).

DDS (rmw_cyclonedds_cpp / rmw_fastrtps_cpp): topic `rt/` + the fully qualified name without
its leading `/` (`/tf` -> `rt/tf`); type `pkg/msg/Name` -> `pkg::msg::dds_::Name_`.
"""

from __future__ import annotations

import re

TOPIC_PREFIX = "rt/"
MAX_DDS_TOPIC = 256  # DDS topic names: ROS 2 keeps them within this many characters
_NOT_NAME = re.compile(r"[^A-Za-z0-9_]+")
_RUNS = re.compile(r"__+")
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DDS_TYPE = re.compile(r"([A-Za-z0-9_]+)::(msg|srv|action)::dds_::([A-Za-z0-9_]+)_")
EMPTY = "unnamed"


def token(text: str) -> str:
    """One legal ROS name token for `text` (see the module's table)."""
    cleaned = _RUNS.sub("_", _NOT_NAME.sub("_", text))
    if not cleaned or cleaned == "_":
        return EMPTY
    if cleaned[0].isdigit():
        cleaned = "_" + cleaned
    return cleaned


def ros_name(device: str, kind: str = "") -> str:
    """The relative ROS name (and TF frame id) of a device name: tokens joined by `/`; a name
    that starts with a digit gets its `kind` before it (`drone_12`), if it has one."""
    if kind and device[:1].isdigit():
        device = f"{kind}_{device}"
    parts = [token(part) for part in device.split("/") if part]
    return "/".join(parts) if parts else EMPTY


def changed(device: str) -> bool:
    """Whether `device` is not a legal ROS name as it is (its name on ROS had to be changed)."""
    return device_name(ros_name(device)) != device


def device_name(name: str) -> str:
    """The device name a ROS name or frame id stands for: the inverse of `ros_name` on the
    names it keeps (a leading `/` dropped, the `_` put before a digit taken away)."""
    return "/".join(
        part[1:] if len(part) > 1 and part[0] == "_" and part[1].isdigit() else part
        for part in name.strip("/").split("/")
        if part
    )


def is_legal(name: str) -> bool:
    """Whether `name` (relative or absolute) is a legal ROS topic name or frame id here."""
    parts = name[1:].split("/") if name.startswith("/") else name.split("/")
    return all(_TOKEN.fullmatch(p) and "__" not in p for p in parts)


def namespace(prefix: str) -> str:
    """`?prefix=` as an absolute namespace: `robowire`, `/robowire/` -> `/robowire`; `` -> ``."""
    parts = [token(p) for p in prefix.split("/") if p]
    return "/" + "/".join(parts) if parts else ""


def join(*names: str) -> str:
    """An absolute ROS name from namespaces and relative names (empty parts skipped)."""
    return "/" + "/".join(p.strip("/") for p in names if p.strip("/"))


def dds_topic(ros_topic: str) -> str:
    """The DDS topic of an absolute ROS topic: `/tf` -> `rt/tf`."""
    return TOPIC_PREFIX + ros_topic.lstrip("/")


def ros_topic(dds_topic_name: str) -> str | None:
    """The ROS topic of a DDS topic (`rt/tf` -> `/tf`), None for a DDS topic that is not one."""
    if not dds_topic_name.startswith(TOPIC_PREFIX):
        return None
    return "/" + dds_topic_name[len(TOPIC_PREFIX) :]


def dds_type(ros_type: str) -> str:
    """`geometry_msgs/msg/PoseStamped` (or `geometry_msgs/PoseStamped`) ->
    `geometry_msgs::msg::dds_::PoseStamped_`."""
    package, kind, name = split_type(ros_type)
    return f"{package}::{kind}::dds_::{name}_"


def ros_type(dds_type_name: str) -> str | None:
    """`geometry_msgs::msg::dds_::PoseStamped_` -> `geometry_msgs/msg/PoseStamped`; None for a
    type name that is not a ROS 2 one."""
    found = _DDS_TYPE.fullmatch(dds_type_name)
    if found is None:
        return None
    return f"{found[1]}/{found[2]}/{found[3]}"


def split_type(ros_type_name: str) -> tuple[str, str, str]:
    """(package, `msg`, name) of `pkg/msg/Name` or `pkg/Name`."""
    parts = ros_type_name.split("/")
    if len(parts) == 2:
        return parts[0], "msg", parts[1]
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    raise ValueError(f"not a ROS type name: {ros_type_name!r}")
