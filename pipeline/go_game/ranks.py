"""Go ranks: Fox's Chinese labels and English forms onto one normalised rank, scale and group.

Fox writes ranks as ``9段`` (9 dan), ``18级`` (18 kyu) and ``P6段`` (professional 6 dan); curated
sets and other servers write ``3k``, ``9d``, ``1D``, ``5K`` or ``7p``. Every later step (rank
groups for selection, KataGo HumanSL metadata, per-rank aggregates) needs one spelling, so the
games table keeps the raw label next to the normalised one:

==========================  ==============  ===========  ==========
raw                          normalised      numeric      group
==========================  ==============  ===========  ==========
``18级`` / ``18k``           ``18k``         −17          null
``5级`` … ``3级``            ``5k`` … ``3k``  −4 … −2     ``3-5k``
``2级``, ``1级``             ``2k``, ``1k``  −1, 0        ``1-2k``
``1段`` … ``9段``            ``1d`` … ``9d``  1 … 9       ``1d`` … ``9d``
``P1段`` … ``P9段``, ``7p``  ``pro``         10           ``pro``
==========================  ==============  ===========  ==========

Groups are those of Kuboki et al. 2025 (``3-5k``, ``1-2k``, ``1d`` … ``9d``). Professionals get
the group ``"pro"`` rather than null so that pro games stay queryable by group; the
``go-kuboki2025`` preset lists its eleven groups explicitly, so pro games are not selected.
Labels that are not ranks (``""``, ``"?"``, ``"10段"``) normalise to null; the raw label stays in
``*_rating_raw``.

Run ``python -m pytest tests/test_go_ranks.py`` to check the table above.
"""

from __future__ import annotations

import functools
import math
import re

import pyarrow as pa
import pyarrow.compute as pc

# Kyu ranks on Fox go down to 18k; other servers use up to 30k.
MAX_KYU = 30
MAX_DAN = 9
PRO_RANK = "pro"
PRO_RANK_NUM = 10.0

# Groups of Kuboki et al. 2025, weakest first.
KUBOKI_GROUPS = ("3-5k", "1-2k", "1d", "2d", "3d", "4d", "5d", "6d", "7d", "8d", "9d")

_RANK_RE = re.compile(
    r"""^\s*(?:
        (?P<pro>[Pp])\s*(?P<pro_n>\d{1,2})\s*(?:段|[Dd]|[Pp])?   # P6段, P9d
      | (?P<n>\d{1,2})\s*(?P<unit>段|级|級|[DdKkPp])             # 9段, 18级, 3k, 1D, 7p
    )\s*$""",
    re.VERBOSE,
)


class RankError(ValueError):
    """A label that is not a Go rank (kept raw, normalised to null)."""


@functools.lru_cache(maxsize=4096)
def normalize_rank(raw: str) -> str:
    """Return the normalised rank (``"9d"``, ``"18k"``, ``"pro"``) of a raw Fox or English label.

    >>> normalize_rank("9段"), normalize_rank("18级"), normalize_rank("P6段"), normalize_rank("1D")
    ('9d', '18k', 'pro', '1d')
    """
    match = _RANK_RE.match(raw)
    if match is None:
        raise RankError(f"not a Go rank: {raw!r}")
    if match["pro"]:
        return PRO_RANK
    n = int(match["n"])
    unit = match["unit"].lower()
    if unit == "p":
        return PRO_RANK
    if unit in ("段", "d"):
        if not 1 <= n <= MAX_DAN:
            raise RankError(f"dan rank out of 1..{MAX_DAN}: {raw!r}")
        return f"{n}d"
    if not 1 <= n <= MAX_KYU:
        raise RankError(f"kyu rank out of 1..{MAX_KYU}: {raw!r}")
    return f"{n}k"


def try_normalize_rank(raw: str | None) -> str | None:
    """``normalize_rank`` that maps missing and unreadable labels to None."""
    if raw is None:
        return None
    try:
        return normalize_rank(raw)
    except RankError:
        return None


@functools.lru_cache(maxsize=256)
def rank_num(rank: str) -> float:
    """Place a normalised rank on one scale: ``1k`` = 0, ``n k`` = 1 − n, ``n d`` = n, pro = 10.

    >>> rank_num("1k"), rank_num("18k"), rank_num("9d"), rank_num("pro")
    (0.0, -17.0, 9.0, 10.0)
    """
    if rank == PRO_RANK:
        return PRO_RANK_NUM
    n = int(rank[:-1])
    return float(n) if rank.endswith("d") else float(1 - n)


TOP_AMATEUR = 9  # 9d, the highest amateur rank: a point above it is "9d+", not a "10d"


def rank_label(num: float) -> str:
    """The amateur rank nearest to a point of the numeric scale (inverse of :func:`rank_num`);
    above 9d, where no amateur rank is, ``"9d+"``.

    >>> rank_label(0.0), rank_label(-2.4), rank_label(3.6), rank_label(0.6), rank_label(10.3)
    ('1k', '3k', '4d', '1d', '9d+')
    """
    nearest = math.floor(num + 0.5)  # halves round up, not to even
    if nearest > TOP_AMATEUR:
        return f"{TOP_AMATEUR}d+"
    return f"{nearest}d" if nearest >= 1 else f"{1 - nearest}k"


@functools.lru_cache(maxsize=256)
def rank_group(rank: str) -> str | None:
    """The Kuboki et al. 2025 group of a normalised rank, ``"pro"`` for pros, else None.

    >>> rank_group("4k"), rank_group("1k"), rank_group("7d"), rank_group("6k"), rank_group("pro")
    ('3-5k', '1-2k', '7d', None, 'pro')
    """
    if rank == PRO_RANK:
        return PRO_RANK
    if rank.endswith("d"):
        return rank
    kyu = int(rank[:-1])
    if 3 <= kyu <= 5:
        return "3-5k"
    if kyu <= 2:
        return "1-2k"
    return None


def _map_unique(raw: pa.Array, fn, value_type: pa.DataType) -> pa.Array:
    """Apply ``fn`` once per distinct value of ``raw`` and spread the results back (vectorised)."""
    encoded = pc.dictionary_encode(
        raw.combine_chunks() if isinstance(raw, pa.ChunkedArray) else raw
    )
    mapped = pa.array([fn(v) for v in encoded.dictionary.to_pylist()], type=value_type)
    return mapped.take(encoded.indices)


def normalize_rank_array(raw: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Normalise a whole Arrow column of raw labels (nulls and non-ranks → null)."""
    return _map_unique(raw, try_normalize_rank, pa.string())


def rank_num_array(ranks: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Numeric scale for a column of normalised ranks (null stays null)."""
    return _map_unique(ranks, lambda r: None if r is None else rank_num(r), pa.float32())


def rank_group_array(ranks: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Kuboki group for a column of normalised ranks (null and ungrouped ranks → null)."""
    return _map_unique(ranks, lambda r: None if r is None else rank_group(r), pa.string())


def common_group_array(white_group: pa.Array, black_group: pa.Array) -> pa.Array:
    """The shared group of both players, null where they differ or either is null."""
    return pc.if_else(pc.equal(white_group, black_group), white_group, pa.scalar(None, pa.string()))
