"""KataGo's HumanSL metadata input: the 192-float row that tells a v15 HumanSL net who is playing.

A port of ``SGFMetadata::fillMetadataRow`` and ``SGFMetadata::getProfile``
(cpp/neuralnet/sgfmetadata.cpp) and of the rank parsing KataGo used to build its human training
data (``parseSGFRank`` in cpp/command/writetrainingdata.cpp). The row is from the side to move's
view: "pla" = the player about to move.

Layout (keep in sync with ``pipeline/go_game/spec.py`` NUM_METADATA):

- 0 / 1: pla / opponent is human;  2 / 3: is unranked;  4 / 5: rank unknown
- 6–39: pla rank as a thermometer: the first ``min(inverse rank, 34)`` entries are 1, where the
  inverse rank is 1 for 9d (and pros), 9 for 1d, 10 for 1k, 9 + n for n kyu; 40–73: opponent
- 74: 0 rated, 1 unrated, 0.5 unknown
- 75–81: time control one-hot (unknown, none, absolute, simple, byo-yomi, canadian, fischer)
- 82: 0.4·(ln(main time s + 60) − 6.5);  83: 0.3·(ln(period s + 1) − 3)
- 84: 0.5·(ln(byo-yomi periods + 2) − 1.5);  85: 0.25·(ln(canadian moves + 2) − 1.5)
- 86: 0.5·ln(board area / 361)
- 87–150: date: cos, sin of days-since-1970 / period for 32 periods from 7 days growing by
  80000^(1/31)
- 151–166: source one-hot (0 KataGo, 1 OGS, 2 KGS, 3 Fox, 4 Tygem, 5 GoGoD, 6 Go4Go)
- 167–191: zero

Example::

    from pipeline.go_game.metadata import humansl_metadata
    row = humansl_metadata("rank_5k")          # (192,) float32, Black to move
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, replace

import numpy as np

from pipeline.core.errors import KibitzError
from pipeline.go_game.spec import NUM_METADATA

SOURCE_KATAGO = 0
SOURCE_OGS = 1
SOURCE_KGS = 2
SOURCE_FOX = 3
SOURCE_TYGEM = 4
SOURCE_GOGOD = 5
SOURCE_GO4GO = 6

RANK_START = 6
RANK_LEN = 34
DATE_START = 87
DATE_LEN = 32
SOURCE_START = 151
EPOCH = dt.date(1970, 1, 1)


class UnknownProfileError(KibitzError, ValueError):
    """A HumanSL profile name KataGo does not define."""


class RankParseError(ValueError):
    """A rank string that is neither a kyu, dan nor pro rank."""


@dataclass(frozen=True)
class SgfMetadata:
    """KataGo's SGFMetadata: who played, when, where and at what time control."""

    inverse_b_rank: int = 0  # 9d = 1 … 1d = 9, 1k = 10, n kyu = 9 + n (pros: 1)
    inverse_w_rank: int = 0
    b_is_unranked: bool = False
    w_is_unranked: bool = False
    b_rank_is_unknown: bool = False
    w_rank_is_unknown: bool = False
    b_is_human: bool = False
    w_is_human: bool = False
    game_is_unrated: bool = False
    game_ratedness_is_unknown: bool = False
    tc_is_unknown: bool = False
    tc_is_none: bool = False
    tc_is_absolute: bool = False
    tc_is_simple: bool = False
    tc_is_byo_yomi: bool = False
    tc_is_canadian: bool = False
    tc_is_fischer: bool = False
    main_time_s: float = 0.0
    period_time_s: float = 0.0
    byo_yomi_periods: int = 0
    canadian_moves: int = 0
    game_date: dt.date = EPOCH
    source: int = SOURCE_KATAGO

    def row(self, *, black_to_move: bool = True, board_size: int = 19) -> np.ndarray:
        """The (192,) float32 input row for the given side to move (fillMetadataRow)."""
        out = np.zeros(NUM_METADATA, dtype=np.float32)
        white = not black_to_move
        pla_human, opp_human = (
            (self.w_is_human, self.b_is_human) if white else (self.b_is_human, self.w_is_human)
        )
        pla_unranked, opp_unranked = (
            (self.w_is_unranked, self.b_is_unranked)
            if white
            else (self.b_is_unranked, self.w_is_unranked)
        )
        pla_unknown, opp_unknown = (
            (self.w_rank_is_unknown, self.b_rank_is_unknown)
            if white
            else (self.b_rank_is_unknown, self.w_rank_is_unknown)
        )
        inv_pla, inv_opp = (
            (self.inverse_w_rank, self.inverse_b_rank)
            if white
            else (self.inverse_b_rank, self.inverse_w_rank)
        )
        out[0:6] = (pla_human, opp_human, pla_unranked, opp_unranked, pla_unknown, opp_unknown)
        if not pla_unranked:
            out[RANK_START : RANK_START + min(inv_pla, RANK_LEN)] = 1.0
        if not opp_unranked:
            out[RANK_START + RANK_LEN : RANK_START + RANK_LEN + min(inv_opp, RANK_LEN)] = 1.0
        out[74] = 0.5 if self.game_ratedness_is_unknown else 1.0 if self.game_is_unrated else 0.0
        one_hot = (
            self.tc_is_unknown,
            self.tc_is_none,
            self.tc_is_absolute,
            self.tc_is_simple,
            self.tc_is_byo_yomi,
            self.tc_is_canadian,
            self.tc_is_fischer,
        )
        if sum(one_hot) != 1:
            raise ValueError(f"exactly one time-control kind must be set: {self!r}")
        out[75:82] = one_hot
        main = min(max(self.main_time_s, 0.0), 3.0 * 86400)
        period = min(max(self.period_time_s, 0.0), 1.0 * 86400)
        out[82] = 0.4 * (math.log(main + 60.0) - 6.5)
        out[83] = 0.3 * (math.log(period + 1.0) - 3.0)
        out[84] = 0.5 * (math.log(min(max(self.byo_yomi_periods, 0), 50) + 2.0) - 1.5)
        out[85] = 0.25 * (math.log(min(max(self.canadian_moves, 0), 50) + 2.0) - 1.5)
        out[86] = 0.5 * math.log(board_size * board_size / 361.0)
        days = float((self.game_date - EPOCH).days)
        cycle = 7.0
        factor = math.pow(80000.0, 1.0 / (DATE_LEN - 1))
        for i in range(DATE_LEN):
            turns = days / cycle
            out[DATE_START + 2 * i] = math.cos(turns * 6.283185307179586476925)
            out[DATE_START + 2 * i + 1] = math.sin(turns * 6.283185307179586476925)
            cycle *= factor
        if not 0 <= self.source < 16:
            raise ValueError(f"source must be in 0..15: {self.source!r}")
        out[SOURCE_START + self.source] = 1.0
        return out


