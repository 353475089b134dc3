"""``kibitz serve``'s driver: check where it may listen, start the service, run until stopped.

The service itself is ``actors.serve_app`` (Ray Serve); this module only decides what to
start and keeps the process alive until SIGINT or SIGTERM, then shuts Serve and Ray down.
A kill -9 skips that: the state file keeps every game committed before it (docs/guide/serve.md).
"""

from __future__ import annotations

import signal
import threading

from actors.serve_app import start, stop
from pipeline.serve.limits import check_listen
from pipeline.serve.service import ServeSettings


def run_service(
    settings: ServeSettings,
    *,
    host: str,
    port: int,
    address: str | None = None,
    num_cpus: int | None = None,
    verbose: bool = False,
) -> None:
    """Serve until interrupted; prints one line once the service answers."""
    check_listen(host, settings.token)
    start(settings, host=host, port=port, address=address, num_cpus=num_cpus, log_to_driver=verbose)
    games = ", ".join(settings.models)
    token = ", token required" if settings.token else ""
    print(
        f"kibitz serve: {games} on http://{host}:{port} (state {settings.state}{token})", flush=True
    )
    stopped = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopped.set())
    stopped.wait()
    stop()
