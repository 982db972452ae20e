"""Sinks that show the world: JSON lines, the live terminal table, and Foxglove live
(`sinks.foxglove`, imported only when a `foxglove://` URL is served). Protocol servers are
sinks too; they live in their protocol packages."""

from robowire.sinks.jsonlines import JsonLinesSink
from robowire.sinks.table import TableSink

__all__ = ["JsonLinesSink", "TableSink"]
