"""Stockfish as Kibitz's chess value evaluator: FENs in, the side to move's win rate out.

A plain step class (no ray): ``actors/stockfish_pool.py`` runs one of these per CPU core. Try it::

    python -c "from pipeline.nets.stockfish import StockfishEvaluator as S; \
print(S().evaluate_v(['6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1']))"

What is computed, per position
- Stockfish searches ``nodes`` nodes with ``UCI_ShowWDL``; its win/draw/loss per mille (the
  side to move's view) give the expected score ``w = (W + D/2) / 1000``.
- ``v = log(w / (1 − w))`` with w clipped to [1e-4, 1 − 1e-4], so ``|v| ≤ V_MAX ≈ 9.21``.
- Positions that are already over are exact, without a search: checkmate → w = 0 (the side to
  move is mated); stalemate, insufficient material, the 75-move rule → w = 1/2.

Determinism (same FEN → same number, whatever the batch, order, retry or engine process)
- ``Threads = 1`` (a multi-threaded search is not reproducible) and a fixed ``Hash``.
- ``ucinewgame`` before EVERY position: it clears the hash, so a search never sees entries left
  by the previous position. That costs a few milliseconds per position but makes a value a pure
  function of (FEN, nodes, hash size, binary), which is what lets re-runs be byte-identical and
  lets :class:`StockfishEvaluator` cache values of positions seen again (openings, transpositions).
- The FEN carries the full-move number because Stockfish's WDL model depends on the game ply.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import chess
import chess.engine
import numpy as np

log = logging.getLogger(__name__)

W_CLIP = 1e-4  # win rates are clipped to [W_CLIP, 1 - W_CLIP] before the logit
V_MAX = math.log((1 - W_CLIP) / W_CLIP)  # ≈ 9.21, the largest |v|
DEBIAN_STOCKFISH = Path("/usr/games/stockfish")


class StockfishNotFoundError(FileNotFoundError):
    """No Stockfish binary on PATH, at /usr/games/stockfish or at $KIBITZ_STOCKFISH."""


class StockfishError(RuntimeError):
    """Stockfish failed on a position twice (the engine was restarted in between)."""


@dataclass(frozen=True)
class StockfishSettings:
    """How one engine searches; part of the extraction config hash."""

    nodes: int = 2000  # ~5 ms a position on one core of this machine; WDL is stable to a few %
    hash_mb: int = 16  # cleared before every position, so only its size matters
    binary: str | None = None  # None: $KIBITZ_STOCKFISH, then PATH, then /usr/games/stockfish


def find_stockfish(binary: str | None = None) -> str:
    """The Stockfish executable to run, or a clear error naming every place looked at."""
    candidates = [binary, os.environ.get("KIBITZ_STOCKFISH"), shutil.which("stockfish")]
    candidates.append(str(DEBIAN_STOCKFISH))
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise StockfishNotFoundError(
        f"no Stockfish binary (tried {binary!r}, $KIBITZ_STOCKFISH, PATH, {str(DEBIAN_STOCKFISH)!r});"
        " install the Debian package 'stockfish' or set KIBITZ_STOCKFISH"
    )


def win_rate_to_v(w: np.ndarray) -> np.ndarray:
    """``log(w / (1 − w))`` of win rates clipped to [1e-4, 1 − 1e-4], as float32."""
    w = np.clip(np.asarray(w, dtype=np.float64), W_CLIP, 1 - W_CLIP)
    return np.log(w / (1 - w)).astype(np.float32)


def terminal_win_rate(board: chess.Board) -> float | None:
    """The exact win rate of the side to move when the game is already over, else None."""
    outcome = board.outcome(claim_draw=False)
    if outcome is None:
        return None
    return 0.0 if outcome.winner is not None else 0.5


class StockfishEvaluator:
    """One Stockfish process evaluating positions one by one (the engine is the bottleneck)."""

    def __init__(self, settings: StockfishSettings | None = None, *, cache_size: int = 200_000):
        self.settings = settings or StockfishSettings()
        self.binary = find_stockfish(self.settings.binary)
        self.cache_size = cache_size
        self._cache: dict[str, float] = {}
        self.searches = 0  # positions actually searched (not cached, not terminal)
        self.restarts = 0
        self._engine: chess.engine.SimpleEngine | None = None
        self._start()

    @property
    def pid(self) -> int:
        """The engine's process id (tests kill it to check the restart path)."""
        return self._engine.transport.get_pid()

    def _start(self) -> None:
        self._engine = chess.engine.SimpleEngine.popen_uci(self.binary)
        self._engine.configure({"Threads": 1, "Hash": self.settings.hash_mb, "UCI_ShowWDL": True})

    def _restart(self) -> None:
        if self._engine is not None:
            try:
                self._engine.close()
            except (chess.engine.EngineError, chess.engine.EngineTerminatedError, OSError):
                log.debug("closing a dead Stockfish failed; starting a new one anyway")
        self.restarts += 1
        self._start()

    def _search(self, board: chess.Board) -> float:
        """One search from a cleared hash (``game=object()`` makes python-chess send ucinewgame)."""
        info = self._engine.analyse(
            board, chess.engine.Limit(nodes=self.settings.nodes), game=object()
        )
        wdl = info.get("wdl")
        if wdl is None:
            wdl = info["score"].wdl(model="sf15.1", ply=board.ply())
        wins, draws, _losses = wdl.pov(board.turn)
        return (wins + draws / 2) / 1000.0

    def win_rate(self, fen: str) -> float:
        """The side to move's expected score in [0, 1] for one FEN; exact when the game is over."""
        if fen in self._cache:
            return self._cache[fen]
        board = chess.Board(fen)
        w = terminal_win_rate(board)
        if w is None:
            try:
                w = self._search(board)
            except (chess.engine.EngineError, chess.engine.EngineTerminatedError, OSError) as exc:
                log.warning("Stockfish died on %r (%s); restarting it and retrying once", fen, exc)
                self._restart()
                try:
                    w = self._search(board)
                except (
                    chess.engine.EngineError,
                    chess.engine.EngineTerminatedError,
                    OSError,
                ) as e2:
                    self._restart()
                    raise StockfishError(f"Stockfish failed twice on {fen!r}: {e2}") from e2
            self.searches += 1
        if len(self._cache) >= self.cache_size:
            self._cache.clear()
        self._cache[fen] = w
        return w

    def evaluate(self, fens: Sequence[str]) -> np.ndarray:
        """Win rates of the side to move, (N,) float64, in the order of ``fens``."""
        return np.fromiter((self.win_rate(f) for f in fens), dtype=np.float64, count=len(fens))

    def evaluate_v(self, fens: Sequence[str]) -> np.ndarray:
        """``v = log(w / (1 − w))`` from the side to move's view, (N,) float32."""
        return win_rate_to_v(self.evaluate(fens))

    def close(self) -> None:
        if self._engine is not None:
            try:
                self._engine.quit()
            except (chess.engine.EngineError, chess.engine.EngineTerminatedError, OSError):
                self._engine.close()
            self._engine = None

    def __enter__(self) -> StockfishEvaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
