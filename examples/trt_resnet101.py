"""(a) The classic flow in TensorRT's style: PyTorch ResNet-101 -> ONNX -> FP16 plan -> inference
on a photo -> top-5 and latency against PyTorch. Only the import differs from a TensorRT script.

    python3 examples/trt_resnet101.py [--onnx models/resnet101.onnx] [--arch resnet101] [--size 224]

CUDA engines run on torch CUDA buffers on a torch stream; without a GPU the plan targets the CPU
and runs on numpy host buffers (Kiln's CPU engines execute on host addresses).
"""
import argparse
import time

import numpy as np

import kiln.trt as trt  # was: import tensorrt as trt

import common

ap = argparse.ArgumentParser()
ap.add_argument("--onnx", default="models/resnet101.onnx")
ap.add_argument("--arch", default="resnet101")
ap.add_argument("--size", type=int, default=224)
ap.add_argument("--photo", default=None)
ap.add_argument("--iters", type=int, default=50)
ap.add_argument("--plan", default=None, help="also write the plan here")
ap.add_argument("--save-io", default=None, help="directory for input.npy and <output>.npy (to compare with `kiln run`)")
args = ap.parse_args()

torch_model = common.export(args.arch, args.onnx, args.size)

# ---- build (TensorRT style) ----
logger = trt.Logger(trt.Logger.WARNING)
builder = trt.Builder(logger)
network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
parser = trt.OnnxParser(network, logger)
with open(args.onnx, "rb") as f:
    if not parser.parse(f.read()):
        for i in range(parser.num_errors):
            print(parser.get_error(i))
        raise SystemExit(1)
config = builder.create_builder_config()
config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 1 << 30)
if builder.platform_has_fast_fp16:
    config.set_flag(trt.BuilderFlag.FP16)
profile = builder.create_optimization_profile()
inp = network.get_input(0)
shape = (1, 3, args.size, args.size)
profile.set_shape(inp.name, shape, shape, shape)
config.add_optimization_profile(profile)
t0 = time.perf_counter()
serialized = builder.build_serialized_network(network, config)
print(f"built in {time.perf_counter() - t0:.1f} s, plan {serialized.nbytes / 1e6:.1f} MB")
if args.plan:
    with open(args.plan, "wb") as f:
        f.write(serialized)

# ---- run ----
runtime = trt.Runtime(logger)
engine = runtime.deserialize_cuda_engine(serialized)
context = engine.create_execution_context()
x = common.photo(args.photo, args.size)
cuda = builder.platform_has_fast_fp16
if cuda:
    import torch
    stream = torch.cuda.Stream()
    buffers = {}
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
            context.set_input_shape(name, x.shape)
        dtype = getattr(torch, np.dtype(trt.nptype(engine.get_tensor_dtype(name))).name)
        buffers[name] = torch.empty(tuple(context.get_tensor_shape(name)), dtype=dtype, device="cuda")
        context.set_tensor_address(name, buffers[name].data_ptr())
    buffers[inp.name].copy_(torch.from_numpy(x))
    torch.cuda.synchronize()  # the copy ran on torch's default stream; the engine runs on `stream`
    run = lambda: context.execute_async_v3(stream.cuda_stream)  # noqa: E731
    sync = stream.synchronize
else:
    buffers = {}
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
            context.set_input_shape(name, x.shape)
            buffers[name] = x
        else:
            buffers[name] = np.empty(context.get_tensor_shape(name), trt.nptype(engine.get_tensor_dtype(name)))
        context.set_tensor_address(name, buffers[name].ctypes.data)
    run = lambda: context.execute_async_v3(0)  # noqa: E731
    sync = lambda: None  # noqa: E731
out_name = engine.get_tensor_name(engine.num_io_tensors - 1)
assert run(), "execute_async_v3 failed"
sync()
logits = buffers[out_name].cpu().numpy() if cuda else buffers[out_name]
if args.save_io:
    import os
    os.makedirs(args.save_io, exist_ok=True)
    np.save(os.path.join(args.save_io, f"{inp.name}.npy"), x)
    np.save(os.path.join(args.save_io, f"{out_name}.npy"), logits)
print("kiln top-5:", [(c, round(p, 4)) for c, p in common.top5(logits)])

# ---- latency against PyTorch ----
def timed(fn, n):
    fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e3

kiln_ms = timed(lambda: (run(), sync()), args.iters)
import torch  # noqa: E402
dev = "cuda" if cuda else "cpu"
tm = torch_model.to(dev).half() if cuda else torch_model
tx = torch.from_numpy(x).to(dev)
tx = tx.half() if cuda else tx
with torch.inference_mode():
    ref = tm(tx).float().cpu().numpy()
    torch_ms = timed(lambda: (tm(tx), torch.cuda.synchronize() if cuda else None), max(1, args.iters // 5))
print("torch top-5:", [(c, round(p, 4)) for c, p in common.top5(ref)])
agree = [c for c, _ in common.top5(logits)][0] == [c for c, _ in common.top5(ref)][0]
print(f"top-1 agrees: {agree}; latency kiln {kiln_ms:.3f} ms, torch {torch_ms:.3f} ms ({engine.num_layers} layers)")
