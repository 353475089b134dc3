"""The per-move features table: one row per move played, the contract between extraction and the
SQL aggregates / meta-models.

Keep in sync with the "Features table" section of docs/reference/tables.md and with ``sql/staging/stg_moves.sql``.

Layout on disk (hive partitioning)::

    DIR/game=chess/source=lichess/month=2024-02/part-<chunk_id>.parquet

Fixed columns are listed in ``BASE_FIELDS``. Each configured net adds columns named by the
one function, :func:`feature_column`, so adding an imitation level or a strength net is a config entry and its columns
appear (SQL reads them with DuckDB's ``COLUMNS('logprior_.*')``):

- imitation net ``NAME`` (e.g. ``maia_1100``, ``rank_5k``): ``prior_NAME`` (float32, probability
  of the played move, softmax over legal moves), ``logprior_NAME`` (float32, natural log, floored
  at log(1e-6)), ``top1_NAME`` (bool, the played move is the net's most likely move);
- strength net ``NAME``: ``sscore_NAME`` (float32, the mover's s-score of the position + move).

Units and views
- ``v_before`` / ``v_after``: the evaluator's value of the position before / after the move,
  from the MOVER's view. Chess: ``log(w / (1 − w))`` of the win rate w (clipped to
  [1e-4, 1 − 1e-4]); Go: KataGo score lead in points.
- ``loss = v_before − v_after`` (positive = the move lost value).
- ``expected_loss = Σ prior(a)·loss(a)`` over the chosen imitation net's likely moves a
  (renormalised over that set); ``expected_loss_moves`` how many moves a were evaluated.
- ``move_number``: 1-based count of the mover's own moves in the game (``ply // 2 + 1``).
"""

from __future__ import annotations

import re

import pyarrow as pa

PARTITION_COLUMNS = ("game", "source", "month")

BASE_FIELDS = [
    pa.field("game_id", pa.string(), nullable=False),
    pa.field("game", pa.string(), nullable=False),  # (partition)
    pa.field("source", pa.string(), nullable=False),  # (partition)
    pa.field("month", pa.string(), nullable=False),  # (partition)
    pa.field("ply", pa.int32(), nullable=False),  # 0-based index of the move in the game
    pa.field("move_number", pa.int32(), nullable=False),  # 1-based, the mover's own count
    pa.field("colour", pa.string(), nullable=False),  # "white" | "black"
    pa.field("player", pa.string()),  # the mover's name
    pa.field("opponent", pa.string()),
    pa.field("rating", pa.int32()),  # chess Elo of the mover; null for Go
    pa.field("rank", pa.string()),  # Go rank of the mover ("3k", "9d"); null for chess
    pa.field("rank_num", pa.float32()),  # games_schema's numeric rank scale
    pa.field("rank_group", pa.string()),  # the mover's group ("1000-1200", "3-5k", "9d")
    pa.field("played_move", pa.string(), nullable=False),  # UCI / "B:pd"
    pa.field("num_legal", pa.int16(), nullable=False),
    pa.field("v_before", pa.float32()),
    pa.field("v_after", pa.float32()),
    pa.field("loss", pa.float32()),
    pa.field("expected_loss", pa.float32()),
    pa.field("expected_loss_moves", pa.int16()),
    pa.field("clock_s", pa.float32()),  # the mover's clock after the move, when known
    pa.field("tc_base_s", pa.int32()),  # the game's base time (games_schema), when known
    pa.field("tc_increment_s", pa.int32()),  # chess increment, Go byo-yomi period seconds
]

_NAME = re.compile(r"^[a-z0-9_]+$")


def column_slug(net_name: str) -> str:
    """``"maia-1100"`` → ``"maia_1100"``: a net name as it appears inside column names."""
    slug = re.sub(r"[^a-z0-9]+", "_", net_name.lower()).strip("_")
    if not _NAME.match(slug):
        raise ValueError(f"net name {net_name!r} does not give a column name")
    return slug


# The per-net column families: which kind of net adds them and their Arrow type. This and
# :func:`feature_column` are the one place the ``<family>_<net slug>`` rule is written.
NET_COLUMN_FAMILIES: dict[str, tuple[str, pa.DataType]] = {
    "prior": ("imitation", pa.float32()),
    "logprior": ("imitation", pa.float32()),
    "top1": ("imitation", pa.bool_()),
    "sscore": ("strength", pa.float32()),
}


def feature_column(family: str, net_name: str) -> str:
    """The features-table column of one net: ``("prior", "maia-1100")`` → ``"prior_maia_1100"``.

    Extraction writes these names, the SQL aggregates derive theirs from them
    (:func:`net_columns_regex`), and the meta-models and ``kibitz estimate`` read them back.
    """
    if family not in NET_COLUMN_FAMILIES:
        raise ValueError(f"unknown column family {family!r}; known: {sorted(NET_COLUMN_FAMILIES)}")
    return f"{family}_{column_slug(net_name)}"


def instance_column(family: str, net_name: str, statistic: str, cut: str = "all") -> str:
    """A column of ``sql/marts/player_instance_features.sql`` summarising one net's feature
    column: ``("prior", "maia-1100", "geomean")`` → ``"prior_maia_1100_geomean_all"`` (``cut``:
    ``k25``, ``k50`` or ``all``, the moves it covers)."""
    return f"{feature_column(family, net_name)}_{statistic}_{cut}"


def net_columns_regex(families: tuple[str, ...] = tuple(NET_COLUMN_FAMILIES)) -> str:
    """A regex matching every column of these families, whatever the net: what the SQL's
    ``COLUMNS('…')`` star expressions select, so a net added to a config needs no SQL edit."""
    unknown = [f for f in families if f not in NET_COLUMN_FAMILIES]
    if unknown:
        raise ValueError(f"unknown column families {unknown!r}")
    return "^(" + "|".join(families) + ")_.+$"


def imitation_fields(net_name: str) -> list[pa.Field]:
    """The columns one imitation (policy) net adds."""
    return [
        pa.field(feature_column(family, net_name), dtype)
        for family, (kind, dtype) in NET_COLUMN_FAMILIES.items()
        if kind == "imitation"
    ]


def strength_fields(net_name: str) -> list[pa.Field]:
    """The column one strength (s-score) net adds."""
    return [
        pa.field(feature_column(family, net_name), dtype)
        for family, (kind, dtype) in NET_COLUMN_FAMILIES.items()
        if kind == "strength"
    ]


def features_schema(imitation_nets: list[str], strength_nets: list[str] = ()) -> pa.Schema:
    """The full schema for a run configured with these nets, in a stable column order."""
    fields = list(BASE_FIELDS)
    for name in imitation_nets:
        fields += imitation_fields(name)
    for name in strength_nets:
        fields += strength_fields(name)
    return pa.schema(fields)
