"""The games table: one row per game, the contract between ingestion and everything after it.

Keep in sync with the "Games table" section of docs/reference/tables.md and with ``sql/staging/stg_games.sql``.

Layout on disk (hive partitioning, DuckDB reads it with
``read_parquet('DIR/**/*.parquet', hive_partitioning = true)``)::

    DIR/game=chess/source=lichess/month=2024-02/part-<chunk_id>.parquet
    DIR/game=go/source=fox/month=2018-12/part-<chunk_id>.parquet
    DIR/_quarantine/game=…/part-<chunk_id>.pq          games that could not be read, with why
    DIR/_chunks/<chunk_id>.json                         completion marker of each input chunk
    DIR/_summary.json                                   the run summary

Conventions
- ``month``: ``"YYYY-MM"`` of the game's date (chess ``UTCDate``, else ``Date``; Go ``DT``).
  When the month is not known (PGN ``1997.??.??`` / ``????.??.??`` or no date tag, an SGF
  without a ``DT`` date) it is ``"unknown"`` (:data:`UNKNOWN_MONTH`) and ``date`` is null; a
  known month with an unknown day (``1997.05.??``) keeps ``"1997-05"`` with a null ``date``.
  No ``?`` in partition folder names: it is a glob wildcard in shells and DuckDB paths.
- ``game_id``: 16 hex chars of blake2b over the game's source identity (Lichess: the game URL;
  Fox: archive-relative member name, or collection file name + game index when a collection
  has no other identity). Stable across re-runs and machines; never a row counter.
- Go moves are ``"B:pd"`` / ``"W:pass"`` (colour, colon, SGF coordinate: column letter then row
  letter, ``a`` = left / top); passes are explicit. Chess moves are UCI as python-chess writes
  them (castling ``e1g1``, promotion ``e7e8q``).
- Go ranks are normalised to ``"18k"``, ``"1d"``, ``"9d"``, ``"pro"`` (any ``P<n>段``); ``*_rank_num``
  puts them on one numeric scale: ``1k = 0``, ``n k = 1 − n``, ``n d = n``, pro = 10.
- Chess evaluations (``%eval``) are centipawns from White's view; mate in n is
  ``±(100000 − n)``; missing evaluations are nulls inside the list.
"""

from __future__ import annotations

import pyarrow as pa

from pipeline.core.errors import KibitzError

# Partition columns, outermost first. They are directory names on disk, not columns in files.
PARTITION_COLUMNS = ("game", "source", "month")
# ``month`` of a game whose month is not known (see the module docstring).
UNKNOWN_MONTH = "unknown"
# The game's common rank group (both players in one band / Fox group): what selection presets
# keep and what extraction balances a partial run over.
GROUP_COLUMN = "rank_group"


class UnknownGameError(KibitzError, ValueError):
    """A game kind (the ``game`` column / partition) that Kibitz has no reader, nets or features
    for. Raised by ``pipeline.kinds.game_kind``; it lives here, at the bottom, so that any stage
    may raise or catch it without importing the stages above."""


GAMES_SCHEMA = pa.schema(
    [
        pa.field("game_id", pa.string(), nullable=False),  # blake2b-64 of the source identity
        pa.field("game", pa.string(), nullable=False),  # "chess" | "go"            (partition)
        pa.field("source", pa.string(), nullable=False),  # "lichess" | "fox" | …     (partition)
        pa.field("month", pa.string(), nullable=False),  # "2024-02" | "unknown"    (partition)
        pa.field("source_file", pa.string(), nullable=False),  # path as given on the command line
        pa.field("source_member", pa.string()),  # member inside an archive (7z), else null
        pa.field("source_index", pa.int64(), nullable=False),  # 0-based game number in file/member
        pa.field("source_offset", pa.int64()),  # byte offset (PGN) or line (SGF collection)
        pa.field("site", pa.string()),  # game URL / server
        pa.field("event", pa.string()),  # PGN Event, e.g. "Rated Blitz game"
        pa.field("date", pa.date32()),
        pa.field("white", pa.string()),
        pa.field("black", pa.string()),
        pa.field("white_rating_raw", pa.string()),  # as given: "1540", "9段", "18级", "P6段"
        pa.field("black_rating_raw", pa.string()),
        pa.field("white_rating", pa.int32()),  # chess Elo; null for Go
        pa.field("black_rating", pa.int32()),
        pa.field("white_rank", pa.string()),  # Go normalised rank "9d", "18k", "pro"; null chess
        pa.field("black_rank", pa.string()),
        pa.field("white_rank_num", pa.float32()),  # one scale for both games (see module doc)
        pa.field("black_rank_num", pa.float32()),
        pa.field("white_rank_group", pa.string()),  # chess "1000-1200"; Go "3-5k", "1-2k", "1d"…
        pa.field("black_rank_group", pa.string()),
        pa.field("rank_group", pa.string()),  # common group when both are in the same one
        pa.field("time_control", pa.string()),  # raw: "300+3"; Fox "TM=1200 TC=3 TT=30"
        pa.field("tc_base_s", pa.int32()),
        pa.field("tc_increment_s", pa.int32()),  # chess increment, Go byo-yomi period seconds
        pa.field("tc_periods", pa.int32()),  # Go byo-yomi periods; null for chess
        pa.field("tc_class", pa.string()),  # "bullet" | "blitz" | "rapid" | "classical" | …
        pa.field("result", pa.string()),  # raw: "1-0", "B+R", "W+12.5", "draw", "B+0.02"
        pa.field("winner", pa.string()),  # "white" | "black" | "draw" | null (unknown)
        pa.field("ended_by", pa.string()),  # "resign" | "score" | "time" | "draw" | "other"
        pa.field("score_margin", pa.float32()),  # Go counted margin (12.5); null otherwise
        pa.field("termination", pa.string()),  # raw PGN Termination header
        pa.field("komi", pa.float32()),  # real komi (Fox KM[650] → 6.5)
        pa.field("handicap", pa.int16()),
        pa.field("rules", pa.string()),  # "japanese" | "chinese" | "tromp-taylor"; null chess
        pa.field("board_size", pa.int16()),  # 19 for Go, 8 for chess
        pa.field("num_plies", pa.int32(), nullable=False),
        pa.field("moves", pa.list_(pa.string()), nullable=False),  # UCI / "B:pd"
        pa.field("setup_black", pa.list_(pa.string())),  # Go AB stones (handicap)
        pa.field("setup_white", pa.list_(pa.string())),  # Go AW stones
        pa.field("clocks_s", pa.list_(pa.float32())),  # %clk after each move, seconds
        pa.field("evals_cp", pa.list_(pa.int32())),  # %eval after each move (see module doc)
        pa.field("selection", pa.string()),  # "<rules name>@<version>" that kept the game
    ]
)

QUARANTINE_SCHEMA = pa.schema(
    [
        pa.field("game", pa.string(), nullable=False),
        pa.field("source_file", pa.string(), nullable=False),
        pa.field("source_member", pa.string()),
        pa.field("source_index", pa.int64(), nullable=False),
        pa.field("source_offset", pa.int64()),
        pa.field("error_type", pa.string(), nullable=False),  # exception class name
        pa.field("reason", pa.string(), nullable=False),  # message naming file and game
        pa.field("raw", pa.string()),  # first 4 KiB of the game's text, decoded with replacement
    ]
)
