"""UgCS VSM: the protocol between a UgCS Control Server (UCS) and a Vehicle Specific Module (VSM).

proto/          robowire's own .proto schema and the generated modules (`make proto`)
codec           LEB128 framing both ways, the incremental frame reader, Field_value <-> Python
device          a device's registration both ways: specs -> ids (one counter) -> Register_device
events          the typed events of both sessions
"""
