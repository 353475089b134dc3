"""Selection rules: which games of the games table a study keeps, as named, versioned YAML.

A rules file (``pipeline/presets/<name>.yaml`` for the built-in presets, or the user's own)::

    name: chess-kuboki2025
    version: 1
    game: chess                 # "chess" | "go" | "any"
    rules:
      - rule: same_rank_group
        allowed: [1000-1200, 1200-1400]
      - rule: min_plies
        n: 20                   # keeps num_plies > 20

Rule types (each vectorised over the Arrow table, no per-game Python loop):

==================== ================== ===================================================
rule                 parameters         keeps a game when
==================== ================== ===================================================
same_rank_group      allowed (optional) both players' groups are equal, non-null (and listed)
min_plies            n                  ``num_plies > n``
event_matches        pattern            ``event`` matches the RE2 regex (search, not full)
tc_class_in          classes            ``tc_class`` is listed
ended_by_in          values             ``ended_by`` is listed
min_score_margin     margin             not ended by score, or ``score_margin >= margin``
no_handicap                             handicap is null or 0 and no ``AB`` setup stones
alternating_colours                     no two consecutive Go moves by the same colour
==================== ================== ===================================================

A rule may carry ``name:`` (default: its type) — the key under which rejected games are counted.
Each rejected game is counted once, by the FIRST rule (in file order) that rejects it.

    >>> rules = load_preset("chess-kuboki2025"); rules.label
    'chess-kuboki2025@1'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import yaml

from pipeline.core import settings
from pipeline.core.errors import KibitzError

PRESETS_DIR = settings.PRESETS_DIR
# Presets of the selection rules (the extraction configs share the folder, hence the list).
PRESET_NAMES = ("chess-kuboki2025", "go-kuboki2025", "all")
GAMES = ("chess", "go", "any")


class RulesError(KibitzError, ValueError):
    """A selection-rules file or preset that cannot be used."""


@dataclass(frozen=True)
class Rule:
    """One rule: its type, the name it is counted under, and its parameters."""

    rule: str
    name: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SelectionRules:
    """A named, versioned list of rules; ``label`` is stored in the games table's ``selection``."""

    name: str
    version: str
    game: str  # "chess" | "go" | "any"
    rules: tuple[Rule, ...]
    description: str = ""

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"

    def to_dict(self) -> dict[str, Any]:
        """The rules as written in YAML (saved in the run summary)."""
        return {
            "name": self.name,
            "version": self.version,
            "game": self.game,
            "description": self.description,
            "rules": [
                {"rule": r.rule, **({"name": r.name} if r.name != r.rule else {}), **r.params}
                for r in self.rules
            ],
        }


# -- rule implementations: table → (rows,) bool, True = the game passes ----------------------


