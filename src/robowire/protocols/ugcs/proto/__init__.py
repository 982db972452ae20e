"""The UgCS VSM schema: robowire's own `.proto` files and the modules `make proto` generates
from them (`ucs_vsm_pb2`, `ucs_vsm_defs_pb2` with their `.pyi` stubs; do not edit those)."""
