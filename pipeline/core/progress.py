"""Progress bars whose rate and ETA leave out the warm-up.

A job's first unit of work finishes only after Ray has started, the nets have loaded and numba
has compiled; a plain tqdm bar divides by that time and shows an ETA of hours for a step of
minutes. :class:`Progress` shows no rate and no ETA until the first update (the end of the
warm-up), then counts only the work done and the time spent after it::

    with Progress(total=32, desc="extract chess", unit=" games") as bar:
        bar.update(4)   # "extract chess:  12%|█▎        | 4/32 [01:05, warming up]"
        bar.update(4)   # "extract chess:  25%|██▌       | 8/32 [01:11<00:18, 1.33 games/s]"
"""

from __future__ import annotations

from typing import Any

from tqdm import tqdm

WARMING_UP = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, warming up{postfix}]"
WARMING_UP_NO_TOTAL = "{desc}: {n_fmt}{unit} [{elapsed}, warming up{postfix}]"


class Progress(tqdm):
    """A tqdm bar with no rate or ETA during the warm-up (until the first update)."""

    _warm: tuple[float, float] | None = None  # (n, time) at the end of the warm-up

    def update(self, n: float | None = 1) -> bool | None:
        if not self.disable and self._warm is None and n:
            self._warm = (self.n + n, self._time())
        return super().update(n)

    @property
    def format_dict(self) -> dict[str, Any]:
        found = super().format_dict
        if self.disable and not hasattr(self, "unit"):  # a bar that was never shown
            return found
        warming = self._warm is None or self.n <= self._warm[0]
        if warming and not self.disable:  # disable is set by close(): the final line
            found["bar_format"] = WARMING_UP if self.total else WARMING_UP_NO_TOTAL
            found["rate"] = None
        elif not warming:
            warm_n, warm_t = self._warm
            found["rate"] = (self.n - warm_n) / max(self._time() - warm_t, 1e-9)
        return found
