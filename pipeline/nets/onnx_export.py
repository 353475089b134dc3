"""Export a Kibitz torch net (contract C4) to ONNX with a dynamic batch axis, cached by content.

Shared by the chess (Lc0) and Go (KataGo) nets: the input and output names come from the
net's ``input_names`` / ``output_names`` (keep in sync with pipeline/nets/evaluator.py and
pipeline/nets/tensorrt_engine.py, which feed and read tensors by those names). The exported file
is checked with ``onnx.checker`` and cached under a name keyed by the net's fingerprint
(weights, buffers, names and the source of its module) and the opset, so a changed net or a
changed net module never reuses a stale export.

Run ``python -m pipeline.nets.onnx_export maia-1500 OUT.onnx`` to export a registered net.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import logging
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import onnx
import torch
from torch import nn

from pipeline.core import settings

logger = logging.getLogger(__name__)

# Opset of the exports; 18 is the torch.export-based exporter's native opset and is parsed by
# ONNX Runtime >= 1.14 and TensorRT >= 8.6.
ONNX_OPSET = 18
# Batch size of the example inputs traced at export; the batch axis is dynamic regardless.
EXPORT_EXAMPLE_BATCH = 2
# Upper bound of the dynamic batch dimension declared to torch.export.
MAX_EXPORT_BATCH = 1 << 16


class OnnxExportError(RuntimeError):
    """A net could not be exported to, or verified as, ONNX."""


def net_fingerprint(net: nn.Module) -> str:
    """sha256 identifying a net's computation: parameters, buffers, I/O names, module source
    and the net's config dataclass, when it has one.

    Used as the key of ONNX exports and TensorRT engines, so two different weight files, the
    same weights under an edited net module, or the same weights run another way (the Go
    policy's ``config.symmetries``) never share a cache entry.
    """
    digest = hashlib.sha256()
    cls = type(net)
    digest.update(f"{cls.__module__}.{cls.__qualname__}".encode())
    source_file = inspect.getsourcefile(cls)
    if source_file is not None:
        digest.update(Path(source_file).read_bytes())
    digest.update(repr((tuple(net.input_names), tuple(net.output_names))).encode())
    config = getattr(net, "config", None)
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        digest.update(repr(dataclasses.asdict(config)).encode())
    tensors = [*net.named_parameters(), *net.named_buffers()]
    for name, tensor in sorted(tensors, key=lambda item: item[0]):
        value = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{value.dtype}:{tuple(value.shape)}".encode())
        flat = value.reshape(-1)  # stride 1 even for channels-last 1×1 conv weights
        digest.update(flat.view(torch.uint8).numpy().tobytes() if value.numel() else b"")
    return digest.hexdigest()


def default_cache_dir() -> Path:
    """Where exports and engines are cached unless a caller passes its own folder."""
    return settings.home_dir() / "cache"


@contextmanager
def _quiet_exporter() -> Iterator[None]:
    """Silence the exporter's notes about optional torchvision ops and pytree internals."""
    registration = logging.getLogger("torch.onnx._internal.exporter._registration")
    previous = registration.level
    registration.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            yield
    finally:
        registration.setLevel(previous)


def scope_node_names(model: onnx.ModelProto) -> None:
    """Rename graph nodes to ``/<module path>/<node>`` from the exporter's namespace metadata.

    The torch.export-based exporter names nodes ``node_conv2d_3``; the module path (e.g.
    ``/value_head/conv1/node_conv2d_3``) is what TensorRT's FP32 layer patterns match, so it
    is written back into the node names, which TensorRT uses as layer names.
    """
    for node in model.graph.node:
        namespace = next((p.value for p in node.metadata_props if p.key == "namespace"), "")
        if not namespace:
            continue
        # ": pkg.Net/tower: Sequential/tower.0: pkg.Block/conv1: Conv2d/conv2d_1: aten.conv2d"
        segments = [segment.split(":", 1)[0].strip() for segment in namespace.split("/")]
        module_path = [name for name in segments[1:-1] if name]
        node.name = "/" + "/".join([*module_path, node.name])


def export_onnx(net: nn.Module, path: Path, *, opset: int = ONNX_OPSET) -> Path:
    """Export ``net`` to ``path`` (written atomically) and verify it with onnx.checker."""
    if opset < 17:
        raise ValueError(f"ONNX opset {opset!r} is too old; Kibitz exports opset >= 17")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    net = net.eval()
    example = net.example_inputs(EXPORT_EXAMPLE_BATCH)
    batch = torch.export.Dim("batch", min=1, max=MAX_EXPORT_BATCH)
    dynamic_shapes = tuple({0: batch} for _ in example)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        with _quiet_exporter():
            torch.onnx.export(
                net,
                example,
                tmp_name,
                input_names=list(net.input_names),
                output_names=list(net.output_names),
                dynamic_shapes=dynamic_shapes,
                opset_version=opset,
                dynamo=True,
                external_data=False,
                verbose=False,
            )
        model = onnx.load(tmp_name)
        scope_node_names(model)
        onnx.checker.check_model(model)
    except (RuntimeError, ValueError, onnx.checker.ValidationError) as exc:
        os.unlink(tmp_name)
        raise OnnxExportError(f"ONNX export of {type(net).__name__} failed: {exc}") from exc
    names = (tuple(i.name for i in model.graph.input), tuple(o.name for o in model.graph.output))
    if names != (tuple(net.input_names), tuple(net.output_names)):
        os.unlink(tmp_name)
        raise OnnxExportError(
            f"exported graph has inputs/outputs {names!r}, net declares "
            f"{(net.input_names, net.output_names)!r}"
        )
    onnx.save(model, tmp_name)
    os.replace(tmp_name, path)
    return path


def cached_onnx(
    net: nn.Module, *, cache_dir: Path | None = None, opset: int = ONNX_OPSET
) -> tuple[Path, str]:
    """The ONNX file for ``net`` in the cache (exporting it once) and the net's fingerprint."""
    fingerprint = net_fingerprint(net)
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = folder / "onnx" / f"{type(net).__name__}-{fingerprint[:24]}-opset{opset}.onnx"
    if path.is_file():
        logger.debug("using cached ONNX export %s", path)
        return path, fingerprint
    logger.info("exporting %s to ONNX (opset %d) at %s", type(net).__name__, opset, path)
    export_onnx(net, path, opset=opset)
    return path, fingerprint


def main(argv: list[str] | None = None) -> int:
    from pipeline.nets.loading import load_net

    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 2:
        print("usage: python -m pipeline.nets.onnx_export NAME_OR_PATH OUT.onnx", file=sys.stderr)
        return 2
    export_onnx(load_net(args[0]), Path(args[1]))
    print(f"wrote {args[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
