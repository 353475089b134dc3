"""`kibitz estimate` end to end on real games: real Maia nets, real Stockfish, real DuckDB,
a meta-model trained here on a small real feature set, and a player with two real games."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest
import torch

from pipeline.cli.main import main
from pipeline.core import settings
from pipeline.estimate.in_process import extract_in_process, extraction_config
from pipeline.extract.config import CPU_BATCH, config_from_dict, load_config
from pipeline.ingest.pgn import plan_chunks, read_chunk
from pipeline.jobs.estimate import write_features
from pipeline.meta.aggregate import run_aggregate

SPLIT = settings.data_dir() / "chess" / "lichess-2024-02-blitz" / "candidating"
BANDS = ("1000-1200", "2000-2200")
GAMES_PER_BAND = 10  # with the split below every band has ≥ 2 instances in each split
PLAYER = "Richmankorter"  # two games in candidating/1000-1200
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

CONFIG = {
    "game": "chess",
    "imitation_nets": ["maia-1100", "maia-1900"],
    # low: the test checks the path end to end, not Stockfish's strength
    "value": {"evaluator": "stockfish", "nodes": 40},
    "expected_loss": {"net": "maia-1100", "prior_share": 0.8, "max_moves": 2},
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A meta-model trained on the features of the first games of two bands."""
    root = tmp_path_factory.mktemp("estimate")
    config = config_from_dict(CONFIG)
    games = pa.concat_tables(
        [
            read_chunk(
                plan_chunks([SPLIT / f"{band}.pgn.zst"], games_per_chunk=GAMES_PER_BAND)[0]
            ).games
            for band in BANDS
        ]
    )
    features, dropped = extract_in_process(config, games)
    assert dropped == 0
    write_features(features, root / "features")
    (root / "features" / "_config.yaml").write_text(
        json.dumps({"config_hash": config.config_hash(), "config": config.to_dict()})
    )
    run_aggregate(root / "features", root / "aggregates")
    code = main(
        [
            "train", "meta", "chess", "--aggregates", str(root / "aggregates"), "--out", str(root / "meta"),
            "--n", "1,2", "--feature-sets", "full_dcloss,no_loss,full_dcloss_clock",
            "--split", "0.4,0.3,0.3",
            "--train-draws", "50", "--eval-draws", "20",
        ]
    )  # fmt: skip
    assert code == 0
    return root


def test_estimate_prints_json_and_writes_report(trained: Path, capsys):
    capsys.readouterr()
    code = main(
        [
            "estimate", "chess", str(SPLIT / "1000-1200.pgn.zst"), "--player", PLAYER.lower(),
            "--model", str(trained / "meta"), "--work", str(trained / "work"), "--json",
            "--progressive", "--confidence", "0.6",
        ]
    )  # fmt: skip
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["player"] == PLAYER.lower()
    assert out["games_found"] == 2 and out["games_used"] == 2
    assert out["n_model"] == 2  # the trained n nearest to two games
    # Lichess games carry %clk and a time control the training games had: the clock model
    assert (out["feature_set"], out["feature_set_note"]) == ("full_dcloss_clock", None)
    assert out["rank_groups"] == list(BANDS)
    assert out["rank_group"] in BANDS
    assert out["rank_group"] == BANDS[out["rank_group_index"]]
    assert out["band"] == list(BANDS)  # two groups: the ±1 band is both
    assert out["rated_rank_groups"] == ["1000-1200"]
    assert 40 < out["moves_used"] < 200
    # the applied model's own figures, as `kibitz train meta` measured them
    manifest = json.loads((trained / "meta" / "meta_models.json").read_text())
    row = next(
        r for r in manifest["results"]
        if (r["method"], r["n"], r["sampling"]) == ("full_dcloss_clock", 2, "rank_group")
    )  # fmt: skip
    assert out["model"] == str(trained / "meta")
    assert (out["model_accuracy"], out["model_accuracy_pm1"]) == (
        row["accuracy"],
        row["accuracy_pm1"],
    )
    assert out["model_samples"] == 2 * 20  # two groups × --eval-draws 20
    assert out["precision"] == out["precision_trained"] == "fp32"
    # the continuous estimate: a rating with nested conformal intervals around it
    assert out["strength_scale"] == "rating"
    low80, high80 = out["interval_80"]
    low95, high95 = out["interval_95"]
    assert low95 <= low80 < out["strength"] < high80 <= high95
    assert 800 < out["strength"] < 2400
    # how often such intervals held on one player's own games, where the model measured it,
    # for the calibration the estimate applied (a player calibration where the model has one)
    # the strength model of the applied set: the clock set's, for these clocked games
    record = manifest["strength_sets"]["full_dcloss_clock"]
    assert out["strength_feature_set"] == record["feature_set"] == "full_dcloss_clock"
    calibrated = record.get("player_calibration", {}).get("half_width", {})
    derived = record.get("derived_player_calibration", {}).get("half_width", {})
    out_calibration = (
        "player" if "2" in calibrated else "derived" if "2" in derived else "rank_group"
    )
    assert out["interval_calibration"] == out_calibration
    player_rows = {
        r["n"]: [r["coverage_80"], r["coverage_95"]]
        for r in record["results"]
        if (r["sampling"], r["calibration"]) == ("player", out_calibration) and "coverage_80" in r
    }  # fmt: skip
    assert out["interval_coverage_player"] == player_rows.get(2)
    # after each game: the last step is the estimate itself
    steps = out["steps"]
    assert [s["games"] for s in steps] == [1, 2] and [s["n_model"] for s in steps] == [1, 2]
    assert steps[-1]["rank_group_index"] == out["rank_group_index"]
    assert steps[-1]["strength"] == pytest.approx(out["strength"])
    # games needed for 60 % within ±1: the first trained n whose measured ±1 accuracy gets there
    pm1 = {r["n"]: r["accuracy_pm1"] for r in manifest["results"]
           if r["method"] == "full_dcloss_clock" and r["sampling"] == "rank_group"}  # fmt: skip
    assert out["confidence"] == 0.6
    if pm1[1] >= 0.6:
        assert (out["games_needed"], out["further_games"]) == (1, 0)
    elif pm1[2] >= 0.6:
        assert (out["games_needed"], out["further_games"]) == (2, 0)
    else:
        assert out["games_needed"] is None and out["further_games"] is None
    report = Path(out["report"])
    assert report.is_file() and report.read_bytes()[:8] == PNG_MAGIC
    assert report.stat().st_size > 30_000  # three drawn panels, not an empty canvas


