"""The model registry: named nets resolved under the models directory and verified by sha256.

Entries come from the built-in ``pipeline/registry/models.yaml`` and, when present, from a
``registry.yaml`` in the models directory (``settings.models_dir()``, ``KIBITZ_MODELS_DIR``
or ``kibitz models --models-dir``); a user entry with a built-in name replaces it. A file is
hashed once per process (cached by path, mtime and size), so a job that loads nine Maia
nets per Ray actor pays for hashing once. The registry knows entries, files and checksums, not
nets: ``pipeline.nets.loading`` turns a name or a file into a torch module.

Usage::

    from pipeline.nets.registry import resolve
    entry = resolve("maia-1500")       # ModelEntry with a verified path

``kibitz models list|fetch|check`` (pipeline/cli/models.py) is the command-line face.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pipeline.core import settings
from pipeline.core.errors import KibitzError
from pipeline.nets.formats import REGISTRY_FORMATS

logger = logging.getLogger(__name__)

BUILTIN_REGISTRY = settings.BUILTIN_REGISTRY
USER_REGISTRY_NAME = "registry.yaml"
# Nets Kibitz trains and ships in the repository (``kibitz train … --register``), read after the
# built-in registry and before the models directory's own registry.yaml.
PROJECT_MODELS_DIR = settings.REPO_ROOT / "models"
GAMES = ("chess", "go")
_REQUIRED_KEYS = ("name", "game", "format", "path", "sha256")
_HASH_CHUNK = 1 << 20

# (absolute path, mtime_ns, size) -> sha256 hex; see file_sha256.
_sha_cache: dict[tuple[str, int, int], str] = {}
_sha_lock = threading.Lock()


class ModelNotFoundError(KibitzError, LookupError):
    """A model name is not in the registry, or its file is not in the models directory."""


class ChecksumMismatchError(KibitzError, ValueError):
    """A model file's sha256 differs from the registry's."""


class RegistryFileError(KibitzError, ValueError):
    """A registry YAML file is malformed."""


class FetchError(KibitzError, OSError):
    """Downloading a model failed (offline, HTTP error, bad checksum)."""


@dataclass(frozen=True)
class ModelEntry:
    """One registry entry; ``path`` is relative to ``models_dir`` unless absolute."""

    name: str
    game: str
    format: str
    path: str
    sha256: str
    models_dir: Path
    url: str | None = None
    license: str = ""
    description: str = ""
    source: str = "built-in"  # which registry file defined it
    # What the name stood for before (a renamed or replaced default), oldest first: the name
    # is the registry's, so its past is kept here and printed in the model's card.
    history: tuple[str, ...] = ()
    # Names these weights were registered under before a rename (``find_entry`` resolves
    # them): features, meta-models and levels heads record the name a net had when they were
    # made, and a rename must not orphan them (each also records the sha256 it read).
    formerly: tuple[str, ...] = ()

    @property
    def file(self) -> Path:
        return (self.models_dir / self.path).resolve()

    @property
    def present(self) -> bool:
        return self.file.is_file()


def _read_registry(path: Path, *, models_dir: Path, source: str) -> list[ModelEntry]:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise RegistryFileError(f"{str(path)!r}: not valid YAML ({exc})") from exc
    models = doc.get("models") if isinstance(doc, dict) else None
    if not isinstance(models, list):
        raise RegistryFileError(f"{str(path)!r}: expected a top-level 'models:' list")
    entries = []
    for i, item in enumerate(models):
        if not isinstance(item, dict):
            raise RegistryFileError(f"{str(path)!r}: models[{i}] is not a mapping: {item!r}")
        missing = [k for k in _REQUIRED_KEYS if not item.get(k)]
        if missing:
            raise RegistryFileError(f"{str(path)!r}: models[{i}] lacks {missing!r}: {item!r}")
        if item["game"] not in GAMES:
            raise RegistryFileError(f"{str(path)!r}: models[{i}] has game {item['game']!r}")
        if item["format"] not in REGISTRY_FORMATS:
            raise RegistryFileError(
                f"{str(path)!r}: models[{i}] has format {item['format']!r}, "
                f"expected one of {sorted(REGISTRY_FORMATS)!r}"
            )
        entries.append(
            ModelEntry(
                name=str(item["name"]),
                game=str(item["game"]),
                format=str(item["format"]),
                path=str(item["path"]),
                sha256=str(item["sha256"]).lower(),
                models_dir=models_dir,
                url=item.get("url"),
                license=str(item.get("license", "")),
                description=str(item.get("description", "")),
                source=source,
                history=_strings(item, "history", path, i),
                formerly=_strings(item, "formerly", path, i),
            )
        )
    return entries


def _strings(item: dict[str, Any], key: str, path: Path, i: int) -> tuple[str, ...]:
    """An entry's optional list of strings (``history``, ``formerly``)."""
    values = item.get(key) or []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise RegistryFileError(f"{str(path)!r}: models[{i}] {key} must be a list of strings")
    return tuple(values)


