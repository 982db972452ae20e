"""One package per protocol, each of the same shape.

    protocols/<name>/codec.py      bytes <-> typed messages (pure functions)
    protocols/<name>/session.py    sans-I/O state machine per role
    protocols/<name>/adapter.py    messages <-> world-model updates
    protocols/<name>/sim.py        a simulated device speaking the protocol
    protocols/<name>/endpoints.py  CLI glue: open_source / open_sink / open_sim / decode_capture

The shared pieces every package uses live in `protocols.base`.
"""
