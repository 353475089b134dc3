"""Where Kibitz finds its models, data and outputs.

Every path has one environment variable and one default, resolved here and nowhere else, so
that a cluster job, a test and the README commands agree on where things are.

- ``KIBITZ_SHARED_DIR``: the folder holding ``models/``, ``data/`` and ``reference/``;
  default ``../shared`` next to the repository checkout.
- ``KIBITZ_MODELS_DIR``: default ``$KIBITZ_SHARED_DIR/models``.
- ``KIBITZ_DATA_DIR``: default ``$KIBITZ_SHARED_DIR/data``.
- ``KIBITZ_HOME``: outputs of the embedded default run; default ``./kibitz-out``.
- ``MLFLOW_TRACKING_URI``: where every command tracks its MLflow runs (MLflow's own variable);
  default ``sqlite:///$KIBITZ_HOME/mlflow.db``, one store for every run of a project, so that
  ``mlflow ui --backend-store-uri sqlite:///kibitz-out/mlflow.db`` shows them side by side. A
  command's ``--tracking-uri`` wins over both.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # pipeline/
REPO_ROOT = PACKAGE_DIR.parent
SQL_DIR = REPO_ROOT / "sql"
# Data files shipped inside the package: the extraction and selection presets, and the built-in
# model registry.
PRESETS_DIR = PACKAGE_DIR / "presets"
BUILTIN_REGISTRY = PACKAGE_DIR / "registry" / "models.yaml"


def _env_path(name: str, default: Path) -> Path:
    value = os.environ.get(name)
    return Path(value).expanduser().resolve() if value else default


def shared_dir() -> Path:
    """The folder with the real models, data and reference outputs."""
    return _env_path("KIBITZ_SHARED_DIR", REPO_ROOT.parent / "shared")


def models_dir() -> Path:
    """The models directory that the registry resolves names in."""
    return _env_path("KIBITZ_MODELS_DIR", shared_dir() / "models")


def data_dir() -> Path:
    """The folder with the real game records (Lichess, Fox)."""
    return _env_path("KIBITZ_DATA_DIR", shared_dir() / "data")


def reference_dir() -> Path:
    """Outputs of the real engines (lc0, KataGo) that Kibitz must reproduce."""
    return shared_dir() / "reference"


def home_dir() -> Path:
    """Where the embedded default run writes its tables, models and MLflow store."""
    return _env_path("KIBITZ_HOME", Path.cwd() / "kibitz-out")


# An output home's layout: one folder a stage, one per game kind where the stage has one. The
# CLI's defaults, `kibitz run` and the home's DuckDB catalog all read it from here.
GAMES_DIR = "games"  # the games table of every kind (partitioned by game=<kind>)
FEATURES_PREFIX = "features-"  # features-<kind>: `kibitz extract`
AGGREGATES_PREFIX = "aggregates-"  # aggregates-<kind>: `kibitz aggregate`
META_PREFIX = "meta-"  # meta-<kind>: `kibitz train meta`
AUDIT_PREFIX = "audit-"  # audit-<kind>: `kibitz audit`
SERVE_STATE = "serve/state.duckdb"  # `kibitz serve`: every accepted game's player instances
AUDIT_FILE = "audit.parquet"  # the per-player table in audit-<kind>/ (catalog view <kind>_audit)


def games_dir(home: Path | None = None) -> Path:
    return (home or home_dir()) / GAMES_DIR


def features_dir(game: str, home: Path | None = None) -> Path:
    return (home or home_dir()) / f"{FEATURES_PREFIX}{game}"


def aggregates_dir(game: str, home: Path | None = None) -> Path:
    return (home or home_dir()) / f"{AGGREGATES_PREFIX}{game}"


def meta_dir(game: str, home: Path | None = None) -> Path:
    return (home or home_dir()) / f"{META_PREFIX}{game}"


def audit_dir(game: str, home: Path | None = None) -> Path:
    return (home or home_dir()) / f"{AUDIT_PREFIX}{game}"


def serve_state(home: Path | None = None) -> Path:
    return (home or home_dir()) / SERVE_STATE


def tracking_uri(explicit: str | None = None, *, home: Path | None = None) -> str:
    """The MLflow store of a run: ``explicit`` (``--tracking-uri``), else
    ``$MLFLOW_TRACKING_URI``, else the SQLite store ``mlflow.db`` in ``home`` (default
    :func:`home_dir`), whatever folder the command writes its outputs to.

    >>> tracking_uri("http://mlflow:5000")
    'http://mlflow:5000'
    """
    if explicit:
        return explicit
    from_env = os.environ.get("MLFLOW_TRACKING_URI")
    if from_env:
        return from_env
    db = (Path(home).expanduser().resolve() if home is not None else home_dir()) / "mlflow.db"
    return f"sqlite:///{db}"
