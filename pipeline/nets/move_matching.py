"""Move-matching statistics: how often a policy net's top move is the move a human played, and
the mean log-likelihood of the played moves — the standard way imitation nets (Maia, KataGo
HumanSL) are reported. Shared by ``pipeline.nets.check_chess`` and ``pipeline.nets.check_go``; printed by
``kibitz models check``.

A rank-conditioned policy (``kibitz-go-policy``: every rank's logits in one pass) is scored at
the rank of the player to move (``accuracy``, ``mean_loglik``), and the tally also keeps each
band's figures under every conditioning rank, so a row names the conditioning whose mean
log-likelihood is highest (``best``: the own rank, if the rank input carries what it should) and
the figures at one fixed rank (``--profile``).

Use::

    tally = MoveMatchTally()
    tally.add(bands, top1_is_played, played_logprob, games_per_band)   # per batch, vectorised
    result = tally.result(net="maia-1500", source="games.pgn.zst", backend="torch")
    print(result.to_text())

    tally = MoveMatchTally(conditionings=GO_POLICY_RANKS)            # rank-conditioned
    tally.add(bands, own_top1, own_logprob, games_per_band,
              conditioned_top1=top1_nr, conditioned_logprob=logprob_nr)  # (N, R) each
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
    # Rank-conditioned policies only (empty otherwise): accuracy and mean log-likelihood of the
    # band's positions under each conditioning of ``MoveMatchResult.conditionings``.
    conditioned_accuracy: tuple[float, ...] = ()
    conditioned_loglik: tuple[float, ...] = ()


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
    # A rank-conditioned policy: its conditioning ranks (the rank axis), the rank ``profile``
    # shown beside the own rank, and the positions left out because the mover's rank is none
    # of the conditionings (a professional, an unranked player).
    conditionings: tuple[str, ...] = ()
    profile: str | None = None
    unranked_positions: int = 0

    def best_conditioning(self, row: BandRow) -> tuple[str, float]:
        """(conditioning, mean log-likelihood) of ``row``'s highest mean log-likelihood."""
        best = int(np.argmax(row.conditioned_loglik))
        return self.conditionings[best], row.conditioned_loglik[best]

    def total_row(self) -> BandRow:
        """All bands together (a rank-conditioned policy's conditioned figures included)."""
        weights = np.array([row.positions for row in self.rows], dtype=np.float64)

        def pooled(values: list[tuple[float, ...]]) -> tuple[float, ...]:
            if not self.conditionings or not weights.sum():
                return ()
            return tuple((weights @ np.asarray(values, dtype=np.float64) / weights.sum()).tolist())

        return BandRow(
            "all", self.games, self.positions, self.accuracy, self.mean_loglik,
            pooled([row.conditioned_accuracy for row in self.rows]),
            pooled([row.conditioned_loglik for row in self.rows]),
        )  # fmt: skip

    def to_text(self) -> str:
        """A small table, one row per band then the total; for a rank-conditioned policy also
        each band's best conditioning and, with a profile, the figures at that rank."""
        conditioned = bool(self.conditionings)
        profile = self.conditionings.index(self.profile) if self.profile else None
        head = f"{'band':<12} {'games':>6} {'positions':>10} {'accuracy':>9} {'mean loglik':>12}"
        if conditioned:
            head += f" {'best rank':>9} {'best loglik':>12}"
        if profile is not None:
            head += f" {f'{self.profile} acc.':>9} {f'{self.profile} loglik':>12}"
        lines = [
            f"{self.net} on {self.source} ({self.backend}): {self.games} games, "
            f"{self.positions} positions"
            + (f", {self.skipped_games} games cut at an illegal move" if self.skipped_games else "")
            + (
                f", {self.unranked_positions} positions of movers outside "
                f"{self.conditionings[0]}…{self.conditionings[-1]} left out"
                if self.unranked_positions
                else ""
            ),
            head,
        ]
        if conditioned:
            lines.insert(
                1,
                "accuracy and mean loglik at the mover's own rank; best rank: the conditioning "
                "with the highest mean loglik",
            )
        for row in [*self.rows, self.total_row()]:
            line = (
                f"{row.band:<12} {row.games:>6} {row.positions:>10} "
                f"{row.accuracy:>8.2%} {row.mean_loglik:>12.4f}"
            )
            if row.conditioned_loglik:
                best, best_loglik = self.best_conditioning(row)
                line += f" {best:>9} {best_loglik:>12.4f}"
            if profile is not None and row.conditioned_loglik:
                line += (
                    f" {row.conditioned_accuracy[profile]:>8.2%}"
                    f" {row.conditioned_loglik[profile]:>12.4f}"
                )
            lines.append(line)
        if self.seconds:
            lines.append(f"{self.positions / self.seconds:,.0f} positions/s")
        return "\n".join(lines)


@dataclass
class MoveMatchTally:
    """Running sums per band, fed batch by batch with numpy arrays."""

    # A rank-conditioned policy's conditioning labels (its rank axis); empty for other nets.
    conditionings: tuple[str, ...] = ()
    positions: dict[str, int] = field(default_factory=dict)
    hits: dict[str, int] = field(default_factory=dict)
    loglik: dict[str, float] = field(default_factory=dict)
    games: dict[str, int] = field(default_factory=dict)
    conditioned_hits: dict[str, np.ndarray] = field(default_factory=dict)  # band → (R,)
    conditioned_loglik: dict[str, np.ndarray] = field(default_factory=dict)  # band → (R,)
    skipped_games: int = 0
    unranked_positions: int = 0

    def add(
        self,
        bands: np.ndarray,
        top1_is_played: np.ndarray,
        played_logprob: np.ndarray,
        games_per_band: Mapping[str, int],
        *,
        conditioned_top1: np.ndarray | None = None,
        conditioned_logprob: np.ndarray | None = None,
    ) -> None:
        """Add one batch: ``bands`` (N,) band label of each position's game. A rank-conditioned
        policy also gives (N, R) top-1 flags and log-likelihoods under every conditioning."""
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
        conditioned = conditioned_top1 is not None and conditioned_logprob is not None
        for k, label in enumerate(labels):
            self.positions[label] = self.positions.get(label, 0) + int(counts[k])
            self.hits[label] = self.hits.get(label, 0) + round(hits[k])
            self.loglik[label] = self.loglik.get(label, 0.0) + float(logs[k])
            if conditioned:  # one pass per band (a dozen at most), vectorised over positions
                here = inverse == k
                width = len(self.conditionings)
                self.conditioned_hits[label] = self.conditioned_hits.get(
                    label, np.zeros(width, np.int64)
                ) + conditioned_top1[here].sum(axis=0)
                self.conditioned_loglik[label] = self.conditioned_loglik.get(
                    label, np.zeros(width)
                ) + conditioned_logprob[here].astype(np.float64).sum(axis=0)
        for label, n in games_per_band.items():
            self.games[label] = self.games.get(label, 0) + int(n)

    def result(
        self,
        *,
        net: str,
        source: str,
        backend: str,
        seconds: float = 0.0,
        profile: str | None = None,
    ) -> MoveMatchResult:
        rows = [
            BandRow(
                band=band,
                games=self.games.get(band, 0),
                positions=n,
                accuracy=self.hits[band] / n,
                mean_loglik=self.loglik[band] / n,
                conditioned_accuracy=tuple((self.conditioned_hits[band] / n).tolist())
                if self.conditionings
                else (),
                conditioned_loglik=tuple((self.conditioned_loglik[band] / n).tolist())
                if self.conditionings
                else (),
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
            conditionings=self.conditionings,
            profile=profile,
            unranked_positions=self.unranked_positions,
        )
