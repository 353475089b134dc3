"""Configuration of ``kibitz extract``: which nets, which evaluator, how work is cut and batched.

The defaults live in YAML presets (``pipeline/presets/extract-chess.yaml``, ``extract-go.yaml``);
``--config FILE`` replaces the preset with the user's own file of the same shape, or with only
what it changes over another file (``base:``). Adding an imitation level (a Maia net, a
rank-conditioned KataGo HumanSL profile) or a strength net is one entry under
``imitation_nets`` / ``strength_nets``: its columns appear in the features table.

The resolved config is written next to the output as ``_config.yaml`` and its hash
(:meth:`ExtractConfig.config_hash`) is part of every chunk id, so output of a changed config never
mixes with old output. Settings that cannot change a single feature value (how many actors,
how many chunks in flight) are left out of the hash: a resumed run may use a different cluster.

Print a preset resolved::

    python -m pipeline.extract.config chess
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pipeline.core import settings
from pipeline.core.errors import KibitzError
from pipeline.core.features_schema import column_slug, features_schema
from pipeline.nets.backends import BACKENDS, PRECISIONS

PRESETS_DIR = settings.PRESETS_DIR
GAMES = ("chess", "go")

VALUE_EVALUATORS = ("stockfish", "net")


class ConfigError(KibitzError, ValueError):
    """An extraction config that is malformed or inconsistent."""


@dataclass
class NetConfig:
    """One net that adds columns to the features table."""

    name: str  # column name part: prior_<slug(name)>, e.g. "maia-1500" → prior_maia_1500
    model: str  # registry name (``kibitz models list``) or a path to a weights file
    # Go only. A KataGo HumanSL net: the metadata profile ("rank_5k", "preaz_1d" …) fed as its
    # "meta" input (one pass per profile). A rank-conditioned policy (kibitz-go-policy): the
    # rank ("5k", "3d"), every rank of one model from one trunk pass. One level per entry.
    profile: str | None = None


@dataclass
class ValueConfig:
    """The evaluator whose value gives v_before / v_after / loss."""

    # chess: "stockfish" | "net" (an Lc0-format WDL or scalar-value net run in the net actor,
    # w = W + D/2 of its WDL); go: "net" (KataGo's score lead)
    evaluator: str = "stockfish"
    model: str | None = None  # registry name when evaluator == "net", e.g. maia-1900
    # Stockfish: 2,000 nodes ≈ 5–8 ms a position on one core here (Stockfish 15.1), depth 7–9;
    # the WDL stays within a few per cent of a 10,000-node search on ordinary positions. The
    # chess preset searches 500, what the meta-model needs (docs/research/results.md).
    nodes: int = 2000
    hash_mb: int = 16  # cleared before every position (determinism), so only its size matters
    engines: int = 0  # Stockfish processes (one CPU each); 0 = every CPU the cluster has


@dataclass
class ExpectedLossConfig:
    """E[loss] = Σ prior(a)·loss(a) over the likely moves a of one imitation net."""

    # name of an imitation net; None turns expected loss off. Each likely move other than the
    # played one costs one more value evaluation (Stockfish search or value-net row).
    net: str | None = None
    prior_share: float = 0.9  # take the most likely moves until they cover this prior mass …
    max_moves: int = 5  # … but never more than this many (each costs one evaluation)


# Positions per net call where the nets run on CPUs: they saturate about here, and more only
# costs memory (estimating one Go player of 21 games with a GPU config's batch of 4,096 peaked
# at 6.1 GB and took 76 s; at 256, 1.3 GB and 43 s, the same estimate: docs/guide/estimate.md).
CPU_BATCH = 256


@dataclass
class ExtractConfig:
    """Everything that decides what ``kibitz extract`` computes and how it schedules it."""

    game: str
    imitation_nets: list[NetConfig] = field(default_factory=list)
    strength_nets: list[NetConfig] = field(default_factory=list)
    value: ValueConfig = field(default_factory=ValueConfig)
    expected_loss: ExpectedLossConfig = field(default_factory=ExpectedLossConfig)
    backend: str = "torch"  # "torch" | "onnx" (ONNX Runtime) | "tensorrt" (NVIDIA GPUs)
    # "fp16": GPUs; "bf16": GPUs and CPUs with AVX-512 BF16 or AMX
    # (pipeline.nets.evaluator.runs_natively)
    precision: str = "fp32"
    # torch backend: run each net through torch.compile (Inductor fuses the bias, activation,
    # mask and SE arithmetic around the convolutions): 1.47x Maia and 2.49x KataGo b6c96 against
    # eager FP16 at batch 4096 on an H100 (bench/gpu/bench_gpu_engines.py), 1.12x the chess
    # value-net extraction's steady rate (docs/guide/gpu.md); each net compiles on its first batch (~10 s).
    compile: bool = False
    # with compile, on a GPU: Inductor's reduce-overhead mode, each padded batch shape replayed as
    # one CUDA graph (pipeline.nets.evaluator.graph_batch): Maia 1.97x eager FP16 against 1.47x
    # for compile alone (bench/gpu/bench_gpu_engines.py); CPU evaluators refuse it.
    cuda_graphs: bool = False
    # Positions per net call. CPU backends saturate around CPU_BATCH (larger only costs memory);
    # a GPU needs thousands in flight to be busy.
    batch_sizes: dict[str, int] = field(
        default_factory=lambda: {"torch": CPU_BATCH, "onnx": CPU_BATCH, "tensorrt": 4096}
    )
    # Go only: override every game's rules / komi (None: the games table's own). KataGo's Fox
    # training data used komi 6.5 for Fox's KM[0] games; leads differ by the komi change only.
    go_rules: str | None = None
    go_komi: float | None = None
    games_per_chunk: int = 100  # one commit (and one Parquet file per partition) per chunk
    # --- scheduling only (not in the hash) ---
    num_evaluators: int = 0  # net actors; 0 = one per GPU, or 1 on a CPU-only cluster
    # CPUs (and torch intra-op threads) of a CPU net actor; 0 = auto: the CPUs of a node when
    # the nets are the only work (Go, a chess value net), one CPU beside a Stockfish pool
    evaluator_cpus: int = 0
    max_in_flight: int = 4  # chunks submitted but not yet committed (bounds memory)

    SCHEDULING_ONLY = ("num_evaluators", "evaluator_cpus", "max_in_flight")

    @property
    def batch_size(self) -> int:
        """Positions per net call for the configured backend."""
        return self.batch_sizes[self.backend]

    def imitation(self, name: str) -> NetConfig:
        for net in self.imitation_nets:
            if net.name == name:
                return net
        raise ConfigError(
            f"no imitation net named {name!r} in {[n.name for n in self.imitation_nets]}"
        )

    def models(self) -> set[str]:
        """The registry names (or files) of every net this config runs: what a preset makes a
        default (``kibitz models list`` shows them first)."""
        nets = {n.model for n in (*self.imitation_nets, *self.strength_nets)}
        return nets | {m for m in (self.value.model, self.expected_loss.net) if m}

    def validate(self) -> ExtractConfig:
        """Raise :class:`ConfigError` on anything inconsistent; return self for chaining."""
        if self.game not in GAMES:
            raise ConfigError(f"game must be one of {GAMES}, got {self.game!r}")
        if self.backend not in BACKENDS:
            raise ConfigError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.compile and self.backend != "torch":
            raise ConfigError(f"compile applies to the torch backend, not {self.backend!r}")
        if self.cuda_graphs and not self.compile:
            raise ConfigError("cuda_graphs replays compiled nets: set compile: true as well")
        if self.backend not in self.batch_sizes or self.batch_sizes[self.backend] < 1:
            raise ConfigError(f"batch_sizes has no positive entry for backend {self.backend!r}")
        if not self.imitation_nets:
            raise ConfigError("imitation_nets is empty: name at least one net")
        names = [n.name for n in self.imitation_nets + self.strength_nets]
        slugs = [column_slug(n) for n in names]
        if len(set(slugs)) != len(slugs):
            raise ConfigError(f"two nets give the same column name: {names!r}")
        if self.value.evaluator not in VALUE_EVALUATORS:
            raise ConfigError(
                f"value.evaluator must be one of {VALUE_EVALUATORS}, got {self.value.evaluator!r}"
            )
        if self.value.evaluator == "net" and not self.value.model:
            raise ConfigError("value.evaluator is 'net' but value.model names no net")
        if self.game == "go" and self.value.evaluator != "net":
            raise ConfigError("Go needs value.evaluator: net (a KataGo net's score lead)")
        if self.value.nodes < 1 or self.value.hash_mb < 1:
            raise ConfigError(f"value.nodes and value.hash_mb must be ≥ 1, got {self.value!r}")
        el = self.expected_loss
        if el.net is not None:
            self.imitation(el.net)
            if not 0 < el.prior_share <= 1:
                raise ConfigError(
                    f"expected_loss.prior_share must be in (0, 1], got {el.prior_share!r}"
                )
            if el.max_moves < 1:
                raise ConfigError(f"expected_loss.max_moves must be ≥ 1, got {el.max_moves!r}")
        if self.games_per_chunk < 1 or self.max_in_flight < 1:
            raise ConfigError("games_per_chunk and max_in_flight must be ≥ 1")
        features_schema([n.name for n in self.imitation_nets], [n.name for n in self.strength_nets])
        return self

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        return out

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def config_hash(self) -> str:
        """16 hex chars over every setting that can change a feature value."""
        d = self.to_dict()
        for key in self.SCHEDULING_ONLY:
            d.pop(key)
        d["value"].pop("engines")
        for key in ("compile", "cuda_graphs"):  # off adds nothing: older configs keep their hash
            if not d[key]:
                d.pop(key)
        d["batch_size"] = d.pop("batch_sizes")[self.backend]
        blob = json.dumps(d, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.blake2b(blob, digest_size=8).hexdigest()

    def schema(self):
        """The features table schema this config produces."""
        return features_schema(
            [n.name for n in self.imitation_nets], [n.name for n in self.strength_nets]
        )


def _net_list(raw: Any, key: str) -> list[NetConfig]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(f"{key} must be a list of {{name, model}} entries, got {raw!r}")
    nets = []
    for entry in raw:
        if isinstance(entry, str):
            entry = {"name": entry, "model": entry}
        if not isinstance(entry, dict) or "name" not in entry:
            raise ConfigError(f"{key} entry must be a net name or {{name, model}}, got {entry!r}")
        entry = {"model": entry["name"], **entry}
        try:
            nets.append(NetConfig(**entry))
        except TypeError as exc:
            raise ConfigError(f"{key} entry {entry!r}: {exc}") from exc
    return nets


def config_from_dict(raw: dict[str, Any]) -> ExtractConfig:
    """Build and validate a config from parsed YAML; unknown keys are errors (typos show)."""
    if not isinstance(raw, dict) or "game" not in raw:
        raise ConfigError(f"an extraction config is a mapping with a 'game' key, got {raw!r}")
    raw = dict(raw)
    try:
        value = ValueConfig(**(raw.pop("value", None) or {}))
        expected = ExpectedLossConfig(**(raw.pop("expected_loss", None) or {}))
        imitation = _net_list(raw.pop("imitation_nets", None), "imitation_nets")
        strength = _net_list(raw.pop("strength_nets", None), "strength_nets")
        batch_sizes = {
            **ExtractConfig(game="chess").batch_sizes,
            **(raw.pop("batch_sizes", None) or {}),
        }
        config = ExtractConfig(
            imitation_nets=imitation,
            strength_nets=strength,
            value=value,
            expected_loss=expected,
            batch_sizes=batch_sizes,
            **raw,
        )
    except TypeError as exc:
        raise ConfigError(f"bad extraction config key: {exc}") from exc
    return config.validate()


BASE_KEY = "base"  # a config file's base file, a path relative to it


def _read_raw(path: Path, seen: tuple[Path, ...] = ()) -> Any:
    """The YAML of ``path`` laid over that of its ``base:`` file, so that a variant (other skill
    levels, another batch) states only what it changes and the rest stays in one file. Mappings
    (``value``, ``expected_loss``, ``batch_sizes``) merge key by key; any other key, a list of
    nets included, replaces the base's."""
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read extraction config {str(path)!r}: {exc}") from exc
    if not isinstance(raw, dict) or BASE_KEY not in raw:
        return raw
    here = Path(path).resolve()
    if here in seen:
        chain = " -> ".join(str(p) for p in (*seen, here))
        raise ConfigError(f"extraction config bases form a cycle: {chain}")
    raw = dict(raw)
    try:
        base = _read_raw(here.parent / str(raw.pop(BASE_KEY)), (*seen, here))
    except ConfigError as exc:
        raise ConfigError(f"{str(path)!r}: base: {exc}") from exc
    if not isinstance(base, dict):
        raise ConfigError(f"the base of {str(path)!r} is not a mapping, got {base!r}")
    merged = dict(base)
    for key, value in raw.items():
        below = base.get(key)
        merged[key] = (
            {**below, **value} if isinstance(below, dict) and isinstance(value, dict) else value
        )
    return merged


def load_config(path: Path) -> ExtractConfig:
    """Read a YAML config file (a preset or the user's), laid over its ``base:`` if it names one."""
    raw = _read_raw(Path(path))
    try:
        return config_from_dict(raw)
    except ConfigError as exc:
        raise ConfigError(f"{str(path)!r}: {exc}") from exc


def preset(game: str) -> ExtractConfig:
    """The shipped default config for ``game`` ("chess" | "go")."""
    if game not in GAMES:
        raise ConfigError(f"game must be one of {GAMES}, got {game!r}")
    return load_config(PRESETS_DIR / f"extract-{game}.yaml")


if __name__ == "__main__":
    cfg = preset(sys.argv[1] if len(sys.argv) > 1 else "chess")
    print(cfg.to_yaml(), end="")
    print(f"# config hash {cfg.config_hash()}")
