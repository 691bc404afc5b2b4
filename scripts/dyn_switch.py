"""One dynamic-shape engine, shapes switched back and forth (issue 10 item 4).

Loads PLAN once and calls it with torch CUDA tensors of each batch in ORDER (each batch visited
twice), CUDA graphs on: for every visit, the wall time of the first call at that shape (set-up:
on a first visit the lowering with the nearest tuned set's tactics and a new context; on a
revisit the context parked from before) and the median GPU time of ITERS further calls (CUDA
events). Prints one JSON line per visit and the engine's shape_setup_ms.
  PYTHONPATH=.gpu-carry/python python scripts/dyn_switch.py PLAN [--order 1,8,64,256,8,1,256,64]
"""
import argparse
import json
import statistics
import time

import torch

import kiln


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("--order", default="1,8,64,256,8,1,256,64")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--input", default="input")
    ap.add_argument("--json")
    a = ap.parse_args()
    engine = kiln.load(a.plan, cuda_graph=True)
    rows = []
    seen = set()
    for b in [int(v) for v in a.order.split(",")]:
        x = torch.randn(b, 3, 224, 224, device="cuda")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        y = engine(x)
        torch.cuda.synchronize()
        first_ms = (time.perf_counter() - t0) * 1e3
        out = torch.empty_like(y)
        times = []
        for _ in range(a.iters):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            engine(x, out=out)
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
        r = {"batch": b, "visit": "revisit" if b in seen else "first", "first_call_ms": round(first_ms, 2),
             "median_ms": round(statistics.median(times), 4)}
        seen.add(b)
        rows.append(r)
        print(json.dumps(r), flush=True)
    setups = [{"shapes": s, "ms": round(ms, 1)} for s, ms in engine._engine.shape_setup_ms()]

    print(json.dumps({"shape_setup_ms": setups}))
    if a.json:
        json.dump({"visits": rows, "shape_setup_ms": setups}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
