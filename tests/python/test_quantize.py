"""kiln.quantize and kiln.build(quantize=...): the Q/DQ model written from calibration data, its
scales (min-max: max |x| / 127), the cache reused without data, the build of the calibrated model
near the float model, and errors for data that does not fit."""
import os

import numpy as np
import onnx
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
