"""Loads one plan three times in one process (python -m kiln's Runtime): the first load pays the
process-wide CUDA driver / context / library start-up (phase "device") and first-use kernel
loading; later loads show what one engine costs. One JSON line per load.
  PYTHONPATH=.gpu-carry/python python scripts/load_twice.py PLAN
"""
import json
import sys
import time

from kiln._kiln import Runtime

for i in range(3):
    t = time.perf_counter()
    e = Runtime.load_engine(sys.argv[1])
    ms = (time.perf_counter() - t) * 1e3
    print(json.dumps({"load": i, "wall_ms": round(ms, 1), "phases_ms": {k: round(v, 1) for k, v in e.load_phases.items()},
                      "weights_uploaded_packed": e.weights_uploaded_packed}), flush=True)
    del e
