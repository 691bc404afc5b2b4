#!/usr/bin/env python3
"""PyTorch peers for scripts/gpu_quant.sh's QuantLinear benchmark: the same MLP (4096 rows,
Linear 4096 -> 4096, ReLU, Linear 4096 -> 4096, biases), timed as CUDA-graph replays with CUDA
events (median of --iters), inputs on the device:
  torch_fp16 / torch_bf16    F.linear in 16 bits (cuBLAS), eager ops captured in a CUDA graph
  torch_compile_fp16         torch.compile(mode="max-autotune-no-cudagraphs") then a CUDA graph
  torch_fp8_scaled_mm        torch._scaled_mm, E4M3 x E4M3 -> fp16 with per-tensor scales (the
                             activation quantized in the graph, as Kiln's layer does), bias fused
  torch_int8_int_mm          torch._int_mm, int8 x int8 -> int32, then dequant + bias in torch ops
Prints one JSON object per line. Needs a GPU with FP8 (sm_89+) for the FP8 row.

  mlp_quant_peers.py [--iters 200] [--rows 4096] [--dim 4096]
"""
import argparse
import json

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_timing import time_graph  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--dim", type=int, default=4096)
    args = ap.parse_args()
    torch.manual_seed(0)
    m, d = args.rows, args.dim
    dev = "cuda"
    flops = 2 * 2 * m * d * d
    w1 = torch.randn(d, d, device=dev) / d ** 0.5
    w2 = torch.randn(d, d, device=dev) / d ** 0.5
    b1 = 0.01 * torch.randn(d, device=dev)
    b2 = 0.01 * torch.randn(d, device=dev)
    x = torch.randn(m, d, device=dev)

    def report(name, ms):
        print(json.dumps({"config": name, "gpu_median_ms": ms, "tflops": round(flops / ms / 1e9, 1)}), flush=True)

    for dt, name in ((torch.float16, "torch_fp16"), (torch.bfloat16, "torch_bf16")):
        W1, W2, B1, B2, X = w1.to(dt), w2.to(dt), b1.to(dt), b2.to(dt), x.to(dt)
        report(name, time_graph(lambda: F.linear(F.relu(F.linear(X, W1, B1)), W2, B2), args.iters))

    X16, W1h, W2h, B1h, B2h = x.half(), w1.half(), w2.half(), b1.half(), b2.half()
    try:
        f = torch.compile(lambda a: F.linear(F.relu(F.linear(a, W1h, B1h)), W2h, B2h),
                          mode="max-autotune-no-cudagraphs")
        report("torch_compile_fp16", time_graph(lambda: f(X16), args.iters))
    except Exception as e:  # noqa: BLE001 - report and go on
        print(json.dumps({"config": "torch_compile_fp16", "error": str(e)[:200]}))

    if hasattr(torch, "_scaled_mm") and torch.cuda.get_device_capability() >= (8, 9):
        e4 = torch.float8_e4m3fn
        fmax = torch.finfo(e4).max
        sw1 = (w1.abs().max() / fmax).float()
        sw2 = (w2.abs().max() / fmax).float()
        W1q = (w1 / sw1).to(e4)  # [N, K]
        W2q = (w2 / sw2).to(e4)
        sx1 = (x.abs().max() / fmax).float()
        h_ref = F.relu(F.linear(x, w1, b1))
        sx2 = (h_ref.abs().max() / fmax).float()

        def fp8_mlp():
            q1 = (X16 / sx1).to(e4)
            h = torch._scaled_mm(q1, W1q.t(), scale_a=sx1, scale_b=sw1, bias=B1h, out_dtype=torch.float16)
            q2 = (F.relu(h) / sx2).to(e4)
            return torch._scaled_mm(q2, W2q.t(), scale_a=sx2, scale_b=sw2, bias=B2h, out_dtype=torch.float16)
        try:
            report("torch_fp8_scaled_mm", time_graph(fp8_mlp, args.iters))
        except Exception as e:  # noqa: BLE001
            print(json.dumps({"config": "torch_fp8_scaled_mm", "error": str(e)[:200]}))

    if hasattr(torch, "_int_mm"):
        s1 = (w1.abs().amax(dim=1) / 127).float()
        s2 = (w2.abs().amax(dim=1) / 127).float()
        W1i = torch.round(w1 / s1[:, None]).to(torch.int8)  # [N, K]; .t() is the column-major [K, N] operand
        W2i = torch.round(w2 / s2[:, None]).to(torch.int8)
        ax1 = (x.abs().max() / 127).float()
        ax2 = (F.relu(F.linear(x, w1, b1)).abs().max() / 127).float()

        def int8_mlp():
            q1 = torch.clamp(torch.round(X16 / ax1), -128, 127).to(torch.int8)
            h = (torch._int_mm(q1, W1i.t()).float() * (ax1 * s1) + b1).half()
            q2 = torch.clamp(torch.round(F.relu(h) / ax2), -128, 127).to(torch.int8)
            return (torch._int_mm(q2, W2i.t()).float() * (ax2 * s2) + b2).half()
        try:
            report("torch_int8_int_mm", time_graph(int8_mlp, args.iters))
        except Exception as e:  # noqa: BLE001
            print(json.dumps({"config": "torch_int8_int_mm", "error": str(e)[:200]}))


if __name__ == "__main__":
    main()
