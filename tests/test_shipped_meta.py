"""The shipped default meta-models `kibitz-meta-chess` and `kibitz-meta-go` (models/): verified
by the registry, cards equal to their render and their accuracy tables to the run's tables,
`kibitz estimate` with no `--model` on a player's real games, a refit from the shipped aggregates
equal to the shipped model, and `kibitz audit` on held-out real players (the false-positive
rate, planted relabelled players)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pipeline.cli.main import main
from pipeline.core import settings
from pipeline.meta.aggregate import feature_columns
from pipeline.meta.audit import audit_held_out_players
from pipeline.meta.model import MetaConfig
from pipeline.meta.model_card import render_card
from pipeline.meta.registered import default_name, resolve_meta_models
from pipeline.meta.train import load_meta_models
from pipeline.nets import registry as model_registry

GAMES = ("chess", "go")
# A player of the candidating splits (never in the testing split the models were fitted on)
# with two real games, and the file that holds them.
PLAYERS = {
    "chess": ("chess/lichess-2024-02-blitz/candidating/1000-1200.pgn.zst", "Richmankorter"),
    "go": ("go/fox-selected/candidating/1-2k.sgf", "maxsunny"),
}


@pytest.mark.parametrize("game", GAMES)
def test_shipped_models_resolve_verified_with_their_card(game):
    models = resolve_meta_models(None, game)  # the registry entry, every file's sha256 checked
    assert models.manifest["name"] == default_name(game) and models.manifest["game"] == game
    card = (models.root / "MODEL_CARD.md").read_text()
    assert card == render_card(models.manifest)
    for table in ("table2_rank_group.md", "table67_player.md"):  # one figure, one rounding
        assert (models.root / "tables" / table).read_text().strip() in card
    record = models.manifest["features_config"]
    assert record["config"]["game"] == game and record["nets"]  # the nets' sha256 it needs
    # fitted as `kibitz train meta` fits today, which the card says (a refit reproduces it)
    assert models.manifest["fitting"] == MetaConfig().fitting_record()
    assert "learning_rate 0.03, num_iterations 400" in card
    if game == "chess":  # each net under its own licence: Maia-2200 is not CSSLab's
        assert "Maia-2200 (CallOn84/LeelaNets, Maia-1's format): GPL-3.0" in card
    assert models.strength() is not None
    instances = pq.read_table(models.aggregates_dir / "player_instance_features.parquet")
    counts = models.manifest["instances"]
    assert instances.num_rows >= sum(counts.values()) > 0


@pytest.mark.parametrize("game", GAMES)
def test_estimate_works_with_no_model_option(game, tmp_path, capsys):
    path, player = PLAYERS[game]
    capsys.readouterr()
    code = main(
        ["estimate", game, str(settings.data_dir() / path), "--player", player,
         "--work", str(tmp_path), "--json"]
    )  # fmt: skip
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    models = resolve_meta_models(None, game)
    assert out["model"] == default_name(game)
    assert out["games_used"] == 2 and out["moves_used"] > 40
    assert out["n_model"] == models.nearest_n(2)
    assert out["rank_group"] in models.group_names
    # Go's model has a sibling fitted for one player's games (the Fox by-player set), applied
    # and measured on one player's games of players it never saw; chess's has no such set.
    trained_for_players = game == "go"
    method = out["feature_set"] + ("-players" if trained_for_players else "")
    sampling = "player" if trained_for_players else "rank_group"
    assert models.player_trained(out["feature_set"], out["n_model"]) == trained_for_players
    assert (out["model_training"], out["model_sampling"]) == (sampling, sampling)
    row = models.accuracy(method, out["n_model"], sampling)
    assert (out["model_accuracy"], out["model_accuracy_pm1"]) == (
        row["accuracy"],
        row["accuracy_pm1"],
    )
    low, high = out["interval_95"]
    assert low < out["strength"] < high
    # the intervals are calibrated on one player's own games (n = 1: every evaluation or
    # by-player player's single games), and their coverage on other players is the card's
    # the strength model of the applied set (chess: the clock set's, for these clocked games)
    record = models.strength(out["feature_set"]).record
    assert out["strength_feature_set"] == record["feature_set"]
    assert (record["feature_set"] == "full_dcloss_clock") == (game == "chess")
    assert out["interval_calibration"] == "player"
    width = record["player_calibration"]["half_width"][str(out["n_model"])][79]
    assert out["interval_80"][1] - out["strength"] == pytest.approx(width, abs=1e-3)
    held = next(
        [r["coverage_80"], r["coverage_95"]] for r in record["results"]
        if (r["n"], r["sampling"], r["calibration"]) == (out["n_model"], "player", "player")
    )  # fmt: skip
    assert out["interval_coverage_player"] == held


@pytest.mark.parametrize("game", GAMES)
def test_refit_from_the_shipped_aggregates_reproduces_the_model(game, tmp_path):
    shipped = resolve_meta_models(None, game)
    feature_set, n = shipped.feature_set(), 5
    nets, players = shipped.manifest.get("sscore_nets"), shipped.player_aggregates_dir
    code = main(
        ["train", "meta", game, "--aggregates", str(shipped.aggregates_dir), "--out", str(tmp_path),
         "--n", str(n), "--feature-sets", ",".join(shipped.manifest["models"]),
         "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"]
        + (["--sscore-nets", ",".join(nets)] if nets else [])
        + (["--player-aggregates", str(players)] if players else [])
    )  # fmt: skip
    assert code == 0
    refit = load_meta_models(tmp_path)
    instances = pq.read_table(shipped.aggregates_dir / "player_instance_features.parquet")
    columns = feature_columns(instances.column_names)
    x = np.column_stack(
        [instances[c].to_numpy(zero_copy_only=False).astype(float) for c in columns]
    )
    np.testing.assert_array_equal(
        refit.predict(x, columns, feature_set, n)[0], shipped.predict(x, columns, feature_set, n)[0]
    )
    np.testing.assert_array_equal(
        refit.strength().predict(x, columns, n), shipped.strength().predict(x, columns, n)
    )
    np.testing.assert_array_equal(  # the applied set's (chess: the clock set's)
        refit.strength(feature_set).predict(x, columns, n),
        shipped.strength(feature_set).predict(x, columns, n),
    )
    assert refit.accuracy(feature_set, n) == shipped.accuracy(feature_set, n)
    # and the sibling fitted for one player's games, with its cross-fitted figures (Go)
    assert refit.player_trained(feature_set, n) == shipped.player_trained(feature_set, n)
    if shipped.player_trained(feature_set, n):
        np.testing.assert_array_equal(
            refit.predict(x, columns, feature_set, n, player=True)[0],
            shipped.predict(x, columns, feature_set, n, player=True)[0],
        )
        method = f"{feature_set}-players"
        assert refit.accuracy(method, n, "player") == shipped.accuracy(method, n, "player")
    assert refit.accuracy(feature_set, n, "player") == shipped.accuracy(feature_set, n, "player")
    # and the intervals calibrated on one player's own games, where the model has them
    calibrated = shipped.manifest["strength"].get("player_calibration")
    if calibrated and str(n) in calibrated["half_width"]:
        again = refit.manifest["strength"]["player_calibration"]
        assert again["half_width"][str(n)] == calibrated["half_width"][str(n)]
        assert again["fold_half_width"][str(n)] == calibrated["fold_half_width"][str(n)]


@pytest.mark.parametrize("game", GAMES)
def test_audit_of_held_out_players(game):
    """Unaltered held-out players are flagged at about the nominal rate; the strongest group's
    players, relabelled as the weakest group's, are flagged."""
    models = resolve_meta_models(None, game)
    instances = models.evaluation_instances()
    alpha = 0.05
    table = audit_held_out_players(models, instances, alpha=alpha)
    rate = float(np.mean(table["flagged"].to_numpy(zero_copy_only=False)))
    assert table.num_rows > 100 and rate <= alpha + 0.03
    scale = models.strength().scale
    weakest, strongest = models.group_names[0], models.group_names[-1]
    low = float(pc.min(instances.filter(pc.equal(instances["rank_group"], weakest))[scale]).as_py())
    top = pc.equal(instances["rank_group"], strongest)
    planted_players = set(instances.filter(top)["player"].to_pylist())
    values = pc.if_else(top, pa.scalar(low), pc.cast(instances[scale], pa.float64()))
    planted = instances.set_column(instances.schema.get_field_index(scale), scale, values)
    audited = audit_held_out_players(models, planted, alpha=alpha)
    mine = audited.filter(pc.is_in(audited["player"], pa.array(sorted(planted_players))))
    caught = float(np.mean(mine["flagged"].to_numpy(zero_copy_only=False)))
    assert mine.num_rows > 20 and caught >= 0.8
    assert float(pc.min(mine["gap"]).as_py()) > 0  # each plays stronger than the planted rating


