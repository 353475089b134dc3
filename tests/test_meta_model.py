"""Meta-models: learnable structure gives high accuracy, random labels give chance, the Chen
baseline matches a hand computation, and `kibitz train meta` tracks parent + child MLflow runs."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from synthetic_features import synthetic_features, write_features

from pipeline.cli.main import main
from pipeline.core.data_split import EVALUATION, TRAIN, VALIDATION
from pipeline.meta.aggregate import run_aggregate
from pipeline.meta.model import (
    InstanceData,
    MetaConfig,
    MetaDataError,
    build_samples,
    chen_group_means,
    chen_predict,
    feature_set_columns,
    instance_data,
    keep_sscore_nets,
    round_to_group,
    train_and_evaluate,
)
from pipeline.meta.train import (
    kibitz_trained_nets,
    load_meta_models,
    net_hashes,
    warn_in_sample,
)

COLUMNS = [
    "prior_maia_1100_geomean_all",
    "prior_maia_1900_geomean_all",
    "loss_mean_all",
    "loss_c61_mean_all",
    "sscore_net_mean_all",
]


def make_data(
    labels: np.ndarray, features: np.ndarray, groups: int, split: np.ndarray
) -> InstanceData:
    n = labels.shape[0]
    return InstanceData(
        features=features,
        columns=COLUMNS,
        group=labels,
        split=split,
        unit=np.arange(n) // 8,  # 8 instances per "player"
        game_id=np.array([f"g{i // 2}" for i in range(n)], dtype=object),
        group_names=[f"g{k}" for k in range(groups)],
    )


def structured(signal: float, groups: int = 5, per_group: int = 400, seed: int = 0) -> InstanceData:
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(groups), per_group)
    noise = rng.normal(size=(labels.size, len(COLUMNS)))
    features = signal * labels[:, None] * np.array([0.3, 0.5, -0.4, -0.2, 0.6]) + noise
    split = rng.choice([0, 1, 2], size=labels.size, p=[0.6, 0.2, 0.2]).astype(np.int8)
    # a player unit (8 consecutive rows) must hold one group and one split: sort by both
    order = np.lexsort((split, labels))
    return make_data(labels[order], features[order], groups, split[order])


CONFIG = MetaConfig(
    ns=(5,),
    feature_sets=("full", "no_sscore"),
    train_draws_per_group=300,
    validation_draws_per_group=100,
    eval_draws_per_group=200,
)


def test_a_unit_is_one_player_in_one_rank_group():
    """Units pair the player with the group index, not a joined string: "ab" in group 12 and
    "ab1" in group 2 are two units, each naming its player; one player in two groups, two."""
    names = [f"g{k}" for k in range(13)]
    players = ["ab", "ab1", "ab", "cd", "cd"]
    groups = ["g12", "g2", "g12", "g3", "g4"]
    instances = pa.table({
        "game": ["go"] * 5, "game_id": [f"x{k}" for k in range(5)], "player": players,
        "rank_group": groups, "sscore_net_mean_all": np.arange(5.0),
    })  # fmt: skip
    rank_groups = pa.table(
        {"game": ["go"] * 13, "rank_group": names, "group_index": list(range(13))}
    )
    data = instance_data(instances, rank_groups, game="go")
    assert data.unit.tolist() == [0, 1, 0, 2, 3]
    assert data.unit_player[data.unit].tolist() == players
    assert data.subset(np.array([3, 4])).unit_player is data.unit_player  # ids keep meaning


def test_structured_groups_are_recovered():
    result = train_and_evaluate(structured(signal=2.0), 5, CONFIG)
    by = {(e.method, e.sampling): e for e in result.evaluations}
    full = by[("full", "rank_group")]
    assert full.samples == 5 * 200
    assert full.accuracy > 0.85
    assert full.accuracy_pm1 >= full.accuracy
    assert full.accuracy_pm1 > 0.99
    # dropping the most informative column costs accuracy
    assert by[("no_sscore", "rank_group")].accuracy < full.accuracy
    # the Chen baseline on one noisy column is worse than the model on all of them
    chen = by[("chen_sscore_net", "rank_group")]
    assert 0.2 < chen.accuracy < full.accuracy
    # confusion matrix rows sum to the draws per group
    np.testing.assert_array_equal(full.confusion().sum(axis=1), [200] * 5)
    assert np.trace(full.confusion()) == round(full.accuracy * full.samples)
    # the player-specific protocol ran on evaluation-split units with ≥ 5 instances
    assert by[("full", "player")].samples > 0


def test_random_labels_give_chance_accuracy():
    result = train_and_evaluate(structured(signal=0.0), 5, CONFIG)
    full = next(e for e in result.evaluations if e.method == "full" and e.sampling == "rank_group")
    assert abs(full.accuracy - 1 / 5) < 0.08
    # ±1 of a regressor that predicts the middle group: 3/5 of the groups are within one
    assert full.accuracy_pm1 < 0.75


def test_round_to_group():
    raw = np.array([-0.7, 0.49, 0.51, 2.6, 10.0])
    assert round_to_group(raw, 3).tolist() == [0, 0, 1, 2, 2]


def test_chen_baseline_by_hand():
    # training instances: group 0 s-scores 0 and 2 (mean 1), group 1: 3 and 5 (mean 4),
    # group 2: 10 (mean 10); an evaluation instance must not enter the means
    labels = np.array([0, 0, 1, 1, 2, 2])
    features = np.zeros((6, len(COLUMNS)))
    features[:, 4] = [0, 2, 3, 5, 10, 100]
    split = np.array([TRAIN] * 5 + [EVALUATION], dtype=np.int8)
    means = chen_group_means(make_data(labels, features, 3, split), MetaConfig())
    np.testing.assert_allclose(means["net"], [1.0, 4.0, 10.0])
    # fitted on the validation split, only its instances count: group 0's 2 and group 2's 10
    split = np.array([TRAIN, VALIDATION, TRAIN, TRAIN, VALIDATION, EVALUATION], dtype=np.int8)
    data = make_data(labels, features, 3, split)
    fitted = chen_group_means(data, MetaConfig(fit_split="validation"))
    np.testing.assert_allclose(fitted["net"], [2.0, np.nan, 10.0])
    # midpoints 2.5 and 7: 2.4 → 0, 2.6 → 1, 6.9 → 1, 7.1 → 2, −50 → 0; a tie goes to the weaker
    got = chen_predict(np.array([2.4, 2.6, 6.9, 7.1, -50.0, 2.5]), means["net"])
    assert got.tolist() == [0, 1, 1, 2, 0, 0]


def test_fit_split_validation_fits_on_validation_games_and_monitors_with_train_games():
    """Samples are means of instances of one split: with distinct feature values per split,
    each sample's mean tells which split it came from."""
    labels = np.repeat([0, 1], 6)
    split = np.tile(np.array([TRAIN, TRAIN, VALIDATION, VALIDATION, EVALUATION, EVALUATION]), 2)
    features = np.zeros((12, len(COLUMNS)))
    features[:, 0] = np.select([split == TRAIN, split == VALIDATION], [1.0, 2.0], 3.0)
    data = make_data(labels, features, 2, split)
    for fit, fitted, monitored in (("train", 1.0, 2.0), ("validation", 2.0, 1.0)):
        config = MetaConfig(fit_split=fit, train_draws_per_group=4, validation_draws_per_group=3)
        samples = build_samples(data, 2, config)
        assert set(samples["train"].features[:, 0]) == {fitted}
        assert set(samples["validation"].features[:, 0]) == {monitored}
        assert set(samples["evaluation"].features[:, 0]) == {3.0}
    with pytest.raises(MetaDataError, match="fit_split"):
        build_samples(data, 2, MetaConfig(fit_split="evaluation"))
    with pytest.raises(MetaDataError, match=r"fit split \(validation; --fit-split"):
        build_samples(data, 3, MetaConfig(fit_split="validation"))  # 2 instances per group


