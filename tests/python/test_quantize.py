"""kiln.quantize and kiln.build(quantize=...): the Q/DQ model written from calibration data, its
scales (min-max: max |x| / 127), the cache reused without data, the build of the calibrated model
near the float model, and errors for data that does not fit."""
import os

import numpy as np
import onnx
from onnx import numpy_helper
import pytest

import kiln


@pytest.fixture(scope="module")
def calib(models, tmp_path_factory):
    d = tmp_path_factory.mktemp("calib")
    x = np.random.default_rng(3).uniform(-2, 2, (32, 4)).astype(np.float32)
    path = d / "calib.npz"
    np.savez(path, x=x)
    return {"path": str(path), "x": x, "dir": d}


def test_quantize_writes_qdq_with_minmax_scales(models, calib):
    out = os.path.join(calib["dir"], "mlp.int8.onnx")
    rep = kiln.quantize(models["mlp"], calib["path"], out)
    assert rep["quantized"] == ["mm"] and rep["calibrator"] == "minmax" and not rep["from_cache"]
    assert rep["samples"] == 32
    assert rep["activation_scales"]["x"] == pytest.approx(np.abs(calib["x"]).max() / 127, rel=1e-6)
    m = onnx.load(out)
    ops = [n.op_type for n in m.graph.node]
    assert ops.count("QuantizeLinear") == 1 and ops.count("DequantizeLinear") == 2
    assert isinstance(rep["model"], bytes) and rep["model"] == open(out, "rb").read()


def test_per_tensor_weight_scales_write_a_scalar_scale(models, calib):
    out = os.path.join(calib["dir"], "mlp.int8t.onnx")
    kiln.quantize(models["mlp"], calib["path"], out, weight_scales="per-tensor")
    m = onnx.load(out)
    w = [n for n in m.graph.node if n.op_type == "DequantizeLinear" and not any(a.name == "axis" for a in n.attribute)]
    assert len(w) == 2  # x's and the weight's: both per tensor
    scales = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    assert all(scales[n.input[1]].shape == () for n in w)
    with pytest.raises(kiln.InvalidArgumentError, match="weight_scales 'per-row'"):
        kiln.quantize(models["mlp"], calib["path"], weight_scales="per-row")


def test_build_quantized_near_float_and_cache_reused(models, calib):
    cache = os.path.join(calib["dir"], "mlp.calib")
    e8 = kiln.build(models["mlp"], shapes={"x": (5, 4)}, target="cpu", quantize="int8", calib=calib["path"],
                    calib_cache=cache)
    assert os.path.exists(cache)
    e32 = kiln.build(models["mlp"], shapes={"x": (5, 4)}, target="cpu")
    x = np.random.default_rng(9).uniform(-2, 2, (5, 4)).astype(np.float32)
    y8, y32 = e8(x), e32(x)
    assert not np.array_equal(y8, y32)  # quantized
    assert np.abs(y8 - y32).max() <= 0.05 * np.abs(y32).max()
    # The cache alone: the same plan's outputs, without data.
    e8b = kiln.build(models["mlp"], shapes={"x": (5, 4)}, target="cpu", quantize="int8", calib_cache=cache)
    np.testing.assert_array_equal(e8b(x), y8)


def test_bad_calibration_data_is_a_clear_error(models, calib):
    bad = os.path.join(calib["dir"], "bad.npz")
    np.savez(bad, input=np.zeros((4, 4), np.float32))
    with pytest.raises(kiln.InvalidArgumentError, match="has no array for input 'x'"):
        kiln.quantize(models["mlp"], bad)
    with pytest.raises(kiln.InvalidArgumentError, match="unknown method"):
        kiln.quantize(models["mlp"], calib["path"], calibrator="kl")
    with pytest.raises(kiln.InvalidArgumentError, match="quantize='int8'"):
        kiln.build(models["mlp"], target="cpu", calib=calib["path"])


def _outlier_mlp(path):
    """x [batch, 32] -> fc0 -> Relu -> fc1 (+ bias 1000 in channel 0) -> fc2 (ignores channel 0):
    min-max INT8 of fc2's input rounds every other channel away (docs/decisions/0062)."""
    from onnx import helper, numpy_helper, TensorProto
    i = np.arange(32 * 32, dtype=np.float32)
    w0 = (0.3 * np.sin(0.37 * i + 1)).reshape(32, 32).astype(np.float32)
    w1 = (0.3 * np.sin(0.37 * i + 2)).reshape(32, 32).astype(np.float32)
    b1 = np.zeros(32, np.float32)
    b1[0] = 1000
    w2 = (0.3 * np.sin(0.37 * np.arange(32 * 16, dtype=np.float32) + 3)).reshape(32, 16).astype(np.float32)
    w2[0, :] = 0
    g = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W0"], ["h0"], "fc0", transB=1),
         helper.make_node("Relu", ["h0"], ["r0"], "relu0"),
         helper.make_node("Gemm", ["r0", "W1", "b1"], ["h1"], "fc1", transB=1),
         helper.make_node("MatMul", ["h1", "W2"], ["y"], "fc2")],
        "outlier", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16])],
        [numpy_helper.from_array(a, n) for a, n in ((w0, "W0"), (w1, "W1"), (b1, "b1"), (w2, "W2"))])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_build_max_error_keeps_the_outlier_layer_float(tmp_path):
    model = _outlier_mlp(str(tmp_path / "outlier.onnx"))
    x = (2 * np.sin(0.71 * np.arange(40 * 32))).reshape(40, 32).astype(np.float32)
    data = str(tmp_path / "calib.npz")
    np.savez(data, x=x)
    e = kiln.build(model, shapes={"x": (8, 32)}, target="cpu", quantize="int8", calib=data, max_error=0.01)
    rep = e.quantize_report
    assert rep["error_all_quantized"] > 0.01 >= rep["error"]
    assert [(l["node"], l["quantized"]) for l in rep["layers"]] == [("fc0", True), ("fc1", True), ("fc2", False)]
    assert rep["held_out_samples"] == 8
    with pytest.raises(kiln.InvalidArgumentError, match="max_error needs calib"):
        kiln.build(model, target="cpu", quantize="int8", max_error=0.01)
    with pytest.raises(kiln.InvalidArgumentError, match=r"\(0, 1\)"):
        kiln.quantize(model, data, max_error=2.0)
