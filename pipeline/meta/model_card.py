"""MODEL_CARD.md of a shipped meta-model, rendered from its manifest only.

Like the nets' cards (``pipeline/train/model_cards.py``), a card is a pure function of the
header the model ships with, here ``meta_models.json``: what it estimates, the data and the
split, the features and the nets they came from with their sha256, the command, seed and
training time, and the accuracy tables measured on the evaluation games. So the card cannot
drift from the model, and a test re-renders it::

    python -m pipeline.meta.model_card models/kibitz-meta-chess   # rewrite the card
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pipeline.meta.intervals import strength_markdown
from pipeline.meta.player_training import player_method
from pipeline.meta.report import markdown_table
from pipeline.meta.train import MANIFEST_FILE
from pipeline.nets.registry import ModelNotFoundError, find_entry, history_of

CARD_FILE = "MODEL_CARD.md"
# Kuboki et al. (2025), Table 2 (rank-group sampling, n = 20, the full feature set) and the
# player-specific Go figure at n = 15: what the card measures itself against.
PUBLISHED = {
    "chess": "88.2 % at n = 20",
    "go": "91.7 % at n = 20 (player-specific: 61.6 % at n = 15)",
}
# Licences of the nets whose outputs the features are; the meta-model is Kibitz's (Apache-2.0).
NET_LICENCES = {
    "maia-2200": "Maia-2200 (CallOn84/LeelaNets, Maia-1's format): GPL-3.0",
    "maia": "Maia-1 (CSSLab/maia-chess): GPL-3.0",
    "katago": "KataGo g170 (lightvector/KataGo): MIT-style KataGo licence",
    "kibitz": "Kibitz's own nets (models/): Apache-2.0",
}


def _results_table(manifest: dict[str, Any]) -> pa.Table:
    rows = [
        {**r, "accuracy": np.nan if r["accuracy"] is None else r["accuracy"],
         "accuracy_pm1": np.nan if r["accuracy_pm1"] is None else r["accuracy_pm1"]}
        for r in manifest.get("results", [])
    ]  # fmt: skip
    return pa.Table.from_pylist(rows)


def _games(manifest: dict[str, Any]) -> str:
    games = manifest.get("games")
    if not games:
        return ""
    return (
        f"Games: {games['train']:,} train, {games['validation']:,} validation,"
        f" {games['evaluation']:,} evaluation. "
    )


def _other_methods(manifest: dict[str, Any]) -> list[str]:
    """The feature sets and baselines measured besides the one whose models are here."""
    shipped = set(manifest.get("models", {}))
    methods = dict.fromkeys(r["method"] for r in manifest.get("results", []))
    return [m for m in methods if m not in shipped]


def _player_models(manifest: dict[str, Any]) -> str:
    """What an estimate of one player applies, where the model has player-trained siblings."""
    models = manifest.get("player_models") or {}
    if not models:
        return ""
    named = ", ".join(f"`{player_method(fs)}` (n = {', '.join(ns)})" for fs, ns in models.items())
    return (
        f" An estimate of one player applies {named}: the same set fitted on the rank-group"
        " samples plus samples of n games of each player of the player-specific set"
        " (`pipeline/meta/player_training.py`); its `player` rows below judge each half of those"
        " players by a model fitted on the other half only, its `rank_group` rows are the"
        " evaluation split's."
    )


def _strength(manifest: dict[str, Any]) -> list[str]:
    record = manifest.get("strength")
    if not record:
        return []
    lines = [
        "## Strength and its intervals",
        "",
        f"A continuous estimate on the `{record['scale']}` scale from the {record['feature_set']}"
        " features, with split-conformal 80 % and 95 % intervals calibrated on the monitoring"
        " split's samples (`pipeline/meta/intervals.py`); coverage and MAE on evaluation games,"
        " beside the MAE of always predicting the fit split's mean.",
    ]
    players = record.get("player_calibration")
    if players:
        counts = ", ".join(f"{c:,} at n = {n}" for n, c in players["players"].items())
        lines[-1] += (
            " An estimate of one player applies a second calibration, on one player's own n"
            f" games (players: {counts}; each weighs the same): its coverage is measured with"
            " each half of the players (hash of the name) judged by the other half's widths."
        )
    lines[-1] += _derived(record)
    lines += ["", strength_markdown(record.get("results", []), record["scale"])]
    for feature_set, other in (manifest.get("strength_sets") or {}).items():
        lines += [
            "",
            f"The same from the {feature_set} features, which an estimate applies to games with"
            f" a clock (the {record['feature_set']} model above holds for every game).{_derived(other)}",
            "",
            strength_markdown(other.get("results", []), other["scale"]),
        ]
    return [*lines, ""]


def _derived(record: dict[str, Any]) -> str:
    """The derived player calibration of a strength record, in a sentence ("" where none)."""
    derived = record.get("derived_player_calibration")
    if not derived or not derived.get("half_width"):
        return ""
    measured = (record.get("player_calibration") or {}).get("half_width", {})
    applied = [n for n in derived["half_width"] if n not in measured]
    rho = (
        f"ρ = {derived['rho']}, the share of a one-game error that a player's games share, from"
        f" {derived['players']:,} players with two or more games"
        " (`pipeline/meta/player_variance.py`)"
    )
    if applied:
        text = (
            f" Where no player calibration was measured, one player's n games"
            f" (n = {', '.join(applied)}) get derived widths: the rank-group ones times"
            f" √(1 + (n − 1)ρ), {rho}."
        )
    else:
        text = (
            f" The widths derived from {rho} (the rank-group ones times √(1 + (n − 1)ρ)) are"
            " not applied here, where every n has a measured player calibration: their rows"
            " (derived from ρ) check the derivation that a model without a player-specific set"
            " applies."
        )
    check = derived.get("check")
    if check:
        held = "; ".join(
            f"n = {n}: {100 * c[0]:.1f} / {100 * c[1]:.1f} %" for n, c in check["coverage"].items()
        )
        text += f" On Go's one-player games ({check['model']}) the derivation held {held}."
    return text


def _nets(manifest: dict[str, Any], models_dir: Path | None) -> list[str]:
    record = manifest.get("features_config") or {}
    config = record.get("config", {})
    sha = record.get("nets", {})
    lines = ["| column name | net | sha256 |", "|---|---|---|"]
    for net in config.get("imitation_nets", []) + config.get("strength_nets", []):
        model = net["model"]
        lines.append(
            f"| {net['name']} | {_present_name(model, models_dir)} | `{sha.get(model, '?')}` |"
        )
    value = config.get("value", {})
    if value.get("evaluator") == "stockfish":
        lines.append(f"| value, loss | Stockfish, {value.get('nodes')} nodes a position | — |")
    elif value.get("model"):
        model = value["model"]
        lines.append(
            f"| value, loss | {_present_name(model, models_dir)} | `{sha.get(model, '?')}` |"
        )
    loss = config.get("expected_loss") or {}
    if loss.get("net"):
        lines.append(
            f"| expected loss | likely moves of {loss['net']} (prior share {loss.get('prior_share')},"
            f" at most {loss.get('max_moves')}) | — |"
        )
    return lines


def _present_name(model: str, models_dir: Path | None) -> str:
    """A net as the registry names it now: the features recorded the name it had when they
    were extracted, and a net renamed since (``formerly``) is shown under both."""
    try:
        entry = find_entry(model, models_dir=models_dir)
    except ModelNotFoundError:  # a path, or a net no longer registered: as recorded
        return model
    return model if entry.name == model else f"{entry.name} (extracted as {model})"


def _licences(manifest: dict[str, Any], models_dir: Path | None) -> str:
    config = (manifest.get("features_config") or {}).get("config", {})
    models = {
        str(n["model"]) for n in config.get("imitation_nets", []) + config.get("strength_nets", [])
    }
    if (config.get("value") or {}).get("model"):
        models.add(str(config["value"]["model"]))
    # each net under the most specific key naming it (maia-2200 is not CSSLab's Maia-1)
    keys = {max((k for k in NET_LICENCES if k in m), key=len, default=None) for m in models}
    found = [text for key, text in NET_LICENCES.items() if key in keys]
    # A Kibitz net built on another project's weights carries their licence too (registry entry),
    # named as the registry names it now (features may record a former name)
    others: dict[str, str] = {}
    for name in sorted(m for m in models if m.startswith("kibitz")):
        try:
            entry = find_entry(name, models_dir=models_dir)
        except ModelNotFoundError:  # a net no longer registered: the generic line stands
            continue
        if entry.license and entry.license != "Apache-2.0":
            others[entry.name] = f"`{entry.name}`: {entry.license}"
    if not found:
        return "see the nets' own entries in `kibitz models list`"
    return "; ".join(found) + "".join(f", except {o}" for o in others.values())


def _fitting(manifest: dict[str, Any]) -> list[str]:
    """The card's line on how the regressors were fitted (manifests before it: none)."""
    fitting = manifest.get("fitting")
    if not fitting:
        return []
    params = ", ".join(f"{k} {v}" for k, v in fitting["lightgbm"].items() if k != "verbose")
    return [
        "",
        f"Fitting: {fitting['train_draws_per_group']:,}"
        f" training samples a rank group and n; LightGBM regression with {params}.",
    ]


