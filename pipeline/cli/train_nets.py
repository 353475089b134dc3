"""``kibitz train sscore|sscore-levels|policy``: the sub-commands that train Kibitz's nets.

Added to ``kibitz train`` (``pipeline/cli/train.py``) by :func:`add_parsers`::

    kibitz ingest chess ../shared/data/chess/lichess-2024-02-blitz/testing --out kibitz-out/games-chess
    kibitz train sscore chess --games kibitz-out/games-chess --out kibitz-out/sscore-chess
    kibitz train sscore go --games kibitz-out/games-go --out kibitz-out/sscore-go --max-minutes 40
    kibitz train sscore-levels chess --games kibitz-out/games-chess --out kibitz-out/sscore-levels
    kibitz train sscore-levels go --games kibitz-out/games-go --out kibitz-out/sscore-go-levels
    kibitz train policy go --games kibitz-out/games-go --out kibitz-out/go-policy --max-minutes 40
    kibitz train policy go --games kibitz-out/games-go --out kibitz-out/go-policy-katago \
        --trunk katago-g170-b6c96 --trunk-mode frozen|finetune --device cuda --batch-size 256

``--out`` receives checkpoints/, model.kibitz.pt, model.onnx, model.yaml and MODEL_CARD.md; the
run is tracked in the project's MLflow store (``$KIBITZ_HOME/mlflow.db`` unless
``--tracking-uri`` or ``MLFLOW_TRACKING_URI``); ``--resume`` continues from its checkpoint.
``--device`` picks where the net trains (default: a CUDA GPU when torch sees one); on a GPU raise
``--groups`` / ``--batch-size`` so each step fills it. ``--init-from MODEL`` starts a new run from a trained model's weights (same format and net
shape) with a fresh schedule, to train a shipped model further or on other games; ``--init-from
A,B`` starts from the mean of both models' weights (the ends of successive schedules of one
line of runs average into a better model: docs/guide/train.md). ``policy
--trunk KATAGO`` puts the rank head on a registered KataGo net's trunk (copied exactly; its
weights end up in the exported file) instead of Kibitz's own, ``--trunk-mode`` frozen (the
head alone trains), finetune (the trunk too, at ``--trunk-lr-scale`` × the LR) or rank-layers
(with ``--init-from`` a trained policy: only its per-rank layers refit, on its own features).
``--symmetries N`` makes the exported policy average its features over N board symmetries;
``--random-symmetries`` trains on each board under a random one of the 8; ``--teacher-symmetries
N`` distils the ``--init-from`` policy averaged over N symmetries into a one-orientation net.
``--register NAME --models-root DIR`` then copies the model into ``DIR/NAME`` and adds it to
``DIR/registry.yaml``, after which ``kibitz models list`` shows it and ``load_net(NAME)`` loads it
(see docs/guide/train.md).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.cli.invocation import command_line
from pipeline.core import settings

log = logging.getLogger(__name__)

Option = tuple[str, type, str]  # (flag, type, help) of an option that sets a config field
# Options that set the training-config field of the same name; unset ones keep the default.
SHARED_OPTIONS: tuple[Option, ...] = (
    ("--max-steps", int, "steps of the LR schedule and hard stop"),
    ("--seed", int, "seed of weights and sampling (default 0)"),
    ("--blocks", int, "residual blocks of the trunk"),
    ("--channels", int, "trunk width"),
    ("--lr", float, "peak learning rate (AdamW, warm-up then cosine)"),
    ("--weight-decay", float, "AdamW's decoupled weight decay (default 1e-4; sscore-levels 0.01)"),
    ("--warmup-steps", int, "linear warm-up steps of the LR schedule"),
    ("--epoch-steps", int, "steps between validations (default: one pass)"),
    ("--positions-per-instance", int, "pool keeps this many random positions per instance"),
    ("--max-train-games", int, "use at most this many training games (a fixed subset)"),
    ("--max-validation-games", int, "validation games of the per-epoch figures"),
    ("--max-evaluation-games", int, "evaluation games of the final figures (default: all)"),
    ("--evaluation-positions", int, "moves per instance in the final evaluation (default: all)"),
    ("--init-from", str, "start from a model's weights (name or .kibitz.pt; A,B: their mean)"),
    ("--select-best", str, "export the weights of the validation where this metric was highest"),
    ("--device", str, "auto (a CUDA GPU if there is one), cpu, cuda or cuda:N (default auto)"),
)
SSCORE_OPTIONS: tuple[Option, ...] = (
    ("--groups", int, "G: groups per batch (default 4)"),
    ("--positions", int, "P: positions per rank and group (default 4)"),
    ("--max-reference-games", int, "training games of the protocol's reference means"),
    ("--score-dropout", float, "training-time dropout in the score head (default 0)"),
)
POLICY_OPTIONS: tuple[Option, ...] = (
    ("--batch-size", int, "positions per step (default 64)"),
    ("--head-channels", int, "width of the per-rank FiLM head (default 32)"),
    ("--trunk", str, "start from this KataGo net's trunk (registry name or .bin.gz), e.g."
     " katago-g170-b6c96; default: Kibitz's own trunk, from scratch"),
    ("--trunk-mode", str, "with --trunk: frozen (only the head trains, default), finetune, or"
     " rank-layers (only the per-rank layers, on the --init-from policy's own features)"),
    ("--trunk-lr-scale", float, "finetune: the trunk's LR is the head's times this (default 0.1)"),
    ("--symmetries", int, "board symmetries (1, 2, 4, 8) the exported model averages over at"
     " inference, n trunk passes a position; training sees one (default 1). A finished run"
     " resumed with another count re-exports and re-evaluates it"),
    ("--teacher-symmetries", int, "self-distillation: the --init-from policy averaged over this"
     " many board symmetries (1, 2, 4, 8) is a frozen teacher whose move distribution is a soft"
     " target beside the played move (default 0: none)"),
    ("--teacher-weight", float, "the teacher's share of the loss (default 0.5)"),
    ("--precision", str, "fp32 (default) or bf16: each training step's forward under bfloat16"
     " autocast (weights, optimiser and loss in fp32; validation, evaluation and export fp32)"),
)  # fmt: skip
# A levels head has no trunk of its own: no --blocks/--channels, nor --init-from.
LEVELS_SHARED = tuple(
    o for o in SHARED_OPTIONS if o[0] not in ("--blocks", "--channels", "--init-from")
)
LEVELS_OPTIONS: tuple[Option, ...] = (
    ("--groups", int, "G: groups per batch (default 32)"),
    ("--positions", int, "P: positions per rank and group (default 8)"),
    ("--max-reference-games", int, "training games of the protocol's reference means"),
    ("--hidden", int, "width of the head's MLP (default 64)"),
)
# Option dests whose config field has another name.
FIELD_OF = {"evaluation_positions": "evaluation_positions_per_instance"}


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _add_options(parser: argparse.ArgumentParser, options: tuple[Option, ...]) -> None:
    for flag, kind, text in options:
        parser.add_argument(flag, type=kind, help=text)


def _add_common(
    parser: argparse.ArgumentParser, shared: tuple[Option, ...] = SHARED_OPTIONS
) -> None:
    parser.add_argument(
        "--games", required=True, help="games table folder (`kibitz ingest` output)"
    )
    parser.add_argument(
        "--out", required=True, help="run folder: checkpoints, exported model, MLflow store"
    )
    parser.add_argument("--max-minutes", type=float, help="training time budget of this invocation")
    parser.add_argument(
        "--resume", action="store_true", help="continue from OUT/checkpoints/last.pt"
    )
    _add_options(parser, shared)
    parser.add_argument(
        "--threads", type=int, help="torch CPU threads (results depend on it; default: torch's)"
    )
    parser.add_argument(
        "--tracking-uri",
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///$KIBITZ_HOME/mlflow.db)",
    )
    parser.add_argument("--register", metavar="NAME", help="register the model under NAME")
    parser.add_argument(
        "--models-root", help="where --register puts it (default: $KIBITZ_MODELS_DIR)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _overrides(args: argparse.Namespace, options: tuple[Option, ...]) -> dict[str, Any]:
    """Config fields set on the command line."""
    fields = {}
    for flag, _, _ in options:
        dest = _dest(flag)
        if getattr(args, dest, None) is not None:
            fields[FIELD_OF.get(dest, dest)] = getattr(args, dest)
    return fields


def _run(
    args: argparse.Namespace,
    config: Any,
    train: Callable[..., Any],
    *,
    game: str,
    description: str,
) -> int:
    """Train, write the model card next to the export, print it, register when asked."""
    from pipeline.train.device import resolve_device
    from pipeline.train.model_cards import model_licence, write_card

    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    resolve_device(config.device)  # before any data is read (a DeviceError: one line, main.py)
    out = Path(args.out)
    result = train(
        config, Path(args.games), out, max_minutes=args.max_minutes, resume=args.resume,
        progress=not args.no_progress, tracking_uri=settings.tracking_uri(args.tracking_uri),
        command=command_line(),
    )  # fmt: skip
    card = write_card(out, args.register or out.name)
    print(card.read_text(encoding="utf-8"))
    if args.register:
        from pipeline.nets.model_export import register_model

        root = Path(args.models_root) if args.models_root else settings.models_dir()
        path = register_model(
            result.exported, name=args.register, models_root=root, game=game,
            description=description, license=model_licence(result.exported.header),
        )  # fmt: skip
        print(f"registered {args.register!r} at {path}")
    return 0


def sscore_config(args: argparse.Namespace) -> Any:
    """The ``SScoreTrainConfig`` of a parsed ``kibitz train sscore`` command line."""
    from pipeline.train.sscore import SScoreTrainConfig

    return SScoreTrainConfig(
        game=args.game,
        with_r_inf=not args.no_r_inf,
        policy_features=not args.no_policy_features,
        **_overrides(args, SHARED_OPTIONS + SSCORE_OPTIONS),
    )


def cmd_train_sscore(args: argparse.Namespace) -> int:
    from pipeline.train.sscore import train

    config = sscore_config(args)
    return _run(
        args, config, train, game=args.game,
        description=f"Kibitz s-score net (Chen et al. 2025 strength estimator), {args.game}",
    )  # fmt: skip


def levels_config(args: argparse.Namespace) -> Any:
    """The ``LevelsTrainConfig`` of a parsed ``kibitz train sscore-levels`` command line."""
    from pipeline.train.sscore_levels import LevelsTrainConfig

    levels = {"levels": tuple(args.levels.split(","))} if args.levels else {}
    return LevelsTrainConfig(
        game=args.game, with_r_inf=not args.no_r_inf, **levels,
        **_overrides(args, LEVELS_SHARED + LEVELS_OPTIONS),
    )  # fmt: skip


def cmd_train_sscore_levels(args: argparse.Namespace) -> int:
    from pipeline.train.sscore_levels import train

    config = levels_config(args)
    return _run(
        args, config, train, game=args.game,
        description=f"Kibitz levels s-score (Bradley-Terry head on {len(config.levels)} "
        f"imitation levels' policies), {args.game}",
    )  # fmt: skip


def cmd_train_policy(args: argparse.Namespace) -> int:
    from pipeline.train.go_policy import GoPolicyTrainConfig, train

    if args.trunk and (args.blocks is not None or args.channels is not None):
        print(
            "kibitz train policy: --blocks/--channels shape Kibitz's own trunk; a --trunk has "
            "its KataGo net's shape",
            file=sys.stderr,
        )
        return 2
    config = GoPolicyTrainConfig(
        random_symmetries=args.random_symmetries,
        **_overrides(args, SHARED_OPTIONS + POLICY_OPTIONS),
    )
    trunk = f", on {config.trunk}'s trunk ({config.trunk_mode})" if config.trunk else ""
    return _run(
        args, config, train, game="go",
        description=f"Kibitz rank-conditioned Go imitation policy (10k-9d, one trunk pass){trunk}",
    )  # fmt: skip


def add_parsers(trainers: argparse._SubParsersAction) -> None:
    """Add ``sscore``, ``sscore-levels`` and ``policy`` to the ``kibitz train`` sub-commands."""
    sscore = trainers.add_parser(
        "sscore",
        help="s-score strength estimator (Chen et al. 2025) for chess or Go",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sscore.add_argument("game", choices=["chess", "go"])
    _add_common(sscore)
    _add_options(sscore, SSCORE_OPTIONS)
    sscore.add_argument("--no-r-inf", action="store_true", help="without the random-move rank r∞")
    sscore.add_argument(
        "--no-policy-features",
        action="store_true",
        help="the score head does not read the policy's log-likelihood and entropy of the move",
    )
    sscore.set_defaults(func=cmd_train_sscore)
    levels = trainers.add_parser(
        "sscore-levels",
        help="s-score head on the policies of several imitation levels (chess: Maia-1 1100-1900;"
        " Go: kibitz-go-policy at 4k, 2k, 1d-9d)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    levels.add_argument("game", choices=["chess", "go"])
    _add_common(levels, LEVELS_SHARED)
    _add_options(levels, LEVELS_OPTIONS)
    levels.add_argument(
        "--levels",
        help="comma-separated registry names, NAME@RANK for a rank-conditioned Go net (default:"
        " chess maia-1100..1900; Go kibitz-go-policy@4k,@2k,@1d..@9d then katago-g170-b6c96)",
    )
    levels.add_argument("--no-r-inf", action="store_true", help="without the random-move rank r∞")
    levels.set_defaults(func=cmd_train_sscore_levels)
    policy = trainers.add_parser(
        "policy",
        help="rank-conditioned Go imitation policy (all ranks in one trunk pass)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    policy.add_argument("game", choices=["go"])
    _add_common(policy)
    _add_options(policy, POLICY_OPTIONS)
    policy.add_argument(
        "--random-symmetries",
        action="store_true",
        help="train on each board under a random one of its 8 symmetries, its features turned"
        " back (the per-point bias keeps the board's own orientation)",
    )
    policy.set_defaults(func=cmd_train_policy)
