"""Move-matching statistics: how often a policy net's top move is the move a human played, and
the mean log-likelihood of the played moves — the standard way imitation nets (Maia, KataGo
HumanSL) are reported. Shared by ``pipeline.nets.check_chess`` and ``pipeline.nets.check_go``; printed by
``kibitz models check``.

Use::

    tally = MoveMatchTally()
    tally.add(bands, top1_is_played, played_logprob, games_per_band)   # per batch, vectorised
    result = tally.result(net="maia-1500", source="games.pgn.zst", backend="torch")
    print(result.to_text())
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class BandRow:
    """Move matching over the positions of one rating band (``band`` = the games' group)."""

    band: str  # "1000-1200", "3-5k", or "mixed" when the players' groups differ
    games: int
    positions: int
    accuracy: float  # share of positions where the top-1 move is the played move
    mean_loglik: float  # mean natural log of the played move's probability


@dataclass
class MoveMatchResult:
    """Move matching of one net on one set of games (contract C5)."""

    net: str
    source: str  # the games file or folder
    backend: str
    games: int
    positions: int
    accuracy: float
    mean_loglik: float
    rows: list[BandRow]  # per band, sorted by band name
    skipped_games: int = 0  # games with an illegal or unreadable move, cut at that move
    seconds: float = 0.0  # wall time of encoding + evaluation

    def to_text(self) -> str:
        """A small table, one row per band then the total."""
        lines = [
            f"{self.net} on {self.source} ({self.backend}): {self.games} games, "
            f"{self.positions} positions"
            + (
                f", {self.skipped_games} games cut at an illegal move" if self.skipped_games else ""
            ),
            f"{'band':<12} {'games':>6} {'positions':>10} {'accuracy':>9} {'mean loglik':>12}",
        ]
        for row in self.rows:
            lines.append(
                f"{row.band:<12} {row.games:>6} {row.positions:>10} "
                f"{row.accuracy:>8.2%} {row.mean_loglik:>12.4f}"
            )
        lines.append(
            f"{'all':<12} {self.games:>6} {self.positions:>10} "
            f"{self.accuracy:>8.2%} {self.mean_loglik:>12.4f}"
        )
        if self.seconds:
            lines.append(f"{self.positions / self.seconds:,.0f} positions/s")
        return "\n".join(lines)


@dataclass
class MoveMatchTally:
    """Running sums per band, fed batch by batch with numpy arrays."""

    positions: dict[str, int] = field(default_factory=dict)
    hits: dict[str, int] = field(default_factory=dict)
    loglik: dict[str, float] = field(default_factory=dict)
    games: dict[str, int] = field(default_factory=dict)
    skipped_games: int = 0

    def add(
        self,
        bands: np.ndarray,
        top1_is_played: np.ndarray,
        played_logprob: np.ndarray,
        games_per_band: Mapping[str, int],
    ) -> None:
        """Add one batch: ``bands`` (N,) band label of each position's game."""
        labels, inverse = np.unique(
            np.asarray(bands, dtype=object).astype(str), return_inverse=True
        )
        hits = np.bincount(
            inverse, weights=top1_is_played.astype(np.float64), minlength=len(labels)
        )
        logs = np.bincount(
            inverse, weights=played_logprob.astype(np.float64), minlength=len(labels)
        )
        counts = np.bincount(inverse, minlength=len(labels))
        for k, label in enumerate(labels):
            self.positions[label] = self.positions.get(label, 0) + int(counts[k])
            self.hits[label] = self.hits.get(label, 0) + round(hits[k])
            self.loglik[label] = self.loglik.get(label, 0.0) + float(logs[k])
        for label, n in games_per_band.items():
            self.games[label] = self.games.get(label, 0) + int(n)

    def result(
        self, *, net: str, source: str, backend: str, seconds: float = 0.0
    ) -> MoveMatchResult:
        rows = [
            BandRow(
                band=band,
                games=self.games.get(band, 0),
                positions=n,
                accuracy=self.hits[band] / n,
                mean_loglik=self.loglik[band] / n,
            )
            for band, n in sorted(self.positions.items())
            if n
        ]
        total = sum(self.positions.values())
        return MoveMatchResult(
            net=net,
            source=source,
            backend=backend,
            games=sum(self.games.values()),
            positions=total,
            accuracy=sum(self.hits.values()) / total if total else float("nan"),
            mean_loglik=sum(self.loglik.values()) / total if total else float("nan"),
            rows=rows,
            skipped_games=self.skipped_games,
            seconds=seconds,
        )
