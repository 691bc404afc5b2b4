"""Array interop for the Pythonic layer: what an input object is (host or CUDA device; address,
shape, dtype) without copying it, and how to make outputs of the same kind.

Accepted: numpy arrays (and anything numpy.asarray takes), torch tensors (CPU or CUDA),
objects with ``__cuda_array_interface__`` (CuPy, Numba, ...), and objects with ``__dlpack__``.
Device tensors are never copied: a non-contiguous one, or one of another dtype than the engine
takes, is refused with a message naming the input. Host arrays are copied into the engine (a
non-contiguous one is made contiguous on the way).
"""
from __future__ import annotations

import sys
from typing import Any, NamedTuple, Optional, Tuple

import numpy as np

from . import _kiln

# numpy dtype -> kiln DataType for the dtypes CUDA engines bind (float32 / int32 / int64) and more.
_TYPESTR = {"<f4": "float32", "<f2": "float16", "<f8": "float64", "<i4": "int32", "<i8": "int64",
            "|i1": "int8", "|u1": "uint8", "|b1": "bool", "<i2": "int16"}


def _torch():
    """The torch module when it is already imported (never imports it: that costs seconds)."""
    return sys.modules.get("torch")


class DeviceArray(NamedTuple):
    """A CUDA device tensor described without copying: address (int), shape, dtype name."""
    address: int
    shape: Tuple[int, ...]
    dtype: str          # kiln dtype name: "float32", "int64", ...
    device: int         # CUDA device ordinal (-1 when unknown)
    source: Any         # the object (torch tensor, CuPy array, ...) it came from


def is_torch_tensor(x: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def torch_dtype_name(t) -> str:
    return str(t.dtype).replace("torch.", "")


def describe_device(x: Any, name: str) -> Optional[DeviceArray]:
    """A DeviceArray when `x` lives on a CUDA device, else None (a host array).

    Raises ValueError for a non-contiguous device tensor (zero copy is the contract).
    """
    if is_torch_tensor(x):
        if not x.is_cuda:
            return None
        if not x.is_contiguous():
            raise ValueError(f"input '{name}': the CUDA tensor is not contiguous (strides {tuple(x.stride())}); "
                             "kiln never copies device data: pass x.contiguous()")
        return DeviceArray(x.data_ptr(), tuple(x.shape), torch_dtype_name(x), x.device.index, x)
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        shape = tuple(int(d) for d in cai["shape"])
        typestr = cai["typestr"]
        dtype = _TYPESTR.get(typestr)
        if dtype is None:
            raise ValueError(f"input '{name}': __cuda_array_interface__ typestr {typestr!r} is not supported")
        strides = cai.get("strides")
        if strides is not None:
            item = np.dtype(typestr).itemsize
            expect, acc = [], item
            for d in reversed(shape):
                expect.append(acc)
                acc *= d
            if tuple(strides) != tuple(reversed(expect)):
                raise ValueError(f"input '{name}': the device array is not C-contiguous (strides {tuple(strides)}); "
                                 "kiln never copies device data")
        return DeviceArray(int(cai["data"][0]), shape, dtype, -1, x)
    dl = getattr(x, "__dlpack_device__", None)
    if dl is not None and not isinstance(x, np.ndarray):
        dev_type, dev_id = dl()
        if int(dev_type) in (2, 13):  # kDLCUDA, kDLCUDAManaged
            torch = _torch()
            if torch is None:
                raise TypeError(f"input '{name}': a DLPack CUDA tensor needs torch to be viewed without a copy "
                                "(import torch), or pass an object with __cuda_array_interface__")
            return describe_device(torch.from_dlpack(x), name)
    return None


def host_array(x: Any, name: str) -> np.ndarray:
    """A numpy view (torch CPU tensors, DLPack host tensors) or conversion of a host input."""
    if is_torch_tensor(x):
        return x.detach().numpy()
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__dlpack__") and hasattr(np, "from_dlpack"):
        try:
            return np.from_dlpack(x)
        except (TypeError, RuntimeError, BufferError):
            pass
    return np.asarray(x)


def stream_handle(stream: Any, device: int = -1) -> int:
    """A cudaStream_t as an integer from: None (torch's current stream, else 0), an int, a
    torch.cuda.Stream (.cuda_stream), a CuPy stream (.ptr), or an object with __cuda_stream__."""
    if stream is None:
        torch = _torch()
        if torch is not None and torch.cuda.is_available():
            return torch.cuda.current_stream(device if device >= 0 else None).cuda_stream
        return 0
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(stream, attr, None)
        if isinstance(v, int):
            return v
    cs = getattr(stream, "__cuda_stream__", None)
    if cs is not None:
        return int(cs()[1])
    raise TypeError(f"cannot get a cudaStream_t from {type(stream).__name__}: pass an int, torch.cuda.Stream or "
                    "an object with .cuda_stream / .ptr")


def empty_like_device(shape, dtype: str, like: DeviceArray):
    """A new device tensor for an output (torch when available, else CuPy)."""
    torch = _torch()
    if torch is not None:
        dev = like.device if like.device >= 0 else torch.cuda.current_device()
        return torch.empty(shape, dtype=getattr(torch, dtype), device=f"cuda:{dev}")
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        return cupy.empty(shape, dtype=dtype)
    raise TypeError("kiln needs torch or cupy to allocate device outputs; pass out= with device tensors")


def numpy_dtype_name(a: np.ndarray) -> str:
    try:
        return _kiln.dtype_name(_kiln.dtype_from_numpy(a.dtype))
    except _kiln.KilnError:
        return str(a.dtype)
