"""Kiln from Python: ONNX -> optimized plan -> runtime (CPU reference backend and CUDA).

The common case is two lines::

    engine = kiln.build("model.onnx", precision="fp16", shapes={"x": (1, 3, 224, 224)})
    y = engine(x)            # x: numpy array, torch tensor (CPU or CUDA), DLPack / CUDA array

Three layers, from high to low:
  * this module: build / load / Engine.__call__ / compare / bench / inspect;
  * ``kiln.trt``: TensorRT's Python API spelling (``import kiln.trt as trt``);
  * ``kiln._kiln``: the C++ API as bound by pybind11 (Builder, BuilderConfig, Runtime, Engine,
    ExecutionContext), which the two above use.

Errors are ``kiln.KilnError`` subclasses whose text is the CLI's message.
"""
from __future__ import annotations

import os
import warnings
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _interop
from ._kiln import (  # noqa: F401  (re-exported)
    Builder, BuilderConfig, BuildProgress, DataType, DeviceLayerInfo, DeviceMemoryInfo, InternalError,
    InvalidArgumentError, InvalidModelError, InvalidPlanError, IOTensor, KilnError, LayerInfo, LayerPrecision,
    LayerTiming, LogSeverity, Network, NotFoundError, OptimizationProfile, OutOfMemoryError, PlanHeader, Runtime, ShapeRange,
    TargetDevice, TensorDesc, UnsupportedError, __version__, dtype_name,
)
from . import _kiln

ShapeSpec = Union[Sequence[int], Tuple[Sequence[int], Sequence[int], Sequence[int]]]

_PRECISIONS = {"fp32": (), "tf32": (), "fp16": ("fp16",), "bf16": ("bf16",), "fp16+bf16": ("fp16", "bf16")}
_LAYER_PRECISIONS = {"fp32": "float32", "float32": "float32", "fp16": "float16", "float16": "float16",
                     "bf16": "bfloat16", "bfloat16": "bfloat16"}

__all__ = ["build", "load", "quantize", "Engine", "compare", "bench", "inspect", "config", "KilnError", "__version__"]


def _invalid(message: str) -> InvalidArgumentError:
    """The exception the C++ side raises for kInvalidArgument, made in Python (same text, code)."""
    e = InvalidArgumentError("InvalidArgument: " + message)
    e.code, e.nodes = "InvalidArgument", []
    return e


def _is_range(spec) -> bool:
    return len(spec) == 3 and all(isinstance(s, (list, tuple)) for s in spec)


def fill_dynamic_dims(network: Network, cfg: BuilderConfig) -> list:
    """Like trtexec and `kiln build`: every input with dynamic dims that no profile names gets
    min = opt = max = its dims with 1 for each dynamic one. Returns one warning line per input."""
    return _kiln.fill_dynamic_dims(network, cfg)


def config(precision: str = "fp32", shapes: Optional[Mapping[str, ShapeSpec]] = None, *,
           workspace: Optional[int] = None, target: str = "auto", timing_cache: Optional[str] = None,
           layer_precisions: Optional[Mapping[str, str]] = None, opt_level: int = 2, tf32: bool = True,
           max_aux_streams: int = -1, tactic_sources: str = "", output_types: str = "", progress=None,
           logger=None) -> BuilderConfig:
    """A BuilderConfig from keyword settings (see build)."""
    if precision not in _PRECISIONS:
        raise _invalid(f"precision '{precision}': expected one of {sorted(_PRECISIONS)}")
    cfg = BuilderConfig()
    for flag in _PRECISIONS[precision]:
        setattr(cfg, flag, True)
    cfg.tf32 = tf32
    if workspace is not None:
        cfg.workspace_limit = int(workspace)
    try:
        cfg.target = TargetDevice.__members__[target]
    except KeyError:
        raise _invalid(f"target '{target}': expected auto, cpu or cuda") from None
    if timing_cache:
        cfg.timing_cache_path = os.fspath(timing_cache)
    cfg.opt_level = opt_level
    cfg.max_aux_streams = max_aux_streams
    for pattern, prec in (layer_precisions or {}).items():
        if prec not in _LAYER_PRECISIONS:
            raise _invalid(f"layer precision '{prec}' for '{pattern}': "
                                       f"expected one of {sorted(_LAYER_PRECISIONS)}")
        cfg.add_layer_precision(pattern, _kiln.dtype_from_name(_LAYER_PRECISIONS[prec]))
    if shapes:
        profile = OptimizationProfile()
        for name, spec in shapes.items():
            lo, opt, hi = spec if _is_range(spec) else (spec, spec, spec)
            profile.set_shape(name, list(lo), list(opt), list(hi))
        cfg.add_optimization_profile(profile)
    cfg.tactic_sources = tactic_sources
    cfg.output_types = output_types
    if progress is not None:
        cfg.progress = progress
    if logger is not None:
        cfg.logger = logger
    return cfg