def test_feature_sets_pick_families():
    assert feature_set_columns(COLUMNS, "full") == [
        "prior_maia_1100_geomean_all", "prior_maia_1900_geomean_all", "loss_mean_all", "sscore_net_mean_all",
    ]  # fmt: skip
    assert "loss_c61_mean_all" in feature_set_columns(COLUMNS, "full_dcloss")
    assert feature_set_columns(COLUMNS, "no_loss") == [
        "prior_maia_1100_geomean_all", "prior_maia_1900_geomean_all", "sscore_net_mean_all",
    ]  # fmt: skip


def test_sscore_nets_keep_the_named_nets_columns_only():
    """Two strength nets whose names share a prefix (the chess preset's): each is kept whole
    and alone; an absent net is an error naming the nets present."""
    columns = [
        "prior_maia_1100_geomean_all",
        "sscore_kibitz_sscore_chess_mean_all",
        "sscore_kibitz_sscore_chess_std_k25",
        "sscore_kibitz_sscore_chess_levels_mean_all",
        "sscore_kibitz_sscore_chess_levels_median_k50",
    ]
    features = np.arange(10.0).reshape(2, 5)
    data = InstanceData(
        features, columns, np.array([0, 1]), np.array([0, 2], dtype=np.int8), np.arange(2),
        np.array(["a", "b"], dtype=object), ["g0", "g1"],
    )  # fmt: skip
    levels = keep_sscore_nets(data, ["kibitz-sscore-chess-levels"])
    assert levels.columns == [columns[0], columns[3], columns[4]]
    np.testing.assert_array_equal(levels.features, [[0.0, 3.0, 4.0], [5.0, 8.0, 9.0]])
    assert keep_sscore_nets(data, ["kibitz-sscore-chess"]).columns == columns[:3]
    assert keep_sscore_nets(data, []) is data
    with pytest.raises(MetaDataError, match=r"\['sscore'\].*kibitz_sscore_chess_levels"):
        keep_sscore_nets(data, ["sscore"])


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("meta")
    table = synthetic_features(groups=4, games_per_group=60, seed=1)
    write_features(table, root / "features")
    run_aggregate(root / "features", root / "aggregates")
    code = main(
        [
            "train", "meta", "chess", "--aggregates", str(root / "aggregates"), "--out", str(root / "out"),
            "--n", "1,5", "--feature-sets", "full,no_loss", "--train-draws", "200", "--eval-draws", "100",
        ]
    )  # fmt: skip
    assert code == 0
    return root / "out"


