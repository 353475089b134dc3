"""The SQL models under ``sql/`` and the DuckDB catalog of an output home.

**Models.** Every ``sql/<layer>/<name>.sql`` file is one model named after its file (one
statement, dbt-style): ``staging`` renames and casts a source, ``marts`` and ``reports`` join and
aggregate. A model reads the sources (``features``, ``games``: views over Parquet that the caller
creates) and other models by their plain names, ``from stg_moves``, so a file stays a query a
reader can run by hand. :func:`load_models` finds those names with DuckDB's own parser and
:func:`run_order` sorts the models so that each runs after what it reads; a cycle or a name that is
neither a model, a source nor a CTE is an error (:class:`SqlModelError`). Nothing lists the order
by hand: a new file under ``sql/`` takes its place from its ``from`` clauses.

The net columns (``<family>_<net slug>``, named by
:func:`pipeline.core.features_schema.feature_column`) are selected with DuckDB ``COLUMNS``
patterns written as template calls that :func:`render_sql` fills in::

    columns({{ net_columns('logprior', 'top1') }})     -- '^(logprior|top1)_.+$'
    columns({{ net_column('logprior') }})              -- '^logprior_(.+)$', \\1 = the net
    columns({{ net_columns('sscore', also=['loss']) }})  -- '^(loss|(sscore)_.+)$'

so the naming rule lives in ``features_schema`` only.

**Catalog.** ``HOME/kibitz.duckdb`` (HOME: ``settings.home_dir()``, ``kibitz run --out``) holds
one view per table found in the home's layout, for every game kind present, so an ad hoc query
needs no paths (``duckdb kibitz-out/kibitz.duckdb -c "from chess_player_features"``)::

    HOME/games/game=<kind>/…/*.parquet       → <kind>_games     (sql/staging/stg_games.sql)
    HOME/features-<kind>/…/*.parquet         → <kind>_features  (sql/staging/stg_moves.sql)
    HOME/aggregates-<kind>/<model>.parquet   → <kind>_<model>   (every mart and report)

The views read Parquet globs at absolute paths, so they see data written after the refresh;
:func:`refresh_catalog` (re)creates them after ``kibitz ingest``, ``extract`` and ``aggregate``
write into a home, drops the views whose tables are gone, and leaves any other object a user
created in the file alone.
"""

from __future__ import annotations

import ast
import graphlib
import heapq
import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from pipeline.core import settings
from pipeline.core.errors import KibitzError
from pipeline.core.features_schema import feature_column, net_columns_regex

log = logging.getLogger(__name__)

# Layers in the order they run when references leave a choice (and the tie-break inside one).
SQL_LAYERS = ("staging", "intermediate", "marts", "reports")
# Models created as views; the others are materialised as tables (and saved by an aggregation).
# An intermediate model is a step of a mart kept in a file of its own (dbt's convention).
VIEW_LAYERS = ("staging", "intermediate")
# Relations a model may read that are not models: views over Parquet the caller creates.
SOURCES = ("features", "games")

CATALOG_FILE = "kibitz.duckdb"
# The catalog's <kind>_games / <kind>_features views are these staging models over the source.
STAGING_OF_SOURCE = {"games": "stg_games", "features": "stg_moves"}
VIEW_COMMENT = "kibitz catalog: "  # marks the views refresh_catalog owns (and what they read)

_TEMPLATE_CALL = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_KIND = re.compile(r"^[a-z][a-z0-9_]*$")
_SLUG_MARK = "netslug"  # a net name whose slug is itself, to cut a column name into its parts


class SqlModelError(KibitzError, ValueError):
    """An SQL model that cannot run: a template call, a reference or a cycle that is wrong."""


