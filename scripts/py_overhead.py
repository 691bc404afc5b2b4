"""Host overhead of the Pythonic call on a CUDA engine (run by scripts/gpu_python.sh).

For a plan and one float32 input, times (host wall clock around the call only, the stream
synchronized between calls so the queue never backs up) with CUDA graphs replayed:
  raw:    ctx.enqueue_bound(addresses, stream, cuda_graph=True): the C++ graph launch behind one
          binding call (what a C++ caller pays, plus ~1 us of pybind11);
  call:   engine(x, out=out, stream=s): the whole Python layer (interop, shape cache, binding);
  alloc:  engine(x, stream=s): the same with a new torch output each call;
and the end-to-end latency (call + stream synchronize) of raw and call. Writes JSON to argv[2].
"""
import json
import statistics
import sys
import time

import torch

import kiln

plan, out_path = sys.argv[1], sys.argv[2]
iters = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
engine = kiln.load(plan, cuda_graph=True)
name = engine.input_names[0]
shape = tuple(d if d > 0 else 1 for d in engine.io[0].shape)
x = torch.randn(*shape, device="cuda")
s = torch.cuda.Stream()
out = engine(x, stream=s)
torch.cuda.synchronize()
ctx = engine.context
addresses = [x.data_ptr(), out.data_ptr()]
handle = s.cuda_stream


def host_us(fn):
    samples = []
    for _ in range(iters):
        s.synchronize()
        t0 = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - t0) / 1e3)
    s.synchronize()
    return {"median_us": statistics.median(samples), "p90_us": sorted(samples)[int(0.9 * len(samples))],
            "min_us": min(samples)}


def e2e_us(fn):
    samples = []
    for _ in range(iters):
        t0 = time.perf_counter_ns()
        fn()
        s.synchronize()
        samples.append((time.perf_counter_ns() - t0) / 1e3)
    return {"median_us": statistics.median(samples), "min_us": min(samples)}


raw = lambda: ctx.enqueue_bound(addresses, handle, True)  # noqa: E731
call = lambda: engine(x, out=out, stream=s)  # noqa: E731
alloc = lambda: engine(x, stream=s)  # noqa: E731
for fn in (raw, call, alloc):
    for _ in range(50):
        fn()
torch.cuda.synchronize()
r = {"plan": plan, "input_shape": list(shape), "iterations": iters, "cuda_graphs_kept": ctx.cuda_graphs,
     "launch_raw": host_us(raw), "launch_call": host_us(call), "launch_call_new_output": host_us(alloc),
     "e2e_raw": e2e_us(raw), "e2e_call": e2e_us(call)}
r["python_overhead_us"] = r["launch_call"]["median_us"] - r["launch_raw"]["median_us"]
r["python_overhead_e2e_us"] = r["e2e_call"]["median_us"] - r["e2e_raw"]["median_us"]
r["within_20us"] = r["python_overhead_us"] <= 20 and r["python_overhead_e2e_us"] <= 20
# The outputs of the two paths are the same bits.
o1 = torch.empty_like(out)
ctx.enqueue_bound([x.data_ptr(), o1.data_ptr()], handle, True)
o2 = engine(x, stream=s)
s.synchronize()
r["raw_equals_call"] = bool(torch.equal(o1, o2))
print(json.dumps(r, indent=2))
with open(out_path, "w") as f:
    json.dump(r, f, indent=2)
