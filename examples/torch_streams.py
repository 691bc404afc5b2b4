"""(c) torch tensors in, torch tensors out: a loop over batches on two CUDA streams, each with its
own Engine (context), outputs written into preallocated torch tensors, CUDA graphs replayed; the
result is checked against the torch model. Without a GPU the same loop runs on CPU tensors.

    python3 examples/torch_streams.py [--onnx models/resnet101.onnx] [--arch resnet101] [--size 224]
"""
import argparse

import torch

import kiln

import common

ap = argparse.ArgumentParser()
ap.add_argument("--onnx", default="models/resnet101.onnx")
ap.add_argument("--arch", default="resnet101")
ap.add_argument("--size", type=int, default=224)
ap.add_argument("--steps", type=int, default=8)
args = ap.parse_args()

ref_model = common.export(args.arch, args.onnx, args.size)
cuda = torch.cuda.is_available() and kiln._kiln.cuda_available()
dev = "cuda" if cuda else "cpu"
engine = kiln.build(args.onnx, shapes={"input": (1, 3, args.size, args.size)}, cuda_graph=cuda)
lanes = [engine, engine.clone()]  # one execution context per stream
streams = [torch.cuda.Stream() for _ in lanes] if cuda else [None, None]
xs = [torch.randn(1, 3, args.size, args.size, device=dev) for _ in range(args.steps)]
outs = [torch.empty(1, 1000, device=dev) for _ in lanes]
results = []
for i, x in enumerate(xs):
    lane = i % 2
    if cuda:
        with torch.cuda.stream(streams[lane]):
            streams[lane].wait_stream(torch.cuda.default_stream())  # x was made on the default stream
            lanes[lane](x, out=outs[lane])                         # zero copy, enqueued on the stream
            results.append(outs[lane].argmax(1))                   # ordered after the engine on this stream
    else:
        lanes[lane](x, out=outs[lane])
        results.append(outs[lane].argmax(1))
if cuda:
    torch.cuda.synchronize()
with torch.inference_mode():
    ref = [ref_model.to(dev)(x).argmax(1) for x in xs]
agree = sum(int(a.item() == b.item()) for a, b in zip(results, ref))
print(f"{agree}/{len(xs)} top-1 agree with torch on {dev}; CUDA graphs kept: "
      f"{[l.context.cuda_graphs for l in lanes]}")