def quantize(model: Union[str, os.PathLike], calib: Optional[Union[str, os.PathLike]] = None,
             output: Optional[Union[str, os.PathLike]] = None, *, format: str = "int8",
             cache: Optional[Union[str, os.PathLike]] = None, calibrator: str = "", batch_size: int = 0,
             max_batches: int = 0, exclude: Sequence[str] = (), max_error: float = 0.0,
             calib_split: float = 0.8, weight_scales: str = "per-channel") -> dict:
    """Post-training quantization (`kiln quantize`, docs/decisions/0050): calibrates the activations
    feeding Conv / Gemm / MatMul on `calib` (a .npz or a directory of <input>.npy, samples stacked on
    dim 0) or takes the scales from `cache`, and writes the model as standard Q/DQ ONNX to `output`
    (replaced only once complete). format: "int8" or "fp8" (E4M3FN, opset 19+). calibrator: "minmax"
    (default), "entropy", "percentile[:P]", "mse", "delayed[:N[:max|most_recent[:M]]]".
    weight_scales: "per-channel" (default) or "per-tensor" Gemm / MatMul weight scales (one scale
    shared by the layers reading one activation; FP8's fused cuBLASLt GEMM on Hopper, decision 0085).
    max_error in (0, 1): the accuracy budget (docs/decisions/0062): calibrate on the first
    calib_split of the samples and keep the fewest, most sensitive layers float until
    1 - cosine(outputs, FP32 outputs) on the held-out rest is <= max_error; the report then adds
    "error_all_quantized", "error", "held_out_samples", "layers" ([{"node", "quantized",
    "sensitivity"}]) and "summary" (the lines kiln build prints).
    Returns the report: {"calibrator", "from_cache", "batches", "samples", "quantized", "skipped",
    "activation_scales", "model": the Q/DQ ONNX bytes}. Raises InvalidArgumentError (data, cache,
    spec, a budget outside (0, 1) or without calib, a split leaving no held-out batch),
    UnsupportedError, NotFoundError.
    """
    data, report = _kiln.quantize_onnx(os.fspath(model), format, os.fspath(calib) if calib else "",
                                       os.fspath(cache) if cache else "", calibrator, batch_size, max_batches,
                                       list(exclude), max_error, calib_split, weight_scales)
    if output is not None:
        out = os.fspath(output)
        tmp = out + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, out)
    report["model"] = data
    return report