@dataclass(frozen=True)
class SqlModel:
    """One ``sql/<layer>/<name>.sql`` file, rendered, with the relations it reads."""

    name: str
    layer: str
    path: Path
    sql: str  # rendered: template calls filled in
    refs: frozenset[str]  # the models and sources it reads (its own CTEs left out)

    @property
    def materialization(self) -> str:
        """``view`` for staging models (renames and casts: cheap to re-read), else ``table``."""
        return "view" if self.layer in VIEW_LAYERS else "table"


# --- template calls -------------------------------------------------------------------------


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _family_prefix(family: str) -> str:
    """``"logprior"`` → ``"logprior_"``: what :func:`feature_column` puts before the net slug."""
    column = feature_column(family, _SLUG_MARK)
    return column.removesuffix(_SLUG_MARK)


def net_columns(*families: str, also: Iterable[str] = ()) -> str:
    """The quoted ``COLUMNS`` pattern of every net's columns of these families, plus the fixed
    columns ``also`` (then group 1 is the whole name: one pattern still matches when no net of
    the families is configured, where ``COLUMNS`` with no match would fail)."""
    regex = net_columns_regex(tuple(families))
    also = list(also)
    if also:
        inner = regex.removeprefix("^").removesuffix("$")
        regex = "^(" + "|".join([*map(re.escape, also), inner]) + ")$"
    return _sql_string(regex)


def net_column(family: str) -> str:
    """The quoted ``COLUMNS`` pattern of one family's columns, the net slug captured as ``\\1``."""
    return _sql_string("^" + re.escape(_family_prefix(family)) + "(.+)$")


TEMPLATE_FUNCTIONS = {"net_columns": net_columns, "net_column": net_column}


