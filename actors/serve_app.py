"""``kibitz serve`` on Ray Serve: an estimate after each finished game, over HTTP.

Three deployments (docs/guide/serve.md)::

    HTTP ─► Api (FastAPI ingress) ─► Extractor-<game>: nets + engine, batches across requests
                                 └─► State: the DuckDB file of accepted games (one replica)

- ``Api`` reads and checks a post (``pipeline.serve.limits``, ``pipeline.serve.records``),
  asks ``State`` whether the game is known, has the game's ``Extractor`` turn it into its
  players' instance rows, has ``State`` commit them, and answers each player's estimate: the
  meta-model applied to all of that player's accepted instances
  (``pipeline.estimate.result.estimate_of_instances``, what ``kibitz estimate`` prints).
- ``Extractor`` gathers the posts that arrive together (``serve.batch``) and extracts them in
  one pass, so the nets see one batch of positions; one replica per game kind by default,
  more with ``--extractors`` (one per GPU on a GPU node).
- ``State`` is the only writer of the state file; a replica that dies is restarted by Serve
  and reopens it with every committed game.

Endpoints: ``POST /v1/{game}/games``, ``GET /v1/{game}/players/{player}``,
``GET /v1/estimates``, ``GET /v1/health``.
"""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations (Request)
# as objects.
import asyncio
import logging
import time
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from ray import serve
from ray.serve.handle import DeploymentHandle

from pipeline.serve.limits import authorized, read_body
from pipeline.serve.records import PostError, read_posted
from pipeline.serve.service import ServeSettings, model_identity

log = logging.getLogger(__name__)

# Posts an Extractor gathers into one extraction, and how long it waits for more: a batch
# of 8 chess games is ~650 positions, near the CPU batch of the nets (256) times 2-3 calls.
MAX_BATCH = 8
BATCH_WAIT_S = 0.05
MAX_RECENT = 1_000


@serve.deployment(max_ongoing_requests=64)
class Extractor:
    """One game kind's extraction and aggregation, loaded once (``InstanceMaker``)."""

    def __init__(self, game: str, model: str | None, threads: int | None, engines: int) -> None:
        import torch

        from pipeline.meta.registered import resolve_meta_models
        from pipeline.serve.instances import InstanceMaker

        if threads:
            torch.set_num_threads(threads)
        self.maker = InstanceMaker(resolve_meta_models(model, game), engines=engines)

    @serve.batch(max_batch_size=MAX_BATCH, batch_wait_timeout_s=BATCH_WAIT_S)
    async def instances(self, games: list[pa.Table]) -> list[dict[str, pa.Table]]:
        # In a thread: the replica's loop keeps taking posts, which form the next batch.
        rows = await asyncio.to_thread(self.maker, games)
        stages = ", ".join(f"{k} {v:.3f}" for k, v in self.maker.seconds.items())
        log.info("%d game(s) extracted: %s s", len(games), stages)
        return rows


@serve.deployment(num_replicas=1, max_ongoing_requests=256, ray_actor_options={"num_cpus": 0})
class State:
    """The state file's one writer (``pipeline.serve.state.StateStore``)."""

    def __init__(self, path: str, models: dict[str, str]) -> None:
        from pipeline.serve.state import StateStore

        self.store = StateStore(Path(path), models)

    def has_game(self, game: str, game_id: str) -> bool:
        return self.store.has_game(game, game_id)

    def accept(self, game: str, game_id: str, instances: dict[str, pa.Table]) -> bool:
        return self.store.accept(game, game_id, instances)

    def instances(self, game: str, player: str) -> pa.Table | None:
        return self.store.instances(game, player)

    def game_players(self, game: str, game_id: str) -> list[str]:
        return self.store.game_players(game, game_id)

    def log_estimates(self, game: str, estimates: dict[str, dict]) -> None:
        self.store.log_estimates(game, estimates)

    def recent(self, game: str | None, limit: int) -> list[dict]:
        return self.store.recent(game, limit)

    def counts(self) -> dict[str, int]:
        return self.store.counts()


app = FastAPI(title="Kibitz", description="Strength estimates from the moves of finished games")


