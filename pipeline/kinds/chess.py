"""Chess as a game kind (:data:`CHESS`): Lichess PGN, Maia / lc0 nets, Stockfish or a value net.

Wires the chess implementations of each stage (``pipeline.ingest.pgn``,
``pipeline.extract.chess``, ``pipeline.nets.check_chess``) behind the interfaces the generic
code calls (``pipeline.kinds.GameKind``). Every implementation is imported inside the method
that needs it, so that importing the kinds costs little (see ``pipeline/kinds/__init__.py``).
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import zstandard

if TYPE_CHECKING:
    import pyarrow as pa

    from pipeline.extract.chess import ChessValueStep
    from pipeline.extract.child_positions import ChildPositions, ChildValues
    from pipeline.extract.config import ExtractConfig
    from pipeline.extract.steps import NetStep
    from pipeline.ingest.chunks import ChunkResult
    from pipeline.ingest.work import WorkItem
    from pipeline.nets.move_matching import MoveMatchResult
    from pipeline.nets.stockfish import StockfishSettings

logger = logging.getLogger(__name__)


class PgnReader:
    """Chess ingestion (``pipeline.ingest.work.ChunkReader``).

    A Lichess month is one ``.pgn.zst`` stream that cannot be seeked: the driver streams each
    file once and cuts it into pieces of raw text, which travel with their work items to the
    tasks (``pipeline.ingest.pgn.stream_chunks``).
    """

    def compile_kernels(self) -> None:
        from pipeline.ingest import pgn

        pgn.compile_kernels()

    def work_items(self, sources: Sequence[str], *, games_per_chunk: int) -> Iterator[WorkItem]:
        from pipeline.ingest import pgn
        from pipeline.ingest.work import WorkItem

        for source in pgn.expand_sources(sources):
            for piece in pgn.stream_chunks(source, games_per_chunk=games_per_chunk):
                if piece.stream_error:
                    logger.warning("%s", piece.stream_error)
                yield WorkItem(piece.chunk, piece.data, piece.stream_error)

    def read_chunk(self, item: WorkItem) -> ChunkResult:
        """Read a piece's bytes; an item without them re-reads its chunk from the file."""
        from pipeline.ingest import pgn

        if item.data is None and item.stream_error is None:
            return pgn.read_chunk(item.chunk)
        return pgn.read_chunk(item.chunk, item.data, stream_error=item.stream_error)

    def read_text(self, data: bytes, source_file: str) -> ChunkResult:
        from pipeline.ingest import pgn

        return pgn.read_text(data, source_file)


class ChessExtraction:
    """Chess extraction (``pipeline.extract.steps.Extraction``): ``pipeline.extract.chess``."""

    def compile_encoders(self) -> None:
        from pipeline.chess_game.encode import compile_kernels

        compile_kernels()

    def encode(self, config: ExtractConfig, games: pa.Table) -> Any:
        from pipeline.extract.chess import encode_chess

        return encode_chess(games)

    def net_step(self, config: ExtractConfig, *, device: str | None = None) -> NetStep:
        from pipeline.extract.chess import ChessNetStep

        return ChessNetStep(config, device=device)

    def needs_children(self, config: ExtractConfig) -> bool:
        """A value net values the positions after the played and the likely moves."""
        return config.value.evaluator == "net"

    def encode_children(self, work: Any, nets: Any, states: Any) -> ChildPositions:
        from pipeline.extract.chess import encode_chess_children

        return encode_chess_children(work, nets)

    def features(
        self,
        config: ExtractConfig,
        work: Any,
        nets: Any,
        values: list,
        kids: ChildValues | None,
    ) -> pa.Table:
        from pipeline.extract.chess import assemble_chess

        return assemble_chess(config, work, nets, values, kids)

    def engine(self, config: ExtractConfig) -> StockfishSettings | None:
        if config.value.evaluator != "stockfish":
            return None
        from pipeline.nets.stockfish import StockfishSettings

        return StockfishSettings(nodes=config.value.nodes, hash_mb=config.value.hash_mb)

    def value_step(self, config: ExtractConfig) -> ChessValueStep | None:
        settings = self.engine(config)
        if settings is None:
            return None
        from pipeline.extract.chess import ChessValueStep

        return ChessValueStep(settings)


class ChessKind:
    """Chess: the ``game=chess`` partition, PGN games, lc0-format nets."""

    name = "chess"
    games_format = "pgn"
    reader = PgnReader()
    extraction = ChessExtraction()
    # The embedded default of `kibitz run`, under the data folder: one .pgn.zst per band.
    candidating = Path("chess/lichess-2024-02-blitz/candidating")
    # The n whose meta-models name the band by an ordinal model (pipeline/meta/decision.py):
    # from one game it gains 2.9 points and both ends without losing ±1; from 5 and 20 games
    # it gains nothing (docs/research/results.md).
    ordinal_ns = (1,)

    def sample(self, split_dir: Path, out_dir: Path, games_per_group: int) -> list[Path]:
        """The first ``games_per_group`` games of each band file, as plain PGN (0 = all)."""
        out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for src in sorted(split_dir.glob("*.pgn.zst")):
            target = out_dir / src.name.replace(".pgn.zst", ".pgn")
            with src.open("rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as z:
                text = io.TextIOWrapper(z, encoding="utf-8", errors="replace").read()
            games = text.split("\n\n[Event ")
            if games_per_group:
                games = games[:games_per_group]
            target.write_text("\n\n[Event ".join(games).rstrip("\n") + "\n\n", encoding="utf-8")
            written.append(target)
        return written

    def strength_label(self, value: float) -> str:
        """A Lichess rating, to the point."""
        return f"{value:.0f}"

    def check_net(self, net: str, games: str | Path, **options: Any) -> MoveMatchResult:
        from pipeline.nets.check_chess import check_net

        return check_net(net, games, **options)

    def __repr__(self) -> str:
        return "CHESS"


CHESS = ChessKind()
