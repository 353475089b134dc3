"""TensorRT engines for Kibitz nets: build once per (net, TensorRT, GPU, profile, precision).

The net is exported to ONNX (pipeline/nets/onnx_export.py), parsed by TensorRT's ONNX parser and
built with one optimisation profile over the batch axis. With ``precision="fp16"`` the
builder may use FP16 kernels everywhere except layers whose names match the net's
``fp32_layer_patterns`` (regular expressions searched in TensorRT layer names, which are the
ONNX node names ``/<module path>/<node>``): those are pinned to FP32 with
OBEY_PRECISION_CONSTRAINTS, because KataGo's normalisation and head layers overflow in FP16.

Engines are cached under ``<cache_dir>/tensorrt/`` with a key over the net fingerprint
(weights + net module source), TensorRT version, GPU name and compute capability, the
profile, the precision and the FP32 patterns; a JSON file beside each engine records the key
fields and is checked before the engine is used, so a run never picks up a stale engine.
Building is logged at WARNING level with the reason (no cached engine for this key), and a
file lock lets one process build while the others on the node wait for it. A timing cache
per (TensorRT version, GPU) is persisted to make later builds faster.

Needs an NVIDIA GPU, ``tensorrt >= 10`` (``pip install kibitz[gpu]``) and a CUDA build of
torch; device memory is torch's. Usage::

    from pipeline.nets.evaluator import make_evaluator
    evaluate = make_evaluator(net, backend="tensorrt", device="cuda", precision="fp16")
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from pipeline.nets.backend_io import BackendUnavailableError, check_inputs, run_in_chunks
from pipeline.nets.onnx_export import cached_onnx, default_cache_dir

logger = logging.getLogger(__name__)

# Builder workspace limit; 4 GiB is ample for the conv nets Kibitz runs.
WORKSPACE_BYTES = 4 << 30
MIN_TENSORRT_MAJOR = 10


class TensorRTError(RuntimeError):
    """Building, loading or running a TensorRT engine failed."""


@dataclass(frozen=True)
class EngineProfile:
    """The batch sizes one engine serves: TensorRT tunes kernels for ``opt_batch``."""

    min_batch: int = 1
    opt_batch: int = 256
    max_batch: int = 1024

    def __post_init__(self) -> None:
        if not 1 <= self.min_batch <= self.opt_batch <= self.max_batch:
            raise ValueError(f"need 1 <= min <= opt <= max batch, got {self!r}")

    @classmethod
    def for_max_batch(cls, max_batch: int) -> EngineProfile:
        """Batch jobs fill whole batches, so the engine is tuned for the largest one."""
        return cls(min_batch=1, opt_batch=max_batch, max_batch=max_batch)


def import_tensorrt() -> Any:
    """Import tensorrt (lazily, so CPU machines never need it) or explain what is missing."""
    try:
        import tensorrt as trt
    except ImportError as exc:
        raise BackendUnavailableError(
            "the tensorrt backend needs the TensorRT Python package (pip install 'kibitz[gpu]' "
            "or tensorrt>=10) and an NVIDIA GPU"
        ) from exc
    major = int(trt.__version__.split(".")[0])
    if major < MIN_TENSORRT_MAJOR:
        raise BackendUnavailableError(
            f"TensorRT {trt.__version__} is too old; Kibitz needs TensorRT >= {MIN_TENSORRT_MAJOR}"
        )
    return trt


def _trt_logger(trt: Any) -> Any:
    """A TensorRT logger that forwards to Python logging."""

    class _Logger(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)

        def log(self, severity: Any, msg: str) -> None:
            if severity in (trt.ILogger.INTERNAL_ERROR, trt.ILogger.ERROR):
                logger.error("TensorRT: %s", msg)
            elif severity == trt.ILogger.WARNING:
                logger.warning("TensorRT: %s", msg)
            else:
                logger.debug("TensorRT: %s", msg)

    return _Logger()


def gpu_identity(device: torch.device) -> str:
    """GPU model and compute capability, e.g. "NVIDIA H100 80GB HBM3 sm90"."""
    major, minor = torch.cuda.get_device_capability(device)
    return f"{torch.cuda.get_device_name(device)} sm{major}{minor}"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")


@dataclass(frozen=True)
class EngineKey:
    """Everything an engine depends on; any change means a different engine file."""

    net_class: str
    net_fingerprint: str
    tensorrt_version: str
    gpu: str
    profile: EngineProfile
    precision: str
    fp32_layer_patterns: tuple[str, ...]
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...]  # per input, dims after the batch

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.as_json(), sort_keys=True).encode()).hexdigest()

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["fp32_layer_patterns"] = list(self.fp32_layer_patterns)
        data["input_shapes"] = [[name, list(dims)] for name, dims in self.input_shapes]
        return data

    def file_stem(self) -> str:
        return (
            f"{self.net_class}-{self.net_fingerprint[:16]}-trt{self.tensorrt_version}-"
            f"{_slug(self.gpu)}-b{self.profile.min_batch}-{self.profile.opt_batch}-"
            f"{self.profile.max_batch}-{self.precision}-{self.digest()[:12]}"
        )


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock, so concurrent actors on one node build an engine once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp_name, path)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)


def _pin_fp32_layers(trt: Any, network: Any, patterns: tuple[str, ...]) -> list[str]:
    """Force layers whose names match any pattern to FP32 compute and FP32 outputs."""
    if not patterns:
        return []
    compiled = [re.compile(p) for p in patterns]
    pinned = []
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        if not any(p.search(layer.name) for p in compiled):
            continue
        layer.precision = trt.float32
        for j in range(layer.num_outputs):
            if layer.get_output(j).dtype in (trt.float32, trt.float16):
                layer.set_output_type(j, trt.float32)
        pinned.append(layer.name)
    if not pinned:
        raise TensorRTError(f"no TensorRT layer matches the FP32 patterns {patterns!r}")
    return pinned


def build_engine(
    onnx_path: Path,
    key: EngineKey,
    *,
    timing_cache_path: Path,
    workspace_bytes: int = WORKSPACE_BYTES,
) -> bytes:
    """Parse ``onnx_path`` and build a serialized engine for ``key``'s profile and precision."""
    trt = import_tensorrt()
    trt_logger = _trt_logger(trt)
    builder = trt.Builder(trt_logger)
    network = builder.create_network(0)  # explicit batch is the only mode in TensorRT 10
    parser = trt.OnnxParser(network, trt_logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise TensorRTError(f"TensorRT could not parse {str(onnx_path)!r}: {errors}")

    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace_bytes)
    if key.precision == "fp16":
        config.set_flag(trt.BuilderFlag.FP16)
        if key.fp32_layer_patterns:
            config.set_flag(trt.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)
            pinned = _pin_fp32_layers(trt, network, key.fp32_layer_patterns)
            logger.info("TensorRT: %d layers pinned to FP32", len(pinned))

    profile = builder.create_optimization_profile()
    p = key.profile
    for name, dims in key.input_shapes:
        profile.set_shape(name, (p.min_batch, *dims), (p.opt_batch, *dims), (p.max_batch, *dims))
    config.add_optimization_profile(profile)

    cache_bytes = timing_cache_path.read_bytes() if timing_cache_path.is_file() else b""
    timing_cache = config.create_timing_cache(cache_bytes)
    config.set_timing_cache(timing_cache, ignore_mismatch=False)

    started = time.perf_counter()
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise TensorRTError(f"TensorRT failed to build an engine from {str(onnx_path)!r}")
    logger.warning("TensorRT: engine built in %.1f s", time.perf_counter() - started)
    _atomic_write(timing_cache_path, bytes(config.get_timing_cache().serialize()))
    return bytes(serialized)


