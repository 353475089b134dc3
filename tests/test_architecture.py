"""The code layout shows the architecture: packages by stage, imports one way, no circles.

``pipeline/`` is cut into packages in the order the data flows (docs/architecture.md). A module
may import from its own package and from packages *below* it, never above: the reader of a
module then knows that nothing upstream depends on it, and a circle cannot form between
packages. Within the whole tree no module circle is allowed either (lazy imports inside
functions count: they are edges all the same, only hidden). ``actors/`` is the only code that
imports Ray, and only the drivers in ``pipeline/jobs/`` import ``actors/``.
"""

from __future__ import annotations

import ast
from pathlib import Path

from pipeline.core.settings import REPO_ROOT

# Lowest first; a package may import only from itself and the packages listed before it.
LAYERS = (
    "core",
    "chess_game",
    "go_game",
    "ingest",
    "nets",
    "extract",
    "ratings",
    "meta",
    "train",
    "kinds",
    "estimate",
    "serve",
    "actors",
    "jobs",
    "cli",
)


def _module_name(path: Path) -> str:
    name = ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return name.removesuffix(".__init__")


def _modules() -> dict[str, Path]:
    files = sorted((REPO_ROOT / "pipeline").rglob("*.py")) + sorted(
        (REPO_ROOT / "actors").rglob("*.py")
    )
    return {_module_name(p): p for p in files}


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """Every module of this repository (or package, for ``from pkg import name``) that
    ``path`` imports anywhere, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


IMPORTS = {name: _imports(path) for name, path in MODULES.items()}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "actors":
        return "actors"
    if parts[0] == "pipeline" and len(parts) > 1:
        return parts[1]
    return None


def test_every_module_lives_in_a_stage_package() -> None:
    loose = [m for m in MODULES if m != "pipeline" and _layer(m) not in LAYERS]
    assert not loose, f"modules outside the stage packages {LAYERS}: {loose}"


def test_imports_between_packages_run_one_way() -> None:
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    upward = [
        f"{module} -> {target}"
        for module, targets in IMPORTS.items()
        for target in targets
        if _layer(module) in rank
        and _layer(target) in rank
        and rank[_layer(target)] > rank[_layer(module)]
    ]
    assert not upward, "imports that point up the stages:\n" + "\n".join(sorted(upward))


def test_no_import_circle() -> None:
    graph = {m: {t for t in targets if t in MODULES and t != m} for m, targets in IMPORTS.items()}
    # Tarjan's strongly connected components, iteratively: a component of two or more
    # modules is a circle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    assert not circles, f"import circles: {circles}"


def test_only_actors_import_ray_and_only_jobs_import_actors() -> None:
    ray_users = sorted(
        m
        for m, targets in IMPORTS.items()
        if _layer(m) != "actors" and any(t == "ray" or t.startswith("ray.") for t in targets)
    )
    assert not ray_users, f"modules outside actors/ that import Ray: {ray_users}"
    actor_users = sorted(
        m
        for m, targets in IMPORTS.items()
        if _layer(m) not in ("actors", "jobs") and any(t.startswith("actors") for t in targets)
    )
    assert not actor_users, f"modules outside jobs/ that import actors/: {actor_users}"


def test_no_module_is_loaded_by_a_name_in_a_string() -> None:
    """Dispatch goes through objects (the game kinds, the net formats), not through module
    names in strings handed to importlib."""
    users = sorted(m for m, targets in IMPORTS.items() if "importlib" in targets)
    assert not users, f"modules that import importlib: {users}"


def test_architecture_doc_names_every_module() -> None:
    doc = (REPO_ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = [
        str(path.relative_to(REPO_ROOT))
        for path in MODULES.values()
        if path.name != "__init__.py" and str(path.relative_to(REPO_ROOT)) not in doc
    ]
    assert not missing, f"docs/architecture.md does not describe: {missing}"
