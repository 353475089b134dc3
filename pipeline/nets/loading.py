"""Load a net by registry name or by file: the one place that maps a format to its loader.

``LOADERS`` maps each registry format (``pipeline.nets.formats``) to the function that turns a
file of that format into a torch module in eval mode. The registry (``pipeline.nets.registry``)
resolves names to verified files and knows no loader; this module sits above it and above every
loader, so it imports them directly. A ``kibitz-sscore-levels`` file loads its imitation nets by
name through :func:`load_net` itself (``pipeline.nets.sscore_levels`` is handed it), which is
why that recursion lives here rather than in the levels module.

Usage::

    from pipeline.nets.loading import load_net
    net = load_net("maia-1500")        # Lc0Net, verified against the registry's sha256
    net = load_net("out/model.kibitz.pt")  # any net file, format by suffix
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from torch import nn

from pipeline.nets.formats import (
    GO_POLICY_FORMAT,
    KATAGO_FORMAT,
    KIBITZ_FORMAT,
    KIBITZ_FORMATS,
    LC0_FORMAT,
    LEVELS_FORMAT,
    SSCORE_FORMAT,
)
from pipeline.nets.go_rank_policy import build_go_rank_policy
from pipeline.nets.katago_net import load_katago_net
from pipeline.nets.kibitz_model_file import ModelFileError, read_model_file
from pipeline.nets.lc0_net import load_lc0_net
from pipeline.nets.registry import ModelNotFoundError, is_registry_name, resolve
from pipeline.nets.sscore_levels import build_levels_sscore
from pipeline.nets.sscore_net import build_sscore_net


def load_kibitz_net(path: str | Path, *, expected_format: str | None = None) -> nn.Module:
    """The net in a ``model.kibitz.pt`` file, in eval mode, built from its header's config."""
    header, state = read_model_file(Path(path))
    fmt = header.get("format")
    if expected_format is not None and fmt != expected_format:
        raise ModelFileError(f"{str(path)!r} holds a {fmt!r} net, expected {expected_format!r}")
    if fmt == SSCORE_FORMAT:
        net: nn.Module = build_sscore_net(header["net"])
    elif fmt == GO_POLICY_FORMAT:
        net = build_go_rank_policy(header["net"])
    elif fmt == LEVELS_FORMAT:  # the head on the registry's imitation nets, checked by sha256
        net = build_levels_sscore(header, state, load=load_net)
        net.header = header
        return net.eval()
    else:
        raise ModelFileError(
            f"{str(path)!r} has unknown format {fmt!r}, expected one of {KIBITZ_FORMATS!r}"
        )
    net.load_state_dict(state)
    net.header = header
    return net.eval()


def load_sscore_net(path: str | Path) -> nn.Module:
    """Loader of format "kibitz-sscore"."""
    return load_kibitz_net(path, expected_format=SSCORE_FORMAT)


def load_levels_sscore(path: str | Path) -> nn.Module:
    """Loader of format "kibitz-sscore-levels"."""
    return load_kibitz_net(path, expected_format=LEVELS_FORMAT)


def load_go_policy_net(path: str | Path) -> nn.Module:
    """Loader of format "kibitz-go-policy"."""
    return load_kibitz_net(path, expected_format=GO_POLICY_FORMAT)


# Net loaders by registry ``format``: one per name in ``formats.NET_FORMATS`` (a test checks).
LOADERS: dict[str, Callable[[Path], nn.Module]] = {
    LC0_FORMAT: load_lc0_net,
    KATAGO_FORMAT: load_katago_net,
    SSCORE_FORMAT: load_sscore_net,
    GO_POLICY_FORMAT: load_go_policy_net,
    LEVELS_FORMAT: load_levels_sscore,
    KIBITZ_FORMAT: load_kibitz_net,  # a model.kibitz.pt given by path: its header says which
}


def format_for_path(path: Path) -> str:
    """The format of a net file given by path, told by its suffix."""
    name = path.name.lower()
    if name.endswith((".pb.gz", ".pb")):
        return LC0_FORMAT
    if name.endswith((".bin.gz", ".bin")):
        return KATAGO_FORMAT
    if name.endswith(".kibitz.pt"):
        return KIBITZ_FORMAT
    raise ModelNotFoundError(
        f"cannot tell the net format of {str(path)!r}: expected an Lc0 .pb.gz or a KataGo .bin.gz"
    )


def load_net_file(path: Path, fmt: str) -> nn.Module:
    """Load a net file with the loader for ``fmt`` (a name in ``formats.NET_FORMATS``)."""
    if fmt not in LOADERS:
        raise ModelNotFoundError(
            f"{str(path)!r} has format {fmt!r}, which is not a net (net formats:"
            f" {', '.join(sorted(LOADERS))}; meta-models are read by `kibitz estimate`)"
        )
    return LOADERS[fmt](path)


def load_net(name_or_path: str | Path, *, models_dir: Path | None = None) -> nn.Module:
    """Load a registered net by name (verified) or any net file by path (format by suffix)."""
    candidate = Path(name_or_path)
    if is_registry_name(name_or_path):
        entry = resolve(name_or_path, models_dir=models_dir)
        return load_net_file(entry.file, entry.format)
    if not candidate.is_file():
        raise ModelNotFoundError(f"net file {str(candidate)!r} not found")
    return load_net_file(candidate, format_for_path(candidate))