def engine_key(
    net: nn.Module,
    fingerprint: str,
    *,
    device: torch.device,
    precision: str,
    profile: EngineProfile,
) -> EngineKey:
    """The cache key of ``net``'s engine on ``device``."""
    trt = import_tensorrt()
    example = net.example_inputs(1)
    return EngineKey(
        net_class=type(net).__name__,
        net_fingerprint=fingerprint,
        tensorrt_version=trt.__version__,
        gpu=gpu_identity(device),
        profile=profile,
        precision=precision,
        fp32_layer_patterns=tuple(getattr(net, "fp32_layer_patterns", ())),
        input_shapes=tuple(
            (name, tuple(int(d) for d in t.shape[1:]))
            for name, t in zip(net.input_names, example, strict=True)
        ),
    )


def cached_engine(
    net: nn.Module,
    *,
    device: torch.device,
    precision: str,
    profile: EngineProfile,
    cache_dir: Path | None = None,
) -> tuple[Path, EngineKey]:
    """The engine file for ``net`` (built and cached when absent) and its key."""
    folder = (Path(cache_dir) if cache_dir is not None else default_cache_dir()) / "tensorrt"
    folder.mkdir(parents=True, exist_ok=True)
    onnx_path, fingerprint = cached_onnx(net, cache_dir=cache_dir)
    key = engine_key(net, fingerprint, device=device, precision=precision, profile=profile)
    engine_path = folder / f"{key.file_stem()}.engine"
    meta_path = engine_path.with_suffix(".json")
    with _file_lock(engine_path.with_suffix(".lock")):
        if engine_path.is_file() and meta_path.is_file():
            recorded = json.loads(meta_path.read_text())
            if recorded.get("key") != key.as_json():
                raise TensorRTError(
                    f"engine {str(engine_path)!r} was built for a different configuration "
                    f"than its name says; delete it and {str(meta_path)!r} to rebuild"
                )
            logger.info("using cached TensorRT engine %s", engine_path)
            return engine_path, key
        logger.warning(
            "building TensorRT engine for %s (%s, batch %d..%d, GPU %s, TensorRT %s): no "
            "cached engine for this key; this takes minutes",
            key.net_class,
            precision,
            profile.min_batch,
            profile.max_batch,
            key.gpu,
            key.tensorrt_version,
        )
        timing_cache_path = folder / f"timing-trt{key.tensorrt_version}-{_slug(key.gpu)}.cache"
        engine = build_engine(onnx_path, key, timing_cache_path=timing_cache_path)
        _atomic_write(engine_path, engine)
        meta = {"key": key.as_json(), "onnx": str(onnx_path), "built_at": time.time()}
        _atomic_write(meta_path, json.dumps(meta, indent=2).encode())
    return engine_path, key


