"""The TensorRT spelling (kiln.trt): the seed-style flow on the CPU target with host buffers
(CPU engines execute on host addresses; CUDA engines on device addresses, see gpu_python.sh)."""
import numpy as np
import pytest

import kiln
import kiln.trt as trt


def build_plan(path, fp16=True, profile=((1, 4), (2, 4), (8, 4))):
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    parser = trt.OnnxParser(network, logger)
    with open(path, "rb") as f:
        assert parser.parse(f.read()), [str(parser.get_error(i)) for i in range(parser.num_errors)]
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 1 << 30)
    if fp16:
        config.set_flag(trt.BuilderFlag.FP16)
    inp = network.get_input(0)
    prof = builder.create_optimization_profile()
    prof.set_shape(inp.name, *profile)
    config.add_optimization_profile(prof)
    config.kiln_config.target = kiln.TargetDevice.cpu
    return builder.build_serialized_network(network, config), network, config


def test_seed_style_flow_on_host_buffers(models):
    # A CPU engine knows its output shapes before running only when the profile fixes the dims.
    plan, network, config = build_plan(models["mlp"], profile=((3, 4), (3, 4), (3, 4)))
    assert plan is not None and plan.nbytes > 0
    assert network.num_inputs == 1 and network.get_input(0).shape == (-1, 4)
    assert config.get_flag(trt.BuilderFlag.FP16) and config.get_memory_pool_limit(trt.MemoryPoolType.WORKSPACE) == 1 << 30
    runtime = trt.Runtime(trt.Logger())
    engine = runtime.deserialize_cuda_engine(plan)
    assert engine.num_io_tensors == 2
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    assert names == ["x", "y"]
    assert engine.get_tensor_mode("x") == trt.TensorIOMode.INPUT and engine.get_tensor_mode("y") == trt.TensorIOMode.OUTPUT
    assert engine.get_tensor_shape("x") == (3, 4)  # the profile fixed the batch
    assert trt.nptype(engine.get_tensor_dtype("x")) == np.float32
    assert engine.get_tensor_profile_shape("x", 0) == [(3, 4), (3, 4), (3, 4)]
    ctx = engine.create_execution_context()
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    assert ctx.set_input_shape("x", x.shape)
    assert ctx.get_tensor_shape("y") == (3, 3)
    y = np.empty(ctx.get_tensor_shape("y"), trt.nptype(engine.get_tensor_dtype("y")))
    assert ctx.set_tensor_address("x", x.ctypes.data) and ctx.set_tensor_address("y", y.ctypes.data)
    assert ctx.execute_async_v3(0)
    np.testing.assert_allclose(y, np.maximum(x @ models["w"] + models["b"], 0), rtol=1e-5, atol=1e-6)
    info = engine.create_engine_inspector().get_engine_information(trt.LayerInformationFormat.JSON)
    assert '"Layers"' in info


def test_dynamic_profile_and_unknown_output_shape(models):
    plan, _, _ = build_plan(models["mlp"])
    engine = trt.Runtime().deserialize_cuda_engine(plan)
    assert engine.get_tensor_profile_shape("x", 0) == [(1, 4), (2, 4), (8, 4)]
    ctx = engine.create_execution_context()
    assert ctx.set_input_shape("x", (5, 4))
    assert ctx.get_tensor_shape("x") == (5, 4)
    assert ctx.get_tensor_shape("y") == (-1, 3)  # a CPU engine learns it by running, as TensorRT's -1


def test_parser_errors_list_every_unsupported_node(models):
    logged = []

    class Capture(trt.ILogger):
        def log(self, severity, msg):
            logged.append((severity, msg))

    network = trt.Builder(Capture()).create_network(0)
    parser = trt.OnnxParser(network, Capture())
    assert not parser.parse_from_file(models["unsupported"])
    assert parser.num_errors == 2
    assert {parser.get_error(i).node_name().split("'")[1] for i in range(2)} == {"frob_1", "gizmo_2"}
    assert logged and logged[0][0] == trt.ILogger.ERROR and "2 unsupported ops" in logged[0][1]


def test_build_failure_returns_none_and_logs(models):
    logged = []

    class Capture(trt.ILogger):
        def log(self, severity, msg):
            logged.append(msg)

    builder = trt.Builder(Capture())
    network = builder.create_network(0)
    assert trt.OnnxParser(network, None).parse_from_file(models["mlp"])
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (4, 4), (4, 4), (4, 4))
    config.add_optimization_profile(profile)
    p2 = builder.create_optimization_profile()
    p2.set_shape("nope", (1,), (1,), (1,))
    config.add_optimization_profile(p2)
    assert builder.build_serialized_network(network, config) is None
    assert any("'nope' is not an input" in m for m in logged)
    assert trt.Runtime(Capture()).deserialize_cuda_engine(b"not a plan") is None


def test_bad_addresses_and_shapes_return_false(models, capfd):
    plan, _, _ = build_plan(models["mlp"])
    ctx = trt.Runtime().deserialize_cuda_engine(plan).create_execution_context()
    assert not ctx.set_input_shape("x", (9, 4))
    assert "outside the optimization profile" in capfd.readouterr().err
    assert not ctx.execute_async_v3(0)  # nothing bound
