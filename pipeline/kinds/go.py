"""Go as a game kind (:data:`GO`): Fox SGF, KataGo nets, values and expected loss from a net.

Wires the Go implementations of each stage (``pipeline.ingest.sgf``, ``pipeline.extract.go``,
``pipeline.nets.check_go``) behind the interfaces the generic code calls
(``pipeline.kinds.GameKind``). Every implementation is imported inside the method that needs it:
``pipeline.extract.go`` loads Go's numba board code, which a chess run should not pay for.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from pipeline.extract.child_positions import ChildPositions, ChildValues
    from pipeline.extract.config import ExtractConfig
    from pipeline.extract.steps import NetStep
    from pipeline.ingest.chunks import ChunkResult
    from pipeline.ingest.work import WorkItem
    from pipeline.nets.move_matching import MoveMatchResult
    from pipeline.nets.stockfish import StockfishSettings


class SgfReader:
    """Go ingestion (``pipeline.ingest.work.ChunkReader``).

    Fox inputs (files, collections, folders, 7z archives) are planned up front
    (``pipeline.ingest.sgf.plan_chunks``) and each task reads its own slice of the files.
    """

    def compile_kernels(self) -> None:
        from pipeline.ingest import sgf

        sgf.compile_kernels()

    def work_items(self, sources: Sequence[str], *, games_per_chunk: int) -> Iterator[WorkItem]:
        from pipeline.ingest import sgf
        from pipeline.ingest.work import WorkItem

        paths = [Path(p) for p in sources]
        for chunk in sgf.plan_chunks(paths, games_per_chunk=games_per_chunk):
            yield WorkItem(chunk)

    def read_chunk(self, item: WorkItem) -> ChunkResult:
        from pipeline.ingest import sgf

        return sgf.read_chunk(item.chunk)

    def read_text(self, data: bytes, source_file: str) -> ChunkResult:
        from pipeline.ingest import sgf

        return sgf.read_text(data, source_file)


class GoExtraction:
    """Go extraction (``pipeline.extract.steps.Extraction``): ``pipeline.extract.go``."""

    def compile_encoders(self) -> None:
        from pipeline.go_game.encode import compile_kernels

        compile_kernels()

    def encode(self, config: ExtractConfig, games: pa.Table) -> Any:
        from pipeline.extract.go import encode_go

        return encode_go(games, config)

    def net_step(self, config: ExtractConfig, *, device: str | None = None) -> NetStep:
        from pipeline.extract.go import GoNetStep

        return GoNetStep(config, device=device)

    def needs_children(self, config: ExtractConfig) -> bool:
        """Expected loss values the positions after the likely moves."""
        return config.expected_loss.net is not None

    def encode_children(self, work: Any, nets: Any, states: Any) -> ChildPositions:
        from pipeline.extract.go import encode_go_children

        return encode_go_children(work, nets, states)

    def features(
        self,
        config: ExtractConfig,
        work: Any,
        nets: Any,
        values: list,
        kids: ChildValues | None,
    ) -> pa.Table:
        """Go has no engine values (``values`` is always empty): the value net's are in ``nets``."""
        from pipeline.extract.go import assemble_go

        return assemble_go(config, work, nets, kids)

    def engine(self, config: ExtractConfig) -> StockfishSettings | None:
        """None: a net values Go positions (the config refuses any other evaluator)."""
        return None

    def value_step(self, config: ExtractConfig) -> None:
        return None


class GoKind:
    """Go: the ``game=go`` partition, SGF games, KataGo-format nets."""

    name = "go"
    games_format = "sgf"
    reader = SgfReader()
    extraction = GoExtraction()
    # The embedded default of `kibitz run`, under the data folder: one collection per group.
    candidating = Path("go/fox-selected/candidating")
    # The n whose meta-models name the rank group by an ordinal model (pipeline/meta/
    # decision.py): none; ordinal models win Go's ends but lose as much in the middle
    # (docs/research/results.md).
    ordinal_ns: tuple[int, ...] = ()

    def sample(self, split_dir: Path, out_dir: Path, games_per_group: int) -> list[Path]:
        """The first ``games_per_group`` games (lines) of each rank-group collection (0 = all)."""
        out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for src in sorted(split_dir.glob("*.sgf")):
            lines = [ln for ln in src.read_bytes().splitlines() if ln.strip()]
            if games_per_group:
                lines = lines[:games_per_group]
            target = out_dir / src.name
            target.write_bytes(b"\n".join(lines) + b"\n")
            written.append(target)
        return written

    def strength_label(self, value: float) -> str:
        """Kibitz's numeric rank (1k = 0, n k = 1 − n, n d = n) and the nearest rank."""
        from pipeline.go_game.ranks import rank_label

        return f"{value:+.1f} (≈ {rank_label(value)})"

    def check_net(self, net: str, games: str | Path, **options: Any) -> MoveMatchResult:
        from pipeline.nets.check_go import check_net

        return check_net(net, games, **options)

    def __repr__(self) -> str:
        return "GO"


GO = GoKind()