def _decision(manifest: dict[str, Any]) -> str:
    """How the models at the ordinal n name a group (``pipeline/meta/decision.py``), as the
    card's first paragraph says it; "" where every n rounds."""
    ns = manifest.get("ordinal_ns") or []
    if not ns:
        return ""
    return (
        f" At n = {', '.join(map(str, ns))} an ordinal model beside the regressor names the"
        " group instead: the median of its P(group > k), one LightGBM model with k as a feature"
        " (Li & Lin 2007); the regression output stays the continuous reading."
    )


def _refit_options(manifest: dict) -> str:
    """The options a refit from the shipped aggregates needs besides them: the strength nets the
    models were restricted to (``--sscore-nets``) and the player-specific set, if any."""
    nets = manifest.get("sscore_nets") or []
    options = f" --sscore-nets {','.join(nets)}" if nets else ""
    player_dir = manifest.get("player_aggregates_dir")
    if player_dir:
        shipped = not Path(player_dir).is_absolute()
        where = (
            f"models/{manifest.get('name', 'meta-models')}/{player_dir}" if shipped else player_dir
        )
        options += f" --player-aggregates {where}"
    return options


def _player_set(manifest: dict) -> str:
    """Where the player-specific rows' instances come from."""
    folder = manifest.get("player_aggregates_dir")
    if not folder:
        return (
            " The player-specific rows sample the evaluation games' own players (a player with"
            " fewer than n instances there gives no sample at n)."
        )
    return (
        " The player-specific rows sample other games, of players with many games each"
        f" (`--player-aggregates`, shipped in `{folder}/`; games the models were fitted"
        " on are left out)."
    )


