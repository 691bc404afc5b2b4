"""TensorRT's Python API spelling over Kiln: scripts written for ``import tensorrt as trt`` run
after changing that line to ``import kiln.trt as trt``.

Covered: Logger / ILogger, Builder (create_network, create_builder_config,
create_optimization_profile, build_serialized_network, platform_has_fast_fp16), OnnxParser
(parse, parse_from_file, num_errors, get_error, clear_errors), IBuilderConfig (set_flag /
clear_flag / get_flag, set_memory_pool_limit, add_optimization_profile, builder_optimization_level,
max_aux_streams, create_timing_cache / set_timing_cache / get_timing_cache), Runtime
(deserialize_cuda_engine), ICudaEngine (num_io_tensors, get_tensor_name / shape / dtype / mode,
get_tensor_profile_shape, num_optimization_profiles, num_layers, serialize,
create_execution_context, create_engine_inspector), IExecutionContext (set_input_shape,
get_tensor_shape, set_tensor_address, get_tensor_address, execute_async_v3, execute_v2 on host
buffers is not offered; set_optimization_profile_async), DataType, nptype, volume.
docs/python.md lists every difference that remains.
"""
from __future__ import annotations

import ctypes
import json
import os
import sys
import tempfile
from typing import Optional

import numpy as np

from . import _kiln
from ._kiln import KilnError

__version__ = _kiln.__version__


from ._trt_types import (  # noqa: F401  (TensorRT's names, re-exported)
    BuilderFlag, DataType, ILogger, LayerInformationFormat, Logger, MemoryPoolType, NetworkDefinitionCreationFlag,
    TensorIOMode, _FROM_KILN, _log, nptype, volume,
)


class ITensor:
    """A network input or output: name, shape (-1 where dynamic), dtype."""

    def __init__(self, desc):
        self.name = desc.name
        self.shape = tuple(desc.shape)
        self.dtype = _FROM_KILN.get(_kiln.dtype_name(desc.dtype), DataType.FLOAT)
        self.is_network_input = False


class INetworkDefinition:
    """The network an OnnxParser fills (Kiln imports the whole model; no layer-by-layer API)."""

    def __init__(self, flags: int = 0):
        self._net = _kiln.Network()
        self.flags = flags
        self.name = ""

    @property
    def num_inputs(self) -> int:
        return len(self._net.inputs) if self._net.parsed else 0

    @property
    def num_outputs(self) -> int:
        return len(self._net.outputs) if self._net.parsed else 0

    @property
    def num_layers(self) -> int:
        return self._net.num_nodes if self._net.parsed else 0

    def get_input(self, index: int) -> ITensor:
        t = ITensor(self._net.inputs[index])
        t.is_network_input = True
        return t

    def get_output(self, index: int) -> ITensor:
        return ITensor(self._net.outputs[index])


class ParserError:
    def __init__(self, e: KilnError, node: str = ""):
        self._desc = str(e)
        self._node = node
        self._code = getattr(e, "code", "")

    def desc(self) -> str:
        return self._desc

    def code(self) -> str:
        return self._code

    def node_name(self) -> str:
        return self._node

    def __str__(self) -> str:
        return self._desc


class OnnxParser:
    """Parses ONNX into a network. parse* return False on failure and record the errors (one
    per unsupported node for an unsupported-op report)."""

    def __init__(self, network: INetworkDefinition, logger: Optional[ILogger] = None):
        self.network = network
        self.logger = logger
        self._errors = []

    def _run(self, fn, *args) -> bool:
        self._errors = []
        try:
            fn(*args)
            return True
        except KilnError as e:
            nodes = getattr(e, "nodes", [])
            self._errors = [ParserError(e, n) for n in nodes] or [ParserError(e)]
            _log(self.logger, ILogger.ERROR, str(e))
            return False

    def parse(self, model: bytes, path: Optional[str] = None) -> bool:
        base = os.path.dirname(path) if path else "."
        return self._run(self.network._net.parse, bytes(model), base or ".")

    def parse_from_file(self, model: str) -> bool:
        return self._run(self.network._net.parse_from_file, os.fspath(model))

    @property
    def num_errors(self) -> int:
        return len(self._errors)

    def get_error(self, index: int) -> ParserError:
        return self._errors[index]

    def clear_errors(self) -> None:
        self._errors = []