def list_models(*, models_dir: Path | None = None) -> list[ModelEntry]:
    """All registry entries: built-in ones, then the models directory's ``registry.yaml``."""
    root = Path(models_dir).resolve() if models_dir is not None else settings.models_dir()
    by_name: dict[str, ModelEntry] = {}
    for entry in _read_registry(BUILTIN_REGISTRY, models_dir=root, source="built-in"):
        by_name[entry.name] = entry
    project_file = PROJECT_MODELS_DIR / USER_REGISTRY_NAME
    if project_file.is_file() and PROJECT_MODELS_DIR.resolve() != root:
        for entry in _read_registry(project_file, models_dir=PROJECT_MODELS_DIR, source="project"):
            by_name[entry.name] = entry
    user_file = root / USER_REGISTRY_NAME
    if user_file.is_file():
        for entry in _read_registry(user_file, models_dir=root, source=str(user_file)):
            by_name[entry.name] = entry
    return list(by_name.values())


def write_entry(models_root: Path, entry: dict[str, Any]) -> Path:
    """Add (or replace, by name) one entry of ``models_root/registry.yaml``; entries sorted by name.

    How ``kibitz train … --register NAME`` ships a model: the folder ``models_root/NAME/`` holds
    the files, this entry names the one to verify. A replaced entry's ``history`` is kept: a
    retrained model takes the name, not the name's past. Its ``formerly`` is not: those names
    were the old weights'.
    """
    registry = Path(models_root) / USER_REGISTRY_NAME
    doc = yaml.safe_load(registry.read_text(encoding="utf-8")) if registry.is_file() else None
    old = [e for e in (doc or {}).get("models", []) if e.get("name") == entry["name"]]
    entries = [e for e in (doc or {}).get("models", []) if e.get("name") != entry["name"]]
    if old and old[0].get("history") and "history" not in entry:
        entry = {**entry, "history": old[0]["history"]}
    entries.append(entry)
    entries.sort(key=lambda e: e["name"])
    text = "# Kibitz's own trained models (kibitz train … --register NAME); see docs/guide/train.md.\n"
    registry.write_text(
        text + yaml.safe_dump({"models": entries}, sort_keys=False, allow_unicode=True),
        encoding="utf-8",
    )
    return registry


def file_sha256(path: Path) -> str:
    """sha256 of a file, computed once per process per (path, mtime, size)."""
    path = Path(path).resolve()
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    with _sha_lock:
        cached = _sha_cache.get(key)
    if cached is not None:
        return cached
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            digest.update(chunk)
    value = digest.hexdigest()
    with _sha_lock:
        _sha_cache[key] = value
    return value


def verify(entry: ModelEntry) -> Path:
    """The entry's file, after checking that it exists and its sha256 matches."""
    path = entry.file
    if not path.is_file():
        hint = f"; run `kibitz models fetch {entry.name}`" if entry.url else ""
        raise ModelNotFoundError(
            f"model {entry.name!r}: file {str(path)!r} not found under models dir "
            f"{str(entry.models_dir)!r}{hint}"
        )
    actual = file_sha256(path)
    if actual != entry.sha256:
        raise ChecksumMismatchError(
            f"model {entry.name!r}: {str(path)!r} has sha256 {actual}, registry says "
            f"{entry.sha256} (corrupt or replaced file)"
        )
    return path


def find_entry(name: str, *, models_dir: Path | None = None) -> ModelEntry:
    """The registry entry named ``name`` (not verified): the entry of that name, else the one
    whose weights went by that name before a rename (``formerly``). A current name wins, so
    a name a default was renamed away from can be given to new weights."""
    entries = list_models(models_dir=models_dir)
    for entry in entries:
        if entry.name == name:
            return entry
    renamed = [e for e in entries if name in e.formerly]
    if len(renamed) == 1:
        return renamed[0]
    if renamed:
        raise RegistryFileError(
            f"{name!r} is a former name of {len(renamed)} entries"
            f" ({', '.join(e.name for e in renamed)}): a name stands for one net"
        )
    known = ", ".join(e.name for e in entries)
    raise ModelNotFoundError(f"no model named {name!r} in the registry (known: {known})")