RankProfile = SgfMetadata  # the name contract C7 uses


def _basic_rank_profile(inverse_rank: int, pre_alphazero: bool) -> SgfMetadata:
    """KataGo makeBasicRankProfile: KGS, byo-yomi 20 min + 5×30 s, dated 2016-09 or 2020-03."""
    return SgfMetadata(
        inverse_b_rank=inverse_rank,
        inverse_w_rank=inverse_rank,
        b_is_human=True,
        w_is_human=True,
        game_ratedness_is_unknown=True,
        tc_is_byo_yomi=True,
        main_time_s=1200.0,
        period_time_s=30.0,
        byo_yomi_periods=5,
        game_date=dt.date(2016, 9, 1) if pre_alphazero else dt.date(2020, 3, 1),
        source=SOURCE_KGS,
    )


def _pro_profile(year: int) -> SgfMetadata:
    """KataGo makeHistoricalProProfile (≤ 2020, GoGoD) / makeModernProProfile (2021–23, Go4Go)."""
    return SgfMetadata(
        inverse_b_rank=1,
        inverse_w_rank=1,
        b_is_human=True,
        w_is_human=True,
        tc_is_unknown=True,
        game_date=dt.date(year, 6, 1),
        source=SOURCE_GOGOD if year <= 2020 else SOURCE_GO4GO,
    )


def _inverse_rank_of_profile_rank(text: str) -> int | None:
    """Inverse rank of "9d" … "1d", "1k" … "20k" as getProfile accepts them."""
    if text.endswith("d") and text[:-1].isdigit() and 1 <= int(text[:-1]) <= 9:
        return 10 - int(text[:-1])
    if text.endswith("k") and text[:-1].isdigit() and 1 <= int(text[:-1]) <= 20:
        return 9 + int(text[:-1])
    return None


def profile(name: str) -> SgfMetadata:
    """KataGo's named HumanSL profile: ``rank_<r>``, ``preaz_<r>`` (r = 9d … 20k) or
    ``proyear_<year>`` (1800–2023), exactly as ``SGFMetadata::getProfile`` defines them.

    >>> profile("rank_1d").inverse_b_rank
    9
    """
    if name.startswith("proyear_"):
        year_text = name[len("proyear_") :]
        if year_text.isdigit() and 1800 <= int(year_text) <= 2023:
            return _pro_profile(int(year_text))
    for prefix, pre_az in (("rank_", False), ("preaz_", True)):
        if name.startswith(prefix):
            inverse = _inverse_rank_of_profile_rank(name[len(prefix) :])
            if inverse is not None:
                return _basic_rank_profile(inverse, pre_az)
    raise UnknownProfileError(
        f"unknown HumanSL profile {name!r} (rank_9d…rank_20k, "
        f"preaz_9d…preaz_20k, proyear_1800…proyear_2023)"
    )