def build(model: Union[str, os.PathLike], precision: str = "fp32",
          shapes: Optional[Mapping[str, ShapeSpec]] = None, *, cuda_graph: bool = False, **settings) -> "Engine":
    """Builds an ONNX model into an Engine.

    model: path of an .onnx file. precision: "fp32" (TF32 math on CUDA), "fp16", "bf16" or
    "fp16+bf16": the precisions layers may use; inputs and outputs keep the model's dtypes (see output_types).
    shapes: {input: dims} (one fixed shape) or {input: (min, opt, max)} for the inputs with
    dynamic dims; an input with dynamic dims left out builds with 1 for each of them and warns.
    settings: workspace (bytes), target ("auto" | "cpu" | "cuda"), timing_cache (path),
    layer_precisions ({pattern: "fp16" | "bf16" | "fp32"}), opt_level (0..3), tf32,
    max_aux_streams, tactic_sources ("-cudnn_graph", "kiln,cublaslt"), output_types ("fp16": every float
    output in float16, or one per output "fp16,,fp32"; trtexec's --outputIOFormats), progress
    (callable(BuildProgress)), logger (callable(LogSeverity, str)); quantize ("int8" | "fp8") with
    calib (calibration data) and/or calib_cache, calibrator: post-training quantization first (see
    quantize); max_error (0 < E < 1) and calib_split (default 0.8) with calib: the accuracy budget
    (see quantize; the chosen layers are in engine.quantize_report); weight_scales (see quantize). cuda_graph: the Engine replays CUDA graphs of its enqueue (device inputs).
    The GIL is released while building. Raises NotFoundError, UnsupportedError (e.nodes: every
    unsupported node), InvalidModelError, InvalidArgumentError.
    """
    calib = settings.pop("calib", None)
    calib_cache = settings.pop("calib_cache", None)
    calibrator = settings.pop("calibrator", "")
    quant = settings.pop("quantize", None)  # "int8" | "fp8" with calib / calib_cache
    max_error = settings.pop("max_error", 0.0)
    calib_split = settings.pop("calib_split", 0.8)
    weight_scales = settings.pop("weight_scales", "per-channel")
    if (calib or calib_cache) and quant not in ("int8", "fp8"):
        raise _invalid("calib / calib_cache calibrate INT8 or FP8 layers: pass quantize='int8' or 'fp8'")
    if max_error and not calib:
        raise _invalid("max_error needs calib (calibration data): the error is measured on its held-out part")
    cfg = config(precision, shapes, **settings)
    network = Network()
    if quant:
        # Implicit quantization as `kiln build --int8 --calib`: the calibrated Q/DQ model, then its build.
        import tempfile
        setattr(cfg, quant, True)
        report = quantize(model, calib, format=quant, cache=calib_cache, calibrator=calibrator,
                          max_error=max_error, calib_split=calib_split, weight_scales=weight_scales)
        with tempfile.TemporaryDirectory() as d:
            qpath = os.path.join(d, "model.qdq.onnx")
            with open(qpath, "wb") as f:
                f.write(report["model"])
            network.parse_from_file(qpath)
    else:
        network.parse_from_file(os.fspath(model))
    for line in fill_dynamic_dims(network, cfg):
        warnings.warn(line, stacklevel=2)
    engine = Engine(Builder.build_network(network, cfg), cuda_graph=cuda_graph)
    if quant:
        report.pop("model", None)
        engine.quantize_report = report
    return engine


def load(plan: Union[str, os.PathLike, bytes], *, cuda_graph: bool = False) -> "Engine":
    """An Engine from a plan file path or plan bytes. Raises NotFoundError, InvalidPlanError."""
    return Engine(plan, cuda_graph=cuda_graph)