def test_derived_player_intervals_are_applied_and_named(trained: Path, tmp_path, capsys):
    """A model whose manifest derives its player intervals at n = 2 (chess has no player with
    many games) applies those widths to two games of one player, and the text names ρ and
    how the derivation held on Go."""
    model = tmp_path / "meta"
    shutil.copytree(trained / "meta", model)
    manifest = json.loads((model / "meta_models.json").read_text())
    record = manifest["strength_sets"]["full_dcloss_clock"]  # what clocked games apply
    grid = record["level_grid"]
    record["derived_player_calibration"] = {
        "rho": 0.2153, "players": 2915,
        "half_width": {"2": [round(100 + 400 * level, 4) for level in grid]},
        "check": {"model": "kibitz-meta-go", "coverage": {"2": [0.843, 0.961]}},
    }  # fmt: skip
    record.pop("player_calibration", None)
    (model / "meta_models.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    args = ["estimate", "chess", str(SPLIT / "1000-1200.pgn.zst"), "--player", PLAYER,
            "--model", str(model), "--work", str(tmp_path / "work")]  # fmt: skip
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_model"] == 2 and out["interval_calibration"] == "derived"
    assert out["interval_80"][1] - out["strength"] == pytest.approx(100 + 400 * 0.8, abs=1e-3)
    assert out["interval_95"][1] - out["strength"] == pytest.approx(100 + 400 * 0.95, abs=1e-3)
    assert (out["interval_rho"], out["interval_rho_players"]) == (0.2153, 2915)
    assert out["interval_check"] == {"model": "kibitz-meta-go", "coverage": [0.843, 0.961]}
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "derived for one player's own 2 game(s) from the share of the error one player's" in text
    assert "(ρ = 0.2153, 2,915 players with 2+ games)" in text
    assert "(kibitz-meta-go), the same derivation held 84.3 / 96.1 % of the time" in text


def test_estimate_names_a_missing_player(trained: Path):
    with pytest.raises(SystemExit, match="no game of player 'nobody-here'"):
        main(
            [
                "estimate", "chess", str(SPLIT / "1000-1200.pgn.zst"), "--player", "nobody-here",
                "--model", str(trained / "meta"), "--work", str(trained / "work2"),
            ]
        )  # fmt: skip


