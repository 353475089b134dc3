"""MODEL_CARD.md of Kibitz's trained nets: commands, data split, seed, time, quality, caveats.

A card is rendered from the exported model's header only (``model.kibitz.pt`` / ``model.yaml``:
net, settings, the command lines, where the games came from, history and the evaluation-split
figures), so ``kibitz train sscore|policy`` writes it next to the export, ``--register`` copies
it, and a card can be re-rendered from any model folder at any time::

    python -m pipeline.train.model_cards models/kibitz-sscore-chess [models/kibitz-go-policy ...]
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import yaml

from pipeline.nets.formats import GO_POLICY_FORMAT, LEVELS_FORMAT, SSCORE_FORMAT
from pipeline.nets.model_export import CARD_NAME, HEADER_NAME
from pipeline.train.loop import positions_trained
from pipeline.train.sscore_eval import NS, PUBLISHED_ACCURACY, SScoreEvaluation

_SPLIT_TEXT = (
    "Deterministic split by game (`pipeline/core/data_split.py`): blake2b of salt + game_id → "
    "train / validation / evaluation with fractions {fractions} and salt `{salt}`. Training "
    "used only train-split games; the per-epoch figures validation-split games; the quality "
    "figures below evaluation-split games, which were never trained on."
)
# Run facts the card states in prose; every other ``train`` entry is listed as a setting.
_RUN_KEYS = ("commands", "games", "steps", "train_seconds", "positions_per_second",
             "torch_threads", "games_dir", "init_from_model", "positions_trained",
             "selected", "device", "level_policies")  # fmt: skip


def _ingest_command(game: str, games: dict[str, Any] | None, games_dir: str) -> str | None:
    if not games:
        return None
    sources = " ".join(shlex.quote(s) for s in games["sources"])
    return f"kibitz ingest {game} {sources} --out {shlex.quote(games_dir)}"


def _commands(commands: list[str]) -> list[str]:
    if not commands:
        return ["Command: not recorded.", ""]
    if len(commands) == 1:
        return [f"Command: `{commands[0]}`", ""]
    return [
        "Commands (the run was stopped and resumed; `--resume` continues exactly where the "
        "previous invocation stopped, so the weights are those of one uninterrupted run):",
        "",
        *(f"{i}. `{c}`" for i, c in enumerate(commands, 1)),
        "",
    ]


def _trained_on(train: dict[str, Any], *, threads: bool = False) -> str:
    """The device a run trained on (with the torch threads of a CPU run when ``threads``).
    Headers written before ``--device`` (the shipped models) were all trained on this project's
    2-core CPU machine."""
    device = train.get("device")
    count = f", {train['torch_threads']} torch thread(s)" if threads else ""
    if device is None:
        return f"a 2-core CPU shared with other jobs{count}" if threads else "one shared CPU core"
    return f"the CPU{count}" if device == "cpu" else f"GPU {device}"


def _parameters(net: dict[str, Any]) -> int:
    """Weights of the s-score net a header's ``net`` describes."""
    from pipeline.nets.sscore_net import build_sscore_net

    return sum(p.numel() for p in build_sscore_net(net).parameters())


def _renamed_since(start: dict[str, Any]) -> str:
    """What follows a start's sha256: ", now the registry's `NAME`" when the registry names
    the weights a run started from (``model``, by sha256) otherwise than the run did: a file
    registered since, or a default renamed since, whose old name now stands for other weights
    (the commands' ``--init-from OLD`` would no longer find them)."""
    from pipeline.nets.registry import list_models

    names = [e.name for e in list_models() if e.sha256 == start["sha256"]]
    return f", now the registry's `{names[0]}`" if names and start["model"] not in names else ""