class Engine:
    """A built plan, callable on arrays: ``outputs = engine(inputs)``.

    inputs: one array (single-input engines), a sequence in the engine's input order, or a
    mapping {name: array}; or keyword arguments by input name. Arrays are numpy arrays, torch
    tensors (CPU or CUDA), objects with __cuda_array_interface__ or __dlpack__.
      * host inputs (numpy, torch CPU): copied in, run synchronously (any engine), outputs are
        new numpy arrays (torch CPU tensors when an input was a torch tensor);
      * device inputs (CUDA engines): bound by address, no copy; outputs are new torch CUDA
        tensors, or the caller's `out` tensors; the inference is enqueued on `stream` (default:
        torch's current stream) and the call returns without waiting, like a torch op (keep the
        inputs alive and unchanged until the stream has run it, as for any torch op on a side
        stream; new outputs are recorded on a torch.cuda.Stream given as `stream`).
    Inputs and outputs are in the model's declared dtypes (float32, float16, bfloat16, int32, int64, bool).
    Returns the output itself when the engine has one output, else {name: output}.
    One call at a time per Engine (it owns one execution context); Engine.clone() gives another.
    """

    def __init__(self, plan: Union[str, os.PathLike, bytes, "_kiln.Engine"], *, cuda_graph: bool = False):
        self._plan: Optional[bytes] = None
        if isinstance(plan, _kiln.Engine):
            self._engine = plan
        elif isinstance(plan, (bytes, bytearray, memoryview)):
            self._plan = bytes(plan)
            self._engine = Runtime.deserialize_engine(self._plan)
        else:
            self._engine = Runtime.load_engine(os.fspath(plan))
        self.cuda_graph = cuda_graph
        # kiln.build with quantize: the calibration's report (with max_error: the chosen layers).
        self.quantize_report: Optional[dict] = None
        self._ctx = self._engine.create_execution_context()
        self._io = list(self._engine.io_tensors)
        self.input_names = [t.name for t in self._io if t.is_input]
        self.output_names = [t.name for t in self._io if not t.is_input]
        self._shapes: Dict[str, Tuple[int, ...]] = {}  # input shapes set on the context
        self._out_shapes: Dict[Tuple, list] = {}       # input shapes -> output shapes
        # The last validated one-input, one-output CUDA-graph call on torch tensors: (tensor
        # type, (addresses, shapes, dtypes), addresses, device). A call that matches it goes
        # straight to the kept graph (see __call__).
        self._fast: Optional[tuple] = None
        self.is_cuda = self._engine.header.target.backend == "cuda"
        # The dtype each device input / output binds as: the model's declared dtype (CUDA engines'
        # rule, docs/decisions/0069).
        self._device_dtype = {t.name: dtype_name(t.dtype) for t in self._io}

    # ---- description ----
    @property
    def raw(self) -> "_kiln.Engine":
        """The bound C++ engine (kiln._kiln.Engine)."""
        return self._engine

    @property
    def context(self) -> "_kiln.ExecutionContext":
        """The execution context calls run on."""
        return self._ctx

    @property
    def io(self) -> list:
        """IOTensor per input then output: name, dtype, shape (-1 dynamic), is_input."""
        return self._io

    @property
    def target(self) -> str:
        return str(self._engine.header.target)

    def inspect(self) -> dict:
        """`kiln inspect --json` as a dict (layers as the inspector lists them)."""
        return _kiln.inspect(self._engine)

    def clone(self) -> "Engine":
        """Another Engine on the same weights with its own context (for another thread/stream)."""
        return Engine(self._engine, cuda_graph=self.cuda_graph)

    def __repr__(self) -> str:
        ins = ", ".join(f"{t.name}: {dtype_name(t.dtype)}{list(t.shape)}" for t in self._io if t.is_input)
        outs = ", ".join(f"{t.name}: {dtype_name(t.dtype)}{list(t.shape)}" for t in self._io if not t.is_input)
        return f"<kiln.Engine {self.target} ({ins}) -> ({outs})>"

    # ---- calling ----
    def _named(self, inputs, kw) -> Dict[str, Any]:
        if inputs is None:
            named = dict(kw)
        elif isinstance(inputs, Mapping):
            named = dict(inputs, **kw)
        elif isinstance(inputs, (list, tuple)):
            if len(inputs) != len(self.input_names):
                raise _invalid(f"{len(inputs)} inputs given, the engine takes "
                                           f"{len(self.input_names)} ({', '.join(self.input_names)})")
            named = dict(zip(self.input_names, inputs), **kw)
        else:
            if len(self.input_names) != 1:
                raise _invalid(f"one array given, the engine takes "
                                           f"{len(self.input_names)} inputs ({', '.join(self.input_names)})")
            named = {self.input_names[0]: inputs, **kw}
        missing = [n for n in self.input_names if n not in named]
        extra = [n for n in named if n not in self.input_names]
        if missing or extra:
            raise _invalid("; ".join(
                ([f"missing input(s) {', '.join(missing)}"] if missing else []) +
                ([f"unknown input(s) {', '.join(extra)} (inputs: {', '.join(self.input_names)})"] if extra else [])))
        return named

    def _set_shape(self, name: str, shape: Tuple[int, ...]) -> None:
        if self._shapes.get(name) != shape:
            self._fast = None
            self._ctx.set_input_shape(name, list(shape))
            self._shapes[name] = shape

    def __call__(self, inputs=None, *, out=None, stream=None, cuda_graph: Optional[bool] = None, **named_inputs):
        f = self._fast
        if (f is not None and out is not None and not named_inputs and cuda_graph is None
                and inputs.__class__ is f[0] and out.__class__ is f[0]):
            # Same tensors (addresses, shapes, dtypes, still contiguous) as the last validated
            # call: every check _run_device makes would pass again, so replay the kept graph.
            if (inputs.data_ptr(), out.data_ptr(), inputs.shape, out.shape, inputs.dtype, out.dtype) == f[1] and \
                    inputs.is_contiguous() and out.is_contiguous():
                self._ctx.enqueue_bound(f[2], _interop.stream_handle(stream, f[3]), True)
                return out
        named = self._named(inputs, named_inputs)
        first = named[self.input_names[0]] if self.input_names else None
        dev = {n: _interop.describe_device(a, n) for n, a in named.items()}
        n_dev = sum(d is not None for d in dev.values())
        if n_dev == 0:
            return self._run_host(named, out, _interop.is_torch_tensor(first))
        if n_dev != len(dev):
            raise _invalid("inputs mix host and CUDA tensors: " + ", ".join(
                f"{n} ({'cuda' if d else 'host'})" for n, d in dev.items()))
        if not self.is_cuda:
            raise _invalid("this is a CPU engine; it takes host arrays, not CUDA tensors")
        return self._run_device(dev, out, stream, self.cuda_graph if cuda_graph is None else cuda_graph)

    def _run_host(self, named, out, as_torch: bool):
        self._fast = None
        for name in self.input_names:
            a = _interop.host_array(named[name], name)
            self._set_shape(name, tuple(a.shape))
            self._ctx.set_input(name, a)
        self._ctx.execute()
        results = {}
        for name in self.output_names:
            r = np.array(self._ctx.output(name))  # a copy: the next call reuses the context
            results[name] = r
        if out is not None:
            outs = self._out_list(out)
            for name, o in outs.items():
                if _interop.is_torch_tensor(o):
                    import torch  # noqa: WPS433 (already imported: o is a torch tensor)
                    o.copy_(torch.from_numpy(results[name]))
                else:
                    np.copyto(o, results[name])
            return self._pack(outs)
        if as_torch:
            import torch
            results = {n: torch.from_numpy(r) for n, r in results.items()}
        return self._pack(results)

    def _out_list(self, out) -> Dict[str, Any]:
        if isinstance(out, Mapping):
            outs = dict(out)
        elif isinstance(out, (list, tuple)):
            outs = dict(zip(self.output_names, out))
        else:
            outs = {self.output_names[0]: out}
        if sorted(outs) != sorted(self.output_names):
            raise _invalid(f"out= must give every output ({', '.join(self.output_names)})")
        return outs

    def _pack(self, results: Dict[str, Any]):
        return results[self.output_names[0]] if len(self.output_names) == 1 else results

    def _run_device(self, dev, out, stream, cuda_graph: bool):
        for name in self.input_names:
            d = dev[name]
            want = self._device_dtype[name]
            if d.dtype != want:
                raise _invalid(f"input '{name}' is {d.dtype}; the engine takes {want} "
                                           "(kiln never copies device data: convert it first)")
            self._set_shape(name, d.shape)
        key = tuple(self._shapes[n] for n in self.input_names)
        out_shapes = self._out_shapes.get(key)
        if out_shapes is None:
            out_shapes = [tuple(self._ctx.tensor_shape(n)) for n in self.output_names]
            self._out_shapes[key] = out_shapes
        like = dev[self.input_names[0]]
        if out is None:
            outs = {n: _interop.empty_like_device(s, self._device_dtype[n], like)
                    for n, s in zip(self.output_names, out_shapes)}
            if stream is not None and hasattr(stream, "cuda_stream") and hasattr(stream, "wait_event"):
                for o in outs.values():  # torch's allocator: the new outputs are in use on `stream`
                    o.record_stream(stream)
        else:
            outs = self._out_list(out)
        addresses = [dev[n].address for n in self.input_names]
        for n, s in zip(self.output_names, out_shapes):
            o = _interop.describe_device(outs[n], n)
            if o is None:
                raise _invalid(f"out '{n}' must be a CUDA tensor (the inputs are)")
            want = self._device_dtype[n]
            if o.shape != s or o.dtype != want:
                raise _invalid(f"out '{n}' is {o.dtype}{list(o.shape)}; "
                                           f"the engine writes {want}{list(s)}")
            addresses.append(o.address)
        self._ctx.enqueue_bound(addresses, _interop.stream_handle(stream, like.device), cuda_graph)
        self._remember_fast_call(dev, outs, addresses, like, cuda_graph)
        return self._pack(outs)

    def _remember_fast_call(self, dev, outs, addresses, like, cuda_graph: bool) -> None:
        """Keeps this call's validated form for __call__'s fast path (torch tensors, one input,
        one output, CUDA graph on: the case whose host overhead matters)."""
        self._fast = None
        if not cuda_graph or self.cuda_graph is not True or len(dev) != 1 or len(outs) != 1:
            return
        x, o = like.source, next(iter(outs.values()))
        if not (_interop.is_torch_tensor(x) and x.__class__ is o.__class__):
            return
        self._fast = (x.__class__, (x.data_ptr(), o.data_ptr(), x.shape, o.shape, x.dtype, o.dtype),
                      list(addresses), like.device)

    # ---- tools ----
    def save(self, path: Union[str, os.PathLike]) -> None:
        """Writes the plan (only for Engines made from bytes or by build)."""
        if self._plan is None:
            raise _invalid("this Engine was loaded from a file; copy that file instead")
        with open(path, "wb") as f:
            f.write(self._plan)

    def serialize(self) -> bytes:
        """The plan bytes (Engines made from bytes or by build)."""
        if self._plan is None:
            raise _invalid("this Engine was loaded from a file; read that file instead")
        return self._plan


