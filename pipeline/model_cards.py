"""MODEL_CARD.md of Kibitz's trained nets: command, data split, seed, time, quality, caveats.

Written by ``kibitz train sscore|policy`` next to the exported model and copied with it by
``--register``; the figures are the run's own measurements on the evaluation split.
"""

from __future__ import annotations

from dataclasses import asdict

from pipeline.sscore_eval import NS, PUBLISHED_ACCURACY

_SPLIT_TEXT = (
    "Deterministic split by game (`pipeline/data_split.py`): blake2b of salt + game_id → "
    "train / validation / evaluation with fractions {fractions} and salt `{salt}`. "
    "Evaluation games were never trained on."
)


def _common(config, result, command: str) -> list[str]:
    cfg = asdict(config)
    last = result.history[-1] if result.history else {}
    return [
        "## How it was made",
        "",
        f"Command: `{command}`",
        "",
        _SPLIT_TEXT.format(fractions=tuple(config.split_fractions), salt=config.split_salt),
        "",
        f"Seed {config.seed}; {result.steps} steps in {result.train_seconds / 60:.1f} min of training on "
        f"this machine's CPU (2 shared cores), {result.positions_per_second:.0f} training positions/s.",
        "",
        "Settings: " + ", ".join(f"`{k}={v}`" for k, v in cfg.items()),
        "",
        "Last validation: "
        + ", ".join(f"{k} {v:.4g}" for k, v in last.items() if isinstance(v, float | int)),
        "",
    ]


def sscore_card(config, result, *, command: str) -> str:
    """Card of an s-score net, quality next to Chen et al.'s published figures."""
    ev = result.evaluation
    lines = [
        f"# kibitz-sscore-{config.game}",
        "",
        f"Bradley-Terry strength estimator (s-score) of Chen, Shih & Wu (2025) for {config.game}, "
        f"trained by Kibitz: {config.blocks} residual blocks × {config.channels} channels, policy, value "
        "and s-score heads; the move enters the score head as board planes. Format `kibitz-sscore` "
        "(`pipeline/sscore_net.py`), ONNX beside it.",
        "",
        *_common(config, result, command),
        "## Quality (evaluation split)",
        "",
    ]
    if ev is not None:
        lines += [
            "Chen et al.'s protocol: predict the rank group whose mean s-score (training games) is "
            "nearest to the mean s-score of n instances (a player's moves in one game, at most "
            "16 random moves each).",
            "",
            ev.to_markdown(),
            "",
        ]
    published = ", ".join(
        f"n={n}: {p} %" for n, p in zip(NS, PUBLISHED_ACCURACY[config.game], strict=True)
    )
    lines += [
        "## How far from the published net, and why",
        "",
        f"Chen et al. report {published}. Their estimators are 20-block × 256-channel residual nets "
        "trained on GPUs for days on hundreds of thousands of games. This one trains for minutes on "
        "two shared CPU cores, sees tens of thousands of positions, and is a few hundred thousand "
        "parameters: it learns a coarse, partly monotone trend, not the published accuracy. "
        "The same command with `--blocks 20 --channels 256` and no time budget on a GPU machine is "
        "the full-size run.",
        "",
    ]
    return "\n".join(lines)


def go_policy_card(config, result, *, command: str) -> str:
    """Card of the rank-conditioned Go policy."""
    ev = result.evaluation
    lines = [
        "# kibitz-go-policy",
        "",
        "Rank-conditioned Go imitation policy (`pipeline/go_rank_policy.py`): one trunk pass gives "
        f"move logits for all ranks {', '.join(('10k', '…', '9d'))} at once, output (B, 19, 362). "
        f"{config.blocks} residual blocks × {config.channels} channels, per-rank FiLM head of "
        f"{config.head_channels} channels. Format `kibitz-go-policy`, ONNX beside it.",
        "",
        f"Trained ranks (present in the training games): {', '.join(result.trained_ranks)}. Ranks "
        "10k…6k have no games in the Fox selection; their priors are the linear extrapolation of "
        "the trained ranks' parameters, not learned.",
        "",
        *_common(config, result, command),
        "## Quality (evaluation split)",
        "",
    ]
    if ev is not None:
        lines += [ev.to_markdown(), ""]
    lines += [
        "## How far from KataGo's HumanSL net, and why",
        "",
        "KataGo's b18c384 HumanSL net was trained on GPUs on millions of human games and matches "
        "roughly half of human moves; this CPU-trained net sees tens of thousands of positions in "
        "minutes and matches far fewer. It exists to make Go imitation levels available offline "
        "and cheaply (one trunk pass for all ranks); a full-size run is the same command with "
        "`--blocks 20 --channels 256` and no time budget on a GPU machine.",
        "",
    ]
    return "\n".join(lines)
