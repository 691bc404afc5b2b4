# Type stubs of the _kiln extension module (python/src/*.cc). Shapes are lists/tuples of ints
# (elements; -1 for a dynamic dim), addresses and streams are ints (device pointers and
# cudaStream_t), times are milliseconds, sizes bytes. Errors raise KilnError subclasses.
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

__version__: str

class KilnError(RuntimeError):
    code: str            # "InvalidArgument", "NotFound", "Unsupported", ...
    nodes: List[str]     # unsupported-op reports: one line per node, else []
class InvalidArgumentError(KilnError, ValueError): ...
class NotFoundError(KilnError, LookupError): ...
class UnsupportedError(KilnError): ...
class InvalidModelError(KilnError): ...
class InvalidPlanError(KilnError): ...
class OutOfMemoryError(KilnError, MemoryError): ...
class InternalError(KilnError): ...

class DataType:
    float32: DataType
    float64: DataType
    float16: DataType
    bfloat16: DataType
    fp8e4m3fn: DataType
    fp8e5m2: DataType
    int8: DataType
    int16: DataType
    int32: DataType
    int64: DataType
    uint8: DataType
    uint16: DataType
    uint32: DataType
    uint64: DataType
    bool: DataType
    int4: DataType
    uint4: DataType
    fp4e2m1: DataType
    nf4: DataType
    fp8e4m3fnuz: DataType
    fp8e5m2fnuz: DataType
    fp8e8m0: DataType
    int2: DataType
    uint2: DataType
    string: DataType
    name: str
    value: int

def dtype_name(t: DataType) -> str: ...
def dtype_from_name(name: str) -> DataType: ...
def dtype_itemsize(t: DataType) -> float: ...
def numpy_dtype(t: DataType) -> np.dtype: ...
def dtype_from_numpy(d: np.dtype) -> DataType: ...
def cuda_available() -> bool: ...

class TensorDesc:
    name: str
    dtype: DataType
    rank_known: bool
    shape: Tuple[int, ...]
    symbols: List[str]
    def shape_string(self) -> str: ...

class ShapeRange:
    min: List[int]
    opt: List[int]
    max: List[int]
    def contains(self, shape: Sequence[int]) -> bool: ...

class OptimizationProfile:
    def __init__(self) -> None: ...
    def set_shape(self, input: str, min: Sequence[int], opt: Sequence[int], max: Sequence[int]) -> None: ...
    def get_shape(self, input: str) -> Optional[Tuple[List[int], List[int], List[int]]]: ...
    ranges: Dict[str, ShapeRange]

class TargetDevice:
    cpu: TargetDevice
    cuda: TargetDevice
    auto: TargetDevice
    __members__: Dict[str, TargetDevice]

class LayerPrecision:
    def __init__(self, pattern: str, precision: DataType) -> None: ...
    pattern: str
    precision: DataType

class LogSeverity:
    error: LogSeverity
    warning: LogSeverity
    info: LogSeverity
    verbose: LogSeverity
    name: str

class BuildProgress:
    step: str
    done: int
    total: int
    detail: str

class BuilderConfig:
    def __init__(self) -> None: ...
    fp16: bool
    bf16: bool
    tf32: bool
    fp8: bool
    int8: bool
    workspace_limit: int       # bytes; 0 = no limit
    max_aux_streams: int       # -1 = the builder decides
    timing_cache_path: str
    tactic_sources: str        # '' = all; '-cudnn_graph'; 'kiln,cublaslt'
    output_types: str          # '' = as declared; 'fp16' = every float output; 'fp16,,fp32' per output
    tuning_budget: int
    timing_iterations: int
    tuning_shapes: int
    timing_cold_cache: bool
    logger: Any                # set: Callable[[LogSeverity, str], None] or None; get: bool
    target: TargetDevice
    opt_level: int             # 0..3
    disabled_passes: Set[str]
    dump_after_pass: str
    verify_passes: bool
    quant_conv: bool
    profiles: List[OptimizationProfile]
    layer_precisions: List[LayerPrecision]
    progress: Any              # set: Callable[[BuildProgress], None] or None; get: bool
    def add_optimization_profile(self, profile: OptimizationProfile) -> int: ...
    def add_layer_precision(self, pattern: str, precision: DataType) -> None: ...

class Network:
    def __init__(self) -> None: ...
    def parse(self, model: bytes, base_dir: str = ".") -> None: ...
    def parse_from_file(self, path: str) -> None: ...
    parsed: bool
    inputs: List[TensorDesc]
    outputs: List[TensorDesc]
    num_nodes: int

class Builder:
    @staticmethod
    def build(onnx_path: str, config: BuilderConfig) -> bytes: ...
    @staticmethod
    def build_network(network: Network, config: BuilderConfig) -> bytes: ...