def _made(header: dict[str, Any]) -> list[str]:
    train = header["train"]
    ingest = _ingest_command(header["game"], train.get("games"), train["games_dir"])
    lines = ["## How it was made", ""]
    if ingest:
        lines += [
            f"Games: `{ingest}` (selection rules `{train['games'].get('rules')}`, "
            f"{train['games'].get('kept'):,} games kept), run from the repository root.",
            "",
        ]
    init = train.get("init_from_model")
    if init:
        others = [
            f"`{o['model']}` (sha256 `{o['sha256']}`{_renamed_since(o)}, "
            f"{o['positions']:,} training positions)"
            for o in init.get("averaged_with", [])
        ]  # --init-from A,B: the run started from the mean of their weights
        start = (
            f"the mean of the weights of {', '.join(others)} and" if others else "the weights of"
        )
        lines += [
            f"Started from {start} `{init['model']}` (sha256 `{init['sha256']}`"
            f"{_renamed_since(init)}: "
            f"{init['steps']} steps, {init['train_seconds'] / 60:.1f} min, "
            f"{init['positions']:,} training positions), made by:",
            "",
            *(f"- `{c}`" for c in init["commands"]),
            "",
            "and trained further (new optimiser and learning-rate schedule) by:",
            "",
        ]
    lines += [
        *_commands(train.get("commands") or []),
        _SPLIT_TEXT.format(fractions=tuple(train["split_fractions"]), salt=train["split_salt"]),
        "",
        f"Seed {train['seed']}; {train['steps']} steps in {train['train_seconds'] / 60:.1f} min "
        f"of training on {_trained_on(train, threads=True)}, "
        f"{train['positions_per_second']:.0f} training "
        "positions/s on average.",
        "",
        "Settings: " + ", ".join(f"`{k}={v}`" for k, v in train.items() if k not in _RUN_KEYS),
        "",
    ]
    history = header.get("history") or []
    if history:
        last = history[-1]
        lines += [
            "Last validation: "
            + ", ".join(f"{k} {v:.4g}" for k, v in last.items() if isinstance(v, float | int)),
            "",
        ]
    selected = train.get("selected")
    if selected:
        lines += [
            f"Weights: those of step {selected['step']}, the validation with the highest "
            f"`{selected['metric']}` ({selected['value']:+.3f}; `--select-best`), not those of "
            f"the last step; the quality figures below are of these weights.",
            "",
        ]
    return lines


def _positions_seen(header: dict[str, Any]) -> int:
    """Training positions behind the weights (this run's and its initial model's)."""
    return round(positions_trained(header["train"]), -3)


def sscore_card(header: dict[str, Any], name: str) -> str:
    """Card of an s-score net, quality next to Chen et al.'s published figures."""
    net, train, game = header["net"], header["train"], header["game"]
    features = (
        " together with the policy's log-likelihood of it and the policy entropy"
        if net.get("policy_features")
        else ""
    )
    lines = [
        f"# {name}",
        "",
        f"Bradley-Terry strength estimator (s-score) of Chen, Shih & Wu (2025) for {game}, "
        f"trained by Kibitz: {net['blocks']} residual blocks × {net['channels']} channels, "
        f"policy, value and s-score heads; the move enters the score head as board planes"
        f"{features}. Format `kibitz-sscore` (`pipeline/nets/sscore_net.py`), ONNX beside it.",
        "",
        *_made(header),
        "## Quality (evaluation split)",
        "",
    ]
    lines += _quality(header)
    published = ", ".join(
        f"n={n}: {p} %" for n, p in zip(NS, PUBLISHED_ACCURACY[game], strict=True)
    )
    lines += [
        "## How far from the published net, and why",
        "",
        f"Chen et al. report {published}. Their estimators are 20-block × 256-channel residual "
        f"nets trained on GPUs on hundreds of thousands of games. This one is {net['blocks']} × "
        f"{net['channels']} ({_parameters(net):,} parameters) and saw about "
        f"{_positions_seen(header):,.0f} training positions on {_trained_on(train)} (orders of "
        "magnitude less training): one game of a player says much less about the rank than "
        "with the published nets, so accuracy at small n is well below theirs. The same "
        "command with `--blocks 20 --channels 256`, all games and no time budget on a GPU "
        "machine is the full-size run.",
        "",
    ]
    return "\n".join(lines)


def _quality(header: dict[str, Any]) -> list[str]:
    """Chen et al.'s protocol and the evaluation-split table of an s-score's header."""
    quality, train = header.get("quality"), header["train"]
    if not quality:
        return []
    per = train.get("evaluation_positions_per_instance")
    moves = "all its moves" if per is None else f"at most {per} random moves of it"
    return [
        "Chen et al.'s protocol: each rank group's reference is the mean s-score of its "
        f"instances in {train['max_reference_games']:,} training games; predict the group "
        "whose reference is nearest to the mean s-score of n evaluation instances (an "
        f"instance is a player's moves in one game; its score is the mean over {moves}); "
        "1,000 draws per group; ±1 also accepts a neighbouring group.",
        "",
        SScoreEvaluation.from_dict(quality).to_markdown(),
        "",
    ]


