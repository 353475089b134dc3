"""The extraction steps of one config in this process, for a few games at a time.

``kibitz estimate`` extracts one player's handful of games, and ``kibitz serve`` each game as it
finishes: neither pays for a Ray job's start-up. :class:`InProcessExtractor` loads the nets
and starts the engine (chess with Stockfish) once, then turns games tables into features
tables with the same steps as a Ray extraction (``pipeline.extract.steps``), so its features
equal the batch pipeline's for the same games and config (:func:`extraction_config`: the
meta-models' training features' config, runnable on this machine)::

    with InProcessExtractor(config) as extract:
        features, dropped = extract(games)      # a games table (GAMES_SCHEMA) of any size
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType

import pyarrow as pa

from pipeline.extract.config import CPU_BATCH, ExtractConfig, config_from_dict, preset
from pipeline.extract.steps import Part, assemble, game_ranges_for, run_nets
from pipeline.kinds import game_kind
from pipeline.meta.aggregate import features_run_config
from pipeline.meta.train import MetaModels


def extraction_config(
    models: MetaModels, config_path: Path | None, nodes: int | None
) -> ExtractConfig:
    """The training features' extraction config (so the columns match): the copy in the
    manifest, else (manifests written before it) the features folder's, else the preset; its
    precision the nearest this machine runs natively (FP32 for FP16 without a GPU, for BF16
    without AVX-512 BF16, AMX or a GPU), and without a GPU its batch at most ``CPU_BATCH``, so a
    model fitted on a GPU's features estimates on a laptop (a GPU batch of 4,096 took 6.1 GB
    there); the saved config's nets run uncompiled (``config_path``'s run as it says)."""
    if config_path is not None:
        from pipeline.extract.config import load_config

        config = load_config(config_path)
    else:
        saved = (models.manifest.get("features_config") or {}).get("config")
        features_dir = models.manifest.get("features_dir")
        if not saved and features_dir:
            saved = features_run_config(Path(features_dir)).get("config")
        config = config_from_dict(saved) if saved else preset(models.manifest["game"])
        # How the training run's nets ran, not what they computed: compiling costs tens of
        # seconds and a C++ compiler against a few games' positions (the values agree to the
        # number format's rounding, docs/guide/extract.md), and CUDA graphs need a GPU.
        config.compile = config.cuda_graphs = False
    if nodes:
        config.value.nodes = nodes
    from pipeline.nets.evaluator import default_device, runnable_precision  # torch: extracting

    config.precision = runnable_precision(config.precision)
    if default_device() == "cpu":
        config.batch_sizes[config.backend] = min(config.batch_size, CPU_BATCH)
    return config.validate()


def trained_precision(models: MetaModels) -> str | None:
    """The nets' number format of the meta-models' training features (None: not recorded)."""
    return (models.manifest.get("features_config") or {}).get("config", {}).get("precision")


class InProcessExtractor:
    """Nets and engine of ``config``, kept between calls; a call extracts a games table."""

    def __init__(self, config: ExtractConfig, *, engines: int = 1) -> None:
        """``engines``: engines valuing a call's games side by side (chess with Stockfish,
        which values positions one at a time on one core: a batch of games served together
        then takes one engine's time over ``engines``)."""
        self.config = config
        self.extraction = game_kind(config.game).extraction
        self.step = self.extraction.net_step(config)
        first = self.extraction.value_step(config)
        self.engines = (
            []
            if first is None
            else [first] + [self.extraction.value_step(config) for _ in range(engines - 1)]
        )
        # Seconds of the last call by stage: what a GPU or more engines would speed up
        # (bench/speed/bench_serve.py projects a GPU node from them).
        self.seconds: dict[str, float] = {}

    def __call__(self, games: pa.Table) -> tuple[pa.Table, int]:
        """(features of ``games``, games dropped: unreadable or illegal at extraction)."""
        t0 = time.perf_counter()
        work = self.extraction.encode(self.config, games)
        t1 = time.perf_counter()
        nets, kids = run_nets(self.extraction, self.config, self.step, work)
        t2 = time.perf_counter()
        values = self._values(work, nets, games.num_rows)
        t3 = time.perf_counter()
        part = Part("in-process", 0, games.num_rows)
        result = assemble(self.extraction, self.config, part, work, nets, values, kids)
        t4 = time.perf_counter()
        self.seconds = {"encode": t1 - t0, "nets": t2 - t1, "engine": t3 - t2, "assemble": t4 - t3}
        return result.features, result.quarantine.num_rows

    def _values(self, work: object, nets: object, n_games: int) -> list:
        """The engines' values of every game, each engine a contiguous range of games."""
        if not self.engines:
            return []
        ranges = game_ranges_for(n_games, len(self.engines))
        if len(ranges) == 1:
            return [self.engines[0](work, nets, 0, n_games)]
        with ThreadPoolExecutor(len(ranges)) as pool:  # each thread waits on its engine
            return list(pool.map(lambda e, r: e(work, nets, *r), self.engines, ranges))

    def close(self) -> None:
        for engine in self.engines:
            engine.close()

    def __enter__(self) -> InProcessExtractor:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def extract_in_process(config: ExtractConfig, games: pa.Table) -> tuple[pa.Table, int]:
    """Features of ``games`` once (nets loaded and engine started for this call only)."""
    with InProcessExtractor(config) as extract:
        return extract(games)
