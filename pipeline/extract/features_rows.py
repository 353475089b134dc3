"""Per-move columns that come from the games table, for chess and Go alike.

Feature steps know, for every position, which game (row of the chunk's games table) and which
ply it is and whether White moves; this module turns that into the features table's game-level
columns (ids, partition values, the mover's name, rating, rank and group, the played move, the
clock and the time control) by vectorised ``take`` on Arrow columns: no Python per move.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# Games table columns that extraction reads (the rest of the games table is not loaded).
GAMES_COLUMNS = [
    "game_id",
    "game",
    "source",
    "month",
    "white",
    "black",
    "white_rating",
    "black_rating",
    "white_rank",
    "black_rank",
    "white_rank_num",
    "black_rank_num",
    "white_rank_group",
    "black_rank_group",
    "num_plies",
    "moves",
    "setup_black",
    "setup_white",
    "clocks_s",
    "tc_base_s",
    "tc_increment_s",
    "komi",
    "rules",
    "handicap",
    "board_size",
]


def _combined(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def list_element(column: pa.ChunkedArray | pa.Array, game: np.ndarray, ply: np.ndarray) -> pa.Array:
    """``column[game][ply]`` for every (game, ply), null where the list is null or too short."""
    lists = _combined(column)
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    offsets = np.asarray(lists.offsets, dtype=np.int64)
    valid = ply < lengths[game]
    flat = lists.flatten() if lists.offset == 0 else lists.values.slice(offsets[0])
    index = np.where(valid, offsets[game] - offsets[0] + ply, 0)
    values = flat.take(pa.array(index)) if len(flat) else pa.nulls(len(game), flat.type)
    return pc.if_else(pa.array(valid), values, pa.scalar(None, flat.type))


def _pick(games: pa.Table, white_col: str, black_col: str, game: np.ndarray, white: np.ndarray):
    """The mover's value: ``white_col`` where White moves, else ``black_col``."""
    idx = pa.array(game)
    w = games[white_col].take(idx)
    b = games[black_col].take(idx)
    return pc.if_else(pa.array(white), _combined(w), _combined(b))


def game_columns(
    games: pa.Table, game: np.ndarray, ply: np.ndarray, mover_white: np.ndarray
) -> dict[str, pa.Array]:
    """The features table's base columns except the evaluations, one row per (game, ply).

    ``clock_s`` is the mover's clock after the move (``clocks_s[ply]``), null when the game
    has no clock list or a shorter one; ``tc_base_s`` and ``tc_increment_s`` are the game's
    time control, which the time-usage aggregates divide by (think time as a share of the base).
    """
    idx = pa.array(game)
    white = np.asarray(mover_white, dtype=bool)
    ply = np.asarray(ply, dtype=np.int64)
    return {
        "game_id": _combined(games["game_id"].take(idx)),
        "game": _combined(games["game"].take(idx)),
        "source": _combined(games["source"].take(idx)),
        "month": _combined(games["month"].take(idx)),
        "ply": pa.array(ply.astype(np.int32)),
        "move_number": pa.array((ply // 2 + 1).astype(np.int32)),
        "colour": pa.array(np.where(white, "white", "black")),
        "player": _pick(games, "white", "black", game, white),
        "opponent": _pick(games, "black", "white", game, white),
        "rating": _pick(games, "white_rating", "black_rating", game, white),
        "rank": _pick(games, "white_rank", "black_rank", game, white),
        "rank_num": _pick(games, "white_rank_num", "black_rank_num", game, white),
        "rank_group": _pick(games, "white_rank_group", "black_rank_group", game, white),
        "played_move": list_element(games["moves"], game, ply),
        "clock_s": list_element(games["clocks_s"], game, ply),
        "tc_base_s": _combined(games["tc_base_s"].take(idx)),
        "tc_increment_s": _combined(games["tc_increment_s"].take(idx)),
    }


def build_table(schema: pa.Schema, columns: dict[str, pa.Array | np.ndarray]) -> pa.Table:
    """The features table in ``schema``'s column order; NaN floats become nulls."""
    arrays = []
    for field in schema:
        value = columns[field.name]
        if isinstance(value, np.ndarray):
            mask = np.isnan(value) if value.dtype.kind == "f" else None
            value = pa.array(value, type=field.type, mask=mask)
        arrays.append(value.cast(field.type))
    return pa.Table.from_arrays(arrays, schema=schema)