def _bool(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return pc.fill_null(array, False).to_numpy(zero_copy_only=False).astype(bool)


def _same_rank_group(table: pa.Table, allowed: Sequence[str] | None = None) -> np.ndarray:
    white, black = table["white_rank_group"], table["black_rank_group"]
    passes = _bool(pc.equal(white, black))
    if allowed is not None:
        passes &= _bool(pc.is_in(white, value_set=pa.array(list(allowed), pa.string())))
    return passes


def _min_plies(table: pa.Table, n: int) -> np.ndarray:
    return _bool(pc.greater(table["num_plies"], n))


def _event_matches(table: pa.Table, pattern: str) -> np.ndarray:
    return _bool(pc.match_substring_regex(table["event"], pattern))


def _tc_class_in(table: pa.Table, classes: Sequence[str]) -> np.ndarray:
    return _bool(pc.is_in(table["tc_class"], value_set=pa.array(list(classes), pa.string())))


def _ended_by_in(table: pa.Table, values: Sequence[str]) -> np.ndarray:
    return _bool(pc.is_in(table["ended_by"], value_set=pa.array(list(values), pa.string())))


def _min_score_margin(table: pa.Table, margin: float) -> np.ndarray:
    by_score = _bool(pc.equal(table["ended_by"], "score"))
    enough = _bool(pc.greater_equal(table["score_margin"], margin))
    return ~by_score | enough


def _no_handicap(table: pa.Table) -> np.ndarray:
    handicap = pc.fill_null(table["handicap"], 0).to_numpy(zero_copy_only=False)
    stones = pc.fill_null(pc.list_value_length(table["setup_black"]), 0)
    return (handicap == 0) & (stones.to_numpy(zero_copy_only=False) == 0)


def _alternating_colours(table: pa.Table) -> np.ndarray:
    """No game has two consecutive moves ``"B:…"``/``"W:…"`` by the same colour."""
    moves = table["moves"].combine_chunks()
    colour = pc.utf8_slice_codeunits(pc.list_flatten(moves), 0, 1)  # (M,) "B" | "W"
    game_of_move = pc.list_parent_indices(moves).to_numpy()  # (M,)
    passes = np.ones(table.num_rows, dtype=bool)
    if len(colour) < 2:
        return passes
    same = _bool(pc.equal(colour.slice(1), colour.slice(0, len(colour) - 1)))
    repeated = same & (game_of_move[1:] == game_of_move[:-1])
    passes[game_of_move[1:][repeated]] = False
    return passes


# type → (function, required parameters, optional parameters)
RULE_TYPES: dict[str, tuple[Callable[..., np.ndarray], tuple[str, ...], tuple[str, ...]]] = {
    "same_rank_group": (_same_rank_group, (), ("allowed",)),
    "min_plies": (_min_plies, ("n",), ()),
    "event_matches": (_event_matches, ("pattern",), ()),
    "tc_class_in": (_tc_class_in, ("classes",), ()),
    "ended_by_in": (_ended_by_in, ("values",), ()),
    "min_score_margin": (_min_score_margin, ("margin",), ()),
    "no_handicap": (_no_handicap, (), ()),
    "alternating_colours": (_alternating_colours, (), ()),
}


# -- loading --------------------------------------------------------------------------------


def _parse_rule(entry: Any, where: str) -> Rule:
    if not isinstance(entry, Mapping) or "rule" not in entry:
        raise RulesError(f"{where}: each rule needs a 'rule:' type, got {entry!r}")
    kind = entry["rule"]
    if kind not in RULE_TYPES:
        raise RulesError(f"{where}: unknown rule type {kind!r}; known: {sorted(RULE_TYPES)}")
    _fn, required, optional = RULE_TYPES[kind]
    params = {k: v for k, v in entry.items() if k not in ("rule", "name")}
    missing = [p for p in required if p not in params]
    unknown = [p for p in params if p not in required + optional]
    if missing or unknown:
        raise RulesError(
            f"{where}: rule {kind!r} needs {list(required)} (optional {list(optional)}); "
            f"missing {missing}, unknown {unknown}"
        )
    if kind == "event_matches":
        try:
            pc.match_substring_regex(pa.array([""]), params["pattern"])
        except pa.ArrowInvalid as error:
            raise RulesError(f"{where}: bad regex {params['pattern']!r}: {error}") from error
    return Rule(rule=kind, name=str(entry.get("name", kind)), params=params)


def parse_rules(document: Any, *, where: str) -> SelectionRules:
    """Validate a parsed YAML document (``where`` names it in errors)."""
    if not isinstance(document, Mapping):
        raise RulesError(f"{where}: expected a mapping with name, version, game, rules")
    for key in ("name", "version", "game", "rules"):
        if key not in document:
            raise RulesError(f"{where}: missing key {key!r}")
    if document["game"] not in GAMES:
        raise RulesError(f"{where}: game {document['game']!r} is not one of {list(GAMES)}")
    entries = document["rules"] or []
    if not isinstance(entries, list):
        raise RulesError(f"{where}: 'rules' must be a list, got {entries!r}")
    rules = tuple(_parse_rule(e, f"{where} rule {i}") for i, e in enumerate(entries))
    names = [r.name for r in rules]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise RulesError(
            f"{where}: rule names must be unique (add 'name:'), repeated: {duplicates}"
        )
    return SelectionRules(
        name=str(document["name"]),
        version=str(document["version"]),
        game=str(document["game"]),
        rules=rules,
        description=str(document.get("description", "")),
    )


def load_rules(path: str | Path) -> SelectionRules:
    """Load a rules YAML file."""
    path = Path(path)
    if not path.is_file():
        raise RulesError(f"rules file {str(path)!r} does not exist")
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise RulesError(f"rules file {str(path)!r} is not valid YAML: {error}") from error
    return parse_rules(document, where=str(path))


def load_preset(name: str) -> SelectionRules:
    """Load a built-in preset by name (``chess-kuboki2025``, ``go-kuboki2025``, ``all``)."""
    if name not in PRESET_NAMES:
        raise RulesError(f"unknown preset {name!r}; presets: {list(PRESET_NAMES)}")
    return load_rules(PRESETS_DIR / f"{name}.yaml")


# -- applying -------------------------------------------------------------------------------


def rule_passes(table: pa.Table, rule: Rule) -> np.ndarray:
    """(rows,) bool: which games ``rule`` keeps."""
    fn, _required, _optional = RULE_TYPES[rule.rule]
    return fn(table, **rule.params)


def apply_selection(table: pa.Table, rules: SelectionRules) -> tuple[pa.Table, dict[str, int]]:
    """(kept games with ``selection`` set to the rules' label, rejected count per rule name).

    Every game is counted by the first rule that rejects it, so the counts add up:
    ``table.num_rows == kept.num_rows + sum(rejected.values())``.
    """
    alive = np.ones(table.num_rows, dtype=bool)
    rejected: dict[str, int] = {}
    for rule in rules.rules:
        passes = rule_passes(table, rule) if table.num_rows else alive
        rejected[rule.name] = int(np.count_nonzero(alive & ~passes))
        alive &= passes
    kept = table.filter(pa.array(alive))
    label = pa.array(np.full(kept.num_rows, rules.label), pa.string())
    kept = kept.set_column(kept.schema.get_field_index("selection"), "selection", label)
    return kept, rejected