def test_go_player_rows_come_from_its_shipped_by_player_set():
    """The Go model's player-specific rows (Tables 6/7) sample the shipped `by-player` set: its
    games are none the models were fitted on, and at n = 15 every (player, rank group) with at
    least 15 instances gives the protocol's 5 samples."""
    models = resolve_meta_models(None, "go")
    assert models.player_aggregates_dir == models.root / "player-aggregates"
    players = pq.read_table(models.player_aggregates_dir / "player_instance_features.parquet")
    fitted = pq.read_table(models.aggregates_dir / "player_instance_features.parquet")
    assert not set(players["game_id"].to_pylist()) & set(fitted["game_id"].to_pylist())
    units = players.group_by(["player", "rank_group"]).aggregate([("game_id", "count")])
    eligible = pc.sum(pc.greater_equal(units["game_id_count"], 15)).as_py()
    assert eligible >= 200  # 20 players a group (7d: 14), 20 games each
    row = models.accuracy(models.feature_set(), 15, "player")
    assert row["samples"] == 5 * eligible


def test_go_intervals_for_one_player_are_calibrated_on_the_by_player_set():
    """At every trained n the Go model's intervals for one player's own games come from its
    by-player set (wider than those calibrated on samples of n different players), and the
    audit of that set's players, each judged by the other half's widths, flags the ones with
    ≥ 15 games at about α (twice α with the rank-group calibration)."""
    models = resolve_meta_models(None, "go")
    strength = models.strength()
    record = strength.record
    for n in models.ns:
        assert strength.calibration(n) == "player"
        assert record["player_calibration"]["players"][str(n)] >= 200
        assert strength.half_widths(n)[79] >= record["half_width"][str(n)][79] * 0.9
    alpha = 0.05
    table = audit_held_out_players(models, models.player_instances(), alpha=alpha)
    many = table.filter(pc.greater_equal(table["games"], 15))
    rate = float(np.mean(many["flagged"].to_numpy(zero_copy_only=False)))
    assert many.num_rows >= 100 and rate <= alpha + 0.04


