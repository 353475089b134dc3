"""``kibitz extract``: turn the games table into the per-move features table on Ray.

    kibitz extract chess --games kibitz-out/games --out kibitz-out/features
    kibitz extract go --games kibitz-out/games --out kibitz-out/features-go --backend onnx
    kibitz extract chess --games games --out features-part-0 --part 0/4   # one of 4 machines/calls

``--part K/N`` extracts the chunks of part K of N (disjoint games; the N parts together are
the whole table): a run too long for one machine or one call is split, each part aggregated on
its own and the aggregates merged (``kibitz aggregate --merge``, docs/guide/gpu.md).

``--skip-done AGGREGATES...`` continues a run whose features are gone but whose aggregates were
kept: the chunks those aggregates hold (same config, same games table) are not extracted again;
merge the old aggregates with the new run's afterwards.

Exit status 1 when every game was quarantined (the reasons are in ``OUT/_quarantine``).
See docs/guide/extract.md for the output schema and figures.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pipeline.core import settings
from pipeline.core.errors import KibitzError
from pipeline.extract.config import BACKENDS, PRECISIONS, ExtractConfig, load_config, preset


class NothingExtractedError(KibitzError, ValueError):
    """A run in which every game was quarantined: exit 1, like ``kibitz ingest`` with no
    readable game, so that a script never goes on to aggregate an empty features table."""


def configure(args: argparse.Namespace) -> ExtractConfig:
    """The run's config: ``--config`` (or the preset) with the command line's overrides, so that
    a config written for one machine runs on another (a GPU config on a CPU: ``--precision bf16
    --batch-size 256``) and its hash still says what changes the features."""
    config = load_config(args.config) if args.config else preset(args.game)
    if config.game != args.game:
        raise SystemExit(f"config {str(args.config)!r} is for {config.game!r}, not {args.game!r}")
    if args.backend:
        config.backend = args.backend
    if args.precision:
        config.precision = args.precision
    if args.batch_size:
        config.batch_sizes = {**config.batch_sizes, config.backend: args.batch_size}
    if args.compile or args.cuda_graphs:
        config.compile = True
    if args.cuda_graphs:
        config.cuda_graphs = True
    if args.nodes:
        config.value.nodes = args.nodes
    config.validate()
    return config


def _run(args: argparse.Namespace) -> int:
    from pipeline.jobs.extract import parse_part, run_extract

    config = configure(args)
    summary = run_extract(
        config,
        Path(args.games),
        Path(args.out),
        address=args.address,
        num_cpus=args.num_cpus,
        max_games=args.max_games,
        part=parse_part(args.part) if args.part else None,
        skip_done=args.skip_done,
        force=args.force,
        show_progress=not args.no_progress,
    )
    run = summary["this_run"]
    if "skipped_done" in summary:
        done = summary["skipped_done"]
        print(f"skipped {done['chunks']} chunks ({done['games']} games) the aggregates hold")
    print(
        f"{summary['games']} games, {summary['positions']} positions, "
        f"{summary['quarantined_games']} quarantined in {summary['out_dir']}; this run "
        f"{run['positions']} positions in {run['wall_s']:.1f} s ({run['positions_per_s']} /s)"
    )
    if args.json:
        print(json.dumps(summary, indent=1))
    if summary["games"] and summary["games"] == summary["quarantined_games"]:
        raise NothingExtractedError(
            f"every game of {args.games!r} was quarantined ({summary['quarantined_games']}; "
            f"reasons in {str(Path(args.out) / '_quarantine')!r})"
        )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "extract",
        help="evaluate every move with the nets into the features table",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("game", choices=["chess", "go"])
    parser.add_argument("--games", default=str(settings.games_dir()), help="games table folder")
    parser.add_argument(
        "--out", default=None, help="features folder (default: $KIBITZ_HOME/features-GAME)"
    )
    parser.add_argument("--config", type=Path, help="extraction config YAML (default: preset)")
    parser.add_argument("--address", help="Ray cluster to join (default: embedded local Ray)")
    parser.add_argument("--num-cpus", type=int, help="CPUs of the embedded Ray (default: all)")
    parser.add_argument("--backend", choices=BACKENDS, help="override the config's backend")
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="override the config's number format (bf16: GPUs and CPUs with AVX-512 BF16 or AMX, "
        "docs/guide/extract.md)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        metavar="N",
        help="override the backend's positions per net call (a GPU config on a CPU: 256, docs/guide/extract.md)",
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the nets (torch backend; 1.5-2.5x the nets on a GPU, docs/guide/gpu.md)",
    )
    parser.add_argument(
        "--cuda-graphs",
        action="store_true",
        help="--compile, and replay each net's batches as CUDA graphs (a GPU; docs/guide/gpu.md)",
    )
    parser.add_argument("--nodes", type=int, help="override Stockfish's node limit")
    parser.add_argument("--max-games", type=int, help="only the first N games (trial runs)")
    parser.add_argument(
        "--part",
        metavar="K/N",
        help="only part K of N of the games (disjoint; merge the aggregates)",
    )
    parser.add_argument(
        "--skip-done",
        nargs="+",
        type=Path,
        metavar="AGGREGATES",
        help="aggregates of earlier runs of this config over these games: skip their chunks",
    )
    parser.add_argument("--force", action="store_true", help="delete earlier output and redo")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--json", action="store_true", help="print the run summary as JSON")
    parser.set_defaults(func=_run_with_default_out)


def _run_with_default_out(args: argparse.Namespace) -> int:
    if args.out is None:
        args.out = str(settings.features_dir(args.game))
    return _run(args)
