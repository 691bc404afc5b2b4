"""The examples run (CPU here; scripts/gpu_python.sh runs them on the GPU machine) on a small
torchvision model, and their results agree with PyTorch."""
import os
import subprocess
import sys

import pytest

ROOT = os.environ.get("KILN_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EX = os.path.join(ROOT, "examples")


def run(*args):
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def resnet18(tmp_path_factory):
    pytest.importorskip("torchvision")
    return str(tmp_path_factory.mktemp("ex") / "resnet18.onnx")


def test_trt_style_example(resnet18):
    out = run(os.path.join(EX, "trt_resnet101.py"), "--onnx", resnet18, "--arch", "resnet18", "--size", "64",
              "--iters", "2")
    assert "kiln top-5:" in out and "top-1 agrees: True" in out, out


def test_pythonic_example(resnet18):
    out = run(os.path.join(EX, "pythonic_resnet101.py"), resnet18, "64")
    assert "top-5: [(" in out and "'median'" in out, out


def test_torch_streams_example(resnet18):
    out = run(os.path.join(EX, "torch_streams.py"), "--onnx", resnet18, "--arch", "resnet18", "--size", "64",
              "--steps", "2")
    assert "2/2 top-1 agree with torch" in out, out
