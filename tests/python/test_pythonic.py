"""kiln.build / Engine.__call__ / compare / bench / inspect on the CPU target: results against
numpy references, dtype and shape round trips (numpy and torch CPU), dynamic shapes, bad inputs."""
import sys

import numpy as np
import pytest

import kiln


def ref_mlp(models, x):
    return np.maximum(x @ models["w"] + models["b"], 0)


@pytest.fixture(scope="module")
def mlp(models):
    return kiln.build(models["mlp"], shapes={"x": ((1, 4), (2, 4), (8, 4))}, target="cpu")


def test_version():
    assert kiln.__version__ and kiln.__version__.count(".") == 2


def test_numpy_in_numpy_out_dynamic_batch(models, mlp):
    for batch in (1, 5, 8):
        x = np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)
        y = mlp(x)
        assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == (batch, 3)
        np.testing.assert_allclose(y, ref_mlp(models, x), rtol=1e-5, atol=1e-6)


def test_inputs_by_name_list_and_keyword(models, mlp):
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    want = ref_mlp(models, x)
    for y in (mlp({"x": x}), mlp([x]), mlp(x=x)):
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_outputs_do_not_alias_between_calls(models, mlp):
    a = mlp(np.ones((2, 4), np.float32))
    a_copy = a.copy()
    mlp(np.full((2, 4), -3, np.float32))
    np.testing.assert_array_equal(a, a_copy)


def test_dtype_round_trip_numpy(models):
    e = kiln.build(models["dtypes"], target="cpu")
    ids = np.arange(6, dtype=np.int64).reshape(2, 3)
    h = np.array([1.5, -2.25], np.float16)
    out = e(ids=ids, h=h)
    assert out["ids_out"].dtype == np.int64 and out["ids_out"].shape == (2, 3)
    assert out["h_out"].dtype == np.float16 and out["h_out"].shape == (2,)
    np.testing.assert_array_equal(out["ids_out"], ids + 1)
    np.testing.assert_array_equal(out["h_out"], h * 2)


def test_dtype_round_trip_torch_cpu(models):
    torch = pytest.importorskip("torch")
    e = kiln.build(models["dtypes"], target="cpu")
    ids = torch.arange(6, dtype=torch.int64).reshape(2, 3)
    h = torch.tensor([0.5, 3.0], dtype=torch.float16)
    out = e({"ids": ids, "h": h})
    assert isinstance(out["ids_out"], torch.Tensor) and out["ids_out"].dtype == torch.int64
    assert out["h_out"].dtype == torch.float16 and tuple(out["h_out"].shape) == (2,)
    assert torch.equal(out["ids_out"], ids + 1) and torch.equal(out["h_out"], h * 2)


def test_torch_cpu_out_tensor(models, mlp):
    torch = pytest.importorskip("torch")
    x = torch.randn(3, 4)
    out = torch.empty(3, 3)
    y = mlp(x, out=out)
    assert y is out
    np.testing.assert_allclose(out.numpy(), ref_mlp(models, x.numpy()), rtol=1e-5, atol=1e-6)


def test_non_contiguous_host_input_is_copied(models, mlp):
    base = np.random.default_rng(3).standard_normal((4, 6)).astype(np.float32)
    x = base[:, 1:5]  # strided view, not C-contiguous
    assert not x.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(mlp(x), ref_mlp(models, np.ascontiguousarray(x)), rtol=1e-5, atol=1e-6)
    xt = base.T.copy()[1:5].T  # Fortran-ordered
    np.testing.assert_allclose(mlp(xt), ref_mlp(models, np.ascontiguousarray(xt)), rtol=1e-5, atol=1e-6)


def test_wrong_dtype_and_shape_raise_with_the_input_named(mlp):
    with pytest.raises(kiln.InvalidArgumentError, match="input 'x'.*float64.*float32"):
        mlp(np.zeros((2, 4), np.float64))
    with pytest.raises(kiln.InvalidArgumentError, match="input 'x'.*dim 1"):
        mlp(np.zeros((2, 5), np.float32))
    with pytest.raises(kiln.InvalidArgumentError, match="outside the optimization profile"):
        mlp(np.zeros((9, 4), np.float32))
    with pytest.raises(kiln.InvalidArgumentError, match="unknown input.*nope"):
        mlp(x=np.zeros((2, 4), np.float32), nope=np.zeros(1))
    with pytest.raises(kiln.InvalidArgumentError, match="has no Kiln equivalent"):
        mlp(np.zeros((2, 4), np.complex64))