def test_go_model_reads_the_default_levels_and_keeps_the_old_ones_history():
    """#28 item 3: the Go default is fitted on features of today's `kibitz-go-policy`'s levels
    and their head `kibitz-sscore-go-levels`, extracted under the names they were trained as
    (`-distill`, the registry's former names of the same files) at BF16 with compiled nets
    (config hash 40f900abb6b77b26), so `kibitz estimate go` extracts with the Go preset's nets.
    The registry keeps what the model was fitted on before, and the card closes with it (where
    the old figures and instances can be found)."""
    models = resolve_meta_models(None, "go")
    record = models.manifest["features_config"]
    for name in ("kibitz-go-policy", "kibitz-sscore-go-levels"):
        assert record["nets"][f"{name}-distill"] == model_registry.resolve(name).sha256
    assert record["config_hash"] == "40f900abb6b77b26"
    assert record["config"]["precision"] == "bf16" and record["config"]["compile"]
    card = (models.root / "MODEL_CARD.md").read_text()
    assert "| go-policy-4k | kibitz-go-policy (extracted as kibitz-go-policy-distill) |" in card
    history = card[card.index("## History") :]
    for net, instances in (
        ("kibitz-go-policy-4x32", "go-4x32-levels"),
        ("kibitz-go-policy-cpu", "go-g170-levels-testing"),
        ("kibitz-go-policy-gpu", "go-gpu-levels-testing"),
    ):
        assert f"`{net}`" in history and f"bench/aggregates/{instances}" in history
    licence = card[card.index("## Licence") : card.index("## History")]
    assert "except `kibitz-go-policy`: Apache-2.0 (rank head); trunk weights: KataGo" in licence
    chess = resolve_meta_models(None, "chess").root / "MODEL_CARD.md"
    assert "## History" not in chess.read_text()  # a name with no past has no such section
