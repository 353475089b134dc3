"""Game-info properties of Fox (and other) SGFs: result, komi, handicap, rules, clock, date.

Each function reads one SGF property value and returns typed fields for the games table. They
are cached because a dump repeats the same few values millions of times (``RE[W+R]``,
``KM[650]``, ``TM[60]``), which keeps header decoding off the profile.

Fox specifics handled here (see ``docs/guide/ingest.md``):

- ``KM`` is komi × 100 in both raw and curated Fox files (``KM[650]`` = 6.5, ``KM[375]`` = 3.75,
  ``KM[0]`` = 0). A value with a decimal point (``KM[6.5]``, other servers) is taken as is; an
  integer is divided by 100 when the game is from Fox or when it is at least 100 (no real komi
  is), and otherwise taken as is (``KM[7]`` from another server).
- ``RE``: ``B+R``/``W+Resign`` → resign, ``B+T``/``W+Time`` → time, ``B+F`` (forfeit) → other,
  ``W+12.5`` → score 12.5, ``draw``/``Draw``/``0``/``Jigo`` → draw, ``Void``/``?``/``""`` →
  other with no winner. Fox's undocumented ``B+0.02``/``W+0.0`` are kept as scores with their
  margin so that a ``min_score_margin`` rule of 0.5 rejects them.
- Clock: Fox writes ``TM`` main time (s), ``TC`` byo-yomi periods, ``TT`` seconds per period;
  other servers write ``OT[3x30 byo-yomi]``. Classes (per player main time): ``TM`` ≤ 60 s →
  ``blitz`` (Fox's fast games: at most a minute, then byo-yomi), ≤ 1200 s → ``rapid``, longer →
  ``classical``.

Run ``python -m pytest tests/test_ingest_go.py -k results`` for the checks.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from dataclasses import dataclass

# Komi values at or above this are Fox's ×100 encoding whatever the source.
KOMI_X100_THRESHOLD = 100
# Main-time limits (seconds per player) of the Go time-control classes; see module docstring.
BLITZ_MAX_MAIN_S = 60
RAPID_MAX_MAIN_S = 1200

_SCORE_RE = re.compile(r"^([BW])\+(\d+(?:\.\d*)?|\.\d+)$")
_WIN_RE = re.compile(r"^([BW])\+(R|Resign|T|Time|F|Forfeit)?$", re.IGNORECASE)
_DATE_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_OVERTIME_RE = re.compile(r"(\d+)\s*[x×*]\s*(\d+)", re.IGNORECASE)
_INT_RE = re.compile(r"^[+-]?\d+$")

_DRAW_LABELS = frozenset({"0", "draw", "jigo", "d"})
_WIN_ENDINGS = {"r": "resign", "resign": "resign", "t": "time", "time": "time"}
_RULES = {
    "japanese": "japanese",
    "jp": "japanese",
    "chinese": "chinese",
    "cn": "chinese",
    "korean": "korean",
    "aga": "aga",
    "nz": "new-zealand",
    "new zealand": "new-zealand",
    "tromp-taylor": "tromp-taylor",
    "tt": "tromp-taylor",
}


class GameInfoError(ValueError):
    """A game-info property (komi, handicap, clock) that cannot be read."""


@dataclass(frozen=True)
class GameResult:
    """How a game ended, from an SGF ``RE`` value."""

    winner: str | None  # "black" | "white" | "draw" | None (unknown)
    ended_by: str  # "resign" | "score" | "time" | "draw" | "other"
    score_margin: float | None  # counted margin for ended_by == "score"


@dataclass(frozen=True)
class GoClock:
    """A Go time control: main time, byo-yomi periods of a number of seconds each."""

    raw: str | None
    base_s: int | None
    periods: int | None
    period_s: int | None
    tc_class: str | None


_COLOURS = {"B": "black", "W": "white"}


@functools.lru_cache(maxsize=4096)
def parse_result(raw: str) -> GameResult:
    """Read an ``RE`` value.

    >>> parse_result("W+12.5")
    GameResult(winner='white', ended_by='score', score_margin=12.5)
    >>> parse_result("B+0.02")
    GameResult(winner='black', ended_by='score', score_margin=0.02)
    >>> parse_result("draw")
    GameResult(winner='draw', ended_by='draw', score_margin=None)
    """
    text = raw.strip()
    if text.lower() in _DRAW_LABELS:
        return GameResult("draw", "draw", None)
    score = _SCORE_RE.match(text)
    if score:
        return GameResult(_COLOURS[score[1]], "score", float(score[2]))
    win = _WIN_RE.match(text)
    if win:
        ending = _WIN_ENDINGS.get((win[2] or "").lower(), "other")
        return GameResult(_COLOURS[win[1]], ending, None)
    return GameResult(None, "other", None)


@functools.lru_cache(maxsize=1024)
def parse_komi(raw: str, *, fox: bool) -> float:
    """Real komi from a ``KM`` value, undoing Fox's ×100 (see module docstring).

    >>> parse_komi("650", fox=True), parse_komi("375", fox=True), parse_komi("6.5", fox=False)
    (6.5, 3.75, 6.5)
    """
    text = raw.strip()
    if not text:
        return 0.0
    if _INT_RE.match(text):
        value = int(text)
        return value / 100 if fox or abs(value) >= KOMI_X100_THRESHOLD else float(value)
    try:
        return float(text)
    except ValueError:
        raise GameInfoError(f"komi is not a number: KM[{raw}]") from None


def parse_handicap(ha: str | None, black_setup_stones: int) -> int:
    """Handicap stones: ``HA`` when it is at least 2, else the number of ``AB`` stones.

    Fox writes ``HA[1]`` for even games without komi (Black first, no stones), so 1 counts as 0;
    raw Fox files sometimes give ``HA[n]`` with White first but no ``AB``, which keeps ``n``.
    """
    stones = black_setup_stones if black_setup_stones >= 2 else 0
    if ha is None or not ha.strip():
        return stones
    try:
        value = int(ha.strip())
    except ValueError:
        raise GameInfoError(f"handicap is not an integer: HA[{ha}]") from None
    return max(value if value >= 2 else 0, stones)


@functools.lru_cache(maxsize=64)
def parse_rules(raw: str) -> str:
    """Rules name in lower case (``RU[Japanese]`` → ``"japanese"``)."""
    text = raw.strip().lower()
    return _RULES.get(text, text)


def tc_class(base_s: int | None) -> str | None:
    """Time-control class from the main time per player (thresholds in the module docstring)."""
    if base_s is None:
        return None
    if base_s <= BLITZ_MAX_MAIN_S:
        return "blitz"
    if base_s <= RAPID_MAX_MAIN_S:
        return "rapid"
    return "classical"


def _int_or_none(raw: str | None, name: str) -> int | None:
    if raw is None or not raw.strip():
        return None
    try:
        return int(float(raw.strip()))
    except ValueError:
        raise GameInfoError(f"clock value is not a number: {name}[{raw}]") from None


@functools.lru_cache(maxsize=4096)
def parse_clock(tm: str | None, tc: str | None, tt: str | None, ot: str | None) -> GoClock:
    """Read Fox ``TM``/``TC``/``TT`` (or standard ``TM`` + ``OT[3x30 byo-yomi]``).

    >>> parse_clock("1800", "3", "30", None)
    GoClock(raw='TM=1800 TC=3 TT=30', base_s=1800, periods=3, period_s=30, tc_class='classical')
    """
    base = _int_or_none(tm, "TM")
    periods = _int_or_none(tc, "TC")
    period_s = _int_or_none(tt, "TT")
    parts = [f"{k}={v.strip()}" for k, v in (("TM", tm), ("TC", tc), ("TT", tt)) if v is not None]
    if ot is not None:
        parts.append(f"OT={ot.strip()}")
        overtime = _OVERTIME_RE.search(ot)
        if overtime and periods is None and period_s is None:
            periods, period_s = int(overtime[1]), int(overtime[2])
    raw = " ".join(parts) or None
    return GoClock(raw, base, periods, period_s, tc_class(base))


@functools.lru_cache(maxsize=8192)
def parse_date(raw: str) -> tuple[dt.date | None, str | None]:
    """First ``YYYY-MM-DD`` date of a ``DT`` value and its month (``2019-10-10,11`` →
    2019-10-10, ``"2019-10"``); ``(None, None)`` when there is no valid date."""
    match = _DATE_RE.search(raw)
    if match is None:
        return None, None
    try:
        date = dt.date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return None, None
    return date, f"{match[1]}-{match[2]}"
