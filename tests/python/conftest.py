"""Fixtures for the kiln Python package tests: small ONNX models written with onnx.helper
(Debian python3-onnx) into a temporary directory, and the CLI binary for message checks.
Run by ctest (python.pytest) with PYTHONPATH=build/python and KILN_CLI=build/kiln."""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 17)]


def save(model, path):
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """{name: path} of the test models, and the weights the reference computations need."""
    d = tmp_path_factory.mktemp("models")
    rng = np.random.default_rng(7)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    out = {"w": w, "b": b}

    # y = relu(x @ w + b), x: [batch, 4] (dynamic batch)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"), helper.make_node("Add", ["m", "b"], ["a"], name="add"),
         helper.make_node("Relu", ["a"], ["y"], name="relu")], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    out["mlp"] = save(helper.make_model(g, opset_imports=OPSET), d / "mlp.onnx")

    # Two inputs of other dtypes: ids int64 [2,3] -> ids + 1; h float16 [2] -> h * 2
    one = numpy_helper.from_array(np.array(1, np.int64), "one")
    two = numpy_helper.from_array(np.array(2, np.float16), "two")
    g = helper.make_graph(
        [helper.make_node("Add", ["ids", "one"], ["ids_out"], name="inc"),
         helper.make_node("Mul", ["h", "two"], ["h_out"], name="dbl")], "dtypes",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3]),
         helper.make_tensor_value_info("h", TensorProto.FLOAT16, [2])],
        [helper.make_tensor_value_info("ids_out", TensorProto.INT64, [2, 3]),
         helper.make_tensor_value_info("h_out", TensorProto.FLOAT16, [2])], [one, two])
    out["dtypes"] = save(helper.make_model(g, opset_imports=OPSET), d / "dtypes.onnx")

    # Two unsupported ops (every one must be listed).
    g = helper.make_graph(
        [helper.make_node("Frobnicate", ["x"], ["t"], name="frob_1"),
         helper.make_node("Relu", ["t"], ["u"], name="ok_relu"),
         helper.make_node("Gizmo", ["u"], ["y"], name="gizmo_2")], "unsupported",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    out["unsupported"] = save(helper.make_model(g, opset_imports=OPSET), d / "unsupported.onnx")

    # A deep chain of 256x256 MatMul + Relu (~0.1-0.2 s to build and to run on the development
    # machine: long enough for a second thread to be scheduled meanwhile, even under load).
    nodes, inits, prev = [], [], "x"
    for i in range(120):
        wi = (rng.standard_normal((256, 256)) / 16).astype(np.float32)
        inits.append(numpy_helper.from_array(wi, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"], name=f"mm{i}"))
        nodes.append(helper.make_node("Relu", [f"m{i}"], [f"r{i}"], name=f"relu{i}"))
        prev = f"r{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="out"))
    g = helper.make_graph(nodes, "deep", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [512, 256])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [512, 256])], inits)
    out["deep"] = save(helper.make_model(g, opset_imports=OPSET), d / "deep.onnx")
    out["dir"] = str(d)
    return out


@pytest.fixture(scope="session")
def kiln_cli():
    path = os.environ.get("KILN_CLI", "")
    if not path or not os.path.exists(path):
        pytest.skip("KILN_CLI (the kiln binary) is not set; run through ctest")
    return path