def test_train_meta_tracks_parent_and_children(trained: Path):
    manifest = json.loads((trained / "meta_models.json").read_text())
    client = mlflow.MlflowClient(manifest["tracking_uri"])
    experiment = client.get_experiment_by_name("kibitz-meta-chess")
    runs = client.search_runs([experiment.experiment_id], max_results=200)
    parent = [r for r in runs if r.info.run_id == manifest["mlflow_parent_run_id"]]
    children = [
        r for r in runs if r.data.tags.get("mlflow.parentRunId") == manifest["mlflow_parent_run_id"]
    ]
    assert len(parent) == 1
    # (2 feature sets + 1 Chen baseline) × 2 n × 2 samplings
    assert len(children) == 12
    child = next(
        r for r in children
        if r.data.params["feature_set"] == "full" and r.data.params["n"] == "5"
        and r.data.params["sampling"] == "rank_group"
    )  # fmt: skip
    assert child.data.params["split_hash"] == manifest["split_hash"]
    # the synthetic features name no net Kibitz trained: fitted on the train split
    assert manifest["fit_split"] == child.data.params["fit_split"] == "train"
    assert child.data.params["sscore_nets"] == "all"
    assert 0.0 <= child.data.metrics["accuracy"] <= child.data.metrics["accuracy_pm1"] <= 1.0
    artifacts = {a.path for a in client.list_artifacts(child.info.run_id)}
    assert {"model", "plots"} <= artifacts
    plots = {a.path for a in client.list_artifacts(child.info.run_id, "plots")}
    assert any("confusion" in p for p in plots) and any("calibration" in p for p in plots)
    # the parent holds the paper-shaped tables
    tables = {a.path for a in client.list_artifacts(parent[0].info.run_id, "tables")}
    assert "tables/table2_rank_group.md" in tables


