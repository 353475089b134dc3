"""MLflow tracking for every Kibitz fit and tuning run (contract C9).

Two ways to track, chosen by one ``--tracking-uri`` option (or MLflow's own
``MLFLOW_TRACKING_URI``); the rule is :func:`pipeline.core.settings.tracking_uri`:

- embedded default (neither): one local store per output home for every command of a project,
  ``sqlite:///$KIBITZ_HOME/mlflow.db`` (``kibitz-out/mlflow.db``) with artifacts under
  ``$KIBITZ_HOME/mlartifacts``; ``kibitz run --out DIR`` uses ``DIR/mlflow.db``. MLflow 3 made
  SQLite its default store and keeps the file store (``mlruns/``) only for compatibility, so
  Kibitz uses SQLite too; open it with ``mlflow ui --backend-store-uri sqlite:///kibitz-out/mlflow.db``.
- a server: ``--tracking-uri http://host:5000``; the server decides where artifacts go.

Child runs (one per grid configuration of ``kibitz ratings tune``) pass the parent's run id.
Tables are logged as CSV (readable in the MLflow UI) and Parquet (exact types); plots as PNG
drawn with matplotlib's Agg backend (no display on cluster nodes).

Run: ``python -c "from pipeline.core.settings import tracking_uri; print(tracking_uri())"``.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mlflow
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from pipeline.core import settings

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_SQLITE_PREFIX = "sqlite:///"
ARTIFACTS_FOLDER = "mlartifacts"  # next to mlflow.db in the embedded store


def default_tracking_uri(out_dir: Path) -> str:
    """The embedded local store in ``out_dir`` (commands use ``settings.tracking_uri()``)."""
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    return f"{_SQLITE_PREFIX}{out_dir / 'mlflow.db'}"


@functools.lru_cache(maxsize=64)  # a client per call costs ~1 s (store set-up) per child run
def _experiment_id(experiment: str, tracking_uri: str) -> str:
    """Find or create ``experiment``; embedded stores keep artifacts beside their database.

    Without an explicit artifact location MLflow would put a SQLite store's artifacts in
    ``./mlruns`` of whatever folder the command ran in.
    """
    if tracking_uri.startswith(_SQLITE_PREFIX):  # SQLite creates the file, not its folder
        Path(tracking_uri[len(_SQLITE_PREFIX) :]).parent.mkdir(parents=True, exist_ok=True)
    client = mlflow.MlflowClient(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is not None:
        return found.experiment_id
    artifact_location = None
    if tracking_uri.startswith(_SQLITE_PREFIX):
        db_path = Path(tracking_uri[len(_SQLITE_PREFIX) :])
        artifact_location = (db_path.parent / ARTIFACTS_FOLDER).resolve().as_uri()
    return client.create_experiment(experiment, artifact_location=artifact_location)


def _param_value(value: Any) -> str | int | float | bool:
    return value if isinstance(value, str | int | float | bool) else repr(value)


@contextmanager
def tracked_run(
    experiment: str,
    *,
    run_name: str,
    tracking_uri: str | None,
    params: Mapping,
    parent_run_id: str | None = None,
    tags: Mapping | None = None,
) -> Iterator[mlflow.ActiveRun]:
    """An MLflow run with ``params`` logged; a child of ``parent_run_id`` when given.

    ``tracking_uri=None`` uses ``settings.tracking_uri()``: ``$MLFLOW_TRACKING_URI``, else
    ``sqlite:///$KIBITZ_HOME/mlflow.db``.
    """
    tracking_uri = settings.tracking_uri(tracking_uri)
    mlflow.set_tracking_uri(tracking_uri)
    experiment_id = _experiment_id(experiment, tracking_uri)
    with mlflow.start_run(
        experiment_id=experiment_id,
        run_name=run_name,
        parent_run_id=parent_run_id,
        nested=parent_run_id is not None,
        tags=dict(tags or {}),
    ) as run:
        if params:
            mlflow.log_params({str(k): _param_value(v) for k, v in params.items()})
        yield run


def log_metrics(metrics: Mapping[str, float], *, step: int | None = None) -> None:
    """Finite numeric metrics of the active run (MLflow rejects NaN in some stores)."""
    clean = {str(k): float(v) for k, v in metrics.items() if v is not None and float(v) == float(v)}
    mlflow.log_metrics(clean, step=step)


def log_table(table: pa.Table, name: str, *, artifact_path: str = "tables") -> None:
    """``table`` as ``<name>.csv`` and ``<name>.parquet`` artifacts of the active run."""
    with tempfile.TemporaryDirectory() as tmp:
        pa_csv.write_csv(table, Path(tmp) / f"{name}.csv")
        pq.write_table(table, Path(tmp) / f"{name}.parquet")
        mlflow.log_artifacts(tmp, artifact_path=artifact_path)


def log_figure(figure: Figure, name: str, *, artifact_path: str = "plots") -> None:
    """A matplotlib figure as ``<name>.png``; the figure is closed afterwards."""
    import matplotlib.pyplot as plt

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.png"
        figure.savefig(path, dpi=110, bbox_inches="tight")
        mlflow.log_artifact(str(path), artifact_path=artifact_path)
    plt.close(figure)


def log_file(path: Path, *, artifact_path: str | None = None) -> None:
    """One existing file (a resolved config, a report) as an artifact of the active run."""
    mlflow.log_artifact(str(path), artifact_path=artifact_path)
