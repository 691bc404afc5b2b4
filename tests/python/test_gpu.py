"""The zero-copy CUDA path of Engine.__call__ (skipped without a GPU; scripts/gpu_python.sh runs
it on the GPU machine, with pytest or as a script): torch CUDA tensors in and out, a
caller-provided output written in place, CUDA graphs replayed, results equal to the host path,
refusals of other dtypes and non-contiguous device tensors, kiln.trt on device buffers."""
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

try:
    import pytest
except ImportError:  # run as a script on a machine without pytest
    pytest = None

import kiln
from kiln import _kiln

torch = None
try:
    import torch
except ImportError:
    pass

HAVE_GPU = torch is not None and torch.cuda.is_available() and _kiln.cuda_available()
if pytest is not None:
    pytestmark = pytest.mark.skipif(not HAVE_GPU, reason="needs torch with CUDA and a Kiln CUDA build on a GPU")


def _model():
    """y = relu(x @ w + b) for x [batch, 64] (dynamic batch), w [64, 32]."""
    path = os.path.join(tempfile.mkdtemp(prefix="kiln-gpu-"), "mlp.onnx")
    rng = np.random.default_rng(5)
    w = rng.standard_normal((64, 32)).astype(np.float32) / 8
    b = rng.standard_normal(32).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"), helper.make_node("Add", ["m", "b"], ["a"], name="add"),
         helper.make_node("Relu", ["a"], ["y"], name="relu")], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 32])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path, w, b


def _engine(cuda_graph=False):
    path, w, b = _model()
    e = kiln.build(path, shapes={"x": ((1, 64), (4, 64), (16, 64))}, target="cuda", cuda_graph=cuda_graph, tf32=False)
    return e, w, b


def test_torch_cuda_in_out_matches_host_path():
    e, w, b = _engine()
    assert e.is_cuda
    x = torch.randn(5, 64, device="cuda")
    y = e(x)
    torch.cuda.synchronize()
    assert y.is_cuda and y.dtype == torch.float32 and tuple(y.shape) == (5, 32)
    host = e(x.cpu().numpy())  # the same engine through execute() on host tensors
    assert np.array_equal(y.cpu().numpy(), host)
    np.testing.assert_allclose(host, np.maximum(x.cpu().numpy() @ w + b, 0), rtol=1e-4, atol=1e-4)


def test_out_written_in_place_on_a_stream_with_graphs():
    e, _, _ = _engine(cuda_graph=True)
    s = torch.cuda.Stream()
    x = torch.randn(4, 64, device="cuda")
    out = torch.empty(4, 32, device="cuda")
    ptr = out.data_ptr()
    with torch.cuda.stream(s):
        s.wait_stream(torch.cuda.default_stream())
        r = e(x, out=out)
        r2 = e(x, out=out)  # the same addresses: the graph is replayed, not captured again
    s.synchronize()
    assert r is out and r2 is out and out.data_ptr() == ptr
    assert e.context.cuda_graphs == 1
    assert np.array_equal(out.cpu().numpy(), e(x.cpu().numpy()))
    x2 = torch.randn(2, 64, device="cuda")  # another shape: the context gets a new arena, old graphs go
    y2 = e(x2, stream=s)
    s.synchronize()
    assert e.context.cuda_graphs == 1 and np.array_equal(y2.cpu().numpy(), e(x2.cpu().numpy()))
    # Back to the first shape and addresses: captured again on the new arena, never a stale graph.
    x.add_(1.0)
    with torch.cuda.stream(s):
        e(x, out=out)
        e(x, out=out)  # the fast path (same tensors as the last validated call)
    s.synchronize()
    assert np.array_equal(out.cpu().numpy(), e(x.cpu().numpy()))


def test_device_refusals():
    e, _, _ = _engine()
    with_err = [(torch.randn(4, 64, device="cuda", dtype=torch.float16), "float16"),
                (torch.randn(64, 4, device="cuda").t(), "not contiguous")]
    for x, msg in with_err:
        try:
            e(x)
        except (kiln.InvalidArgumentError, ValueError) as err:
            assert msg in str(err), str(err)
        else:
            raise AssertionError(f"accepted {msg}")


def test_output_types_fp16_binds_float16_and_refuses_float32_out():
    """output_types='fp16' (trtexec --outputIOFormats, docs/decisions/0083): the output is float16 on the
    device, close to the float32 engine's, and a float32 out= buffer is refused naming the dtypes."""
    path, w, b = _model()
    e = kiln.build(path, "fp16", shapes={"x": ((1, 64), (4, 64), (16, 64))}, target="cuda", output_types="fp16")
    x = torch.randn(4, 64, device="cuda")
    y = e(x)
    torch.cuda.synchronize()
    assert y.dtype == torch.float16 and tuple(y.shape) == (4, 32)
    np.testing.assert_allclose(y.float().cpu().numpy(), np.maximum(x.cpu().numpy() @ w + b, 0), rtol=2e-2, atol=2e-2)
    try:
        e(x, out=torch.empty(4, 32, device="cuda"))
    except kiln.InvalidArgumentError as err:
        assert "float32" in str(err) and "float16" in str(err), str(err)
    else:
        raise AssertionError("a float32 out= buffer for a float16 output was accepted")


def test_trt_spelling_on_device_buffers():
    import kiln.trt as trt
    path, w, b = _model()
    logger = trt.Logger()
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    assert trt.OnnxParser(network, logger).parse_from_file(path)
    config = builder.create_builder_config()
    p = builder.create_optimization_profile()
    p.set_shape("x", (1, 64), (3, 64), (8, 64))
    config.add_optimization_profile(p)
    engine = trt.Runtime(logger).deserialize_cuda_engine(builder.build_serialized_network(network, config))
    ctx = engine.create_execution_context()
    x = torch.randn(3, 64, device="cuda")
    y = torch.empty(3, 32, device="cuda")
    assert ctx.set_input_shape("x", (3, 64)) and ctx.get_tensor_shape("y") == (3, 32)
    assert ctx.set_tensor_address("x", x.data_ptr()) and ctx.set_tensor_address("y", y.data_ptr())
    s = torch.cuda.Stream()
    assert ctx.execute_async_v3(s.cuda_stream)
    s.synchronize()
    np.testing.assert_allclose(y.cpu().numpy(), np.maximum(x.cpu().numpy() @ w + b, 0), rtol=1e-2, atol=1e-2)


if __name__ == "__main__":
    if not HAVE_GPU:
        print("test_gpu: skipped (no GPU, no torch CUDA or no Kiln CUDA build)")
        sys.exit(0)
    failed = 0
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and callable(fn):
            try:
                fn()
                print(f"PASSED {name}")
            except Exception as err:  # noqa: BLE001 - report every failure
                failed += 1
                print(f"FAILED {name}: {type(err).__name__}: {err}")
    sys.exit(1 if failed else 0)