def test_train_meta_refuses_a_strength_net_the_aggregates_lack(trained: Path, tmp_path):
    args = ["train", "meta", "chess", "--aggregates", str(trained.parent / "aggregates"),
            "--out", str(tmp_path), "--sscore-nets", "sscore-test,kibitz-sscore-chess"]  # fmt: skip
    with pytest.raises(SystemExit, match=r"\['kibitz_sscore_chess'\]; the aggregates have"):
        main(args)


def test_card_names_the_sscore_nets_a_refit_needs(trained: Path):
    from pipeline.meta.model_card import render_card

    manifest = load_meta_models(trained).manifest
    assert manifest["sscore_nets"] == []  # every s-score: a refit needs no option
    assert "--sscore-nets" not in render_card({**manifest, "name": "kibitz-meta-chess"})
    restricted = {**manifest, "name": "kibitz-meta-chess", "sscore_nets": ["sscore-test"]}
    assert (
        "--aggregates models/kibitz-meta-chess/aggregates --out DIR --sscore-nets sscore-test`"
        in render_card(restricted)
    )


def test_saved_models_predict_like_training(trained: Path):
    models = load_meta_models(trained)
    assert models.group_names == ["1000-1200", "1200-1400", "1400-1600", "1600-1800"]
    assert models.nearest_n(3) == 1 and models.nearest_n(4) == 5 and models.nearest_n(40) == 5
    assert models.feature_set() == "full"
    columns = models.manifest["columns"]
    features = np.zeros((2, len(columns)))
    raw, group = models.predict(features, columns, "full", 5)
    assert raw.shape == (2,) and group.dtype == np.int64
    table = pa.parquet.read_table(trained / "tables" / "results.parquet")
    assert set(table["method"].to_pylist()) == {"full", "no_loss", "chen_sscore_sscore_test"}
    text = (trained / "tables" / "table2_rank_group.md").read_text()
    assert text.splitlines()[1] == "| method | n=1 | n=5 |"


def test_chess_models_from_one_game_name_the_group_by_their_ordinal_model(trained: Path):
    """Chess's models at n = 1 name the group by an ordinal model (pipeline/kinds/chess.py):
    the regressor is saved with one model of P(group > k), and the loaded models' group is the
    median of its distribution, not the rounded regression output; at n = 5 they round, and
    Go's models round at every n."""
    import lightgbm as lgb

    from pipeline.kinds import CHESS, GO
    from pipeline.meta.decision import extended_above, ordinal_groups

    assert (CHESS.ordinal_ns, GO.ordinal_ns) == ((1,), ())
    models = load_meta_models(trained)
    assert models.manifest["ordinal_ns"] == [1] and models.ordinal(1) and not models.ordinal(5)
    files = models.model_files("full", 1)
    assert files == ["models/full/n1.txt", "models/full/n1-ordinal.txt"]
    assert models.model_files("full", 5) == ["models/full/n5.txt"]
    assert not (trained / "models/full/n5-ordinal.txt").exists()
    columns = models.manifest["columns"]
    pick = [columns.index(c) for c in models.manifest["feature_sets"]["full"]]
    x = np.random.default_rng(0).normal(0, 1, (50, len(columns)))
    raw, group = models.predict(x, columns, "full", 1)
    regressor, ordinal = (lgb.Booster(model_file=str(trained / f)) for f in files)
    np.testing.assert_array_equal(raw, regressor.predict(x[:, pick]))
    above = extended_above(ordinal, x[:, pick], 4)
    assert above.shape == (50, 3) and np.all(np.diff(above, axis=1) <= 0)
    np.testing.assert_array_equal(group, ordinal_groups(above))
    assert not np.array_equal(group, np.clip(np.rint(raw), 0, 3))  # not the rounded output
    raw, group = models.predict(x, columns, "full", 5)
    np.testing.assert_array_equal(group, np.clip(np.rint(raw), 0, 3))


