"""Posted games → their players' instance rows, as the batch pipeline computes them.

The meta-models were trained on ``player_instance_features`` rows of features extracted with
one config; :class:`InstanceMaker` extracts a batch of posted games with that config (the
nets and the engine loaded once, ``pipeline.jobs.in_process``) and runs the same aggregate
SQL over their features in memory (``pipeline.meta.aggregate.player_instances_of``), so a
game's rows equal what ``kibitz estimate`` computes for it. A batch is what the ``Extractor``
deployment gathered from concurrent requests: its positions go through the nets together.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.estimate.in_process import InProcessExtractor, extraction_config
from pipeline.kinds import game_kind
from pipeline.meta.aggregate import AggregateConfig, player_instances_of
from pipeline.meta.registered import check_nets
from pipeline.meta.train import MetaModels


class InstanceMaker:
    """The extraction and aggregation of the meta-models' training features, kept loaded."""

    def __init__(self, models: MetaModels, *, engines: int = 1) -> None:
        check_nets(models)
        self.config = extraction_config(models, None, None)
        # numba's encoders compiled (or loaded from its cache) now, not in the first post.
        game_kind(self.config.game).extraction.compile_encoders()
        self.aggregate = AggregateConfig(**models.manifest.get("aggregate", {}))
        self.extract = InProcessExtractor(self.config, engines=engines)
        self.seconds: dict[str, float] = {}  # the last call's, by stage (InProcessExtractor's)

    def __call__(self, games: list[pa.Table]) -> list[dict[str, pa.Table]]:
        """For each one-row games table: player name → that player's instance row (players
        without a move that survived extraction have none)."""
        ids = [table["game_id"][0].as_py() for table in games]
        first = {game_id: i for i, game_id in reversed(list(enumerate(ids)))}
        unique = pa.concat_tables([games[i] for i in sorted(first.values())])  # one per id
        features, _ = self.extract(unique)
        started = time.perf_counter()
        rows = player_instances_of(features, config=self.aggregate) if features.num_rows else None
        self.seconds = {**self.extract.seconds, "aggregate": time.perf_counter() - started}
        out = []
        for game_id in ids:
            if rows is None:
                out.append({})
                continue
            mine = rows.filter(pc.equal(rows["game_id"], game_id))
            out.append({mine["player"][i].as_py(): mine.slice(i, 1) for i in range(mine.num_rows)})
        return out

    def close(self) -> None:
        self.extract.close()
