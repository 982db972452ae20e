"""Units of telemetry values, spelled as UCUM-like short strings.

Telemetry in the world model is (value, unit) where unit is one of these strings, so that every
sink (tables, JSON, Foxglove) shows the same spelling. Keep conversions here, not in adapters.
"""

from __future__ import annotations

import math

METRE = "m"
METRE_PER_SECOND = "m/s"
METRE_PER_SECOND2 = "m/s2"
RADIAN = "rad"
DEGREE = "deg"
RADIAN_PER_SECOND = "rad/s"
DEGREE_PER_SECOND = "deg/s"
G = "g"
SECOND = "s"
HERTZ = "Hz"
VOLT = "V"
PERCENT = "%"
COUNT = "1"  # a dimensionless count or raw reading
BOOLEAN = "bool"
RATIO = "ratio"  # -1..1 or 0..1 fraction (motor output, analog ratio)
CELSIUS = "Cel"

STANDARD_GRAVITY = 9.80665  # m/s2 per g


def deg_to_rad(value: float) -> float:
    return value * math.pi / 180.0


def rad_to_deg(value: float) -> float:
    return value * 180.0 / math.pi