def render_card(manifest: dict[str, Any], *, models_dir: Path | None = None) -> str:
    """The card's Markdown for a manifest of ``kibitz train meta`` (shipped or not); a registered
    name's past (the registry's ``history`` in ``models_dir``) closes it, so that the figures of
    a replaced default stay findable."""
    name = manifest.get("name", "meta-models")
    game = manifest["game"]
    groups = manifest["rank_groups"]
    counts = manifest.get("instances", {})
    split = manifest.get("split", {})
    aggregate = manifest.get("aggregate", {})
    results = _results_table(manifest)
    ns = ", ".join(str(n) for n in manifest.get("ns", []))
    lines = [
        f"# {name}",
        "",
        f"Rank-estimation meta-models of Kuboki et al. (2025) for {game}, trained by Kibitz: one"
        f" LightGBM regressor per feature set and number of games n ({ns}) on the mean"
        " per-player-instance features of n games (an instance is one player's moves in one"
        f" game); the output, rounded and clipped, is one of {len(groups)} rank groups"
        f" ({groups[0]} … {groups[-1]}).{_decision(manifest)} `kibitz estimate {game} FILES --player NAME` applies the"
        " model whose n is nearest to the player's number of games.",
        "",
        "## Data",
        "",
        f"{_games(manifest)}Player instances: {counts.get('train', 0):,} train,"
        f" {counts.get('validation', 0):,} validation, {counts.get('evaluation', 0):,} evaluation"
        " (fitted on the"
        f" {manifest.get('fit_split', 'train')} split). Deterministic split by game"
        " (`pipeline/core/data_split.py`): blake2b of salt + game_id with fractions"
        f" ({split.get('train')}, {split.get('validation')}, {split.get('evaluation')}) and salt `{split.get('salt', '?')}`"
        f" (split hash `{manifest.get('split_hash', '?')}`); the figures below are on evaluation"
        " games only. The instances are shipped in `aggregates/player_instance_features.parquet`:"
        f" `kibitz train meta {game} --aggregates models/{name}/aggregates --out DIR"
        f"{_refit_options(manifest)}` refits the models without extracting anything."
        f"{_player_set(manifest)}",
        "",
        f"Aggregation: α = {aggregate.get('alpha')}, γ = {aggregate.get('gamma')}"
        " (`sql/marts/player_instance_features.sql`).",
        "",
        "## Features and the nets they came from",
        "",
        f"Feature set applied: {', '.join(manifest.get('models', {}))}; measured below also:"
        f" {', '.join(_other_methods(manifest)) or 'none'}"
        f" ({len(manifest.get('columns', []))} instance columns in all).{_player_models(manifest)}"
        " Extraction config hash"
        f" `{manifest.get('features_config_hash')}`; `kibitz estimate` extracts a player's games"
        " with the same config and refuses nets whose sha256 differs.",
        "",
        *_nets(manifest, models_dir),
        "",
        "## How it was made",
        "",
        f"Command: `{manifest.get('command') or 'not recorded'}`",
        "",
        f"Seed {manifest.get('seed')}; {manifest.get('seconds')} s of training and evaluation"
        " (every feature set and n, both sampling protocols).",
        *_fitting(manifest),
        "",
        "## Accuracy on the evaluation games",
        "",
        f"Published (Kuboki et al. 2025, full feature set): {PUBLISHED.get(game, '—')}.",
        "",
    ]
    for sampling in ("rank_group", "player"):
        if results.num_rows and sampling in results["sampling"].to_pylist():
            lines += [markdown_table(results, sampling), ""]
    lines += _strength(manifest)
    lines += [
        "## Licence",
        "",
        f"The meta-models: Apache-2.0 (Kibitz). The features they read are outputs of: {_licences(manifest, models_dir)}.",
        "",
    ]
    history = history_of(name, models_dir=models_dir) if "name" in manifest else ()
    if history:
        lines += ["## History", "", *[f"- {line}" for line in history], ""]
    return "\n".join(lines)


def write_card(folder: Path) -> Path:
    """Render the card of a meta-model folder from its manifest."""
    folder = Path(folder)
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    path = folder / CARD_FILE
    path.write_text(render_card(manifest), encoding="utf-8")
    return path


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(write_card(Path(arg)))
