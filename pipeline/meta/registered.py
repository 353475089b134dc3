"""Meta-models shipped as registry entries: ``kibitz-meta-chess`` and ``kibitz-meta-go``.

``kibitz train meta … --register NAME`` copies what an estimate and a refit need out of the
training folder into ``models/NAME/`` (the LightGBM models, the per-player-instance aggregates
they were fitted on, the result tables) and adds a registry entry of format ``kibitz-meta``
whose file is the manifest ``meta_models.json``. The manifest lists every other file with its
sha256, and the registry holds the manifest's sha256: one chain of checksums, verified when the
model is resolved. ``kibitz estimate`` with no ``--model`` resolves the game's default here,
then checks that the nets it would extract with are the ones the model was trained on.

    models/kibitz-meta-chess/
        meta_models.json            manifest (results, nets' sha256, extraction config, files)
        MODEL_CARD.md               rendered from the manifest (pipeline/meta/model_card.py)
        models/<feature_set>/n<n>.txt      and n<n>-ordinal.txt: its ordinal model, if any
        aggregates/*.parquet, _aggregate.json   what `kibitz train meta --aggregates` refits on
        player-aggregates/…         the player-specific set's instances (--player-aggregates), if any
        tables/results.csv, table2_rank_group.md, table67_player.md
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from pipeline.meta.aggregate import SUMMARY_FILE
from pipeline.meta.model import MetaDataError, applied_sets
from pipeline.meta.model_card import CARD_FILE, render_card
from pipeline.meta.train import MANIFEST_FILE, MetaModels, load_meta_models
from pipeline.nets.formats import META_FORMAT
from pipeline.nets.registry import (
    PROJECT_MODELS_DIR,
    ChecksumMismatchError,
    ModelNotFoundError,
    file_sha256,
    find_entry,
    verify,
    write_entry,
)

DEFAULT_NAME = "kibitz-meta-{game}"
AGGREGATES = "aggregates"
PLAYER_AGGREGATES = "player-aggregates"
# The marts a shipped model keeps: the instances it was fitted on (a refit reads them, with
# rank_groups), and the two group profiles an estimate's report draws the player against.
SHIPPED_MARTS = ("player_instance_features", "rank_groups", "prior_profile", "loss_by_move_number")
SHIPPED_TABLES = (
    "tables/results.csv",
    "tables/table2_rank_group.md",
    "tables/table67_player.md",
    "tables/strength.csv",
    "tables/strength.md",
)
# Facts of the training machine that mean nothing elsewhere; the manifest keeps the rest.
_LOCAL_KEYS = ("tracking_uri",)


def default_name(game: str) -> str:
    """The registry name of a game's default meta-models."""
    return DEFAULT_NAME.format(game=game)


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)
    target.chmod(0o644)


def _ship_marts(source: Path, target: Path, folder: str, marts: tuple[str, ...]) -> list[str]:
    """Copy ``marts`` of the aggregates ``source`` and their summary into ``target/folder``;
    the copied files, relative to ``target``."""
    files = []
    for mart in marts:
        rel = f"{folder}/{mart}.parquet"
        _copy(source / f"{mart}.parquet", target / rel)
        files.append(rel)
    summary = json.loads((source / SUMMARY_FILE).read_text())
    summary["rows"] = {m: n for m, n in summary.get("rows", {}).items() if m in marts}
    (target / folder / SUMMARY_FILE).write_text(json.dumps(summary, indent=1))
    return [*files, f"{folder}/{SUMMARY_FILE}"]