class Stopwatch:
    """Seconds by stage of one request (its answer's ``seconds``: where the time goes)."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self.last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round(now - self.last, 4)
        self.last = now


def check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise PostError(400, f"confidence must be between 0 and 1 (got {confidence:g})")


def refusal(error: PostError) -> JSONResponse:
    return JSONResponse({"error": str(error)}, status_code=error.status)


@serve.deployment(max_ongoing_requests=64, ray_actor_options={"num_cpus": 0})
@serve.ingress(app)
class Api:
    """The HTTP API (the module docstring); estimates computed here from ``State``'s rows."""

    def __init__(
        self,
        settings: ServeSettings,
        extractors: dict[str, DeploymentHandle],
        state: DeploymentHandle,
    ) -> None:
        from pipeline.estimate.in_process import extraction_config, trained_precision
        from pipeline.kinds import game_kind
        from pipeline.meta.registered import resolve_meta_models

        self.settings = settings
        self.extractors = extractors
        self.state = state
        self.models = {g: resolve_meta_models(m, g) for g, m in settings.models.items()}
        for game in self.models:  # the readers' numba kernels, before the first post
            game_kind(game).reader.compile_kernels()
        self.precision = {}
        for game, models in self.models.items():
            here = extraction_config(models, None, None).precision
            self.precision[game] = (here, trained_precision(models) or here)

    def _check(self, request: Request, game: str | None = None) -> None:
        if not authorized(request.headers.get("authorization"), self.settings.token):
            raise PostError(401, "a bearer token is needed: Authorization: Bearer <token>")
        if game is not None and game not in self.models:
            served = ", ".join(sorted(self.models))
            raise PostError(404, f"this service does not estimate {game!r}; it serves {served}")

    async def _estimate(self, game: str, player: str, confidence: float) -> dict | None:
        from pipeline.estimate.result import estimate_of_instances

        instances = await self.state.instances.remote(game, player)
        if instances is None:
            return None
        here, trained = self.precision[game]
        estimate = estimate_of_instances(
            self.models[game], instances["player"][0].as_py(), instances,
            games_found=instances.num_rows, precision=here, precision_trained=trained,
            confidence=confidence,
        )  # fmt: skip
        return asdict(estimate)

    @app.post("/v1/{game}/games")
    async def post_game(self, game: str, request: Request, confidence: float = 0.9):
        """One finished game → each of its players' updated estimate."""
        clock = Stopwatch()
        try:
            self._check(request, game)
            check_confidence(confidence)
            body = await read_body(
                request.headers.get("content-length"), request.stream(), self.settings.limits
            )
            posted = read_posted(
                game, body, request.headers.get("content-type", ""),
                max_moves=self.settings.limits.max_moves,
            )  # fmt: skip
            clock.lap("read")
            duplicate = await self.state.has_game.remote(game, posted.game_id)
            skipped: list[str] = []
            if not duplicate:
                rows = await self.extractors[game].instances.remote(posted.games)
                clock.lap("extract")
                if not rows:
                    raise PostError(422, "no move of either player survived extraction")
                duplicate = not await self.state.accept.remote(game, posted.game_id, rows)
                skipped = [p for p in posted.players if p not in rows]
            players = await self.state.game_players.remote(game, posted.game_id)
            clock.lap("store")
        except PostError as error:
            return refusal(error)
        estimates = {p: await self._estimate(game, p, confidence) for p in players}
        clock.lap("estimate")
        if not duplicate:
            await self.state.log_estimates.remote(game, estimates)
        return {
            "game": game,
            "game_id": posted.game_id,
            "duplicate": duplicate,
            "estimates": list(estimates.values()),
            "skipped": [
                {"player": p, "reason": "no move of the player in this game"} for p in skipped
            ],
            "seconds": clock.laps,
        }

    @app.get("/v1/{game}/players/{player}")
    async def player(self, game: str, player: str, request: Request, confidence: float = 0.9):
        """A player's current estimate from every game of theirs accepted so far."""
        try:
            self._check(request, game)
            check_confidence(confidence)
        except PostError as error:
            return refusal(error)
        estimate = await self._estimate(game, player, confidence)
        if estimate is None:
            return refusal(PostError(404, f"no {game} game of player {player!r} accepted yet"))
        return estimate

    @app.get("/v1/estimates")
    async def recent(self, request: Request, game: str | None = None, limit: int = 20):
        """The newest estimates the service answered, newest first."""
        try:
            self._check(request, game)
            if not 1 <= limit <= MAX_RECENT:
                raise PostError(400, f"limit must be 1 … {MAX_RECENT} (got {limit})")
        except PostError as error:
            return refusal(error)
        return {"estimates": await self.state.recent.remote(game, limit)}

    @app.get("/v1/health")
    async def health(self):
        """Alive, what it serves and how much it holds (no token needed)."""
        counts = await self.state.counts.remote()
        return {"status": "ok", "games": sorted(self.models), **counts}


def build_app(settings: ServeSettings) -> serve.Application:
    """The application graph of one service (bound, not yet running)."""
    from pipeline.meta.registered import resolve_meta_models

    identities = {g: model_identity(resolve_meta_models(m, g)) for g, m in settings.models.items()}
    options = {"num_cpus": settings.extractor_cpus, "num_gpus": settings.extractor_gpus}
    extractors = {
        game: Extractor.options(
            name=f"Extractor-{game}",
            num_replicas=settings.extractors,
            ray_actor_options=options,
        ).bind(game, model, settings.threads, settings.engines)
        for game, model in settings.models.items()
    }
    state = State.bind(str(settings.state), identities)
    return Api.bind(settings, extractors, state)


def start(
    settings: ServeSettings,
    *,
    host: str,
    port: int,
    address: str | None,
    num_cpus: int | None,
    log_to_driver: bool = False,
) -> None:
    """Start Ray (``address``, else an embedded local cluster) and the service on it; returns
    once every deployment is ready. Serve's own default host is every interface: ``host`` is
    always passed."""
    from actors.ray_start import start_ray

    start_ray(address, num_cpus, log_to_driver=log_to_driver)
    serve.start(http_options={"host": host, "port": port})
    serve.run(build_app(settings), name="kibitz", route_prefix="/")


def stop() -> None:
    import ray

    serve.shutdown()
    ray.shutdown()