def test_games_without_a_clock_or_of_another_time_control_take_the_no_clock_model(
    trained: Path, tmp_path, capsys
):
    """An over-the-board game (no %clk) and a game of a time control the training games never
    had: the estimate applies the model that reads no clock and says why, in the text and in
    --json; the training's time controls are in the manifest."""
    import zstandard

    text = (
        zstandard.ZstdDecompressor()
        .stream_reader((SPLIT / "1000-1200.pgn.zst").open("rb"))
        .read()
        .decode()
    )
    games = [g for g in text.split("\n\n[Event ") if f'"{PLAYER}"' in g]
    assert len(games) == 2
    first = re.sub(r" \{ \[%clk [0-9:]+\] \}", "", games[0])  # over the board: no clock
    second = re.sub(r'\[TimeControl "[^"]+"\]', '[TimeControl "600+5"]', games[1])
    pgn = tmp_path / "mixed.pgn"
    pgn.write_text(
        "\n\n".join(g if g.startswith("[Event") else "[Event " + g for g in (first, second))
    )
    manifest = json.loads((trained / "meta" / "meta_models.json").read_text())
    assert "600+5" not in manifest["time_controls"] and manifest["time_controls"]
    argv = ["estimate", "chess", str(pgn), "--player", PLAYER, "--model", str(trained / "meta"),
            "--work", str(tmp_path / "work")]  # fmt: skip
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["feature_set"] == "full_dcloss" and out["games_used"] == 2
    assert out["strength_feature_set"] == "full_dcloss"  # the strength model reads none either
    assert out["feature_set_note"].startswith("1 of 2 game(s) have no clock; time control 600+5")
    assert out["feature_set_note"].endswith("so the model that reads no clock (full_dcloss)")
    assert main(argv) == 0
    assert f"note: {out['feature_set_note']}\n" in capsys.readouterr().out


def test_a_player_whose_only_game_is_chess960_gets_its_reason(tmp_path):
    """Today's message was "no game of player 'alice' in ['c960.pgn']", which sends the user
    looking for a typo; the game the reader set aside is named with its reason instead."""
    pgn = tmp_path / "c960.pgn"
    pgn.write_text(
        '[Event "Rated Blitz game"]\n[White "alice"]\n[Black "bob"]\n[Result "1-0"]\n'
        '[Variant "Chess960"]\n[SetUp "1"]\n'
        '[FEN "bqnbrkrn/pppppppp/8/8/8/8/PPPPPPPP/BQNBRKRN w GEge - 0 1"]\n\n1. e4 e5 1-0\n'
    )
    with pytest.raises(SystemExit, match=(
        r"no game of player 'Alice' in .* that Kibitz can read: .*c960\.pgn' game 0 \(byte 0\):"
        r" variant 'Chess960' is not standard chess"
    )):  # fmt: skip
        main(["estimate", "chess", str(pgn), "--player", "Alice", "--work", str(tmp_path / "w")])


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU runs FP16 itself")
def test_a_model_fitted_on_gpu_features_estimates_at_fp32_on_a_cpu(trained: Path, tmp_path, capsys):
    """Features extracted at FP16 (a GPU day) are recomputed at FP32 on a machine without a GPU,
    and the estimate says so, rather than failing for want of a GPU."""
    model = tmp_path / "meta-fp16"
    shutil.copytree(trained / "meta", model)
    manifest = json.loads((model / "meta_models.json").read_text())
    manifest["features_config"]["config"]["precision"] = "fp16"
    (model / "meta_models.json").write_text(json.dumps(manifest))
    argv = ["estimate", "chess", str(SPLIT / "1000-1200.pgn.zst"), "--player", PLAYER,
            "--model", str(model), "--work", str(tmp_path / "work")]  # fmt: skip
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["precision"], out["precision_trained"]) == ("fp32", "fp16")
    assert main(argv) == 0
    assert "nets run at fp32 here; the model's features were extracted at fp16" in (
        capsys.readouterr().out
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU keeps the GPU batch")
def test_a_gpu_config_estimates_in_cpu_batches():
    """The shipped Go model's features came from a GPU config (batches of 4,096); on a CPU a
    player's games are extracted in batches of CPU_BATCH: one Go player's 21 games took 6.1 GB
    at 4,096 and 1.3 GB at 256, with the same estimate (docs/guide/estimate.md). Features extracted
    with compiled nets and CUDA graphs estimate uncompiled: a compile's tens of seconds for a
    few games, and graphs need a GPU."""
    configs = Path(__file__).resolve().parents[1] / "bench" / "configs"
    config = load_config(configs / "extract-go-gpu.yaml")
    saved = {**config.to_dict(), "compile": True, "cuda_graphs": True}
    models = SimpleNamespace(manifest={"game": "go", "features_config": {"config": saved}})
    got = extraction_config(models, None, None)
    assert config.batch_size == 4096 and got.batch_size == CPU_BATCH == 256
    assert got.imitation_nets == config.imitation_nets and got.precision == "fp32"
    assert (got.compile, got.cuda_graphs) == (False, False)