# Why a levels head trails the published nets: it knows only what its imitation nets say.
_LEVELS_LIMITS = {
    "chess": "the imitation nets, trained by CSSLab on millions of Lichess games, do the "
    "judging; it knows only what their policies say about a move, and Maia-1 learnt from "
    "players rated 1100-1900.",
    "go": "the imitation nets do the judging; it knows only what their policies say about a "
    "move. Kibitz's rank-conditioned Go policies learnt from about 16,000 Fox games (a rank "
    "head on KataGo g170's small trunk, or a 4 × 32 net), not the millions of human games of "
    "a HumanSL net, and their ranks' priors for the same move differ by only hundredths of a "
    "nat (docs/research/log-nets.md).",
}
_LEVELS_INPUTS = {
    "chess": "planes, played move",
    "go": "spatial and global features, legal-move mask, played move",
}


def levels_card(header: dict[str, Any], name: str) -> str:
    """Card of a levels s-score: the head, the imitation nets it needs, quality."""
    net, game = header["net"], header["game"]
    published = ", ".join(
        f"n={n}: {p} %" for n, p in zip(NS, PUBLISHED_ACCURACY[game], strict=True)
    )
    softmax = " (softmax over the legal moves)" if net.get("softmax") == "legal" else ""
    lines = [
        f"# {name}",
        "",
        f"Bradley-Terry strength estimator (s-score, Chen, Shih & Wu 2025) for {game} whose "
        f"trunk is {len(net['levels'])} frozen imitation levels: per move it reads the move's "
        f"log-likelihood and the policy entropy under each level{softmax}, and a 2-layer MLP "
        f"of {net['hidden']} units turns those into the s-score (Kuboki et al.'s multi-level "
        "features inside the s-score). Format `kibitz-sscore-levels` "
        "(`pipeline/nets/sscore_levels.py`): this file holds only the head "
        f"({_levels_parameters(net):,} parameters, Apache-2.0); the nets are loaded from the "
        f"registry and checked against the sha256 they were trained with: {_level_nets(net)}. "
        f"Loaded, the model takes the inputs of a `kibitz-sscore` net ({_LEVELS_INPUTS[game]}) "
        "and runs each net once (a rank-conditioned net: one trunk pass, then each rank's "
        "layers); `model.onnx` beside it is the head alone (features → s-score). The nets keep "
        f"their licences, which a deployment that runs this model accepts: {_level_licences(net)}.",
        "",
        *_made(header),
        *_policies_pass(header["train"].get("level_policies") or {}),
        "## Quality (evaluation split)",
        "",
        *_quality(header),
        "## How far from the published net, and why",
        "",
        f"Chen et al. report {published} with 20-block × 256-channel nets trained on GPUs on "
        "hundreds of thousands of games. This head trains in minutes on a CPU because "
        + _LEVELS_LIMITS[game],
        "",
    ]
    return "\n".join(lines)


def _level_models(net: dict[str, Any]) -> dict[str, list[str]]:
    """Each distinct registry name of a levels header → its rank profiles (empty: plain net)."""
    from pipeline.nets.sscore_levels import split_level

    models: dict[str, list[str]] = {}
    for level in net["levels"]:
        model, profile = split_level(level)
        models.setdefault(model, []).extend([profile] if profile else [])
    return models


def _level_nets(net: dict[str, Any]) -> str:
    """Each net once, with its sha256 and, when rank-conditioned, the ranks read."""
    from pipeline.nets.sscore_levels import split_level

    sha = {split_level(level)[0]: digest for level, digest in net["level_sha256"].items()}
    return ", ".join(
        f"`{model}` (sha256 `{sha[model][:12]}…`"
        + (f"; ranks {', '.join(ranks)})" if ranks else ")")
        for model, ranks in _level_models(net).items()
    )


def _level_licences(net: dict[str, Any]) -> str:
    """The licence the registry states for each net the head needs."""
    from pipeline.nets.registry import ModelNotFoundError, find_entry

    def licence(model: str) -> str:
        try:
            return find_entry(model).license or "not stated in the registry"
        except ModelNotFoundError:
            return "not in this registry"

    return ", ".join(f"`{model}` {licence(model)}" for model in _level_models(net))


