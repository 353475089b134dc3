"""``kibitz models``: list, fetch and check the registered nets.

- ``kibitz models list`` shows every registry entry (built-in and the models directory's
  ``registry.yaml``) with its role, whether its file is present and its sha256 matches,
  defaults first. A **default** is a net the extraction presets run or the shipped default
  meta-models (``kibitz-meta-chess``, ``kibitz-meta-go``) were fitted on, or one of those
  meta-models; a **reference** is an entry no default uses (a public net to compare against,
  the small policy the tests run); a **user** entry comes from the models directory's own
  ``registry.yaml`` (``kibitz train … --register``).
- ``kibitz models fetch NAME... | --all`` downloads entries from their url, verified by sha256;
  without a network it fails within the connect timeout with a clear message.
- ``kibitz models check NAME --pgn FILE | --sgf FILE`` prints move-matching accuracy and mean
  log-likelihood of a net on real games: the check of the net's game kind
  (``pipeline.kinds``: ``kind.check_net``, i.e. pipeline.nets.check_chess / check_go). A
  rank-conditioned Go policy is scored at each mover's own rank, with each group's best
  conditioning rank; ``--profile RANK`` adds the figures at one rank (a HumanSL net: its rank
  profile, ``rank_1d``); ``--komi K`` replaces the games' komi.

``--models-dir DIR`` (before the sub-command) points the whole process at another models
directory, exactly like ``KIBITZ_MODELS_DIR``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from pipeline.extract.config import preset
from pipeline.kinds import game_kind
from pipeline.meta.registered import default_name
from pipeline.nets import registry as model_registry
from pipeline.nets.backends import BACKENDS

logger = logging.getLogger(__name__)

GAME_OF_FORMAT = {"lc0": "chess", "katago": "go"}


def _use_models_dir(args: argparse.Namespace) -> None:
    if args.models_dir is not None:
        os.environ["KIBITZ_MODELS_DIR"] = str(Path(args.models_dir).expanduser().resolve())


def _status(entry: model_registry.ModelEntry, verify: bool) -> tuple[str, str]:
    if not entry.present:
        return "no", "-"
    if not verify:
        return "yes", "not checked"
    actual = model_registry.file_sha256(entry.file)
    return "yes", "ok" if actual == entry.sha256 else "MISMATCH"


ROLES = ("default", "reference", "user")  # the order ``kibitz models list`` shows them in


def default_models(entries: list[model_registry.ModelEntry]) -> set[str]:
    """The names the defaults use: each game's extraction preset's nets, its default
    meta-models and the nets those were fitted on (their manifest names the nets it read, by
    the names they had then, which ``formerly`` maps to today's)."""
    names: set[str] = set()
    by_name = {e.name: e for e in entries}
    for game in model_registry.GAMES:
        meta = default_name(game)
        names |= preset(game).models() | {meta}
        if meta in by_name and by_name[meta].present:
            manifest = json.loads(by_name[meta].file.read_text(encoding="utf-8"))
            names |= set(manifest.get("features_config", {}).get("nets", {}))
    return names


def model_role(entry: model_registry.ModelEntry, defaults: set[str]) -> str:
    if entry.name in defaults or defaults & set(entry.formerly):
        return "default"
    return "reference" if entry.source in ("built-in", "project") else "user"


def cmd_list(args: argparse.Namespace) -> int:
    _use_models_dir(args)
    entries = model_registry.list_models()
    defaults = default_models(entries)
    roles = {e.name: model_role(e, defaults) for e in entries}
    entries.sort(key=lambda e: ROLES.index(roles[e.name]))  # stable: registry order within
    rows = [("name", "role", "game", "format", "present", "sha256", "license", "path")]
    for entry in entries:
        present, sha = _status(entry, verify=not args.no_verify)
        name = entry.name + (f" (formerly {', '.join(entry.formerly)})" if entry.formerly else "")
        rows.append(
            (name, roles[entry.name], entry.game, entry.format, present, sha, entry.license,
             str(entry.file))
        )  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join([*cells, row[-1]]))
    bad = [r[0] for r in rows[1:] if r[5] == "MISMATCH"]
    if bad:
        print(f"sha256 mismatch: {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    _use_models_dir(args)
    if args.all == bool(args.names):
        print("give model names or --all (not both)", file=sys.stderr)
        return 2
    names = [e.name for e in model_registry.list_models() if e.url] if args.all else args.names
    failures = 0
    for name in names:
        try:
            path = model_registry.fetch(name, timeout=args.timeout, force=args.force)
        except (model_registry.FetchError, model_registry.ModelNotFoundError) as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            failures += 1
        except model_registry.ChecksumMismatchError as exc:
            print(f"{name}: {exc}; use --force to download it again", file=sys.stderr)
            failures += 1
        else:
            print(f"{name}: {path}")
    return 1 if failures else 0


def _game_of(net: str) -> str:
    path = Path(net)
    if path.is_file():
        name = path.name.lower()
        return "chess" if name.endswith((".pb.gz", ".pb")) else "go"
    return model_registry.find_entry(net).game


def cmd_check(args: argparse.Namespace) -> int:
    _use_models_dir(args)
    kind = game_kind(_game_of(args.name))
    games_file = getattr(args, kind.games_format)  # --pgn / --sgf
    if games_file is None:
        print(
            f"{args.name!r} is a {kind.name} net: give the games with --{kind.games_format} FILE",
            file=sys.stderr,
        )
        return 2
    options: dict[str, object] = {"max_games": args.max_games, "backend": args.backend}
    if args.device is not None or args.backend == "tensorrt":
        options["device"] = args.device or "cuda"
    for option in ("profile", "komi"):  # Go only
        if getattr(args, option) is None:
            continue
        if kind.name != "go":
            print(f"--{option} is for Go nets; {args.name!r} is a {kind.name} net", file=sys.stderr)
            return 2
        options[option] = getattr(args, option)
    result = kind.check_net(args.name, games_file, **options)
    print(result.to_text())
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "models",
        help="list, fetch and check the registered nets (Maia, KataGo)",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument(
        "--models-dir",
        type=Path,
        default=None,
        help="models directory (default: KIBITZ_MODELS_DIR or ../shared/models); its "
        "registry.yaml adds entries",
    )
    commands = parser.add_subparsers(dest="models_command", metavar="SUBCOMMAND", required=True)

    listing = commands.add_parser(
        "list", help="show registered nets: role (default first), presence and sha256 status"
    )
    listing.add_argument(
        "--no-verify", action="store_true", help="skip hashing the files (faster on big nets)"
    )
    listing.set_defaults(func=cmd_list)

    fetch = commands.add_parser("fetch", help="download nets from their registry url")
    fetch.add_argument("names", nargs="*", metavar="NAME", help="registered model names")
    fetch.add_argument("--all", action="store_true", help="every entry that has a url")
    fetch.add_argument("--force", action="store_true", help="download even if present")
    fetch.add_argument(
        "--timeout", type=float, default=10.0, help="connect/read timeout in seconds (default 10)"
    )
    fetch.set_defaults(func=cmd_fetch)

    check = commands.add_parser(
        "check", help="move-matching accuracy and mean log-likelihood on real games"
    )
    check.add_argument("name", help="registered model name or a net file")
    source = check.add_mutually_exclusive_group(required=True)
    source.add_argument("--pgn", type=Path, help="chess games: .pgn / .pgn.zst file or folder")
    source.add_argument(
        "--sgf", type=Path, help="Go games: .sgf file (one game per line) or folder"
    )
    check.add_argument("--max-games", type=int, default=200, help="games per file (default 200)")
    check.add_argument("--backend", choices=BACKENDS, default="torch", help="evaluation backend")
    check.add_argument(
        "--device", default=None, help="cpu or cuda[:N] (default cpu; cuda for tensorrt)"
    )
    check.add_argument(
        "--profile",
        metavar="RANK",
        help="Go: a rank-conditioned policy's rank (3d) to score beside each mover's own rank;"
        " a KataGo HumanSL net's rank profile (rank_1d)",
    )
    check.add_argument(
        "--komi",
        type=float,
        help="Go: komi of every game instead of its own (6.5 scores Fox's KM[0] games as Kibitz's"
        " trainers encode them)",
    )
    check.set_defaults(func=cmd_check)
