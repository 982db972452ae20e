"""The built-in web viewer: `robowire serve http://127.0.0.1:8080 --from URL…` (and `demo`).

    viewer/server.py   `ViewerSink` (the Sink template) and `open_sink`: static files and the
                       WebSocket on one port (`websockets`), the shared status/log/links pushes
    viewer/client.py   `ViewerClient`: one browser, its own latest-state subscriber, `ready`
                       flow control, catalogs, selection telemetry, commands
    viewer/frames.py   the binary state frame: vectorised encoder and a checking decoder
    viewer/static/     the browser app (index.html, ES modules, WebGL2), shipped in the wheel

The wire contract between these and the browser is in docs/viewer.md.
"""