def _policies_pass(record: dict[str, dict[str, Any]]) -> list[str]:
    """The levels' one pass over each pool (the run's time is mostly this, not the steps)."""
    if not record:
        return []
    parts = [
        f"{name} {r['positions']:,} positions ("
        + ("read from the run's cache" if r["seconds"] is None else f"{r['seconds'] / 60:.1f} min")
        + ")"
        for name, r in record.items()
    ]
    return [
        "Before the steps, every position of each pool went through the levels' nets once "
        "(`pipeline/train/level_policies.py`, cached in `RUN/level-policies/` by the pool's and the "
        f"nets' fingerprint; the last invocation): {'; '.join(parts)}.",
        "",
    ]


def _levels_parameters(net: dict[str, Any]) -> int:
    """Weights of the head a levels header's ``net`` describes."""
    from pipeline.nets.sscore_levels import LevelsHead, LevelsHeadConfig

    head = LevelsHead(LevelsHeadConfig(tuple(net["levels"]), int(net["hidden"])))
    return sum(p.numel() for p in head.parameters())


def go_policy_card(header: dict[str, Any], name: str) -> str:
    """Card of the rank-conditioned Go policy."""
    from pipeline.train.go_policy import PolicyEvaluation  # torch-heavy: only for policy cards

    net, trunk = header["net"], header.get("trunk")
    quality = header.get("quality")
    shape = (
        _katago_trunk_text(net, trunk)
        if trunk
        else f"{net['blocks']} residual blocks × {net['channels']} channels"
    )
    lines = [
        f"# {name}",
        "",
        "Rank-conditioned Go imitation policy (`pipeline/nets/go_rank_policy.py`): one trunk pass "
        "gives move logits for all ranks 10k … 9d at once, output (B, 19, 362). "
        f"{shape}, per-rank FiLM head of "
        f"{net['head_channels']} channels. Format `kibitz-go-policy`, ONNX beside it."
        + (
            " The trunk's weights are in the file: loading it needs no KataGo file."
            if trunk
            else ""
        ),
        "",
        f"Trained ranks (present in the training games): {', '.join(header['trained_ranks'])}. "
        "Ranks 10k…6k have no games in the Fox selection; their priors are the linear "
        "extrapolation of the trained ranks' parameters, not learned.",
        "",
        *_made(header),
        "## Quality (evaluation split)",
        "",
    ]
    if quality:
        lines += [PolicyEvaluation.from_dict(quality).to_markdown(), ""]
    lines += ["## How far from KataGo's HumanSL net, and why", ""]
    if trunk:
        lines += [
            "KataGo's b18c384 HumanSL net was trained on GPUs on millions of human games, rank "
            f"as an input of the whole net. This net's trunk learnt from KataGo's self-play "
            f"({trunk['katago_model']}), not from people; its rank head saw about "
            f"{_positions_seen(header):,.0f} training positions of Fox games on "
            f"{_trained_on(header['train'])}. What separates adjacent ranks' moves is a few "
            "millinats per move; the rank enters only the late layers, so all 19 ranks cost one "
            "trunk pass.",
            "",
            *_licence(trunk),
        ]
        return "\n".join(lines)
    lines += [
        "KataGo's b18c384 HumanSL net was trained on GPUs on millions of human games; this "
        f"{net['blocks']} × {net['channels']} net saw about {_positions_seen(header):,.0f} "
        f"training positions on {_trained_on(header['train'])}. It imitates moves well for its "
        "size, but "
        "what separates adjacent ranks' moves is a few millinats per move, below what so little "
        "training resolves. It exists to make Go imitation levels available offline and cheaply "
        "(one trunk pass for all ranks); a full-size run is the same command with "
        "`--blocks 20 --channels 256` and no time budget on a GPU machine.",
        "",
    ]
    return "\n".join(lines)


def _katago_trunk_text(net: dict[str, Any], trunk: dict[str, Any]) -> str:
    """What a policy on a KataGo trunk is made of: the net, its sha256, the training mode."""
    if trunk["mode"] == "frozen":
        mode = "kept frozen (only the rank head trained)"
    elif trunk["mode"] == "rank-layers":
        mode = (
            "trained as below; in the last run only the per-rank layers trained, on the shared "
            "features (trunk and head conv frozen) of the policy it started from"
        )
    else:
        mode = f"fine-tuned with the head, at {trunk['lr_scale']:g} × the head's learning rate"
    return (
        f"Trunk: KataGo's `{trunk['katago_model']}` (model version {trunk['model_version']}, "
        f"{net['blocks']} residual blocks × {net['channels']} channels; `{trunk['model']}`, "
        f"sha256 `{trunk['sha256']}`), copied exactly at the start of training and {mode}"
    )


