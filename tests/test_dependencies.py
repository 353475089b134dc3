"""The runtime dependencies are what Kibitz's code imports, and nothing else.

A package that only the tests use (a reference implementation Kibitz is compared against)
belongs in the ``test`` extra, so a user's install carries what runs; a package the code
imports but the list lacks would work here only by the accident of another package pulling it.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    from pip._vendor import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
# Imported only where the extra that names it is installed (pipeline/nets/tensorrt_engine.py).
OPTIONAL = {"tensorrt": "gpu"}


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def imported_modules(*roots: str) -> set[str]:
    """The top-level modules the code under ``roots`` imports, other than the standard
    library's and its own."""
    out = set()
    for root in roots:
        for path in (REPO / root).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    out |= {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    out.add(node.module.split(".")[0])
    return out - set(sys.stdlib_module_names) - {"pipeline", "actors"}


def test_the_runtime_list_is_what_the_code_imports():
    distributions = packages_distributions()  # module -> the distributions that provide it
    declared = {_name(r) for r in PROJECT["dependencies"]}
    provided = {
        module: {_name(d) for d in distributions[module]}
        for module in imported_modules("pipeline", "actors") - set(OPTIONAL)
    }
    undeclared = sorted(m for m, names in provided.items() if not names & declared)
    assert not undeclared, f"imported but not in the dependencies: {undeclared}"
    # onnxscript is torch.onnx.export(dynamo=True)'s exporter: used, never imported by name.
    unused = declared - set().union(*provided.values()) - {"onnxscript"}
    assert not unused, f"in the dependencies but never imported: {sorted(unused)}"
    assert {_name(r) for r in PROJECT["optional-dependencies"][OPTIONAL["tensorrt"]]} == {
        "tensorrt"
    }


def test_the_reference_implementations_are_test_only():
    test_extra = {_name(r) for r in PROJECT["optional-dependencies"]["test"]}
    references = {"trueskill", "glicko2", "trueskillthroughtime", "sgfmill"}
    assert references <= test_extra
    assert not references & {_name(r) for r in PROJECT["dependencies"]}
    assert not references & imported_modules("pipeline", "actors")
    assert references <= imported_modules("tests")
