"""Errors become exceptions carrying the CLI's message; unsupported-op reports list every node;
the GIL is released while building and executing; lifetimes (an engine outlives its runtime, a
context keeps its engine alive)."""
import gc
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import kiln
from kiln import _kiln


def cli_stderr(kiln_cli, *args):
    r = subprocess.run([kiln_cli, *args], capture_output=True, text=True)
    assert r.returncode == 2, r.stdout + r.stderr
    return r.stderr


def test_missing_model_message_is_the_clis(models, kiln_cli, tmp_path):
    missing = str(tmp_path / "none.onnx")
    with pytest.raises(kiln.NotFoundError) as e:
        kiln.build(missing)
    assert e.value.code == "NotFound"
    assert f"kiln build: {e.value}" in cli_stderr(kiln_cli, "build", missing, "-o", str(tmp_path / "p.plan"))


def test_unsupported_ops_list_every_node(models, kiln_cli, tmp_path):
    with pytest.raises(kiln.UnsupportedError) as e:
        kiln.build(models["unsupported"], target="cpu")
    nodes = e.value.nodes
    assert len(nodes) == 2
    assert any("frob_1" in n and "Frobnicate" in n for n in nodes)
    assert any("gizmo_2" in n and "Gizmo" in n for n in nodes)
    assert not any("ok_relu" in n for n in nodes)
    stderr = cli_stderr(kiln_cli, "build", models["unsupported"], "-o", str(tmp_path / "p.plan"))
    assert f"kiln build: {e.value}" in stderr
    assert isinstance(e.value, kiln.KilnError) and isinstance(e.value, RuntimeError)


def test_corrupt_plan_message_is_the_clis(models, kiln_cli, tmp_path):
    plan = bytearray(_kiln.Builder.build(models["mlp"], kiln.config(shapes={"x": (2, 4)}, target="cpu")))
    plan[len(plan) // 2] ^= 0x10
    p = tmp_path / "bad.plan"
    p.write_bytes(plan)
    with pytest.raises(kiln.InvalidPlanError, match="checksum mismatch") as e:
        kiln.load(p)
    assert f"kiln run: {e.value}" in cli_stderr(kiln_cli, "run", str(p))
    with pytest.raises(kiln.InvalidPlanError):
        kiln.load(bytes(plan))


def test_bad_profile_names_input_and_dim(models):
    with pytest.raises(kiln.InvalidArgumentError, match="'x'.*dim"):
        kiln.build(models["mlp"], shapes={"x": ((4, 4), (2, 4), (8, 4))}, target="cpu")


def _progress_during(call):
    """How many times a second thread increments a counter while `call` runs in this one. The
    switch interval is raised to 0.2 s so that, with the GIL held through `call`, the other
    thread cannot run between the two counter reads (the interpreter would not preempt us)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.2)
    try:
        return _measure(call)
    finally:
        sys.setswitchinterval(old)


def _measure(call):
    count = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    time.sleep(0.02)
    before = count[0]
    t0 = time.perf_counter()
    result = call()
    elapsed = time.perf_counter() - t0
    during = count[0] - before
    stop.set()
    t.join()
    return during, elapsed, result


def test_gil_released_during_build_and_execute(models):
    cfg = kiln.config(target="cpu")
    during, elapsed, plan = _progress_during(lambda: _kiln.Builder.build(models["deep"], cfg))
    assert elapsed > 0.02, f"build took {elapsed * 1e3:.2f} ms, too short to tell"
    # With the GIL held the other thread cannot run at all (0); released, it spins along.
    assert during > 100, f"the other thread advanced {during} times during a {elapsed * 1e3:.0f} ms build"
    engine = kiln.load(plan)
    x = np.random.default_rng(0).standard_normal((512, 256)).astype(np.float32)
    ctx = engine.context
    ctx.set_input("x", x)
    during, elapsed, _ = _progress_during(ctx.execute)
    assert during > 100, f"the other thread advanced {during} times during a {elapsed * 1e3:.0f} ms execute"


def test_engine_outlives_runtime_and_context_keeps_engine(models):
    import kiln.trt as trt
    plan = _kiln.Builder.build(models["mlp"], kiln.config(shapes={"x": (2, 4)}, target="cpu"))
    runtime = trt.Runtime(trt.Logger())
    engine = runtime.deserialize_cuda_engine(plan)
    del runtime
    gc.collect()
    ctx = engine.create_execution_context()
    raw_ctx = ctx._ctx
    del engine, ctx
    gc.collect()
    assert raw_ctx.engine.io_tensors[0].name == "x"  # the context kept its engine
    x = np.ones((2, 4), np.float32)
    raw_ctx.set_input("x", x)
    raw_ctx.execute()
    want = np.maximum(x @ models["w"] + models["b"], 0)
    np.testing.assert_allclose(raw_ctx.output("y"), want, rtol=1e-5, atol=1e-6)


def test_progress_callback_sees_the_steps(models):
    steps = []
    kiln.build(models["mlp"], shapes={"x": (2, 4)}, target="cpu", progress=lambda p: steps.append(p.step))
    assert "profiles" in steps and "serialize" in steps


def test_logger_callbacks_are_accepted_and_cleared(models):
    messages = []
    cfg = kiln.config(shapes={"x": (2, 4)}, target="cpu", logger=lambda sev, msg: messages.append((sev, msg)))
    assert cfg.logger is True
    plan = _kiln.Builder.build(models["mlp"], cfg)
    assert all(isinstance(s, kiln.LogSeverity) and isinstance(m, str) for s, m in messages)
    cfg.logger = None
    assert cfg.logger is False
    e = _kiln.Runtime.deserialize_engine(plan, lambda sev, msg: messages.append((sev, msg)))
    assert [t.name for t in e.io_tensors] == ["x", "y"]
    assert all(l.tactic_id == 0xFFFFFFFF for l in e.layers)  # CPU layers carry no tactic id
