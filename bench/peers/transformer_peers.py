#!/usr/bin/env python3
"""PyTorch peers for the transformer rows of Kiln's speed table: the same modules Kiln's ONNX files
were exported from (scripts/transformer_models.py: BERT-base, GPT-2 small; torchvision's ViT-B/16),
FP16 on the GPU, inputs on the device, timed with CUDA events as CUDA-graph replays (median):
  eager          the module's eager ops captured in one CUDA graph
  compile        torch.compile(mode="reduce-overhead") (Inductor + CUDA graphs)
One JSON object per line: {"model", "batch", "seq", "peer", "gpu_median_ms", "items_per_s"}.

  transformer_peers.py [--configs bert_base:32,gpt2:32,vit_b_16:64] [--compile] [--iters 100]
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import transformer_models as tm  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_timing import time_graph, time_replays  # noqa: E402


def build(name, batch, seq):
    if name == "vit_b_16":
        import torchvision
        m = torchvision.models.vit_b_16(weights=None).eval().cuda().half()
        x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=torch.float16)
        return m, (x,)
    m = tm.build_text_model(name, 0).eval().cuda().half()
    feeds = tuple(torch.from_numpy(v).cuda() for v in tm.sample_inputs(name, batch, seq, 0).values())
    return m, feeds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="bert_base:32,gpt2:32,vit_b_16:64")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--compile", action="store_true", help="also torch.compile(mode='reduce-overhead')")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    for cfg in args.configs.split(","):
        name, batch = cfg.split(":")
        batch = int(batch)
        model, feeds = build(name, batch, args.seq)
        with torch.no_grad():
            peers = [("eager", lambda: model(*feeds))]
            for peer, fn in peers:
                ms = time_graph(fn, args.iters)
                print(json.dumps({"model": name, "batch": batch, "seq": args.seq, "peer": peer, "gpu_median_ms": ms,
                                  "items_per_s": round(batch / ms * 1000.0, 1)}), flush=True)
            if args.compile:
                try:
                    cm = torch.compile(model, mode="reduce-overhead")
                    for _ in range(3):
                        cm(*feeds)
                    ms = time_replays(lambda: cm(*feeds), args.iters)
                    print(json.dumps({"model": name, "batch": batch, "seq": args.seq, "peer": "compile",
                                      "gpu_median_ms": ms, "items_per_s": round(batch / ms * 1000.0, 1)}), flush=True)
                except Exception as e:  # noqa: BLE001
                    print(json.dumps({"model": name, "batch": batch, "peer": "compile", "error": str(e)[:200]}))


if __name__ == "__main__":
    main()