def _engine_of(e) -> "_kiln.Engine":
    if isinstance(e, Engine):
        return e.raw
    if isinstance(e, _kiln.Engine):
        return e
    return Runtime.load_engine(os.fspath(e))


def compare(engine, model: Union[str, os.PathLike], inputs: Optional[Mapping[str, Any]] = None, *,
            shapes: Optional[Mapping[str, Sequence[int]]] = None, seed: int = 1, top_k: int = 5,
            atol: float = 1e-5, rtol: float = 1e-3) -> dict:
    """`kiln compare`: runs the engine (an Engine, a plan path) and the CPU reference interpreter
    on the ONNX model with the same inputs (given as host arrays, the rest seeded random like the
    CLI). Returns {"atol", "rtol", "ok", "outputs": [{name, ok, dtype, shape, max_abs_error,
    max_rel_error, normalized_error, cosine, top_k, topk_agreement, violations}]}."""
    arrays = {n: _interop.host_array(a, n) for n, a in (inputs or {}).items()}
    return _kiln.compare(_engine_of(engine), os.fspath(model), arrays,
                         {k: list(v) for k, v in (shapes or {}).items()}, seed, top_k, atol, rtol)


def bench(engine, *, shapes: Optional[Mapping[str, Sequence[int]]] = None, warmup: int = 10,
          iterations: int = 100, duration_s: float = 0.0, cuda_graph: bool = False, streams: int = 1,
          dump_profile: str = "") -> dict:
    """`kiln bench`: prints the CLI's summary and returns its --json object (latency_ms
    {min, median, mean, p90, p95, p99, max} in ms, throughput, ...; CUDA plans add the GPU
    compute and host-to-host phases)."""
    return _kiln.bench(_engine_of(engine), {k: list(v) for k, v in (shapes or {}).items()}, warmup, iterations,
                       duration_s, cuda_graph, streams, dump_profile)


def inspect(engine) -> dict:
    """`kiln inspect --json` of an Engine or plan path as a dict."""
    return _kiln.inspect(_engine_of(engine))
