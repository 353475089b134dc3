"""One object per game kind: what chess and Go do differently, in one place per kind.

Ingestion, extraction, ``kibitz models check`` and ``kibitz estimate`` are the same code for
both games except at a few points: how input files are cut and read, how positions are encoded,
which nets evaluate them, how features are assembled, which check measures a net. Each of those
points is a method of the kind's object; callers ask for it by name once and call it::

    kind = game_kind(config.game)          # CHESS or GO; UnknownGameError names the known ones
    result = kind.reader.read_chunk(item)  # ingestion (pipeline.ingest.work.ChunkReader)
    work = kind.extraction.encode(config, games)  # extraction (pipeline.extract.steps.Extraction)
    kind.check_net("maia-1100", "games.pgn")      # kibitz models check

instead of ``if config.game == "chess"`` at every one of them, or module names in strings. The
kinds sit above every stage they wire (``ingest``, ``nets``, ``extract``); the generic code of
those stages takes the kind's piece (a reader, an extraction) as an argument, and the drivers
above (``actors/``, ``pipeline/jobs/``, ``pipeline/cli/``) resolve the kind.

The implementations stay in their stages (``pipeline/ingest/pgn.py``, ``pipeline/extract/go.py``,
``pipeline/nets/check_chess.py``, …) and are imported inside the kind's methods: importing this
package costs neither Go's numba board code in a chess run nor torch in ``kibitz ingest``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pipeline.core.games_schema import UnknownGameError
from pipeline.kinds.chess import CHESS
from pipeline.kinds.go import GO

if TYPE_CHECKING:
    from pipeline.extract.steps import Extraction
    from pipeline.ingest.work import ChunkReader
    from pipeline.nets.move_matching import MoveMatchResult

__all__ = ["CHESS", "GO", "KINDS", "GameKind", "UnknownGameError", "game_kind"]


class GameKind(Protocol):
    """Everything kind-specific that the stages dispatch to.

    A Protocol rather than an ABC: ``pipeline/kinds/chess.py`` and ``go.py`` then need not import
    this package, which imports them to build :data:`KINDS` (no import circle), and the type
    checker still holds both objects to this interface where :data:`KINDS` is built.
    """

    @property
    def name(self) -> str:
        """``"chess"`` | ``"go"``: the games table's ``game`` partition and configs' ``game``."""
        ...

    @property
    def games_format(self) -> str:
        """``"pgn"`` | ``"sgf"``: the games files it reads (``kibitz models check --pgn``)."""
        ...

    @property
    def ordinal_ns(self) -> tuple[int, ...]:
        """The n whose meta-models name the rank group by an ordinal model by default, the
        others rounding (``pipeline.meta.decision``)."""
        ...

    @property
    def reader(self) -> ChunkReader:
        """Ingestion: plans work items from input files and reads them into games rows."""
        ...

    @property
    def extraction(self) -> Extraction:
        """Extraction: encode, net step, positions after moves, features, engine values."""
        ...

    @property
    def candidating(self) -> Path:
        """The embedded default of ``kibitz run``: a split under the data folder."""
        ...

    def sample(self, split_dir: Path, out_dir: Path, games_per_group: int) -> list[Path]:
        """The first ``games_per_group`` games of every band / rank-group file of ``split_dir``
        written under ``out_dir`` in the format the reader takes (0 = all); the files."""
        ...

    def strength_label(self, value: float) -> str:
        """A point of the data's strength scale as a player reads it (an estimate's report):
        a chess rating, a Go rank on Kibitz's numeric scale with the nearest rank."""
        ...

    def check_net(self, net: str, games: str | Path, **options: Any) -> MoveMatchResult:
        """Move matching of ``net`` (registry name or file) on the games under ``games``
        (``kibitz models check``); ``options``: ``max_games``, ``backend``, ``device``."""
        ...


# Every kind, by name.
KINDS: dict[str, GameKind] = {kind.name: kind for kind in (CHESS, GO)}


def game_kind(name: str) -> GameKind:
    """The kind object of ``name`` (``"chess"`` or ``"go"``)."""
    try:
        return KINDS[name]
    except KeyError:
        raise UnknownGameError(
            f"unknown game {name!r}; known games: {', '.join(sorted(KINDS))}"
        ) from None
