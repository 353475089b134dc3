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