def test_nets_kibitz_trained_are_found_and_named_in_a_warning(caplog):
    """Kibitz's s-score net trained on the train split: a fit there is warned about."""
    maia = {"name": "maia-1100", "model": "maia-1100"}
    sscore = {"name": "sscore", "model": "kibitz-sscore-chess"}
    path = {"name": "mine", "model": "/models/mine/net/model.kibitz.pt"}
    cases = (
        ([maia], [sscore], ["kibitz-sscore-chess"]),
        ([maia], [], []),
        ([], [path], [path["model"]]),
    )
    for imitation, strength, expected in cases:
        config = {"imitation_nets": imitation, "strength_nets": strength}
        assert kibitz_trained_nets({"config": config}) == expected
    assert kibitz_trained_nets({}) == []
    warn_in_sample(MetaConfig(fit_split="validation"), ["kibitz-sscore-chess"])
    assert not caplog.records
    warn_in_sample(MetaConfig(), ["kibitz-sscore-chess"])
    assert "kibitz-sscore-chess trained on the train split" in caplog.records[0].getMessage()


def test_meta_runs_log_the_weights_the_features_came_from():
    """`net_<name>` params are the sha256 `kibitz extract` recorded, not the registry's entry
    today (a retrained net keeps its name); folders from before the record fall back to it."""
    config = {
        "imitation_nets": [{"name": "maia-1100", "model": "maia-1100"}],
        "strength_nets": [{"name": "sscore", "model": "kibitz-sscore-chess"}],
        "value": {"evaluator": "stockfish", "nodes": 1500},
    }
    record = {"config": config, "nets": {"maia-1100": "a" * 64, "kibitz-sscore-chess": "b" * 64}}
    assert net_hashes(record) == {
        "maia-1100": "a" * 64, "sscore": "b" * 64, "value": "stockfish nodes=1500"
    }  # fmt: skip
    registry = net_hashes({"config": config})
    assert registry["maia-1100"].startswith("e1cf1cd0")  # ../shared/models/SHA256SUMS


def test_the_manifest_records_figures_nets_and_command(trained: Path):
    manifest = json.loads((trained / "meta_models.json").read_text())
    table = pa.parquet.read_table(trained / "tables" / "results.parquet").to_pylist()
    row = next(
        r for r in table if (r["method"], r["n"], r["sampling"]) == ("full", 5, "rank_group")
    )
    models = load_meta_models(trained)
    recorded = models.accuracy("full", 5)
    assert recorded["accuracy"] == round(row["accuracy"], 6)
    assert recorded["accuracy_pm1"] == round(row["accuracy_pm1"], 6)
    assert recorded["samples"] == row["samples"] == 4 * 100  # 4 groups × --eval-draws 100
    assert models.accuracy("full", 7) is None
    assert manifest["command"].startswith("kibitz ")
    # the synthetic features were never extracted: no nets, an empty extraction record
    assert manifest["nets"] == {} and manifest["features_config"] == {}
    assert models.aggregates_dir == Path(manifest["aggregates_dir"])