class IOptimizationProfile:
    def __init__(self):
        self._p = _kiln.OptimizationProfile()

    def set_shape(self, input: str, min, opt, max) -> None:  # noqa: A002 - TensorRT's names
        self._p.set_shape(input, list(min), list(opt), list(max))

    def get_shape(self, input: str):  # noqa: A002
        r = self._p.get_shape(input)
        return [] if r is None else [tuple(s) for s in r]


class ITimingCache:
    """Kiln's timing cache is a JSON file; this object holds its path (a temporary file when it
    was made from bytes)."""

    def __init__(self, data: bytes = b""):
        fd, self.path = tempfile.mkstemp(prefix="kiln-timing-", suffix=".json")
        with os.fdopen(fd, "wb") as f:
            f.write(bytes(data))
        if not data:
            os.unlink(self.path)  # no file = an empty cache

    def serialize(self) -> bytes:
        try:
            with open(self.path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return b""


class IBuilderConfig:
    def __init__(self):
        self._c = _kiln.BuilderConfig()
        self._flags = {BuilderFlag.TF32}
        self._c.tf32 = True
        self._cache: Optional[ITimingCache] = None

    _KILN_FLAGS = {BuilderFlag.FP16: "fp16", BuilderFlag.BF16: "bf16", BuilderFlag.TF32: "tf32",
                   BuilderFlag.INT8: "int8", BuilderFlag.FP8: "fp8"}

    def set_flag(self, flag: BuilderFlag) -> None:
        self._flags.add(BuilderFlag(flag))
        if flag in self._KILN_FLAGS:
            setattr(self._c, self._KILN_FLAGS[flag], True)

    def clear_flag(self, flag: BuilderFlag) -> None:
        self._flags.discard(BuilderFlag(flag))
        if flag in self._KILN_FLAGS:
            setattr(self._c, self._KILN_FLAGS[flag], False)

    def get_flag(self, flag: BuilderFlag) -> bool:
        return BuilderFlag(flag) in self._flags

    def set_memory_pool_limit(self, pool: MemoryPoolType, pool_size: int) -> None:
        if pool == MemoryPoolType.WORKSPACE:
            self._c.workspace_limit = int(pool_size)

    def get_memory_pool_limit(self, pool: MemoryPoolType) -> int:
        return self._c.workspace_limit if pool == MemoryPoolType.WORKSPACE else 0

    def add_optimization_profile(self, profile: IOptimizationProfile) -> int:
        return self._c.add_optimization_profile(profile._p)

    @property
    def num_optimization_profiles(self) -> int:
        return len(self._c.profiles)

    @property
    def builder_optimization_level(self) -> int:
        return self._c.opt_level

    @builder_optimization_level.setter
    def builder_optimization_level(self, level: int) -> None:
        self._c.opt_level = max(0, min(3, int(level)))  # TensorRT 0..5; Kiln 0..3

    @property
    def max_aux_streams(self) -> int:
        return self._c.max_aux_streams

    @max_aux_streams.setter
    def max_aux_streams(self, n: int) -> None:
        self._c.max_aux_streams = int(n)

    def create_timing_cache(self, serialized_timing_cache: bytes = b"") -> ITimingCache:
        return ITimingCache(serialized_timing_cache)

    def set_timing_cache(self, cache: ITimingCache, ignore_mismatch: bool = False) -> bool:
        self._cache = cache
        self._c.timing_cache_path = cache.path
        return True

    def get_timing_cache(self) -> Optional[ITimingCache]:
        return self._cache

    @property
    def kiln_config(self) -> "_kiln.BuilderConfig":
        """The Kiln BuilderConfig underneath (layer precisions, target, passes)."""
        return self._c


class IHostMemory(bytes):
    """Serialized plan bytes (bytes(h), h.nbytes, memoryview(h) all work)."""

    @property
    def nbytes(self) -> int:
        return len(self)

    @property
    def dtype(self):
        return DataType.UINT8


class Builder:
    def __init__(self, logger: Optional[ILogger] = None):
        self.logger = logger
        self.max_threads = 1

    def create_network(self, flags: int = 0) -> INetworkDefinition:
        return INetworkDefinition(flags)

    def create_builder_config(self) -> IBuilderConfig:
        return IBuilderConfig()

    def create_optimization_profile(self) -> IOptimizationProfile:
        return IOptimizationProfile()

    @property
    def platform_has_fast_fp16(self) -> bool:
        return _cuda_available()

    @property
    def platform_has_tf32(self) -> bool:
        return _cuda_available()

    def build_serialized_network(self, network: INetworkDefinition, config: IBuilderConfig) -> Optional[IHostMemory]:
        """The plan, or None after logging the error (as TensorRT). Dynamic dims that no profile
        covers build with 1 (with a warning)."""
        try:
            if self.logger is not None:
                config._c.logger = _forward(self.logger)
            for line in _kiln.fill_dynamic_dims(network._net, config._c):
                _log(self.logger, ILogger.WARNING, line)
            return IHostMemory(_kiln.Builder.build_network(network._net, config._c))
        except KilnError as e:
            _log(self.logger, ILogger.ERROR, str(e))
            return None


_SEVERITY = {"error": ILogger.ERROR, "warning": ILogger.WARNING, "info": ILogger.INFO, "verbose": ILogger.VERBOSE}


def _forward(logger: ILogger):
    """A kiln logger callable that passes the library's messages to a TensorRT-style logger."""
    return lambda severity, message: logger.log(_SEVERITY[severity.name], message)


def _cuda_available() -> bool:
    return _kiln.cuda_available()


class Runtime:
    def __init__(self, logger: Optional[ILogger] = None):
        self.logger = logger

    def deserialize_cuda_engine(self, serialized_engine) -> Optional["ICudaEngine"]:
        """An engine, or None after logging the error (as TensorRT). CPU plans load too."""
        try:
            data = bytes(serialized_engine)
            log = _forward(self.logger) if self.logger is not None else None
            return ICudaEngine(_kiln.Runtime.deserialize_engine(data, log), data)
        except KilnError as e:
            _log(self.logger, ILogger.ERROR, str(e))
            return None


class EngineInspector:
    def __init__(self, engine: "ICudaEngine"):
        self._engine = engine
        self.execution_context = None

    def get_layer_information(self, layer_index: int, format: LayerInformationFormat) -> str:  # noqa: A002
        layer = _kiln.inspect(self._engine._e)["layers"][layer_index]
        return json.dumps(layer) if format == LayerInformationFormat.JSON else layer["name"]

    def get_engine_information(self, format: LayerInformationFormat) -> str:  # noqa: A002
        info = _kiln.inspect(self._engine._e)
        if format == LayerInformationFormat.JSON:
            return json.dumps({"Layers": info["layers"], "Bindings": [t["name"] for t in info["inputs"] + info["outputs"]]})
        return "\n".join(layer["name"] for layer in info["layers"])


class ICudaEngine:
    def __init__(self, engine: "_kiln.Engine", plan: bytes = b""):
        self._e = engine
        self._plan = plan
        self._io = list(engine.io_tensors)
        self.name = ""

    @property
    def num_io_tensors(self) -> int:
        return len(self._io)

    def get_tensor_name(self, index: int) -> str:
        return self._io[index].name

    def _find(self, name: str):
        io = self._e.find_io(name)
        if io is None:
            raise KeyError(f"'{name}' is not an input or output of the engine")
        return io

    def get_tensor_shape(self, name: str):
        return tuple(self._find(name).shape)

    def get_tensor_dtype(self, name: str) -> DataType:
        """The dtype bound buffers hold: the model's declared dtype, inputs and outputs alike
        (CUDA engines take and return their I/O in it, docs/decisions/0069)."""
        io = self._find(name)
        return _FROM_KILN.get(_kiln.dtype_name(io.dtype), DataType.FLOAT)

    def get_tensor_mode(self, name: str) -> TensorIOMode:
        return TensorIOMode.INPUT if self._find(name).is_input else TensorIOMode.OUTPUT

    def get_tensor_profile_shape(self, name: str, profile_index: int):
        r = self._e.profiles[profile_index].get_shape(name)
        if r is None:
            raise KeyError(f"'{name}' is not an input of profile {profile_index}")
        return [tuple(s) for s in r]

    @property
    def num_optimization_profiles(self) -> int:
        return len(self._e.profiles)

    @property
    def num_layers(self) -> int:
        return len(self._e.layers)

    @property
    def device_memory_size(self) -> int:
        m = self._e.device_memory
        return m.arena_bytes + m.workspace_bytes

    def serialize(self) -> IHostMemory:
        return IHostMemory(self._plan)

    def create_execution_context(self) -> "IExecutionContext":
        return IExecutionContext(self)

    def create_engine_inspector(self) -> EngineInspector:
        return EngineInspector(self)

    @property
    def kiln_engine(self) -> "_kiln.Engine":
        return self._e


class IProfiler:
    """Base of profilers: report_layer_time(layer_name, ms) per layer after a profiled run."""

    def report_layer_time(self, layer_name: str, ms: float) -> None:  # pragma: no cover
        pass


class IExecutionContext:
    """Binds buffers by address and runs. CUDA engines: device (or pinned host) addresses,
    enqueued on the caller's stream. CPU engines (Kiln's CPU target, no TensorRT equivalent):
    host addresses (numpy's arr.ctypes.data), run synchronously by execute_async_v3."""

    def __init__(self, engine: ICudaEngine):
        self.engine = engine
        self._ctx = engine._e.create_execution_context()
        self._cpu = engine._e.header.target.backend == "cpu"
        self._host: dict = {}  # CPU engines: name -> host address
        self.profiler: Optional[IProfiler] = None
        self.name = ""

    def _host_view(self, name: str) -> np.ndarray:
        io = self.engine._find(name)
        shape = tuple(self._ctx.tensor_shape(name))
        dtype = np.dtype(_kiln.numpy_dtype(io.dtype))
        n = volume(shape) * dtype.itemsize
        buf = (ctypes.c_char * max(n, 1)).from_address(self._host[name])
        return np.frombuffer(buf, dtype=dtype, count=volume(shape)).reshape(shape)

    def _execute_host(self) -> None:
        for t in self.engine._io:
            if t.name not in self._host:
                raise KeyError(f"tensor '{t.name}' has no address (set_tensor_address)")
        for t in self.engine._io:
            if t.is_input:
                self._ctx.set_input(t.name, self._host_view(t.name))
        self._ctx.execute()
        for t in self.engine._io:
            if not t.is_input:
                np.copyto(self._host_view(t.name), self._ctx.output(t.name))
        if self.profiler is not None:
            for lt in self._ctx.layer_timings:
                self.profiler.report_layer_time(lt.name, lt.ms)

    def set_input_shape(self, name: str, shape) -> bool:
        try:
            self._ctx.set_input_shape(name, [int(d) for d in shape])
            return True
        except KilnError as e:
            print(f"[kiln.trt] [E] {e}", file=sys.stderr)
            return False

    def get_tensor_shape(self, name: str):
        """The shape for the next run; -1 in dims not known yet (a CPU engine's data-dependent
        output dims), as TensorRT."""
        try:
            return tuple(self._ctx.tensor_shape(name))
        except KilnError:
            return tuple(self.engine._find(name).shape)

    def set_tensor_address(self, name: str, memory: int) -> bool:
        try:
            if self._cpu:
                self.engine._find(name)
                self._host[name] = int(memory)
                return True
            self._ctx.set_tensor_address(name, int(memory))
            return True
        except (KilnError, KeyError) as e:
            print(f"[kiln.trt] [E] {e}", file=sys.stderr)
            return False

    def get_tensor_address(self, name: str) -> int:
        return self._host.get(name, 0) if self._cpu else self._ctx.tensor_address(name)

    def set_optimization_profile_async(self, profile_index: int, stream_handle: int) -> bool:
        self._ctx.set_optimization_profile(profile_index)
        return True

    @property
    def active_optimization_profile(self) -> int:
        return self._ctx.optimization_profile

    def execute_async_v3(self, stream_handle: int) -> bool:
        """Enqueues on the cudaStream_t `stream_handle` (an int; 0 = default stream). Returns
        False after printing the error (as TensorRT)."""
        try:
            if self._cpu:
                self._ctx.set_profiling(self.profiler is not None)
                self._execute_host()
            else:
                self._ctx.enqueue(int(stream_handle))
            return True
        except (KilnError, KeyError) as e:
            print(f"[kiln.trt] [E] {e}", file=sys.stderr)
            return False

    @property
    def all_binding_shapes_specified(self) -> bool:
        try:
            for t in self.engine._io:
                self._ctx.tensor_shape(t.name)
            return True
        except KilnError:
            return False
