"""``kibitz train sscore`` and ``kibitz train policy``: the sub-commands that train Kibitz's nets.

Added to ``kibitz train`` (``pipeline/cli_train.py``) by :func:`add_parsers`::

    kibitz train sscore chess --games kibitz-out/games --out runs/sscore-chess --max-minutes 15
    kibitz train sscore go --games kibitz-out/games --out runs/sscore-go --max-minutes 15
    kibitz train policy go --games kibitz-out/games --out runs/go-policy --max-minutes 10

``--out`` receives checkpoints/, model.kibitz.pt, model.onnx, model.yaml, MODEL_CARD.md and the
MLflow store (unless ``--tracking-uri``); ``--resume`` continues from its checkpoint.
``--register NAME --models-root DIR`` then copies the model into ``DIR/NAME`` and adds it to
``DIR/registry.yaml``, after which ``kibitz models list`` shows it and ``load_net(NAME)`` loads it
(see docs/train.md).
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
from pathlib import Path

log = logging.getLogger(__name__)


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--games", required=True, help="games table folder (`kibitz ingest` output)"
    )
    parser.add_argument(
        "--out", required=True, help="run folder: checkpoints, exported model, MLflow store"
    )
    parser.add_argument("--max-minutes", type=float, help="training time budget of this invocation")
    parser.add_argument("--max-steps", type=int, help="steps of the LR schedule and hard stop")
    parser.add_argument(
        "--resume", action="store_true", help="continue from OUT/checkpoints/last.pt"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--blocks", type=int, help="residual blocks of the trunk")
    parser.add_argument("--channels", type=int, help="trunk width")
    parser.add_argument("--lr", type=float, help="peak learning rate (AdamW, cosine schedule)")
    parser.add_argument(
        "--epoch-steps", type=int, help="steps between validations (default: one pass)"
    )
    parser.add_argument("--max-train-games", type=int, help="use at most this many training games")
    parser.add_argument("--max-evaluation-games", type=int, help="games of the final evaluation")
    parser.add_argument("--tracking-uri", help="MLflow server (default: sqlite store in --out)")
    parser.add_argument("--register", metavar="NAME", help="register the model under NAME")
    parser.add_argument(
        "--models-root", help="where --register puts it (default: $KIBITZ_MODELS_DIR)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _overrides(args: argparse.Namespace, keys: tuple[str, ...]) -> dict:
    return {k: getattr(args, k) for k in keys if getattr(args, k, None) is not None}


def _register(args: argparse.Namespace, exported, game: str, description: str) -> None:
    if not args.register:
        return
    from pipeline import settings
    from pipeline.model_export import register_model

    root = Path(args.models_root) if args.models_root else settings.models_dir()
    path = register_model(
        exported, name=args.register, models_root=root, game=game, description=description
    )
    print(f"registered {args.register!r} at {path}")


def _command_line() -> str:
    return "kibitz " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def cmd_train_sscore(args: argparse.Namespace) -> int:
    from pipeline.model_cards import sscore_card
    from pipeline.train_sscore import SScoreTrainConfig, train

    keys = (
        "blocks",
        "channels",
        "lr",
        "epoch_steps",
        "max_train_games",
        "max_evaluation_games",
        "seed",
    )
    config = SScoreTrainConfig(game=args.game, **_overrides(args, keys))
    if args.max_steps is not None:
        config.max_steps = args.max_steps
    if args.groups is not None:
        config.groups = args.groups
    if args.positions is not None:
        config.positions = args.positions
    config.with_r_inf = not args.no_r_inf
    out = Path(args.out)
    result = train(
        config, Path(args.games), out, max_minutes=args.max_minutes, resume=args.resume,
        progress=not args.no_progress, tracking_uri=args.tracking_uri or _default_tracking_uri(out),
    )  # fmt: skip
    card = sscore_card(config, result, command=_command_line())
    (out / "MODEL_CARD.md").write_text(card, encoding="utf-8")
    print(card)
    _register(
        args,
        result.exported,
        args.game,
        f"Kibitz s-score net (Chen et al. 2025 strength estimator), {args.game}",
    )
    return 0


def cmd_train_policy(args: argparse.Namespace) -> int:
    from pipeline.model_cards import go_policy_card
    from pipeline.train_go_policy import GoPolicyTrainConfig, train

    keys = (
        "blocks",
        "channels",
        "lr",
        "epoch_steps",
        "max_train_games",
        "max_evaluation_games",
        "seed",
        "batch_size",
    )
    config = GoPolicyTrainConfig(**_overrides(args, keys))
    if args.max_steps is not None:
        config.max_steps = args.max_steps
    out = Path(args.out)
    result = train(
        config, Path(args.games), out, max_minutes=args.max_minutes, resume=args.resume,
        progress=not args.no_progress, tracking_uri=args.tracking_uri or _default_tracking_uri(out),
    )  # fmt: skip
    card = go_policy_card(config, result, command=_command_line())
    (out / "MODEL_CARD.md").write_text(card, encoding="utf-8")
    print(card)
    _register(
        args,
        result.exported,
        "go",
        "Kibitz rank-conditioned Go imitation policy (10k-9d, one trunk pass)",
    )
    return 0


def add_parsers(trainers: argparse._SubParsersAction) -> None:
    """Add ``sscore`` and ``policy`` to the ``kibitz train`` sub-commands."""
    sscore = trainers.add_parser(
        "sscore",
        help="s-score strength estimator (Chen et al. 2025) for chess or Go",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sscore.add_argument("game", choices=["chess", "go"])
    _add_common(sscore)
    sscore.add_argument("--groups", type=int, help="G: groups per batch (default 4)")
    sscore.add_argument("--positions", type=int, help="P: positions per rank and group (default 4)")
    sscore.add_argument("--no-r-inf", action="store_true", help="without the random-move rank r∞")
    sscore.set_defaults(func=cmd_train_sscore)
    policy = trainers.add_parser(
        "policy",
        help="rank-conditioned Go imitation policy (all ranks in one trunk pass)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    policy.add_argument("game", choices=["go"])
    _add_common(policy)
    policy.add_argument("--batch-size", type=int, help="positions per step (default 64)")
    policy.set_defaults(func=cmd_train_policy)


def _default_tracking_uri(out: Path) -> str:
    from pipeline.tracking import default_tracking_uri  # mlflow is slow to import: only here

    return default_tracking_uri(out)
