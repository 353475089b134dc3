"""Starting Ray without notices a user cannot act on.

Ray ≥ 2.5x turns on token authentication for every new local cluster and logs a WARNING about
it on each start ("Token authentication is enabled for this Ray cluster…"), which the quiet
path of ``kibitz`` would print before every stage. Authentication stays as Ray sets it; only
the notice is hidden, unless the driver logs at DEBUG (``kibitz -v``) or the user chose a mode
with ``RAY_AUTH_MODE`` (then Ray prints nothing anyway).
"""

from __future__ import annotations

import logging

TOKEN_NOTICE_LOGGER = "ray._private.authentication.authentication_token_setup"


def quiet_start_notices() -> None:
    """Call before ``ray.init``: hide Ray's per-start token notice unless logging at DEBUG."""
    if not logging.getLogger().isEnabledFor(logging.DEBUG):
        logging.getLogger(TOKEN_NOTICE_LOGGER).setLevel(logging.ERROR)


def start_ray(address: str | None, num_cpus: int | None, *, log_to_driver: bool = False) -> None:
    """``ray.init`` as every Kibitz driver starts it: ``address="local"`` when none is given
    (a fresh embedded cluster, never silently joining one that `ray start` left running on
    this machine), ``num_cpus`` only for that embedded one, no dashboard, quiet notices."""
    import ray

    quiet_start_notices()
    ray.init(
        address=address or "local",
        num_cpus=num_cpus if address is None else None,
        include_dashboard=False,
        log_to_driver=log_to_driver,
        configure_logging=False,
    )
