"""``kibitz serve``: estimates as games finish, over HTTP, on Ray Serve.

    kibitz serve                                   # chess and Go, http://127.0.0.1:8000
    kibitz serve --game chess --port 8100 --state /var/lib/kibitz/state.duckdb
    KIBITZ_SERVE_TOKEN=… kibitz serve --host 0.0.0.0 --address auto   # on a Ray cluster

Post each finished game (``POST /v1/chess/games`` with the PGN, ``/v1/go/games`` with the
SGF, or JSON ``{"pgn": …, "id": …}``) and get back each player's updated estimate, the fields
of ``kibitz estimate --json``; ``GET /v1/chess/players/NAME`` reads one player's,
``GET /v1/estimates`` the newest. Every accepted game is committed to the state file before
the answer, a game posted twice counts once, and the estimate after k games is what
``kibitz estimate`` prints for the same k games. Listens on 127.0.0.1 unless ``--host`` says
otherwise, and then only with a bearer token. Runs until interrupted (Ctrl-C, SIGTERM).
See docs/guide/serve.md.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

TOKEN_ENV = "KIBITZ_SERVE_TOKEN"


def read_token(token_file: str | None) -> str | None:
    """The bearer token: ``--token-file``'s first line, else ``$KIBITZ_SERVE_TOKEN``."""
    if token_file:
        token = Path(token_file).read_text(encoding="utf-8").strip()
        if not token:
            raise SystemExit(f"token file {token_file!r} is empty")
        return token
    return os.environ.get(TOKEN_ENV) or None


def cmd_serve(args: argparse.Namespace) -> int:
    from pipeline.core.settings import serve_state
    from pipeline.jobs.serve import run_service
    from pipeline.serve.limits import Limits
    from pipeline.serve.service import ServeSettings

    games = args.game or ["chess", "go"]
    settings = ServeSettings(
        models={game: getattr(args, f"model_{game}") for game in games},
        state=Path(args.state) if args.state else serve_state(),
        token=read_token(args.token_file),
        limits=Limits(
            max_body_bytes=args.max_body_kb * 1024,
            body_timeout_s=args.body_timeout,
            max_moves=args.max_moves,
        ),
        extractors=args.extractors,
        extractor_gpus=args.gpus_per_extractor,
        threads=args.threads or os.cpu_count(),
        engines=args.engines or os.cpu_count() or 1,
    )
    run_service(
        settings, host=args.host, port=args.port, address=args.address,
        num_cpus=args.num_cpus, verbose=args.verbose,
    )  # fmt: skip
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="estimates as games finish: an HTTP API on Ray Serve",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--game", action="append", choices=["chess", "go"],
        help="a game kind to serve (repeat for both; default: both)",
    )  # fmt: skip
    for game in ("chess", "go"):
        parser.add_argument(
            f"--model-{game}",
            help=f"{game} meta-models: a registry name or folder (default: kibitz-meta-{game})",
        )
    parser.add_argument("--state", help="the state file (default: $KIBITZ_HOME/serve/state.duckdb)")
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--token-file", help=f"file holding the bearer token (default: ${TOKEN_ENV})"
    )
    parser.add_argument("--address", help="Ray cluster to join (default: embedded local Ray)")
    parser.add_argument("--num-cpus", type=int, help="CPUs of the embedded Ray (default: all)")
    parser.add_argument(
        "--extractors", type=int, default=1, help="Extractor replicas per game kind (default 1)"
    )
    parser.add_argument(
        "--gpus-per-extractor", type=float, default=0.0,
        help="GPUs of each Extractor replica (1 on a GPU node: one replica per GPU)",
    )  # fmt: skip
    parser.add_argument(
        "--threads", type=int, help="torch threads of each Extractor (default: the machine's cores)"
    )
    parser.add_argument(
        "--engines",
        type=int,
        help="Stockfish engines of each chess Extractor, valuing a batch's games side by side"
        " (default: the machine's cores)",
    )
    parser.add_argument(
        "--max-body-kb", type=int, default=256, help="largest post in KiB (default 256; else 413)"
    )
    parser.add_argument(
        "--body-timeout", type=float, default=10.0,
        help="seconds a post's body may take to arrive (default 10; else 408)",
    )  # fmt: skip
    parser.add_argument(
        "--max-moves", type=int, default=1000,
        help="most moves (plies) a posted game may have (default 1000; else 413)",
    )  # fmt: skip
    parser.set_defaults(func=cmd_serve)