def register_meta_models(
    out_dir: Path,
    name: str,
    *,
    models_root: Path = PROJECT_MODELS_DIR,
    description: str | None = None,
) -> Path:
    """Ship the ``kibitz train meta`` output ``out_dir`` as ``models_root/name``; registered.

    The folder is rebuilt whole (a previous version's files do not linger), its manifest names
    the aggregates relatively, and the card is rendered from that manifest.
    """
    trained = load_meta_models(out_dir)
    target = Path(models_root) / name
    if target.exists():
        shutil.rmtree(target)
    # An estimate applies one feature set, or for games without a clock the first that reads
    # none: their models ship; the ablations' figures stay in the manifest and the card, and a
    # refit from the shipped aggregates rebuilds their models.
    trained_sets = list(trained.manifest["models"])
    shipped = applied_sets(trained_sets)
    player_models = {
        fs: files_at_n
        for fs, files_at_n in (trained.manifest.get("player_models") or {}).items()
        if fs in shipped
    }
    files = [
        f
        for fs in shipped
        for n in trained.manifest["models"][fs]
        for player in (False, True)
        if not player or fs in player_models
        for f in trained.model_files(fs, int(n), player=player)
    ]
    files = list(dict.fromkeys(files))  # a set without a player sibling names its own twice
    strength_sets = {
        fs: r for fs, r in (trained.manifest.get("strength_sets") or {}).items() if fs in shipped
    }
    records = [trained.manifest.get("strength") or {}, *strength_sets.values()]
    files += [f for record in records for f in (record.get("models") or {}).values()]
    files += [rel for rel in SHIPPED_TABLES if (trained.root / rel).is_file()]
    for rel in files:
        _copy(trained.root / rel, target / rel)
    files += _ship_marts(trained.aggregates_dir, target, AGGREGATES, SHIPPED_MARTS)
    player_dir = trained.player_aggregates_dir
    if player_dir is not None:
        # the player rows' instances (rank groups come from the training aggregates)
        files += _ship_marts(player_dir, target, PLAYER_AGGREGATES, ("player_instance_features",))
    manifest = {k: v for k, v in trained.manifest.items() if k not in _LOCAL_KEYS}
    manifest.update(
        name=name,
        models={fs: trained.manifest["models"][fs] for fs in shipped},
        player_models=player_models,
        strength_sets=strength_sets,
        feature_sets={fs: trained.manifest["feature_sets"][fs] for fs in shipped},
        aggregates_dir=AGGREGATES,
        player_aggregates_dir=PLAYER_AGGREGATES if player_dir is not None else None,
        files={rel: file_sha256(target / rel) for rel in sorted(files)},
    )
    manifest_path = target / MANIFEST_FILE
    manifest_path.write_text(json.dumps(manifest, indent=1))
    (target / CARD_FILE).write_text(
        render_card(manifest, models_dir=Path(models_root)), encoding="utf-8"
    )
    game = manifest["game"]
    write_entry(
        models_root,
        {
            "name": name,
            "game": game,
            "format": META_FORMAT,
            "path": f"{name}/{MANIFEST_FILE}",
            "sha256": file_sha256(manifest_path),
            "license": "Apache-2.0",
            "description": description
            or f"Kibitz rank-estimation meta-models (Kuboki et al. 2025, LightGBM), {game}",
        },
    )
    return target


def verify_files(models: MetaModels) -> None:
    """Every file the manifest lists is present with its sha256 (a shipped model's)."""
    for rel, sha in models.manifest.get("files", {}).items():
        path = models.root / rel
        if not path.is_file():
            raise ModelNotFoundError(f"meta-model {str(models.root)!r}: {rel} is missing")
        if file_sha256(path) != sha:
            raise ChecksumMismatchError(
                f"meta-model {str(models.root)!r}: {rel} has sha256 {file_sha256(path)},"
                f" its manifest says {sha} (corrupt or replaced file)"
            )


def resolve_meta_models(model: str | Path | None, game: str) -> MetaModels:
    """Meta-models from a ``kibitz train meta`` folder, a registry name, or (None) the game's
    default ``kibitz-meta-<game>``; a registered one verified file by file."""
    if model is not None and Path(model).is_dir():
        return load_meta_models(Path(model))
    name = str(model) if model is not None else default_name(game)
    entry = find_entry(name)
    if entry.format != META_FORMAT:
        raise MetaDataError(
            f"{name!r} is a {entry.format} net, not meta-models (give a `kibitz train meta`"
            f" folder or a {META_FORMAT} entry such as {default_name(game)!r})"
        )
    verify(entry)
    models = load_meta_models(entry.file.parent)
    verify_files(models)
    return models


def check_nets(models: MetaModels) -> None:
    """The nets an estimate would extract with are those the meta-models were trained on.

    A meta-model reads features of particular weights: a registry name now pointing at other
    weights (a retrained net), or a net file that is missing, would give features the model
    never saw. Each named net is verified against the registry and its sha256 compared with
    the one the training features recorded; nets given as paths are checked by their file.
    """
    record: dict[str, Any] = models.manifest.get("features_config") or {}
    recorded = record.get("nets") or {}
    for model, sha in recorded.items():
        path = Path(model)
        if path.is_file():
            actual = file_sha256(path)
        else:
            entry = find_entry(model)
            verify(entry)  # present and intact, else a clear error naming the net
            actual = entry.sha256
        if actual != sha:
            raise MetaDataError(
                f"meta-models {str(models.root)!r} were trained on features of net {model!r}"
                f" with sha256 {sha}; the net found now has {actual} (retrained or replaced):"
                " extract and train the meta-models again, or restore that net"
            )
