"""The deterministic train / validation / evaluation split by game, shared by every trained part.

Kibitz trains several things on the same games (the s-score and policy nets, the LightGBM
meta-models); if each split the games its own way, a meta-model could be evaluated on games a
strength net was trained on. So there is one rule, here: a game's split depends only on its
``game_id`` (``pipeline/core/games_schema.py``: a stable hash of the game's source identity) and on
:class:`SplitConfig`, never on row order, file layout, the machine or the run.

    u = int(blake2b(salt + "\\x00" + game_id, 8 bytes), big-endian) / 2**64     # uniform in [0, 1)
    split = train       if u < train
            validation  if u < train + validation
            evaluation  otherwise

Both players of a game (both player instances) always land in the same split. Changing the
fractions moves only the games near a boundary; changing the salt reshuffles everything.
:meth:`SplitConfig.split_hash` goes into every MLflow run so runs on different splits are never
compared by mistake.

Run ``python -m pipeline.core.data_split GAME_ID...`` to print the split of some games.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import numpy as np

from pipeline.core.errors import KibitzError

SPLITS = ("train", "validation", "evaluation")
TRAIN, VALIDATION, EVALUATION = range(3)


class SplitConfigError(KibitzError, ValueError):
    """Split fractions that are negative or do not sum to 1."""


@dataclass(frozen=True)
class SplitConfig:
    """Fractions of games per split and the salt of the hash."""

    train: float = 0.8
    validation: float = 0.1
    evaluation: float = 0.1
    # Versioned so a deliberate reshuffle is a visible config change, not a code edit.
    salt: str = "kibitz-split-v1"

    def __post_init__(self) -> None:
        fractions = (self.train, self.validation, self.evaluation)
        if min(fractions) < 0 or abs(sum(fractions) - 1.0) > 1e-9:
            raise SplitConfigError(f"split fractions must be ≥ 0 and sum to 1, got {fractions!r}")

    def split_hash(self) -> str:
        """16 hex chars identifying this split rule (fractions and salt)."""
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.blake2b(blob, digest_size=8).hexdigest()

    @classmethod
    def parse(cls, text: str) -> SplitConfig:
        """``"0.8,0.1,0.1"`` (train, validation, evaluation) → a config with the default salt."""
        try:
            train, validation, evaluation = (float(x) for x in text.split(","))
        except ValueError as exc:
            raise SplitConfigError(
                f"split must be three fractions 'train,validation,evaluation', got {text!r}"
            ) from exc
        return cls(train=train, validation=validation, evaluation=evaluation)


def game_unit(game_ids: Iterable[str], salt: str) -> np.ndarray:
    """Each game's position ``u`` in [0, 1), a pure function of (salt, game_id).

    One hash per game, not per move: callers pass distinct game ids (a few thousand to a few
    million), which hashlib does at ~1 µs each.
    """
    prefix = salt.encode() + b"\x00"
    values = np.fromiter(
        (
            int.from_bytes(hashlib.blake2b(prefix + g.encode(), digest_size=8).digest(), "big")
            for g in game_ids
        ),
        dtype=np.uint64,
    )
    return values.astype(np.float64) / 2.0**64  # (G,)


def assign_splits(game_ids: Iterable[str], config: SplitConfig = SplitConfig()) -> np.ndarray:
    """Split codes (:data:`TRAIN`, :data:`VALIDATION`, :data:`EVALUATION`) per game id, int8."""
    u = game_unit(game_ids, config.salt)
    codes = np.full(u.shape, EVALUATION, dtype=np.int8)
    codes[u < config.train + config.validation] = VALIDATION
    codes[u < config.train] = TRAIN
    return codes


def split_of(game_id: str, config: SplitConfig = SplitConfig()) -> str:
    """The split name of one game (``"train"``, ``"validation"`` or ``"evaluation"``)."""
    return SPLITS[int(assign_splits([game_id], config)[0])]


def split_names(codes: np.ndarray) -> np.ndarray:
    """Codes → ``"train"`` / ``"validation"`` / ``"evaluation"`` strings."""
    return np.asarray(SPLITS, dtype=object)[codes]


if __name__ == "__main__":
    for game_id, name in zip(sys.argv[1:], split_names(assign_splits(sys.argv[1:])), strict=True):
        print(game_id, name)