def _known_entry(name: str, models_dir: Path | None) -> ModelEntry | None:
    """``find_entry``, or None for a name the registry does not know (a model not registered
    yet), whose card has no past to tell."""
    try:
        return find_entry(name, models_dir=models_dir)
    except ModelNotFoundError:
        return None


def history_of(name: str, *, models_dir: Path | None = None) -> tuple[str, ...]:
    """What the registry keeps of ``name``'s past (a default replaced under its name), oldest
    first."""
    entry = _known_entry(name, models_dir)
    return entry.history if entry else ()


def formerly_of(name: str, *, models_dir: Path | None = None) -> tuple[str, ...]:
    """The names ``name``'s weights went by before a rename."""
    entry = _known_entry(name, models_dir)
    return entry.formerly if entry else ()


def resolve(name: str, *, models_dir: Path | None = None) -> ModelEntry:
    """The entry named ``name`` with its file verified (present, sha256 matches)."""
    entry = find_entry(name, models_dir=models_dir)
    verify(entry)
    return entry


def is_registry_name(name_or_path: str | Path) -> bool:
    """A string that is not an existing file names a registry entry; anything else is a path."""
    return isinstance(name_or_path, str) and not Path(name_or_path).is_file()


def model_sha256(name_or_path: str | Path, *, models_dir: Path | None = None) -> str:
    """sha256 of the weights ``pipeline.nets.loading.load_net`` would load: the registry's for a
    name (``load_net`` verifies the file against it), the file's own for a path."""
    if is_registry_name(name_or_path):
        return find_entry(name_or_path, models_dir=models_dir).sha256
    return file_sha256(Path(name_or_path))


def _check_reachable(url: str, timeout: float) -> None:
    """Resolve and connect to the url's host within ``timeout`` seconds.

    ``urlopen``'s timeout does not bound name resolution, which can stall for a long
    time on a machine without a network; this probe does, so an offline fetch fails fast.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FetchError(f"cannot fetch {url!r}: only http(s) URLs are supported")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    result: dict[str, Any] = {}

    def probe() -> None:
        try:
            with socket.create_connection((parts.hostname, port), timeout=timeout):
                result["ok"] = True
        except OSError as exc:
            result["error"] = exc

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise FetchError(
            f"cannot reach {parts.hostname}:{port} for {url!r} within {timeout:g} s "
            "(no network?); copy the file into the models directory instead"
        )
    if "error" in result:
        raise FetchError(
            f"cannot reach {parts.hostname}:{port} for {url!r}: {result['error']} "
            "(no network?); copy the file into the models directory instead"
        )


def fetch(
    name: str, *, models_dir: Path | None = None, timeout: float = 10.0, force: bool = False
) -> Path:
    """Download a registered model from its url into the models directory, verified.

    The file is streamed to a temporary file beside the target, hashed while it arrives and
    moved into place only when its sha256 matches, so an interrupted or wrong download never
    leaves a file that ``resolve`` would accept.
    """
    entry = find_entry(name, models_dir=models_dir)
    target = entry.file
    if target.is_file() and not force:
        verify(entry)
        logger.info("%s already present and verified at %s", name, target)
        return target
    if not entry.url:
        raise FetchError(
            f"model {name!r} has no url in the registry; place {str(target)!r} by hand"
        )
    _check_reachable(entry.url, timeout)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FetchError(f"cannot create {str(target.parent)!r}: {exc}") from exc
    logger.info("downloading %s from %s", name, entry.url)
    digest = hashlib.sha256()
    try:
        fd, tmp_name = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=".part", dir=target.parent
        )
    except OSError as exc:
        raise FetchError(f"cannot write into {str(target.parent)!r}: {exc}") from exc
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(entry.url, timeout=timeout) as response:
                    while chunk := response.read(_HASH_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
            except (urllib.error.URLError, OSError) as exc:
                raise FetchError(f"downloading {name!r} from {entry.url!r} failed: {exc}") from exc
        actual = digest.hexdigest()
        if actual != entry.sha256:
            raise FetchError(
                f"downloaded {name!r} from {entry.url!r} has sha256 {actual}, registry says "
                f"{entry.sha256}; not installed"
            )
        os.replace(tmp_name, target)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
    logger.info("installed %s at %s", name, target)
    return target