def parse_rank(rank: str | None, *, source: str = "fox") -> tuple[int, bool, bool]:
    """(inverse rank, is unranked, rank unknown) of a rank string, as KataGo's parseSGFRank.

    Accepts the games table's normalised ranks ("18k", "1d", "pro") and raw forms ("3 kyu",
    "9段", "18级", "P6段", "-"). GoGoD's "d" ranks are pro ranks, its kyu ranks unknown.
    """
    if rank is None or rank == "":
        return 0, False, True
    if rank == "-":
        return 0, True, False
    text = rank.strip()
    lower = text.lower()
    if lower in ("insei", "ama", "ama.", "amateur", "nr"):
        return 0, False, True
    if lower == "pro" or (text[:1] in "Pp" and text[1:].rstrip("段").isdigit()):
        return 1, False, False
    kinds = (
        (" kyu", "k"),
        (" k", "k"),
        ("kyu", "k"),
        ("k", "k"),
        ("级", "k"),
        ("k ama", "k"),
        (" dan", "d"),
        (" d", "d"),
        ("dan", "d"),
        ("d", "d"),
        ("段", "d"),
        ("d ama", "d"),
        ("a", "d"),
        (" pro", "p"),
        (" p", "p"),
        ("pro", "p"),
        ("p", "p"),
    )
    for suffix, kind in kinds:
        if text.endswith(suffix) and text[: -len(suffix)].strip().isdigit():
            number = int(text[: -len(suffix)])
            if kind == "p" or (kind == "d" and source == "gogod"):
                return 1, False, False
            if kind == "k" and source == "gogod":
                return 0, False, True
            if number <= 0:
                break
            if kind == "d":
                return 10 - min(number, 9), False, False
            return 9 + number, False, False
    raise RankParseError(f"unable to parse Go rank {rank!r}")


def fox_metadata(
    black_rank: str | None,
    white_rank: str | None,
    *,
    date: dt.date,
    main_time_s: float | None = None,
    byo_yomi_periods: int | None = None,
    period_time_s: float | None = None,
) -> SgfMetadata:
    """Metadata of a Fox game as KataGo built it for its Fox training data.

    Fox ``TM`` / ``TC`` / ``TT`` (games table ``tc_base_s`` / ``tc_periods`` /
    ``tc_increment_s``) give byo-yomi when all three are set, else absolute time. KataGo's
    writetrainingdata has no Fox branch for ratedness; Kibitz marks Fox ranked games as rated.
    """
    inv_b, b_unranked, b_unknown = parse_rank(black_rank, source="fox")
    inv_w, w_unranked, w_unknown = parse_rank(white_rank, source="fox")
    meta = SgfMetadata(
        inverse_b_rank=inv_b,
        inverse_w_rank=inv_w,
        b_is_unranked=b_unranked,
        w_is_unranked=w_unranked,
        b_rank_is_unknown=b_unknown,
        w_rank_is_unknown=w_unknown,
        b_is_human=True,
        w_is_human=True,
        game_date=date,
        source=SOURCE_FOX,
    )
    if main_time_s is not None and byo_yomi_periods and period_time_s:
        return replace(
            meta,
            tc_is_byo_yomi=True,
            main_time_s=float(main_time_s),
            byo_yomi_periods=int(byo_yomi_periods),
            period_time_s=float(period_time_s),
        )
    if main_time_s:
        return replace(meta, tc_is_absolute=True, main_time_s=float(main_time_s))
    return replace(meta, tc_is_unknown=True)


def humansl_metadata(
    which: str | SgfMetadata, *, black_to_move: bool = True, board_size: int = 19
) -> np.ndarray:
    """(192,) float32 HumanSL metadata row for a profile name or an SgfMetadata (contract C7)."""
    meta = profile(which) if isinstance(which, str) else which
    return meta.row(black_to_move=black_to_move, board_size=board_size)


def metadata_rows(
    which: str | SgfMetadata, black_to_move: np.ndarray, *, board_size: int = 19
) -> np.ndarray:
    """(N, 192) rows for positions with the given sides to move (two distinct rows, gathered)."""
    meta = profile(which) if isinstance(which, str) else which
    both = np.stack(
        [
            meta.row(black_to_move=False, board_size=board_size),
            meta.row(black_to_move=True, board_size=board_size),
        ]
    )  # (2, 192)
    return both[np.asarray(black_to_move, dtype=np.int64)]  # (N, 192)
