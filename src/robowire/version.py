"""robowire's version, `robowire.__version__` (a leaf: the viewer's server header names it)."""

__version__ = "0.1.0"