def _torch_dtype(trt: Any, dtype: Any) -> torch.dtype:
    mapping = {
        trt.float32: torch.float32,
        trt.float16: torch.float16,
        trt.int32: torch.int32,
        trt.int64: torch.int64,
        trt.bool: torch.bool,
    }
    if dtype not in mapping:
        raise TensorRTError(f"unsupported TensorRT tensor dtype {dtype!r}")
    return mapping[dtype]


class TensorRTEvaluator:
    """Runs a cached TensorRT engine on one GPU, device buffers held as torch CUDA tensors."""

    def __init__(
        self,
        net: nn.Module,
        *,
        device: str = "cuda",
        precision: str = "fp16",
        cache_dir: Path | None = None,
        profile: EngineProfile | None = None,
    ) -> None:
        trt = import_tensorrt()
        if not torch.cuda.is_available():
            raise BackendUnavailableError("the tensorrt backend needs a CUDA GPU; none is visible")
        self.trt = trt
        self.device = torch.device(device)
        if self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.profile = profile or EngineProfile()
        self.input_names = tuple(net.input_names)
        self.output_names = tuple(net.output_names)
        self.engine_path, self.key = cached_engine(
            net, device=self.device, precision=precision, profile=self.profile, cache_dir=cache_dir
        )
        with torch.cuda.device(self.device):
            self.runtime = trt.Runtime(_trt_logger(trt))
            self.engine = self.runtime.deserialize_cuda_engine(self.engine_path.read_bytes())
            if self.engine is None:
                raise TensorRTError(
                    f"cannot deserialize TensorRT engine {str(self.engine_path)!r}; delete it to "
                    "rebuild"
                )
            self.context = self.engine.create_execution_context()
            self.stream = torch.cuda.Stream(device=self.device)
        names = {self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)}
        missing = set(self.input_names + self.output_names) - names
        if missing:
            raise TensorRTError(
                f"engine {str(self.engine_path)!r} lacks tensors {sorted(missing)!r}"
            )

    def run_on_device(self, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One batch (at most the profile's max rows) in, outputs left on the GPU in the
        engine's dtypes, ordered after the engine on the default stream."""
        trt = self.trt
        # inputs a net bank placed on the GPU were written on the default stream
        self.stream.wait_stream(torch.cuda.default_stream(self.device))
        with torch.cuda.device(self.device), torch.cuda.stream(self.stream):
            kept = []
            for name in self.input_names:
                dtype = _torch_dtype(trt, self.engine.get_tensor_dtype(name))
                source = torch.as_tensor(inputs[name])
                if source.device.type == "cpu":
                    source = source.pin_memory()
                tensor = source.to(self.device, dtype=dtype, non_blocking=True).contiguous()
                kept.append(tensor)
                self.context.set_input_shape(name, tuple(tensor.shape))
                self.context.set_tensor_address(name, tensor.data_ptr())
            outputs = {}
            for name in self.output_names:
                shape = tuple(self.context.get_tensor_shape(name))
                dtype = _torch_dtype(trt, self.engine.get_tensor_dtype(name))
                tensor = torch.empty(shape, dtype=dtype, device=self.device)
                self.context.set_tensor_address(name, tensor.data_ptr())
                outputs[name] = tensor
            if not self.context.execute_async_v3(self.stream.cuda_stream):
                raise TensorRTError(f"TensorRT execution failed for {str(self.engine_path)!r}")
        for tensor in kept:  # their memory is not reused before the engine has read it
            tensor.record_stream(self.stream)
        torch.cuda.default_stream(self.device).wait_stream(self.stream)
        return outputs

    def _run(self, chunk: list) -> list[np.ndarray]:
        outputs = self.run_on_device(dict(zip(self.input_names, chunk, strict=True)))
        return [t.float().cpu().numpy() for t in outputs.values()]

    def __call__(self, inputs: Mapping[str, np.ndarray | torch.Tensor]) -> dict[str, np.ndarray]:
        arrays, batch = check_inputs(inputs, self.input_names)
        if batch and batch < self.profile.min_batch:
            raise ValueError(
                f"batch of {batch} rows is below the engine profile minimum "
                f"{self.profile.min_batch}"
            )
        return run_in_chunks(arrays, batch, self.profile.max_batch, self.output_names, self._run)