def _call_template(expression: str, where: str) -> str:
    try:
        call = ast.parse(expression.strip(), mode="eval").body
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id in TEMPLATE_FUNCTIONS
        ):
            raise ValueError(f"not a call of one of {sorted(TEMPLATE_FUNCTIONS)}")
        args = [ast.literal_eval(a) for a in call.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        return TEMPLATE_FUNCTIONS[call.func.id](*args, **kwargs)
    except (SyntaxError, ValueError, TypeError) as exc:
        raise SqlModelError(f"{where}: bad template call {{{{{expression}}}}}: {exc}") from exc


def render_sql(text: str, *, where: str = "sql") -> str:
    """``text`` with every ``{{ net_columns(…) }}`` / ``{{ net_column(…) }}`` call filled in."""
    return _TEMPLATE_CALL.sub(lambda m: _call_template(m.group(1), where), text)


# --- models and their order -----------------------------------------------------------------


def _walk(node: Any, tables: set[str], ctes: set[str]) -> None:
    if isinstance(node, dict):
        if node.get("type") == "BASE_TABLE" and isinstance(node.get("table_name"), str):
            tables.add(node["table_name"].lower())
        for entry in (node.get("cte_map") or {}).get("map", []):
            ctes.add(entry["key"].lower())
        for value in node.values():
            _walk(value, tables, ctes)
    elif isinstance(node, list):
        for value in node:
            _walk(value, tables, ctes)


def sql_refs(
    sql: str, *, where: str = "sql", con: duckdb.DuckDBPyConnection | None = None
) -> frozenset[str]:
    """The relations an SQL statement reads by name, its own CTEs left out (DuckDB's parser;
    ``con``: a connection to parse with, else a new in-memory one)."""
    parser = con or duckdb.connect()
    try:
        (text,) = parser.execute("select json_serialize_sql(?)", [sql]).fetchall()[0]
    finally:
        if con is None:
            parser.close()
    tree = json.loads(text)
    if tree.get("error"):
        raise SqlModelError(f"{where}: DuckDB cannot parse it: {tree.get('error_message')}")
    tables: set[str] = set()
    ctes: set[str] = set()
    _walk(tree["statements"], tables, ctes)
    return frozenset(tables - ctes)


def load_models(sql_dir: Path = settings.SQL_DIR) -> dict[str, SqlModel]:
    """Every model under ``sql_dir/<layer>/``, rendered and with its references, by name."""
    models: dict[str, SqlModel] = {}
    with duckdb.connect() as con:
        for layer in SQL_LAYERS:
            for path in sorted((Path(sql_dir) / layer).glob("*.sql")):
                name = path.stem
                if name in models or name in SOURCES:
                    raise SqlModelError(f"{str(path)!r}: the name {name!r} is taken twice")
                where = f"{layer}/{path.name}"
                sql = render_sql(path.read_text(encoding="utf-8"), where=where)
                refs = sql_refs(sql, where=where, con=con)
                models[name] = SqlModel(name, layer, path, sql, refs)
    return models


def run_order(models: Mapping[str, SqlModel], targets: Iterable[str] | None = None) -> list[str]:
    """The models to build for ``targets`` (default: all) with what they read, each after its
    references; among models that are free to run, staging first, then marts, then reports."""
    wanted = list(models) if targets is None else list(targets)
    graph: dict[str, set[str]] = {}
    todo = list(wanted)
    while todo:
        name = todo.pop()
        if name in graph:
            continue
        if name not in models:
            raise SqlModelError(f"unknown model {name!r}; known: {sorted(models)}")
        model = models[name]
        unknown = sorted(model.refs - set(models) - set(SOURCES))
        if unknown:
            raise SqlModelError(
                f"{model.layer}/{model.path.name} reads {unknown}, neither a model under sql/"
                f" ({sorted(models)}) nor a source ({list(SOURCES)})"
            )
        graph[name] = {r for r in model.refs if r in models}
        todo += graph[name]
    sorter = graphlib.TopologicalSorter(graph)
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        raise SqlModelError(f"the SQL models read each other in a cycle: {exc.args[1]}") from exc
    order: list[str] = []
    ready: list[tuple[int, str]] = []
    while sorter.is_active():
        for name in sorter.get_ready():
            heapq.heappush(ready, (SQL_LAYERS.index(models[name].layer), name))
        _, name = heapq.heappop(ready)
        order.append(name)
        sorter.done(name)
    return order


def bind_sql(sql: str, relations: Mapping[str, str]) -> str:
    """``sql`` with the named relations defined as CTEs around it: ``{"games": "select …"}``
    runs a model on any relation without creating views named like its references."""
    ctes = ",\n".join(f"{name} as ({query})" for name, query in relations.items())
    return f"with {ctes}\nselect * from (\n{sql}\n)" if relations else sql


def create_model(con: duckdb.DuckDBPyConnection, model: SqlModel) -> None:
    """Create (or replace) one model in ``con``, a view or a table by its layer."""
    con.execute(f"create or replace {model.materialization} {model.name} as {model.sql}")


# --- the catalog of an output home ----------------------------------------------------------


def parquet_glob(folder: Path) -> str:
    """The ``read_parquet`` glob of a chunk-store table (its side tables end in ``.pq``)."""
    return (Path(folder).resolve() / "**" / "*.parquet").as_posix()


def _read_parquet(glob: str) -> str:
    return f"select * from read_parquet({_sql_string(glob)}, hive_partitioning = true)"


def _has_parquet(folder: Path) -> bool:
    return folder.is_dir() and next(folder.rglob("*.parquet"), None) is not None


def _kinds(home: Path, prefix: str) -> dict[str, Path]:
    """``prefix<kind>`` folders of the home by kind (names that are no SQL identifier skipped)."""
    found = {}
    for folder in sorted(home.glob(f"{prefix}*")):
        kind = folder.name.removeprefix(prefix)
        if folder.is_dir() and _KIND.match(kind):
            found[kind] = folder
        elif folder.is_dir():
            log.warning("catalog: %s is no game kind's folder; skipped", folder)
    return found


def catalog_views(
    home: Path, models: Mapping[str, SqlModel] | None = None
) -> dict[str, tuple[str, str]]:
    """The views the home's tables call for: name → (SQL, what it reads)."""
    home = Path(home).resolve()
    models = load_models() if models is None else models
    views = {}
    sources = {
        "games": _kinds(home / settings.GAMES_DIR, "game="),
        "features": _kinds(home, settings.FEATURES_PREFIX),
    }
    for source, folders in sources.items():
        staging = models[STAGING_OF_SOURCE[source]]
        for kind, folder in folders.items():
            if _has_parquet(folder):
                glob = parquet_glob(folder)
                views[f"{kind}_{source}"] = (
                    bind_sql(staging.sql, {source: _read_parquet(glob)}),
                    glob,
                )
    outputs = [n for n in run_order(models) if models[n].materialization == "table"]
    for kind, folder in _kinds(home, settings.AGGREGATES_PREFIX).items():
        for name in outputs:
            path = folder / f"{name}.parquet"
            if path.is_file():
                file = path.resolve().as_posix()
                views[f"{kind}_{name}"] = (f"select * from read_parquet({_sql_string(file)})", file)
    for kind, folder in _kinds(home, settings.AUDIT_PREFIX).items():
        path = folder / settings.AUDIT_FILE
        if path.is_file():
            file = path.resolve().as_posix()
            views[f"{kind}_audit"] = (f"select * from read_parquet({_sql_string(file)})", file)
    return views


def refresh_catalog(home: Path) -> dict[str, str]:
    """(Re)create ``home/kibitz.duckdb``'s views over the tables found; return view → what it
    reads. Idempotent; views of tables that are gone are dropped, other objects are kept."""
    home = Path(home).resolve()
    views = catalog_views(home)
    con = duckdb.connect(str(home / CATALOG_FILE))
    try:
        con.begin()
        owned = {
            name
            for name, comment in con.execute(
                "select view_name, comment from duckdb_views() where not internal"
            ).fetchall()
            if (comment or "").startswith(VIEW_COMMENT)
        }
        for name in sorted(owned - set(views)):
            con.execute(f"drop view {name}")
        for name, (sql, reads) in views.items():
            con.execute(f"create or replace view {name} as {sql}")
            con.execute(f"comment on view {name} is {_sql_string(VIEW_COMMENT + reads)}")
        con.commit()
    finally:
        con.close()
    return {name: reads for name, (_, reads) in views.items()}


def is_home(folder: Path) -> bool:
    """``settings.home_dir()``, or a folder that already has a catalog (``kibitz run --out``)."""
    folder = Path(folder).resolve()
    return folder == settings.home_dir() or (folder / CATALOG_FILE).is_file()


def refresh_home_of(out_dir: Path) -> Path | None:
    """The stage hook: after a stage wrote ``out_dir``, refresh the catalog of the home it sits
    in (its parent folder, when that is a home); return the catalog's path, or None.

    The stage's output is complete by then, so a catalog that cannot be written (another
    process holds the file) is a warning, not a failure: ``kibitz run`` refreshes it again.
    """
    home = Path(out_dir).resolve().parent
    if not is_home(home):
        return None
    try:
        refresh_catalog(home)
    except (duckdb.Error, OSError, SqlModelError) as exc:
        log.warning("catalog %s not refreshed: %s", home / CATALOG_FILE, exc)
        return None
    return home / CATALOG_FILE


def aggregates_dir_for(features_dir: Path) -> Path:
    """Where ``kibitz aggregate`` writes by default: ``aggregates-<kind>`` beside the features,
    the kind taken from a ``features-<kind>`` name or from the one ``game=<kind>`` partition."""
    features_dir = Path(features_dir)
    kind = features_dir.name.removeprefix(settings.FEATURES_PREFIX)
    if kind == features_dir.name:
        kinds = [p.name.removeprefix("game=") for p in features_dir.glob("game=*") if p.is_dir()]
        kind = kinds[0] if len(kinds) == 1 else ""
    if _KIND.match(kind):
        return settings.aggregates_dir(kind, home=features_dir.parent)
    return features_dir.parent / settings.AGGREGATES_PREFIX.rstrip("-")