def fill_dynamic_dims(network: Network, config: BuilderConfig) -> List[str]: ...

class PlanTarget:
    backend: str               # "cpu" | "cuda"
    cc_major: int
    cc_minor: int
    cudnn_version: int
    cublaslt_version: int

class PlanHeader:
    format_version: int
    kiln_version: str
    target: PlanTarget
    file_bytes: int
    checksum: int

class IOTensor:
    name: str
    dtype: DataType
    shape: Tuple[int, ...]
    desc: TensorDesc
    is_input: bool

class LayerInfo:
    name: str
    op: str
    origin: List[str]
    inputs: List[TensorDesc]
    outputs: List[TensorDesc]
    tactic: str
    precision: str
    precision_constrained: bool
    tactic_id: int
    tuned_ms: float
    quantization: str

class DeviceLayerInfo:
    name: str
    op: str
    tactic: str
    tactic_id: int
    tuned_ms: float
    fallback: str
    workspace_bytes: int
    stream: int

class DeviceMemoryInfo:
    arena_bytes: int
    activation_bytes_sum: int
    weight_bytes: int
    workspace_bytes: int
    aux_streams: int

class LayerTiming:
    name: str
    op: str
    tactic: str
    ms: float

class Engine:
    header: PlanHeader
    io_tensors: List[IOTensor]
    profiles: List[OptimizationProfile]
    layers: List[LayerInfo]
    weights_bytes: int
    fp16: bool
    bf16: bool
    tf32: bool
    fp8: bool
    int8: bool
    opt_level: int
    workspace_limit: int
    max_aux_streams: int
    device_layers: List[DeviceLayerInfo]
    device_memory: DeviceMemoryInfo
    load_phases: Dict[str, float]
    tactics_restored: int
    tactics_rebuilt: int
    weights_uploaded_packed: int
    tuned_shapes: List[List[List[int]]]
    def shape_setup_ms(self) -> List[Tuple[List[List[int]], float]]: ...
    def find_io(self, name: str) -> Optional[IOTensor]: ...
    def create_execution_context(self) -> ExecutionContext: ...

class Runtime:
    @staticmethod
    def deserialize_engine(plan: Any, logger: Optional[Callable[[LogSeverity, str], None]] = None) -> Engine: ...
    @staticmethod
    def load_engine(path: str, logger: Optional[Callable[[LogSeverity, str], None]] = None) -> Engine: ...

class ExecutionContext:
    engine: Engine
    optimization_profile: int
    layer_timings: List[LayerTiming]
    cuda_graphs: int
    def set_optimization_profile(self, index: int) -> None: ...
    def set_input_shape(self, name: str, shape: Sequence[int]) -> None: ...
    def set_input(self, name: str, array: np.ndarray) -> None: ...
    def execute(self) -> None: ...
    def output(self, name: str) -> np.ndarray: ...
    def set_profiling(self, on: bool) -> None: ...
    def set_cuda_graph(self, on: bool) -> None: ...
    def set_tensor_address(self, name: str, address: int) -> None: ...
    def tensor_address(self, name: str) -> int: ...
    def tensor_shape(self, name: str) -> Tuple[int, ...]: ...
    def enqueue(self, stream: int = 0) -> None: ...
    def execute_async(self, stream: int = 0) -> None: ...
    def enqueue_bound(self, addresses: Sequence[int], stream: int, cuda_graph: bool = False) -> None: ...

def inspect(engine: Engine) -> Dict[str, Any]: ...
def quantize_onnx(model: str, format: str = ..., data: str = ..., cache: str = ..., calibrator: str = ...,
                  batch_size: int = ..., max_batches: int = ..., exclude: Sequence[str] = ..., max_error: float = ...,
                  calib_split: float = ..., weight_scales: str = ...) -> Tuple[bytes, Dict[str, Any]]: ...
def prepare_inputs(engine: Engine, shapes: Dict[str, Sequence[int]] = ..., seed: int = 1) -> Dict[str, np.ndarray]: ...
def load_tensor(path: str) -> np.ndarray: ...
def compare(engine: Engine, model: str, inputs: Dict[str, np.ndarray] = ..., shapes: Dict[str, Sequence[int]] = ...,
            seed: int = 1, top_k: int = 5, atol: float = 1e-5, rtol: float = 1e-3) -> Dict[str, Any]: ...
def bench(engine: Engine, shapes: Dict[str, Sequence[int]] = ..., warmup: int = 10, iterations: int = 100,
          duration_s: float = 0.0, cuda_graph: bool = False, streams: int = 1, dump_profile: str = "") -> Dict[str, Any]: ...
