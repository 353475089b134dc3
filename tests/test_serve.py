"""``kibitz serve``: real Ray Serve on the local Ray, real HTTP, a real DuckDB state file.

The unit tests pin each rule without Ray (a post's reading, its limits, the state file); the
service tests start ``kibitz serve`` as a user does and talk HTTP to it: the estimate after
each game equals ``kibitz estimate``'s for the same games, a game counts once, bad posts
change nothing, and a kill -9 of a replica or of the whole service loses no accepted game.
"""

from __future__ import annotations

import asyncio
import http.client
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pyarrow as pa
import pytest
import zstandard

from pipeline.core.settings import data_dir
from pipeline.kinds import CHESS
from pipeline.serve.limits import Limits, ListenError, authorized, check_listen, read_body
from pipeline.serve.records import PostError, read_posted
from pipeline.serve.state import StateMismatchError, StateStore

CHESS_FILE = data_dir() / "chess/lichess-2024-02-blitz/candidating/1000-1200.pgn.zst"
GO_FILE = data_dir() / "go/fox-selected/by-player/1d.sgf"
PLAYER = "Richmankorter"  # 2 games in CHESS_FILE: the README's first estimate


def _chess_games() -> list[str]:
    with CHESS_FILE.open("rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as z:
        text = io.TextIOWrapper(z, encoding="utf-8").read()
    return ["[Event " + g.removeprefix("[Event ") for g in text.split("\n\n[Event ")]


GAMES = _chess_games()
MINE = [g for g in GAMES if f'"{PLAYER}"' in g]


def _refused(call, *args, **kwargs) -> PostError:
    with pytest.raises(PostError) as caught:
        call(*args, **kwargs)
    return caught.value


# -- a post read into a games row (no Ray) ----------------------------------------------------


def test_a_posted_game_is_the_dumps_game() -> None:
    """Same columns and the same id as the game read from the dump (its Site URL)."""
    posted = read_posted("chess", MINE[0].encode(), "text/plain", max_moves=1000)
    dumped = CHESS.reader.read_text(MINE[0].encode(), str(CHESS_FILE)).games
    assert posted.game_id == dumped["game_id"][0].as_py()
    assert posted.games.drop(["source_file"]).equals(dumped.drop(["source_file"]))
    assert PLAYER in posted.players and posted.plies == len(dumped["moves"][0])
    as_json = json.dumps({"pgn": MINE[0]}).encode()
    assert read_posted("chess", as_json, "application/json", max_moves=1000).game_id == posted.game_id


def test_a_game_without_url_is_named_by_its_text_or_its_id() -> None:
    text = b'[White "a"]\n[Black "b"]\n[Result "1-0"]\n\n1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0\n'
    first = read_posted("chess", text, "text/plain", max_moves=1000)
    assert first.game_id == read_posted("chess", text, "text/plain", max_moves=1000).game_id
    other = text.replace(b"Nc6", b"a6")
    assert read_posted("chess", other, "", max_moves=1000).game_id != first.game_id
    named = json.dumps({"pgn": text.decode(), "id": "server-game-17"}).encode()
    assert read_posted("chess", named, "application/json", max_moves=1000).game_id == "server-game-17"
    sgf = GO_FILE.read_bytes().split(b"\n")[0]
    go = read_posted("go", sgf, "application/x-go-sgf", max_moves=1000)
    assert go.plies == sgf.count(b";B[") + sgf.count(b";W[") and len(go.game_id) == 16


@pytest.mark.parametrize(
    ("game", "body", "content_type", "status", "reason"),
    [
        ("chess", b"garbage 1. e4", "", 400, "is not PGN: starts with b'garbage"),
        ("chess", b"(;GM[1]SZ[19];B[pd])", "", 400, "looks like a go record; post it to /v1/go/games"),
        ("go", MINE[0].encode(), "", 400, "looks like a chess record"),
        ("chess", (MINE[0] + "\n\n" + MINE[1]).encode(), "", 400, "holds 2 games"),
        ("chess", b'[White "a"]\n[Black "b"]\n[Result "1-0"]\n\n1. e4 e5 2. Ke3 1-0\n', "", 400, "no legal move matches: 'Ke3'"),
        ("chess", b'[White "a"]\n[Black "b"]\n[Result "*"]\n\n*\n', "", 422, "has no moves"),
        ("chess", b'{"pgn": 3}', "application/json", 400, "holds the game's PGN text in 'pgn'"),
        ("chess", b"{not json", "application/json", 400, "the body is not JSON"),
        ("chess", b'{"pgn": "1. e4", "id": "../../etc"}', "application/json", 400, "'id' must be"),
        ("shogi", b"", "", 404, "unknown game 'shogi'"),
    ],
)
def test_bad_posts_are_refused_with_a_reason(game, body, content_type, status, reason) -> None:
    error = _refused(read_posted, game, body, content_type, max_moves=1000)
    assert error.status == status and reason in str(error) and "\n" not in str(error)


def test_a_variant_and_an_overlong_game_are_refused() -> None:
    c960 = MINE[0].replace('[Event "', '[Variant "Chess960"]\n[SetUp "1"]\n[Event "', 1)
    error = _refused(read_posted, "chess", c960.encode(), "", max_moves=1000)
    assert error.status == 422 and "Chess960" in str(error)
    error = _refused(read_posted, "chess", MINE[0].encode(), "", max_moves=10)
    assert error.status == 413 and "more than this service takes (10)" in str(error)


def test_engines_side_by_side_value_as_one_engine() -> None:
    """The service's Stockfish engines value a batch's games in ranges, in parallel: the
    features are those of one engine valuing them all (each search starts from a cleared hash)."""
    from pipeline.estimate.in_process import InProcessExtractor, extraction_config
    from pipeline.meta.registered import resolve_meta_models

    config = extraction_config(resolve_meta_models(None, "chess"), None, None)
    games = pa.concat_tables(
        [read_posted("chess", g.encode(), "", max_moves=1000).games for g in GAMES[:3]]
    )
    with InProcessExtractor(config) as one, InProcessExtractor(config, engines=2) as two:
        alone, _ = one(games)
        side_by_side, _ = two(games)
    assert len(two.engines) == 2 and alone.num_rows > 100
    assert side_by_side.equals(alone)


# -- limits: size, time, who (no Ray) ---------------------------------------------------------


def test_a_body_over_the_limit_is_refused_before_it_is_read() -> None:
    limits = Limits(max_body_bytes=100, body_timeout_s=5)
    pulled = []

    async def chunks(sizes):
        for size in sizes:
            pulled.append(size)
            yield b"x" * size

    error = _refused(asyncio.run, read_body("1000000", chunks([10]), limits))
    assert error.status == 413 and pulled == []  # Content-Length alone decided
    error = _refused(asyncio.run, read_body(None, chunks([60, 60, 60, 60]), limits))
    assert error.status == 413 and pulled == [60, 60]  # stopped at the chunk past the limit
    assert asyncio.run(read_body("20", chunks([20]), limits)) == b"x" * 20


def test_a_slow_body_times_out() -> None:
    async def trickle():
        yield b"["
        await asyncio.sleep(10)
        yield b"]"

    error = _refused(asyncio.run, read_body(None, trickle(), Limits(body_timeout_s=0.2)))
    assert error.status == 408 and "within 0.2 s" in str(error)


def test_beyond_localhost_only_with_a_token() -> None:
    check_listen("127.0.0.1", None)
    check_listen("0.0.0.0", "s3cret")
    with pytest.raises(ListenError, match="needs a bearer token"):
        check_listen("0.0.0.0", None)
    assert authorized(None, None) and authorized("Bearer s3cret", "s3cret")
    assert not authorized(None, "s3cret") and not authorized("Bearer s3cre", "s3cret")
    assert not authorized("Basic s3cret", "s3cret")


# -- the state file (no Ray) -----------------------------------------------------------------


def _row(player: str, game_id: str, x: float) -> pa.Table:
    return pa.table({"player": [player], "game_id": [game_id], "x": [x]})


def test_state_counts_a_game_once_and_keeps_the_order(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.duckdb", {"chess": "m@1"})
    assert store.accept("chess", "g1", {"Alice": _row("Alice", "g1", 1.0)})
    assert not store.accept("chess", "g1", {"Alice": _row("Alice", "g1", 9.0)})
    assert store.accept("chess", "g2", {"Alice": _row("Alice", "g2", 2.0), "Bob": _row("Bob", "g2", 3.0)})
    assert store.instances("chess", "ALICE")["x"].to_pylist() == [1.0, 2.0]
    assert store.instances("go", "alice") is None
    assert store.instances("chess", "x'; drop table games; --") is None
    assert store.counts() == {"games": 2, "players": 2}
    store.close()
    with pytest.raises(StateMismatchError, match="holds chess instances of the meta-models 'm@1'"):
        StateStore(tmp_path / "s.duckdb", {"chess": "m@2"})


def test_state_survives_kill_9_after_commit(tmp_path: Path) -> None:
    """A process that commits a game and is killed before it closes the file loses nothing."""
    script = (
        "import os, signal, pyarrow as pa, sys\n"
        "from pathlib import Path\n"
        "from pipeline.serve.state import StateStore\n"
        f"s = StateStore(Path({str(tmp_path / 's.duckdb')!r}), {{'chess': 'm@1'}})\n"
        "s.accept('chess', 'g1', {'A': pa.table({'player': ['A'], 'x': [1.5]})})\n"
        "print('committed', flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL and "committed" in done.stdout
    store = StateStore(tmp_path / "s.duckdb", {"chess": "m@1"})
    assert store.instances("chess", "a")["x"].to_pylist() == [1.5]


# -- the service over HTTP ---------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """``kibitz serve`` in its own process group, as a user starts it."""

    def __init__(self, state: Path, port: int, *args: str, env: dict | None = None) -> None:
        self.port = port
        command = ["kibitz", "serve", "--game", "chess", "--port", str(port), "--state", str(state)]
        self.process = subprocess.Popen(
            [*command, "--body-timeout", "2", "--max-moves", "600", *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, **(env or {})}, start_new_session=True,
        )  # fmt: skip
        lines = []
        for line in self.process.stdout:
            lines.append(line)
            if line.startswith("kibitz serve:"):
                return
        raise AssertionError("kibitz serve did not start:\n" + "".join(lines[-30:]))

    def request(self, method: str, path: str, body: bytes | None = None, headers=None):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")

    def kill_9(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # Ray's workers follow their raylet
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) != 0:
                    return
            time.sleep(0.5)
        raise AssertionError(f"port {self.port} still answers after kill -9")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    state = tmp_path_factory.mktemp("serve") / "state.duckdb"
    running = {"service": Service(state, _free_port()), "state": state}
    yield running
    running["service"].stop()


def _mine(answer: dict) -> dict:
    return next(e for e in answer["estimates"] if e["player"] == PLAYER)


PRINTED = ("rank_group", "band", "games_used", "moves_used", "n_model", "feature_set", "model")


def test_the_service_answers_what_kibitz_estimate_prints(service, tmp_path) -> None:
    """After each of the player's games, the service's estimate is `kibitz estimate`'s for the
    same games (its --progressive steps), to the printed precision."""
    from pipeline.jobs.estimate import run_estimate
    from pipeline.meta.registered import resolve_meta_models

    path = tmp_path / "mine.pgn"
    path.write_text("\n\n".join(MINE) + "\n\n")
    batch = run_estimate(
        "chess", [str(path)], PLAYER, resolve_meta_models(None, "chess"), tmp_path / "work",
        progressive=True,
    )  # fmt: skip
    answers = []
    for text in MINE:
        status, answer = service["service"].request("POST", "/v1/chess/games", text.encode())
        assert status == 200 and answer["duplicate"] is False
        answers.append(_mine(answer))
    for step, answer in zip(batch.steps, answers, strict=True):
        assert answer["games_used"] == step["games"]
        assert answer["rank_group_index"] == step["rank_group_index"]
        assert f"{answer['strength']:.0f}" == f"{step['strength']:.0f}"
        assert [f"{v:.0f}" for v in answer["interval_80"]] == [f"{v:.0f}" for v in step["interval_80"]]
    final = answers[-1]
    assert {k: final[k] for k in PRINTED} == {k: getattr(batch, k) for k in PRINTED}
    assert final["strength"] == pytest.approx(batch.strength, abs=0.5)
    assert final["rank_group"] == "1400-1600"  # the README's first estimate
    status, read = service["service"].request("GET", f"/v1/chess/players/{PLAYER.lower()}")
    assert status == 200 and read["strength"] == final["strength"]
    status, recent = service["service"].request("GET", "/v1/estimates?limit=2")
    assert status == 200 and recent["estimates"][0]["estimate"]["games_used"] >= 1


def test_a_game_posted_twice_counts_once(service) -> None:
    client = service["service"]
    before = client.request("GET", "/v1/health")[1]
    status, again = client.request(
        "POST", "/v1/chess/games", json.dumps({"pgn": MINE[0]}).encode(),
        {"Content-Type": "application/json"},
    )  # fmt: skip
    assert status == 200 and again["duplicate"] is True and _mine(again)["games_used"] == 2
    assert client.request("GET", "/v1/health")[1] == before


def _replica_pids(deployment: str) -> list[int]:
    """The processes of one deployment's replicas (Ray titles them
    ``ray::ServeReplica:<app>:<deployment>``)."""
    listed = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    title = f"ServeReplica:kibitz:{deployment}"
    return [int(line.split()[0]) for line in listed.splitlines() if title in line.split(None, 1)[1]]


def _until(call, seconds: float = 180):
    """``call()``'s first answer that is not None, polled until ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            answer = call()
        except (OSError, http.client.HTTPException):
            answer = None
        if answer is not None:
            return answer
        time.sleep(1)
    raise AssertionError(f"no answer in {seconds} s")


def test_a_killed_replica_comes_back_with_every_accepted_game(service) -> None:
    """kill -9 of the state file's writer and of the extractor, while the service runs: Serve
    starts them again, the state holds every accepted game, and a new game is extracted."""
    client = service["service"]
    before = client.request("GET", "/v1/health")[1]
    killed = _replica_pids("State") + _replica_pids("Extractor-chess")
    assert len(killed) == 2, killed
    for pid in killed:
        os.kill(pid, signal.SIGKILL)

    def served_again():
        status, estimate = client.request("GET", f"/v1/chess/players/{PLAYER}")
        fresh = set(_replica_pids("State")) - set(killed)
        return estimate if status == 200 and fresh else None

    assert _until(served_again)["games_used"] == 2
    status, again = client.request("POST", "/v1/chess/games", MINE[0].encode())
    assert status == 200 and again["duplicate"] is True and _mine(again)["games_used"] == 2
    other = next(g for g in GAMES if g not in MINE)
    status, answer = client.request("POST", "/v1/chess/games", other.encode())
    assert status == 200 and answer["duplicate"] is False
    assert client.request("GET", "/v1/health")[1]["games"] == before["games"] + 1


def test_a_game_the_clock_model_cannot_read_is_estimated_without_it_and_said(service) -> None:
    """A bullet game (a time control the clock model never saw) and a game without ``%clk``
    are estimated by the model that reads no clock, and each answer says why."""
    client = service["service"]
    game = next(g for g in GAMES if g not in MINE and '[TimeControl "180+0"]' in g)
    bullet = game.replace('[TimeControl "180+0"]', '[TimeControl "60+0"]').replace(
        '[Site "https://lichess.org/', '[Site "https://lichess.org/bullet'
    )
    unclocked = re.sub(r" \{ \[%clk [0-9:]+\] \}", "", game)
    for text, why in ((bullet, "60+0"), (unclocked, "have no clock")):
        status, answer = client.request("POST", "/v1/chess/games", text.encode())
        assert status == 200 and answer["duplicate"] is False
        for estimate in answer["estimates"]:
            assert estimate["feature_set"] == "full_dcloss"
            assert why in estimate["feature_set_note"]
            assert "model that reads no clock (full_dcloss)" in estimate["feature_set_note"]


def test_bad_requests_change_nothing(service) -> None:
    client = service["service"]
    before = client.request("GET", "/v1/health")[1]
    status, answer = client.request("POST", "/v1/chess/games", b"garbage 1. e4")
    assert status == 400 and "is not PGN" in answer["error"]
    status, answer = client.request("POST", "/v1/chess/games", b"x" * (300 * 1024))
    assert status == 413 and "takes up to 262,144" in answer["error"]
    status, answer = client.request("POST", "/v1/go/games", b"(;GM[1])")
    assert status == 404 and "does not estimate 'go'" in answer["error"]
    name = urllib.parse.quote("x'; drop table games; --")
    status, answer = client.request("GET", f"/v1/chess/players/{name}")
    assert status == 404
    status, answer = client.request("GET", "/v1/chess/games/none")
    assert status == 404
    with socket.create_connection(("127.0.0.1", client.port)) as slow:  # an upload that stalls
        slow.sendall(b"POST /v1/chess/games HTTP/1.1\r\nHost: x\r\nContent-Length: 900\r\n\r\n[Ev")
        slow.settimeout(30)
        assert slow.recv(200).split(b"\r\n")[0] == b"HTTP/1.1 408 Request Timeout"
    assert client.request("GET", "/v1/health")[1] == before


def test_kill_9_loses_no_accepted_game_and_a_token_guards(service) -> None:
    """kill -9 of the whole service (driver, Ray, every replica), then a restart on the same
    state file, this time with a bearer token."""
    service["service"].kill_9()
    restarted = Service(service["state"], _free_port(), env={"KIBITZ_SERVE_TOKEN": "s3cret"})
    service["service"] = restarted
    assert restarted.request("GET", f"/v1/chess/players/{PLAYER}")[0] == 401
    auth = {"Authorization": "Bearer s3cret"}
    status, estimate = restarted.request("GET", f"/v1/chess/players/{PLAYER}", headers=auth)
    assert status == 200 and estimate["games_used"] == 2 and estimate["rank_group"] == "1400-1600"
    status, again = restarted.request("POST", "/v1/chess/games", MINE[1].encode(), auth)
    assert status == 200 and again["duplicate"] is True


def test_serve_refuses_other_hosts_without_a_token() -> None:
    env = {k: v for k, v in os.environ.items() if k != "KIBITZ_SERVE_TOKEN"}
    done = subprocess.run(
        ["kibitz", "serve", "--host", "0.0.0.0"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 1 and "needs a bearer token" in done.stderr
