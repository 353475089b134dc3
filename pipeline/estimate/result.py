"""One player's estimate from their instance rows: what ``kibitz estimate`` prints and
``kibitz serve`` answers.

:func:`estimate_of_instances` takes the player's rows of ``player_instance_features`` (one a
game, in the order the games were played), picks the feature set their games allow (the
clock set only for games with a clock of a time control the model saw,
:func:`applied_feature_set`), scores the running means with the models of the trained n
nearest to the number of games (``pipeline.meta.progressive``) and returns an
:class:`Estimate`: the group, the strength with its intervals and what they were calibrated
on, the applied model's own measured figures and the games still needed. Both commands call
it on the same rows, so they agree to the last digit.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.kinds import game_kind
from pipeline.meta.aggregate import feature_columns
from pipeline.meta.intervals import SavedStrength
from pipeline.meta.model import preferred_set, reads_clock, time_controls
from pipeline.meta.player_training import player_method
from pipeline.meta.progressive import further_games, games_for_confidence, score_steps
from pipeline.meta.train import MetaModels

# An instance column that holds a value exactly when its game has a clock.
CLOCK_PRESENT = "clock_spent_share_all"


@dataclass
class Estimate:
    """What ``kibitz estimate`` reports (``--json`` prints it as is)."""

    player: str
    game: str
    games_found: int  # games of the player in the files
    games_used: int  # of those, games with features (readable and legal)
    moves_used: int
    model: str  # the meta-models applied: registry name or folder
    n_model: int  # the trained n whose model was applied
    feature_set: str
    # Why ``feature_set`` is not the model's first choice, or what in the games it did not know
    # (a game without a clock, a time control the clock model never saw); None: nothing to say.
    feature_set_note: str | None
    # What the applied model at n_model was fitted on: "player" (rank-group samples and samples
    # of one player's own games: pipeline/meta/player_training.py) or "rank_group".
    model_training: str
    # That model's own figures at n_model as `kibitz train meta` measured them, on one player's
    # own games, none of them fitted on (model_sampling "player") where measured, else on
    # rank-group samples of the evaluation games: how far to trust this estimate. None if not
    # recorded.
    model_sampling: str | None
    model_accuracy: float | None
    model_accuracy_pm1: float | None
    model_samples: int | None
    # The continuous estimate on the data's scale (chess rating, Go numeric rank) with its
    # conformal 80 % and 95 % intervals ([low, high]); None where the model has no strength part.
    strength_scale: str | None
    # The features the strength model read: the clock set's for games with a clock (where the
    # model has one), else the set that reads none.
    strength_feature_set: str | None
    strength: float | None
    interval_80: list[float] | None
    interval_95: list[float] | None
    # What the intervals were calibrated on: "player" (one player's own n_model games, where the
    # model has a player-specific set), "derived" (the rank-group widths widened by rho, the
    # share of one game's error that a player's games share, measured on players with two or
    # more games: chess, whose data hold no player with many games in one band;
    # pipeline/meta/player_variance.py) or "rank_group" (samples of n_model different players,
    # which cover one player's own games less from about 10 games on: docs/guide/estimate.md).
    interval_calibration: str | None
    # How often those intervals held on one player's own n_model games, measured on players
    # they were not calibrated on ([80 %, 95 %]); None where not measured.
    interval_coverage_player: list[float] | None
    # "derived" only: rho and the players it rests on, and how the same derivation held where
    # the answer is known ({"model": the Go model, "coverage": [80 %, 95 %]} at n_model).
    interval_rho: float | None
    interval_rho_players: int | None
    interval_check: dict | None
    # Games at which the model's measured ±1-group accuracy reaches `confidence` (trained n
    # interpolated), and how many more than `games_used` that is; None: not reached.
    confidence: float
    games_needed: int | None
    further_games: int | None
    rank_group: str
    rank_group_index: int
    prediction: float  # the regressor's output (group index scale); the group rounds it, or at an
    # ordinal n is the ordinal model's (MetaModels.ordinal)
    band: list[str]  # the group and its neighbours (the ±1 band)
    rank_groups: list[str]  # every group, weakest first
    n_trained: list[int]  # the n the meta-models were trained at
    # The nets' number format here and in the training features' extraction: they differ where
    # this machine lacks the training's arithmetic (FP16 of a GPU, BF16 of a bfloat16 CPU), and
    # the nets then run FP32 (pipeline.nets.evaluator.runnable_precision; docs/guide/estimate.md).
    precision: str
    precision_trained: str
    rated_rank_groups: list[str]  # the player's own groups according to the files, if any
    report: str | None
    steps: list[dict] | None  # --progressive: the estimate after each game (progressive.Step)
    seconds: float

    def to_text(self) -> str:
        rated = (
            f"; rated in the files: {', '.join(self.rated_rank_groups)}"
            if self.rated_rank_groups
            else ""
        )
        games = "one game" if self.n_model == 1 else f"{self.n_model} games"
        on = {
            "player": f"samples of {games} of one player, none of them fitted on",
            "rank_group": "evaluation samples"
            + ("" if self.n_model == 1 else f" of {self.n_model} different players' games"),
        }
        trust = (
            f"; at n={self.n_model} it is right {100 * self.model_accuracy:.1f} % of the time"
            f" (±1 group: {100 * self.model_accuracy_pm1:.1f} %) on {self.model_samples:,}"
            f" {on[self.model_sampling]}"
            if self.model_accuracy is not None and self.model_accuracy_pm1 is not None
            else f"; no accuracy recorded for n={self.n_model}"
        )
        fitted = ", fitted for one player's games" if self.model_training == "player" else ""
        return (
            f"{self._steps_text()}"
            f"{self.player}: estimated rank group {self.rank_group} (±1 band {self.band[0]} … {self.band[-1]})"
            f" from {self.games_used} game(s), {self.moves_used} moves{rated}\n"
            f"{self._strength_text()}"
            f"model: {self.model} ({self.feature_set}, n={self.n_model}{fitted}){trust}\n"
            f"{f'note: {self.feature_set_note}' + chr(10) if self.feature_set_note else ''}"
            f"{self._precision_text()}"
            f"{self._needed_text()}"
            f"report: {self.report}"
        )

    def _precision_text(self) -> str:
        if self.precision == self.precision_trained:
            return ""
        return (
            f"nets run at {self.precision} here; the model's features were extracted at "
            f"{self.precision_trained}, which this machine lacks (docs/guide/estimate.md: what it changes)\n"
        )

    def _needed_text(self) -> str:
        target = f"{100 * self.confidence:.0f} % right within ±1 group"
        if self.games_needed is None:
            return f"games for {target}: more than the model's largest n ({max(self.n_trained)})\n"
        more = f"{self.further_games} more" if self.further_games else "reached"
        return f"games for {target}: {self.games_needed} ({more})\n"

    def _steps_text(self) -> str:
        if not self.steps:
            return ""
        label = game_kind(self.game).strength_label
        lines = ["after game | rank group | strength (80 %)"]
        for step in self.steps:
            strength = (
                f"{label(step['strength'])} ({label(step['interval_80'][0])} …"
                f" {label(step['interval_80'][1])})"
                if step["strength"] is not None
                else "–"
            )
            group = self.rank_groups[step["rank_group_index"]]
            lines.append(f"{step['games']:>10} | {group:>10} | {strength}")
        return "\n".join(lines) + "\n"

    def _different_players(self) -> str:
        """What rank-group samples of n_model are, in words."""
        if self.n_model == 1:
            return "single games of different players"
        return f"{self.n_model} different players' games"

    def _strength_text(self) -> str:
        if self.strength is None:
            return ""
        label = game_kind(self.game).strength_label
        bands = [
            f"{level}: {label(iv[0])} … {label(iv[1])}"
            for level, iv in (("80 %", self.interval_80), ("95 %", self.interval_95))
            if iv is not None
        ]
        calibrated = {
            "player": f"; calibrated on one player's own {self.n_model} game(s)",
            "rank_group": f"; calibrated on {self._different_players()}",
            "derived": (
                f"; derived for one player's own {self.n_model} game(s) from the share of the"
                f" error one player's games share (ρ = {self.interval_rho},"
                f" {self.interval_rho_players or 0:,} players with 2+ games)"
            ),
        }.get(self.interval_calibration or "", "")
        if self.interval_check is not None:
            low, high = (100 * c for c in self.interval_check["coverage"])
            calibrated += (
                f"; on Go, where one player's games are known ({self.interval_check['model']}),"
                f" the same derivation held {low:.1f} / {high:.1f} % of the time"
            )
        held = (
            f"; on other players' own {self.n_model} game(s) the model measured these intervals"
            f" to hold {100 * self.interval_coverage_player[0]:.1f} / "
            f"{100 * self.interval_coverage_player[1]:.1f} % of the time"
            if self.interval_coverage_player is not None
            else ""
        )
        bands_text = "; ".join(bands)
        return f"strength ({self.strength_scale}): {label(self.strength)} ({bands_text}){calibrated}{held}\n"


def _band(groups: list[str], index: int) -> list[str]:
    return groups[max(index - 1, 0) : index + 2]


def _player_coverage(strength: SavedStrength | None, n: int) -> list[float] | None:
    """The strength intervals' measured coverage on one player's own ``n`` games, if any."""
    measured = strength.coverage(n, "player") if strength is not None else None
    return list(measured) if measured is not None else None


def _derivation(strength: SavedStrength | None, n: int) -> dict:
    """The Estimate's interval_rho, interval_rho_players and interval_check at trained ``n``:
    set where the applied intervals are derived (SavedStrength.calibration)."""
    if strength is None or strength.calibration(n) != "derived":
        return {"interval_rho": None, "interval_rho_players": None, "interval_check": None}
    check = strength.derivation_check(n)
    return {
        "interval_rho": strength.derived.get("rho"),
        "interval_rho_players": strength.derived.get("players"),
        "interval_check": {"model": check[0], "coverage": check[1]} if check else None,
    }


def applied_feature_set(
    models: MetaModels, instances: pa.Table, requested: str | None
) -> tuple[str, str | None]:
    """The feature set an estimate applies to these instances, and a note when it is not the
    model's first choice or the games hold what its training games did not.

    The clock features were learnt on the time controls of the training games: a game without
    a clock (an over-the-board PGN, a chess.com export without ``%clk``) or of another time
    control takes the set that reads no clock, shipped beside it, and the note names why."""
    chosen = requested or models.feature_set()
    if not reads_clock(chosen):
        return chosen, None
    trained_list = models.manifest.get("time_controls") or []  # sorted by base, increment
    trained_controls = set(trained_list)
    clocked = pc.is_valid(instances[CLOCK_PRESENT]).to_numpy(zero_copy_only=False)
    unseen = sorted(set(time_controls(instances)) - trained_controls)
    problems = []
    if not clocked.all():
        problems.append(f"{int((~clocked).sum())} of {len(clocked)} game(s) have no clock")
    if unseen and not trained_list:  # aggregates without the time control (written before it)
        problems.append("the clock model records no time control of its training games")
    elif unseen:
        problems.append(
            f"time control {', '.join(unseen)} is not among the {len(trained_controls)} of the"
            f" clock model's training games ({', '.join(trained_list[:4])} …)"
        )
    if not problems:
        return chosen, None
    if requested:  # the user's choice stands; the note says what it does not know
        return chosen, "; ".join(problems) + f": {chosen} reads the clock all the same"
    fallback = preferred_set(list(models.manifest["models"]), clock=False)
    if fallback is None:  # trained with clock sets only (--feature-sets)
        note = f": {chosen} reads the clock all the same (the model has no set that reads none)"
        return chosen, "; ".join(problems) + note
    return fallback, "; ".join(problems) + f", so the model that reads no clock ({fallback})"


def applied_figures(models: MetaModels, feature_set: str, n: int) -> tuple[str | None, dict]:
    """(sampling, figures row) of the model an estimate of one player applies at ``n``: its
    sibling fitted for one player's games where it has one, measured on other players' own
    games; else the rank-group model, on one player's games where the model has a
    player-specific set, else on rank-group samples. (None, {}) where nothing was recorded."""
    method = player_method(feature_set) if models.player_trained(feature_set, n) else feature_set
    with_players = models.player_aggregates_dir is not None  # else few players, in one split
    for sampling in ("player", "rank_group") if with_players else ("rank_group",):
        row = models.accuracy(method, n, sampling)
        if row is not None and row.get("samples"):
            return sampling, row
    return None, {}


def estimate_of_instances(
    models: MetaModels,
    player: str,
    instances: pa.Table,
    *,
    games_found: int,
    precision: str,
    precision_trained: str,
    feature_set: str | None = None,
    progressive: bool = False,
    confidence: float = 0.9,
) -> Estimate:
    """The estimate of ``player`` from their instances (rows of ``player_instance_features``,
    in the order the games were played): what ``kibitz estimate`` prints and ``kibitz serve``
    answers after each game, from the same rows the same way (no report: ``report`` None)."""
    started = time.perf_counter()
    columns = feature_columns(instances.column_names)
    matrix = np.column_stack(
        [instances[c].to_numpy(zero_copy_only=False).astype(np.float64) for c in columns]
    )  # (K, F) the player's instances, game by game
    chosen, note = applied_feature_set(models, instances, feature_set)
    steps = score_steps(models, matrix, columns, chosen)
    last = steps[-1]  # every game: the estimate
    groups = models.group_names
    rated = sorted(set(instances["rank_group"].drop_null().to_pylist()))
    sampling, measured = applied_figures(models, chosen, last.n_model)
    pm1 = [applied_figures(models, chosen, n)[1].get("accuracy_pm1") for n in models.ns]
    needed = games_for_confidence(models.ns, pm1, confidence)
    strength = models.strength(chosen)
    return Estimate(
        player=player,
        game=models.manifest["game"],
        games_found=games_found,
        games_used=instances.num_rows,
        moves_used=int(pc.sum(instances["moves_all"]).as_py()),
        model=models.manifest.get("name") or str(models.root),
        n_model=last.n_model,
        feature_set=chosen,
        feature_set_note=note,
        model_training="player" if models.player_trained(chosen, last.n_model) else "rank_group",
        model_sampling=sampling,
        model_accuracy=measured.get("accuracy"),
        model_accuracy_pm1=measured.get("accuracy_pm1"),
        model_samples=measured.get("samples"),
        strength_scale=strength.scale if strength is not None else None,
        strength_feature_set=strength.record["feature_set"] if strength is not None else None,
        strength=last.strength,
        interval_80=last.interval_80,
        interval_95=last.interval_95,
        interval_calibration=strength.calibration(last.n_model) if strength is not None else None,
        interval_coverage_player=_player_coverage(strength, last.n_model),
        **_derivation(strength, last.n_model),
        confidence=confidence,
        games_needed=None if needed is None else math.ceil(needed - 1e-9),
        further_games=further_games(needed, instances.num_rows),
        rank_group=groups[last.rank_group_index],
        rank_group_index=last.rank_group_index,
        prediction=last.prediction,
        band=_band(groups, last.rank_group_index),
        rank_groups=groups,
        n_trained=models.ns,
        precision=precision,
        precision_trained=precision_trained,
        rated_rank_groups=rated,
        report=None,
        steps=[asdict(step) for step in steps] if progressive else None,
        seconds=round(time.perf_counter() - started, 2),
    )