def test_dynamic_dims_without_shapes_build_with_one_and_warn(models):
    with pytest.warns(UserWarning, match=r"input 'x' has dynamic dims \[batch,4\].*building with \[1,4\]"):
        e = kiln.build(models["mlp"], target="cpu")
    assert e.raw.profiles[0].get_shape("x") == ([1, 4], [1, 4], [1, 4])
    assert e(np.ones((1, 4), np.float32)).shape == (1, 3)


def test_save_load_inspect(models, mlp, tmp_path):
    p = tmp_path / "mlp.plan"
    mlp.save(p)
    e = kiln.load(p)
    info = e.inspect()
    assert [i["name"] for i in info["inputs"]] == ["x"] and [o["name"] for o in info["outputs"]] == ["y"]
    assert info["profiles"][0]["x"] == {"min": [1, 4], "opt": [2, 4], "max": [8, 4]}
    assert {l["op"] for l in info["layers"]} & {"MatMul", "Gemm", "FusedMatMul", "Relu"}
    x = np.ones((2, 4), np.float32)
    np.testing.assert_array_equal(e(x), mlp(x))


def test_compare_matches_reference(models, mlp):
    r = kiln.compare(mlp, models["mlp"], shapes={"x": (4, 4)})
    assert r["ok"] is True and r["outputs"][0]["name"] == "y"
    assert r["outputs"][0]["shape"] == [4, 3] and r["outputs"][0]["max_abs_error"] <= 1e-5
    r = kiln.compare(mlp, models["mlp"], inputs={"x": np.ones((2, 4), np.float32)})
    assert r["outputs"][0]["shape"] == [2, 3]


def test_bench_returns_the_cli_json(models, mlp):
    r = kiln.bench(mlp, shapes={"x": (2, 4)}, warmup=1, iterations=5)
    assert r["iterations"] >= 5 and r["input_shapes"] == {"x": [2, 4]}
    lat = r["latency_ms"]
    assert 0 < lat["min"] <= lat["median"] <= lat["max"]
    assert r["target"] == "cpu"
    with pytest.raises(kiln.InvalidArgumentError):
        kiln.bench(mlp, iterations=0)


def test_output_types(models):
    """output_types='fp16' (trtexec --outputIOFormats): the float output comes back float16, the
    float32 result rounded; a type that is not fp32 / fp16 / bf16 is refused naming it."""
    e = kiln.build(models["mlp"], shapes={"x": (2, 4)}, target="cpu", output_types="fp16")
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    y = e(x)
    assert y.dtype == np.float16 and y.shape == (2, 3)
    np.testing.assert_allclose(y.astype(np.float32), ref_mlp(models, x), rtol=1e-3, atol=1e-3)
    with pytest.raises(kiln.InvalidArgumentError, match="entry 'fp8'"):
        kiln.build(models["mlp"], shapes={"x": (2, 4)}, target="cpu", output_types="fp8")


def test_precision_and_target_checked(models):
    with pytest.raises(kiln.InvalidArgumentError, match="precision 'fp64'"):
        kiln.build(models["mlp"], precision="fp64")
    with pytest.raises(kiln.InvalidArgumentError, match="target 'tpu'"):
        kiln.build(models["mlp"], target="tpu")


def test_cuda_inputs_refused_by_cpu_engine(mlp):
    class FakeCuda:  # a device array by the CUDA array interface (never dereferenced)
        __cuda_array_interface__ = {"shape": (2, 4), "typestr": "<f4", "data": (4096, False), "version": 3}
    with pytest.raises(kiln.InvalidArgumentError, match="CPU engine"):
        mlp(FakeCuda())


def test_non_contiguous_cuda_array_refused(mlp):
    class Strided:
        __cuda_array_interface__ = {"shape": (2, 4), "typestr": "<f4", "data": (4096, False), "version": 3,
                                    "strides": (4, 8)}
    with pytest.raises(ValueError, match="not C-contiguous"):
        mlp(Strided())


def test_stub_names_exist():
    """Every name the _kiln.pyi stub declares at module level exists in the module."""
    import ast
    import os
    from kiln import _kiln
    stub = os.path.join(os.path.dirname(kiln.__file__), "_kiln.pyi")
    tree = ast.parse(open(stub).read())
    names = [n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))]
    assert len(names) > 30
    assert [n for n in names if not hasattr(_kiln, n)] == []


def test_python_side_errors_carry_the_code(mlp):
    with pytest.raises(kiln.InvalidArgumentError) as e:
        mlp([np.zeros((2, 4), np.float32)] * 2)
    assert e.value.code == "InvalidArgument" and e.value.nodes == []
    assert str(e.value).startswith("InvalidArgument: 2 inputs given, the engine takes 1 (x)")