def test_registered_meta_models_ship_verified_files_and_their_card(trained, tmp_path, monkeypatch):
    from pipeline.meta.model_card import render_card
    from pipeline.meta.registered import register_meta_models, resolve_meta_models, verify_files
    from pipeline.nets.registry import ChecksumMismatchError, file_sha256, find_entry

    monkeypatch.setenv("KIBITZ_MODELS_DIR", str(tmp_path))
    target = register_meta_models(trained, "my-meta", models_root=tmp_path)
    entry = find_entry("my-meta")
    assert (entry.format, entry.game, entry.file) == (
        "kibitz-meta",
        "chess",
        target / "meta_models.json",
    )
    assert entry.sha256 == file_sha256(entry.file)
    shipped = resolve_meta_models("my-meta", "chess")
    assert shipped.root == target and shipped.aggregates_dir == target / "aggregates"
    files = shipped.manifest["files"]
    assert "models/full/n5.txt" in files and "aggregates/player_instance_features.parquet" in files
    assert "models/full/n1-ordinal.txt" in files  # the ordinal model ships beside it
    assert "tracking_uri" not in shipped.manifest  # a path on the training machine
    assert (target / "MODEL_CARD.md").read_text() == render_card(shipped.manifest)
    # the shipped copy predicts exactly like the trained folder
    columns = shipped.manifest["columns"]
    x = np.linspace(-1, 1, 3 * len(columns)).reshape(3, len(columns))
    for n in (1, 5):
        raw, group = shipped.predict(x, columns, "full", n)
        trained_raw, trained_group = load_meta_models(trained).predict(x, columns, "full", n)
        assert np.array_equal(raw, trained_raw) and np.array_equal(group, trained_group)
    assert "At n = 1 an ordinal model beside the regressor" in render_card(shipped.manifest)
    # a replaced model file is caught by its manifest sha256
    (target / "models" / "full" / "n5.txt").write_text("tree\n")
    with pytest.raises(ChecksumMismatchError, match=r"models/full/n5\.txt"):
        verify_files(shipped)
    with pytest.raises(MetaDataError, match="is a lc0 net, not meta-models"):
        resolve_meta_models("maia-1100", "chess")


def test_a_player_specific_set_ships_with_the_model_and_its_refit_command(trained, tmp_path):
    """``--player-aggregates``: the manifest names the set, registering copies its instances,
    and the card's refit command passes the shipped copy (so the player rows refit too)."""
    from pipeline.meta.model_card import render_card
    from pipeline.meta.registered import register_meta_models

    aggregates = trained.parent / "aggregates"
    out = tmp_path / "out"
    code = main(
        ["train", "meta", "chess", "--aggregates", str(aggregates), "--out", str(out),
         "--player-aggregates", str(aggregates), "--n", "5", "--feature-sets", "full",
         "--train-draws", "200", "--eval-draws", "100"]
    )  # fmt: skip
    assert code == 0
    models = load_meta_models(out)
    assert models.player_aggregates_dir == aggregates.resolve()
    target = register_meta_models(out, "my-meta", models_root=tmp_path / "models")
    shipped = load_meta_models(target)
    assert shipped.manifest["player_aggregates_dir"] == "player-aggregates"
    assert shipped.player_aggregates_dir == target / "player-aggregates"
    assert "player-aggregates/player_instance_features.parquet" in shipped.manifest["files"]
    assert pq.read_table(shipped.player_aggregates_dir / "player_instance_features.parquet").equals(
        pq.read_table(aggregates / "player_instance_features.parquet")
    )
    card = render_card(shipped.manifest)
    assert (
        "--aggregates models/my-meta/aggregates --out DIR"
        " --player-aggregates models/my-meta/player-aggregates`" in card
    )
    assert load_meta_models(trained).player_aggregates_dir is None