def _licence(trunk: dict[str, Any]) -> list[str]:
    """Whose terms the weights of a policy on a KataGo trunk are under: the KataGo net's licence
    as the registry states it (none for a file given by path), and Apache-2.0 for the rest."""
    stated = trunk.get("license")
    licence = (
        f'the registry gives its licence as "{stated}"'
        if stated
        else "it was given by path, so no registry states its licence: check its source's"
    )
    return [
        "## Licence",
        "",
        f"The trunk's weights are KataGo's (`{trunk['katago_model']}`, lightvector/KataGo); "
        f"{licence}. KataGo's repository licence is the MIT licence (copyright David J Wu): "
        "its copyright and permission notice must accompany every copy of this file and of "
        "`model.onnx`, which both embed those weights. The rank head's weights were trained by "
        "Kibitz and, like Kibitz's code, are under Apache-2.0.",
        "",
    ]


def model_licence(header: dict[str, Any]) -> str:
    """The licence a registry entry of a trained model states: Apache-2.0, and for a policy on a
    KataGo trunk also the KataGo net's licence, which its embedded trunk weights are under."""
    trunk = header.get("trunk")
    if not trunk:
        return "Apache-2.0"
    stated = trunk.get("license") or f"the licence of {trunk['katago_model']}"
    return f"Apache-2.0 (rank head); trunk weights: {stated}"


def render_card(header: dict[str, Any], name: str) -> str:
    """The card of a model of either format, with the history of its name."""
    cards = {
        SSCORE_FORMAT: sscore_card,
        GO_POLICY_FORMAT: go_policy_card,
        LEVELS_FORMAT: levels_card,
    }
    if header["format"] not in cards:
        raise ValueError(f"no model card for format {header['format']!r}")
    return cards[header["format"]](header, name) + _names(header, name)


def _registered_as(header: dict[str, Any]) -> str | None:
    """The name the training command registered the model under (``--register NAME``)."""
    for command in reversed(header["train"].get("commands") or []):
        words = shlex.split(command)
        if "--register" in words[:-1]:
            return words[words.index("--register") + 1]
    return None


def _names(header: dict[str, Any], name: str) -> str:
    """A "History" section when the model was trained under another name or the registry keeps
    a past for ``name`` (a default replaced by a better model): readers of the commands above,
    or of an older run's records, otherwise meet names that no longer resolve."""
    from pipeline.nets.registry import formerly_of, history_of

    lines = []
    registered = _registered_as(header)
    renamed = header.get("renamed")
    if renamed:  # the header's own references were renamed too: the file changed, not the weights
        nets = ", ".join(f"`{old}` → `{new}`" for old, new in renamed["nets"].items())
        lines.append(
            f"- Trained and registered as `{renamed['from']}`; the names of the nets this file "
            f"refers to were changed to their present registry names ({nets}), with the weights "
            f"unchanged, and it ships as `{name}`."
        )
    elif registered and registered != name:
        lines.append(
            f"- Registered as `{registered}` by the command above; the same file (the "
            f"registry's sha256) ships as `{name}`."
        )
    lines += [
        f"- Went by `{old}` before a rename; the registry resolves that name to this file, so "
        f"features, models and heads that recorded it still find it."
        for old in formerly_of(name)
        if old != registered
    ]
    lines += [f"- {line}" for line in history_of(name)]
    return "\n" + "\n".join(["## History", "", *lines, ""]) if lines else ""


def write_card(folder: Path, name: str | None = None) -> Path:
    """Re-render ``folder/MODEL_CARD.md`` from ``folder/model.yaml`` (name: the folder's)."""
    folder = Path(folder)
    header = yaml.safe_load((folder / HEADER_NAME).read_text(encoding="utf-8"))
    path = folder / CARD_NAME
    path.write_text(render_card(header, name or folder.name), encoding="utf-8")
    return path


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(write_card(Path(arg)))
