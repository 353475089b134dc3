"""One posted game: the body of ``POST /v1/{game}/games`` read into a one-row games table.

A game server posts each game as it finishes, as the game record's own text (PGN for chess,
SGF for Go) or as JSON holding it (``{"pgn": …}`` / ``{"sgf": …}``, Lichess's game export
with ``pgnInJson=true`` among them), with an optional ``"id"``. The game kind's ingestion
reader reads it from memory (``read_text``: no file is written or opened), so a posted game
gets exactly the columns, checks and quarantine reasons of a game in a dump.

Identity, which makes a second post of the same game count once: a Lichess game's id is its
``Site`` URL's, as in a dump; otherwise the post's ``"id"`` names the game; otherwise the
text does (its sha256), so a re-sent record is recognised and two different games never
collide. Everything a post can get wrong is a :class:`PostError` with the HTTP status and a
one-line reason; nothing of a post becomes a path or a piece of SQL.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.core.errors import KibitzError
from pipeline.kinds import KINDS, game_kind

# A client's own game id: short, and nothing a shell, a path or SQL reads specially.
CLIENT_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")

# How a record of the other game kind starts: an SGF game tree, a PGN tag.
OPENINGS = {"go": b"(;", "chess": b"["}


class PostError(KibitzError, ValueError):
    """A post the service refuses: ``status`` is the HTTP status, the message one line."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


@dataclass(frozen=True)
class PostedGame:
    """A readable posted game: its one-row games table (``GAMES_SCHEMA``) and its identity."""

    game: str
    game_id: str
    games: pa.Table
    plies: int

    @property
    def players(self) -> list[str]:
        return [self.games[side][0].as_py() for side in ("white", "black")]


def record_text(body: bytes, content_type: str, game: str) -> tuple[bytes, str | None]:
    """The game record's text and the client's id from a post's body: JSON with a ``pgn`` /
    ``sgf`` field (and optionally ``id``), or the record itself."""
    if not content_type.split(";")[0].strip().lower().endswith("json"):
        return body, None
    try:
        record = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PostError(400, f"the body is not JSON: {exc}") from None
    field = game_kind(game).games_format
    if not isinstance(record, dict) or not isinstance(record.get(field), str):
        raise PostError(400, f"a JSON post holds the game's {field.upper()} text in {field!r}")
    client_id = record.get("id")
    if client_id is not None and not (
        isinstance(client_id, str) and CLIENT_ID.fullmatch(client_id)
    ):
        raise PostError(400, f"'id' must be 1-128 of A-Z a-z 0-9 _ . : - (got {client_id!r})")
    return record[field].encode("utf-8"), client_id


def read_posted(game: str, body: bytes, content_type: str, *, max_moves: int) -> PostedGame:
    """The posted game, or a :class:`PostError`: 400 for a record that cannot be read (its
    reader's reason), for another game kind's record or for more than one game; 413 for more
    than ``max_moves`` moves (plies); 422 for a readable game Kibitz cannot use (a chess
    variant, a game without a move)."""
    if game not in KINDS:
        raise PostError(404, f"unknown game {game!r}; known games: {', '.join(sorted(KINDS))}")
    text, client_id = record_text(body, content_type, game)
    other = next(k for k in KINDS if k != game)
    if text.lstrip().startswith(OPENINGS[other]) and not text.lstrip().startswith(OPENINGS[game]):
        raise PostError(400, f"this looks like a {other} record; post it to /v1/{other}/games")
    key = client_id or hashlib.sha256(text).hexdigest()[:32]
    name = f"posted/{key}" + (".sgf" if game_kind(game).games_format == "sgf" else "")
    result = game_kind(game).reader.read_text(text, name)
    read = result.games.num_rows + result.quarantine.num_rows
    if read > 1:
        raise PostError(400, f"the post holds {read} games; post one game at a time")
    if result.quarantine.num_rows:
        row = result.quarantine.to_pylist()[0]
        status = 422 if row["error_type"] == "UnsupportedVariantError" else 400
        raise PostError(status, " ".join(row["reason"].split()))
    if read == 0:
        raise PostError(400, "the post holds no game")
    games = result.games
    plies = int(pc.list_value_length(games["moves"])[0].as_py() or 0)
    if plies > max_moves:
        raise PostError(
            413, f"the game has {plies} moves, more than this service takes ({max_moves})"
        )
    if plies == 0:
        raise PostError(422, "the game has no moves: there is nothing to estimate from")
    game_id = games["game_id"][0].as_py()
    if client_id and "://" not in (games["site"][0].as_py() or ""):
        game_id = client_id
        games = games.set_column(
            games.schema.get_field_index("game_id"), "game_id", pa.array([game_id])
        )
    return PostedGame(game, game_id, games, plies)
