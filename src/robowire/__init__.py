"""robowire: one toolkit and live gateway for robot and tracker telemetry protocols."""

__version__ = "0.1.0"