def test_strength_models_are_saved_with_their_intervals(trained: Path):
    """Synthetic ratings: the strength part of the manifest, and the saved model's intervals
    are its point ± the recorded conformal half-widths."""
    models = load_meta_models(trained)
    record = models.manifest["strength"]
    assert record["scale"] == "rating" and record["feature_set"] == "full"
    assert sorted(record["models"]) == ["1", "5"] and record["levels"] == [0.8, 0.95]
    grid = record["level_grid"]
    assert len(grid) == 99 and (grid[0], grid[79], grid[94], grid[-1]) == (0.01, 0.8, 0.95, 0.99)
    widths = record["half_width"]["5"]
    assert widths == sorted(widths) and 0 < widths[79] < widths[94]
    by = {(r["sampling"], r["n"]): r for r in record["results"] if r["calibration"] == "rank_group"}
    assert by[("rank_group", 5)]["samples"] == 4 * 100
    assert (
        0.0 <= by[("rank_group", 5)]["coverage_80"] <= by[("rank_group", 5)]["coverage_95"] <= 1.0
    )
    assert by[("player", 5)]["samples"] == 0  # one game per synthetic player: no n=5 samples
    columns = models.manifest["columns"]
    strength = models.strength()
    assert strength.nearest_n(4) == 5 and strength.scale == "rating"
    point = strength.predict(np.zeros((2, len(columns))), columns, 5)
    assert point.shape == (2,)
    np.testing.assert_allclose(strength.interval(point, 5, 0.8)[:, 1] - point, widths[79])
    np.testing.assert_allclose(point - strength.interval(point, 5, 0.95)[:, 0], widths[94])
    # the p-value of a gap: 1 − the largest level whose half-width the gap exceeds
    gaps = np.array([0.0, widths[79] + 1e-6, widths[94] + 1e-6, 1e9])
    expected = [
        1.0,
        0.2,
        round(1 - grid[max(i for i, w in enumerate(widths) if w < gaps[2])], 2),
        0.01,
    ]
    np.testing.assert_allclose(strength.p_value(gaps, 5), expected)
    assert (
        (trained / "tables" / "strength.md").read_text().startswith("strength on the rating scale")
    )


def test_audit_flags_a_relabelled_player_and_writes_its_view(trained: Path, tmp_path):
    """Synthetic players: one of the strongest group's players is given a rating 3,000 points
    below; the audit flags exactly that gap's direction and writes table, figure and run."""
    from pipeline.meta.audit import audit_players, run_audit

    models = load_meta_models(trained)
    instances = pa.parquet.read_table(
        trained.parent / "aggregates" / "player_instance_features.parquet"
    )
    target = next(r["player"] for r in instances.to_pylist() if r["rank_group"] == "1600-1800")
    relabel = pa.compute.equal(instances["player"], target)
    ratings = pa.compute.if_else(
        relabel, pa.scalar(-1300.0), pa.compute.cast(instances["rating"], pa.float64())
    )
    planted = instances.set_column(instances.schema.get_field_index("rating"), "rating", ratings)
    table = audit_players(models, planted, alpha=0.05)
    assert table.num_rows == len(set(instances["player"].to_pylist()))
    row = next(r for r in table.to_pylist() if r["player"] == target)
    # the smallest p-value the calibration can give: 1 − its largest level with a finite width
    # (the player calibration at n = 1 rests on a few dozen synthetic players)
    widths = models.strength().half_widths(1)
    grid = models.manifest["strength"]["level_grid"]
    smallest = round(1 - grid[int(np.flatnonzero(np.isfinite(widths))[-1])], 2)
    assert models.strength().calibration(1) == "player" and smallest <= 0.05
    assert row["flagged"] and row["gap"] > 2_000 and row["z"] > 1.9 and row["p_value"] == smallest
    assert row["rated"] == -1300.0 and row["games"] == 1 and row["n_model"] == 1
    assert row["interval_low"] < row["estimate"] < row["interval_high"] < row["rated"] + 4_000
    assert table["p_value"][0].as_py() == smallest  # the most surprising players first
    # written where the catalog finds it, with its MLflow run
    import duckdb

    duckdb.connect(str(tmp_path / "kibitz.duckdb")).close()  # makes tmp_path an output home
    summary = run_audit(models, trained.parent / "aggregates", tmp_path / "audit-chess", alpha=0.05,
                        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")  # fmt: skip
    assert summary["players"] == table.num_rows and summary["flagged"] >= 0
    assert Path(summary["figure"]).read_bytes()[:4] == b"\x89PNG"
    con = duckdb.connect(str(tmp_path / "kibitz.duckdb"))
    assert con.execute("select count(*) from chess_audit").fetchone()[0] == table.num_rows
    run = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").get_run(
        summary["mlflow_run_id"]
    )
    assert run.data.metrics["players"] == table.num_rows and run.data.params["alpha"] == "0.05"
