"""Sinks that show the world: JSON lines and the live terminal table. Protocol servers are
sinks too; they live in their protocol packages."""

from robowire.sinks.jsonlines import JsonLinesSink
from robowire.sinks.table import TableSink

__all__ = ["JsonLinesSink", "TableSink"]
