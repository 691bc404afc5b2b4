"""Enums, loggers and dtype helpers of kiln.trt (TensorRT's names and numbering); trt.py
re-exports every name here."""
from __future__ import annotations

import enum
import sys
from typing import Optional

import numpy as np


class ILogger:
    """Base of loggers: override log(severity, msg)."""

    class Severity(enum.IntEnum):
        INTERNAL_ERROR = 0
        ERROR = 1
        WARNING = 2
        INFO = 3
        VERBOSE = 4

    INTERNAL_ERROR = Severity.INTERNAL_ERROR
    ERROR = Severity.ERROR
    WARNING = Severity.WARNING
    INFO = Severity.INFO
    VERBOSE = Severity.VERBOSE

    def log(self, severity, msg: str) -> None:  # pragma: no cover - overridden
        pass


class Logger(ILogger):
    """Prints messages at `min_severity` or more severe to stderr."""

    def __init__(self, min_severity=ILogger.WARNING):
        self.min_severity = min_severity

    def log(self, severity, msg: str) -> None:
        if int(severity) <= int(self.min_severity):
            print(f"[kiln.trt] [{ILogger.Severity(int(severity)).name[0]}] {msg}", file=sys.stderr)


def _log(logger: Optional[ILogger], severity, msg: str) -> None:
    if logger is not None:
        logger.log(severity, msg)


class DataType(enum.IntEnum):
    """TensorRT's DataType values (the numbering of tensorrt.DataType)."""
    FLOAT = 0
    HALF = 1
    INT8 = 2
    INT32 = 3
    BOOL = 4
    UINT8 = 5
    FP8 = 6
    BF16 = 7
    INT64 = 8
    INT4 = 9


_FROM_KILN = {"float32": DataType.FLOAT, "float16": DataType.HALF, "int8": DataType.INT8, "int32": DataType.INT32,
              "bool": DataType.BOOL, "uint8": DataType.UINT8, "fp8e4m3fn": DataType.FP8, "bfloat16": DataType.BF16,
              "int64": DataType.INT64, "int4": DataType.INT4}
_NP = {DataType.FLOAT: np.float32, DataType.HALF: np.float16, DataType.INT8: np.int8, DataType.INT32: np.int32,
       DataType.BOOL: np.bool_, DataType.UINT8: np.uint8, DataType.INT64: np.int64}


def nptype(dtype: DataType):
    """numpy type of a DataType (TypeError for FP8 / BF16 / INT4, as TensorRT)."""
    if dtype not in _NP:
        raise TypeError(f"could not resolve {dtype!r} to a numpy type")
    return _NP[dtype]


def volume(shape) -> int:
    return int(np.prod(list(shape), dtype=np.int64)) if len(shape) else 1


class TensorIOMode(enum.IntEnum):
    NONE = 0
    INPUT = 1
    OUTPUT = 2


class BuilderFlag(enum.IntEnum):
    FP16 = 0
    INT8 = 1
    DEBUG = 2
    GPU_FALLBACK = 3
    REFIT = 5
    DISABLE_TIMING_CACHE = 6
    TF32 = 7
    SPARSE_WEIGHTS = 8
    SAFETY_SCOPE = 9
    OBEY_PRECISION_CONSTRAINTS = 10
    PREFER_PRECISION_CONSTRAINTS = 11
    DIRECT_IO = 12
    REJECT_EMPTY_ALGORITHMS = 13
    VERSION_COMPATIBLE = 14
    EXCLUDE_LEAN_RUNTIME = 15
    FP8 = 16
    BF16 = 18


class MemoryPoolType(enum.IntEnum):
    WORKSPACE = 0
    DLA_MANAGED_SRAM = 1
    DLA_LOCAL_DRAM = 2
    DLA_GLOBAL_DRAM = 3
    TACTIC_DRAM = 4


class NetworkDefinitionCreationFlag(enum.IntEnum):
    EXPLICIT_BATCH = 0
    STRONGLY_TYPED = 1


class LayerInformationFormat(enum.IntEnum):
    ONELINE = 0
    JSON = 1
