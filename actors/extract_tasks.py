"""CPU tasks of ``kibitz extract``: read + encode a chunk of games, encode the positions after
moves that its second net pass values, assemble its features.

``num_cpus=0``: the driver bounds how many chunks are in flight (``max_in_flight``), which
bounds these tasks too; asking Ray for a CPU here would deadlock small clusters whose CPUs are
all held by the net and Stockfish actors.
"""

from __future__ import annotations

from typing import Any

import ray

from pipeline.extract.child_positions import ChildPositions, ChildValues
from pipeline.extract.config import config_from_dict
from pipeline.extract.steps import Part, PartResult, assemble, read_games_rows, split_states
from pipeline.kinds import game_kind


@ray.remote(num_cpus=0, max_retries=0, num_returns=2)
def encode_task(config: dict[str, Any], games_root: str, part: Part) -> tuple[Any, Any]:
    """Read rows [start, stop) of one games file and encode their positions: (the work,
    Go's board states or None), two objects so that the states never reach the net actor."""
    cfg = config_from_dict(config)
    extraction = game_kind(cfg.game).extraction
    return split_states(extraction.encode(cfg, read_games_rows(games_root, part)))


@ray.remote(num_cpus=0, max_retries=0)
def children_task(config: dict[str, Any], work: Any, states: Any, nets: Any) -> ChildPositions:
    """The positions after moves of one chunk (``pipeline/extract/child_positions.py``)."""
    return game_kind(config["game"]).extraction.encode_children(work, nets, states)


@ray.remote(num_cpus=0, max_retries=0)
def assemble_task(
    config: dict[str, Any],
    part: Part,
    work: Any,
    nets: Any,
    kids: ChildValues | None,
    *values: Any,
) -> PartResult:
    """The features table and the quarantined games of one part, with stage timings."""
    cfg = config_from_dict(config)
    return assemble(game_kind(cfg.game).extraction, cfg, part, work, nets, list(values), kids)
