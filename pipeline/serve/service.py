"""What one ``kibitz serve`` serves: its game kinds and their meta-models, state file and limits.

The settings travel from the command line (``pipeline.cli.serve``) through the driver
(``pipeline.jobs.serve``) to the deployments (``actors.serve_app``), which load the meta-models
themselves; :func:`model_identity` is what the state file records of them
(``pipeline.serve.state``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pipeline.meta.train import MANIFEST_FILE, MetaModels
from pipeline.nets.registry import file_sha256
from pipeline.serve.limits import Limits


@dataclass(frozen=True)
class ServeSettings:
    """One service: the game kinds it takes and their meta-models, its state file and limits."""

    models: dict[str, str | None]  # game kind → registry name or folder (None: shipped default)
    state: Path
    token: str | None = None
    limits: Limits = field(default_factory=Limits)
    extractors: int = 1  # replicas per game kind
    extractor_cpus: float = 1.0
    extractor_gpus: float = 0.0
    threads: int | None = None  # torch threads of an Extractor (None: its CPUs)
    engines: int = 1  # chess engines of an Extractor, valuing a batch's games side by side


def model_identity(models: MetaModels) -> str:
    """What a state file records of the meta-models it was built with: name and manifest."""
    manifest = Path(models.root) / MANIFEST_FILE
    return f"{models.manifest.get('name') or models.root}@{file_sha256(manifest)[:16]}"
